import CCurl
import Foundation
import Glibc
import Synchronization

/// Why a webhook delivery attempt, or loading what it needs, failed.
enum WebhookError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libcurl or libcrypto cannot be loaded, or lacks a function.
    case library(String)
    /// libcurl's own error (`CURLcode`), with its text.
    case transfer(code: Int, String)
    /// The receiver answered with this status (not 2xx).
    case status(Int)
    /// The delivery was abandoned because the server is stopping.
    case stopped

    var description: String {
        switch self {
        case .library(let m): m
        case .transfer(let code, let m): "libcurl error \(code): \(m)"
        case .status(let s): "the receiver answered \(s)"
        case .stopped: "the server stopped"
        }
    }

    /// Whether a later attempt may succeed: transfer errors, 408, 429 and
    /// 5xx; another status (a 4xx, a redirect, which is not followed) will
    /// not change by trying again.
    var isTransient: Bool {
        switch self {
        case .transfer: true
        case .status(let s): s == 408 || s == 429 || s >= 500
        case .library, .stopped: false
        }
    }
}

/// libcurl (`libcurl.so.4`), loaded with dlopen the first time a server is
/// given `--webhook`, and initialised once for the process. The library
/// stays loaded for the process's life; its functions are the header's own
/// types (`Sources/CCurl/shim.h`).
struct CurlLibrary: Sendable {
    nonisolated(unsafe) let easyInit: diptych_curl_easy_init_fn
    nonisolated(unsafe) let easyCleanup: diptych_curl_easy_cleanup_fn
    nonisolated(unsafe) let easyPerform: diptych_curl_easy_perform_fn
    nonisolated(unsafe) let easyStrerror: diptych_curl_easy_strerror_fn
    nonisolated(unsafe) let easySetopt: diptych_curl_easy_setopt_fn
    nonisolated(unsafe) let easyGetinfo: diptych_curl_easy_getinfo_fn
    nonisolated(unsafe) let slistAppend: diptych_curl_slist_append_fn
    nonisolated(unsafe) let slistFreeAll: diptych_curl_slist_free_all_fn

    /// libcurl's text for `code`.
    func describe(_ code: CURLcode) -> String { easyStrerror(code).map { String(cString: $0) } ?? "error \(code.rawValue)" }

    /// The process's one copy (loading and `curl_global_init` happen once, thread-safely).
    static func shared() throws(WebhookError) -> CurlLibrary { try loaded.get() }

    private static let loaded: Result<CurlLibrary, WebhookError> = {
        guard let h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(.library("--webhook needs libcurl.so.4 (Debian: libcurl4), which cannot be loaded: \(dlerror().map { String(cString: $0) } ?? "dlopen failed")"))
        }
        func sym<T>(_ name: String, _: T.Type) throws(WebhookError) -> T {
            guard let p = dlsym(h, name) else { throw .library("libcurl.so.4 has no \(name)") }
            return unsafeBitCast(p, to: T.self)
        }
        do throws(WebhookError) {
            let global = try sym("curl_global_init", diptych_curl_global_init_fn.self)
            let lib = CurlLibrary(
                easyInit: try sym("curl_easy_init", diptych_curl_easy_init_fn.self),
                easyCleanup: try sym("curl_easy_cleanup", diptych_curl_easy_cleanup_fn.self),
                easyPerform: try sym("curl_easy_perform", diptych_curl_easy_perform_fn.self),
                easyStrerror: try sym("curl_easy_strerror", diptych_curl_easy_strerror_fn.self),
                easySetopt: try sym("curl_easy_setopt", diptych_curl_easy_setopt_fn.self),
                easyGetinfo: try sym("curl_easy_getinfo", diptych_curl_easy_getinfo_fn.self),
                slistAppend: try sym("curl_slist_append", diptych_curl_slist_append_fn.self),
                slistFreeAll: try sym("curl_slist_free_all", diptych_curl_slist_free_all_fn.self))
            let code = global(Int(CURL_GLOBAL_DEFAULT))
            guard code == CURLE_OK else { return .failure(.library("curl_global_init failed: \(lib.describe(code))")) }
            return .success(lib)
        } catch {
            return .failure(error)
        }
    }()
}

