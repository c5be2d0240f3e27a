import CCrypto
import Foundation
import Glibc

/// HMAC-SHA256 of webhook bodies with the `--webhook-secret-file` key,
/// computed by OpenSSL's `HMAC()` from `libcrypto.so.3` (loaded with dlopen
/// when a server is given `--webhook`; the same library libcurl's TLS uses).
/// The key is never logged or described.
struct WebhookSigner: Sendable {
    private let key: [UInt8]
    nonisolated(unsafe) private let hmac: diptych_hmac_fn
    nonisolated(unsafe) private let sha256: diptych_evp_sha256_fn

    /// Reads the key from `file` (surrounding whitespace trimmed). Errors name the option and the file, never the key.
    init(secretFile path: String) throws(ServerError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .badUsage("--webhook-secret-file '\(path)': cannot read the file")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count >= 16 else {
            throw .badUsage("--webhook-secret-file '\(path)': the secret must be at least 16 bytes (surrounding whitespace is not counted)")
        }
        do { try self.init(key: Array(text.utf8)) } catch { throw .runtime(error.description) }
    }

    init(key: [UInt8]) throws(WebhookError) {
        self.key = key
        let functions = try Self.library.get()
        hmac = functions.hmac; sha256 = functions.sha256
    }

    private struct Functions: @unchecked Sendable { var hmac: diptych_hmac_fn; var sha256: diptych_evp_sha256_fn }   // C function pointers from dlsym, immutable

    private static let library: Result<Functions, WebhookError> = {
        guard let h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(.library("--webhook needs OpenSSL's libcrypto.so.3 (Debian: libssl3), which cannot be loaded: \(dlerror().map { String(cString: $0) } ?? "dlopen failed")"))
        }
        guard let m = dlsym(h, "HMAC"), let d = dlsym(h, "EVP_sha256") else { return .failure(.library("libcrypto.so.3 has no HMAC or EVP_sha256")) }
        return .success(Functions(hmac: unsafeBitCast(m, to: diptych_hmac_fn.self), sha256: unsafeBitCast(d, to: diptych_evp_sha256_fn.self)))
    }()

    /// The signature header's value for `body`: `sha256=` and the HMAC in lower-case hex.
    func signature(_ body: Data) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = key.withUnsafeBytes { k in
            body.withUnsafeBytes { b in
                hmac(sha256(), k.baseAddress, Int32(k.count), b.bindMemory(to: UInt8.self).baseAddress, b.count, &digest, &length) != nil
            }
        }
        precondition(ok && length == 32, "HMAC-SHA256 failed")
        return "sha256=" + digest.prefix(Int(length)).map { String(format: "%02x", $0) }.joined()
    }
}
