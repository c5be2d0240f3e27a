import CMicroHTTPD
import Foundation

/// One HTTP request as the router sees it: the body is complete (and within
/// the size limit) when the handler runs.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, e.g. `/v1/takes/ab12`.
    public var path: String
    public var query: String?
    /// The `Authorization` header, if any.
    public var authorization: String?
    public var body: Data

    public init(method: String, path: String, query: String? = nil, authorization: String? = nil, body: Data = Data()) {
        self.method = method; self.path = path; self.query = query; self.authorization = authorization; self.body = body
    }
}

/// A response: status, content type and body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: Data
    public var headers: [String: String] = [:]

    public init(status: Int, contentType: String = "application/json", body: Data, headers: [String: String] = [:]) {
        self.status = status; self.contentType = contentType; self.body = body; self.headers = headers
    }
}

/// The HTTP side of `diptych serve`: owns one libmicrohttpd daemon (an
/// internal polling thread and a thread per connection, so a handler may
/// block, e.g. while a take finalizes). Bodies are accumulated up to
/// `maxBodyBytes`; a larger one gets 413 (at once when `Content-Length`
/// says so, else after the rest has been read and discarded).
final class HTTPServer: @unchecked Sendable {
    typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse

    let address: ListenAddress
    let maxBodyBytes: Int
    private let handler: Handler
    private let log: @Sendable (String) -> Void
    private var daemon: OpaquePointer?
    private let logger: UnsafeMutablePointer<diptych_mhd_logger>
    private let lock = NSLock()
    private var started = false
    private var lastLogLine: String?
    private var quiesced = false

    init(address: ListenAddress, maxBodyBytes: Int, log: @escaping @Sendable (String) -> Void, handler: @escaping Handler) {
        self.address = address; self.maxBodyBytes = maxBodyBytes; self.handler = handler; self.log = log
        logger = .allocate(capacity: 1)
        logger.initialize(to: diptych_mhd_logger(fn: nil, cls: nil))
    }

    deinit {
        precondition(daemon == nil, "HTTPServer released while listening; call stop()")
        logger.deallocate()
    }

    /// Connections open at once (one thread each), and the seconds a
    /// connection may stay idle: enough that a few hundred slow or idle
    /// clients cannot shut the others out, short enough that they let go.
    static let connectionLimit: UInt32 = 1024
    static let idleTimeout: UInt32 = 20

    /// Binds and starts serving; returns the port (the real one for port 0).
    /// Throws `.runtime` with libmicrohttpd's reason (address in use, say).
    func start() throws(ServerError) -> UInt16 {
        let me = Unmanaged.passUnretained(self).toOpaque()
        logger.pointee = diptych_mhd_logger(fn: { cls, message in
            guard let cls, let message else { return }
            Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().logged(String(cString: message))
        }, cls: me)
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_THREAD_PER_CONNECTION.rawValue
            | MHD_USE_ITC.rawValue | MHD_USE_ERROR_LOG.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let d = address.withSockaddr { sa in
            diptych_mhd_start(flags, address.port, sa, HTTPServer.access, me, HTTPServer.completed, me,
                              HTTPServer.connectionLimit, HTTPServer.idleTimeout, 256 * 1024, logger)
        }
        guard let d else {
            let why = lock.withLock { lastLogLine } ?? "libmicrohttpd could not start"
            throw .runtime("--listen \(address): \(why.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        daemon = d
        lock.withLock { started = true }
        return diptych_mhd_bound_port(d)
    }

    /// Stops accepting connections; those open are served to the end.
    func quiesce() {
        lock.lock(); defer { lock.unlock() }
        guard let d = daemon, !quiesced else { return }
        quiesced = true
        let fd = MHD_quiesce_daemon(d)
        if fd >= 0 { close(fd) }
    }

    /// Stops the daemon: closes every connection and joins its threads.
    func stop() {
        guard let d = daemon else { return }
        MHD_stop_daemon(d)
        daemon = nil
    }

    /// libmicrohttpd's messages go to the log once it listens; while it starts,
    /// the last one is kept for `start()`'s error (said once, in one line).
    private func logged(_ line: String) {
        let listening = lock.withLock { lastLogLine = line; return started }
        if listening { log("http: \(line.trimmingCharacters(in: .whitespacesAndNewlines))") }
    }

    /// What one request has accumulated between calls of `access`.
    private final class RequestState {
        var body = Data()
        var tooLarge = false
    }

    private static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, conCls in
        guard let cls, let connection, let conCls, let uploadSize else { return .NO }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        // First call: headers only. Refuse a declared oversized body before reading it.
        guard let raw = conCls.pointee else {
            let state = RequestState()
            conCls.pointee = Unmanaged.passRetained(state).toOpaque()
            if let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length"),
               let n = Int(String(cString: length)), n > server.maxBodyBytes {
                return server.queue(HTTPErrors.response(413, "request body of \(n) bytes is over the \(server.maxBodyBytes)-byte limit"),
                                    on: connection)
            }
            return .YES
        }
        let state = Unmanaged<RequestState>.fromOpaque(raw).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            if !state.tooLarge, let uploadData {
                if state.body.count + n > server.maxBodyBytes {
                    state.tooLarge = true
                    state.body = Data()
                } else {
                    uploadData.withMemoryRebound(to: UInt8.self, capacity: n) { state.body.append($0, count: n) }
                }
            }
            uploadSize.pointee = 0
            return .YES
        }
        if state.tooLarge {
            return server.queue(HTTPErrors.response(413, "request body is over the \(server.maxBodyBytes)-byte limit"), on: connection)
        }
        let target = url.map { String(cString: $0) } ?? "/"
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let auth = MHD_lookup_connection_value(connection, .HEADER_KIND, "Authorization").map { String(cString: $0) }
        let request = HTTPRequest(method: method.map { String(cString: $0) } ?? "GET", path: String(parts[0]),
                                  query: parts.count > 1 ? String(parts[1]) : nil, authorization: auth, body: state.body)
        return server.queue(server.handler(request), on: connection)
    }

    private static let completed: MHD_RequestCompletedCallback = { _, _, conCls, _ in
        guard let conCls, let raw = conCls.pointee else { return }
        Unmanaged<RequestState>.fromOpaque(raw).release()
        conCls.pointee = nil
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let r = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let r else { return .NO }
        defer { MHD_destroy_response(r) }
        _ = MHD_add_response_header(r, "Content-Type", response.contentType)
        for (k, v) in response.headers { _ = MHD_add_response_header(r, k, v) }
        return MHD_queue_response(connection, UInt32(response.status), r)
    }
}