/// One libcurl easy handle, reused for every POST of one webhook receiver
/// (its connection is kept between deliveries). Used from one thread at a
/// time. `abort()` ends a transfer in progress from any thread (the
/// progress callback reads it), so stopping the server never waits out a
/// receiver's timeout.
final class CurlEasy: @unchecked Sendable {   // `handle` is used by one thread at a time
    private let curl: CurlLibrary
    private let handle: UnsafeMutableRawPointer
    /// Read by the progress callback through an unretained pointer to self.
    private let aborted = Atomic<Bool>(false)

    init(timeout: TimeInterval, connectTimeout: TimeInterval) throws(WebhookError) {
        curl = try CurlLibrary.shared()
        guard let h = curl.easyInit() else { throw .library("curl_easy_init failed") }
        handle = h
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_TIMEOUT_MS, Int(timeout * 1000))
        try set(CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout * 1000))
        try set(CURLOPT_FOLLOWLOCATION, 0)
        try check(diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        // The receiver's answer is not kept: the status says it all.
        try check(diptych_curl_setopt_write(curl.easySetopt, handle) { _, size, count, _ in size * count })
        try set(CURLOPT_NOPROGRESS, 0)
        try check(diptych_curl_setopt_xferinfo(curl.easySetopt, handle) { me, _, _, _, _ in
            guard let me else { return 0 }
            return Unmanaged<CurlEasy>.fromOpaque(me).takeUnretainedValue().aborted.load(ordering: .relaxed) ? 1 : 0
        })
        try check(diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_XFERINFODATA,
                                              Unmanaged.passUnretained(self).toOpaque()))
    }

    deinit { curl.easyCleanup(handle) }

    private func set(_ option: CURLoption, _ value: Int) throws(WebhookError) {
        try check(diptych_curl_setopt_long(curl.easySetopt, handle, option, value))
    }

    private func check(_ code: CURLcode) throws(WebhookError) {
        guard code == CURLE_OK else { throw .transfer(code: Int(code.rawValue), curl.describe(code)) }
    }

    /// Ends the transfer in progress, and every later one, at once.
    func abort() { aborted.store(true, ordering: .relaxed) }

    /// POSTs `body` to `url` with `headers` (`Name: value` each); returns
    /// the receiver's status. Throws `.transfer` when no answer came,
    /// `.stopped` after `abort()`.
    func post(_ url: String, headers: [String], body: Data) throws(WebhookError) -> Int {
        guard !aborted.load(ordering: .relaxed) else { throw .stopped }
        var list: UnsafeMutablePointer<curl_slist>?
        for h in headers + ["Expect:"] {   // no 100-continue round trip
            guard let next = curl.slistAppend(list, h) else { curl.slistFreeAll(list); throw .library("curl_slist_append failed") }
            list = next
        }
        defer {
            _ = diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_HTTPHEADER, nil)
            curl.slistFreeAll(list)
        }
        try check(diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_URL, url))
        try check(diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_HTTPHEADER, list))
        // libcurl copies the body (COPYPOSTFIELDS reads POSTFIELDSIZE's count of bytes).
        try check(diptych_curl_setopt_long(curl.easySetopt, handle, CURLOPT_POSTFIELDSIZE, body.count))
        try check(body.withUnsafeBytes { diptych_curl_setopt_pointer(curl.easySetopt, handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) })
        let code = curl.easyPerform(handle)
        if aborted.load(ordering: .relaxed) { throw .stopped }
        try check(code)
        var status = 0
        try check(diptych_curl_getinfo_long(curl.easyGetinfo, handle, CURLINFO_RESPONSE_CODE, &status))
        return status
    }
}
