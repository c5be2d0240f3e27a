import CMicroHTTPD
import DiptychCore
import Foundation
import Synchronization

/// One HTTP request as the router sees it: the body is complete (and within
/// the size limit) when the handler runs.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, e.g. `/v1/takes/ab12`.
    public var path: String
    public var query: String?
    /// The query's arguments, decoded (`?state=finished&limit=10`); a name given twice keeps its last value.
    public var arguments: [String: String] = [:]
    /// The `Authorization` header, if any.
    public var authorization: String?
    /// The `Idempotency-Key` header, if any.
    public var idempotencyKey: String?
    /// The `Last-Event-ID` header, if any (a reconnecting event stream).
    public var lastEventID: String?
    public var body: Data

    public init(method: String, path: String, query: String? = nil, arguments: [String: String] = [:], authorization: String? = nil,
                idempotencyKey: String? = nil, lastEventID: String? = nil, body: Data = Data()) {
        self.method = method; self.path = path; self.query = query; self.arguments = arguments; self.authorization = authorization
        self.idempotencyKey = idempotencyKey; self.lastEventID = lastEventID; self.body = body
    }
}

/// A body sent as it is made (server-sent events): `next` blocks until
/// there is more and returns nil at the end. It runs on the connection's
/// own thread.
protocol HTTPStream: AnyObject, Sendable {
    func next() -> Data?
}

/// A response: status, content type and body, or a stream instead of the body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: Data
    public var headers: [String: String] = [:]
    var stream: (any HTTPStream)?

    public init(status: Int, contentType: String = "application/json", body: Data, headers: [String: String] = [:]) {
        self.status = status; self.contentType = contentType; self.body = body; self.headers = headers
    }
}

/// The HTTP side of `diptych serve`: owns one libmicrohttpd daemon (an
/// internal polling thread and a thread per connection, so a handler may
/// block, e.g. while a take finalizes). Before any body is read, `admit`
/// sees the method, path and `Authorization` header and may answer at once
/// (a missing token: 401, with the body never read). Bodies are accumulated
/// up to `maxBodyBytes`; a larger one gets 413 (at once when
/// `Content-Length` says so, else after the rest has been read and
/// discarded). One client address holds at most `perAddressLimit`
/// connections, and a request must arrive whole within `requestDeadline`
/// (`ConnectionDeadlines`), however slowly its bytes trickle in.
final class HTTPServer: @unchecked Sendable {   // libmicrohttpd daemon handle (set by start, cleared by stop) and its logger's C struct
    typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// Sees a request's head (its body empty, not yet read); a response refuses it.
    typealias Admit = @Sendable (HTTPRequest) -> HTTPResponse?

    let address: ListenAddress
    let maxBodyBytes: Int
    private let handler: Handler
    private let admit: Admit
    private let deadlines: ConnectionDeadlines
    private let log: @Sendable (String) -> Void
    private var daemon: OpaquePointer?
    private let logger: UnsafeMutablePointer<diptych_mhd_logger>
    private struct State {
        var started = false
        var lastLogLine: String?
        var quiesced = false
    }
    private let state = Mutex(State())

    init(address: ListenAddress, maxBodyBytes: Int, requestDeadline: Double,
         log: @escaping @Sendable (String) -> Void, admit: @escaping Admit = { _ in nil }, handler: @escaping Handler) {
        self.address = address; self.maxBodyBytes = maxBodyBytes; self.handler = handler; self.admit = admit; self.log = log
        deadlines = ConnectionDeadlines(deadline: requestDeadline)
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
    /// Connections one client address may hold at once.
    static let perAddressLimit: UInt32 = 64

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
                              HTTPServer.notify, me, HTTPServer.connectionLimit, HTTPServer.perAddressLimit,
                              HTTPServer.idleTimeout, 256 * 1024, logger)
        }
        guard let d else {
            let why = state.withLock { $0.lastLogLine } ?? "libmicrohttpd could not start"
            throw .runtime("--listen \(address): \(why.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        daemon = d
        deadlines.start()
        state.withLock { $0.started = true }
        return diptych_mhd_bound_port(d)
    }

    /// Stops accepting connections; those open are served to the end.
    func quiesce() {
        guard let d = daemon else { return }
        state.withLock { s in
            guard !s.quiesced else { return }
            s.quiesced = true
            let fd = MHD_quiesce_daemon(d)
            if fd >= 0 { close(fd) }
        }
    }

    /// Stops the daemon: closes every connection and joins its threads.
    func stop() {
        guard let d = daemon else { return }
        MHD_stop_daemon(d)
        daemon = nil
        deadlines.stop()
    }

    /// libmicrohttpd's messages go to the log once it listens; while it starts,
    /// the last one is kept for `start()`'s error (said once, in one line).
    private func logged(_ line: String) {
        let listening = state.withLock { $0.lastLogLine = line; return $0.started }
        if listening { log("http: \(line.trimmingCharacters(in: .whitespacesAndNewlines))") }
    }

    /// The query arguments of one request while libmicrohttpd lists them.
    private final class QueryArguments {
        var values: [String: String] = [:]
    }

    /// What one request has accumulated between calls of `access`.
    private final class RequestState {
        var body = Data()
        var tooLarge = false
    }

    private static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, conCls in
        guard let cls, let connection, let conCls, let uploadSize else { return .NO }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        // The request's head, read on the first call and the last (not for each body chunk).
        func head() -> HTTPRequest {
            let target = url.map { String(cString: $0) } ?? "/"
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let auth = MHD_lookup_connection_value(connection, .HEADER_KIND, "Authorization").map { String(cString: $0) }
            let key = MHD_lookup_connection_value(connection, .HEADER_KIND, "Idempotency-Key").map { String(cString: $0) }
            let lastEvent = MHD_lookup_connection_value(connection, .HEADER_KIND, "Last-Event-ID").map { String(cString: $0) }
            // The query's arguments as libmicrohttpd decoded them.
            let arguments = QueryArguments()
            _ = MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, { cls, _, name, value in
                guard let cls, let name else { return .YES }
                Unmanaged<QueryArguments>.fromOpaque(cls).takeUnretainedValue().values[String(cString: name)] = value.map { String(cString: $0) } ?? ""
                return .YES
            }, Unmanaged.passUnretained(arguments).toOpaque())
            return withExtendedLifetime(arguments) {
                HTTPRequest(method: method.map { String(cString: $0) } ?? "GET", path: String(parts[0]),
                            query: parts.count > 1 ? String(parts[1]) : nil, arguments: arguments.values, authorization: auth,
                            idempotencyKey: key, lastEventID: lastEvent)
            }
        }
        // First call: headers only. Refuse an unauthorized request, or a declared
        // oversized body, before reading the body.
        guard let raw = conCls.pointee else {
            let state = RequestState()
            conCls.pointee = Unmanaged.passRetained(state).toOpaque()
            if let refusal = server.admit(head()) { return server.queue(refusal, on: connection) }
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
        // The request has arrived whole: its handler may take as long as it needs.
        server.deadlines.arrived(connection)
        var request = head()
        request.body = state.body
        return server.queue(server.handler(request), on: connection)
    }

    private static let completed: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
        if let cls, let connection {
            // The next request on this connection has a deadline of its own.
            Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().deadlines.restart(connection)
        }
        guard let conCls, let raw = conCls.pointee else { return }
        Unmanaged<RequestState>.fromOpaque(raw).release()
        conCls.pointee = nil
    }

    private static let notify: MHD_NotifyConnectionCallback = { cls, connection, _, event in
        guard let cls, let connection else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        if event == MHD_ConnectionNotificationCode(rawValue: 0) {  // MHD_CONNECTION_NOTIFY_STARTED
            server.deadlines.opened(connection, socket: diptych_mhd_connection_fd(connection))
        } else {
            server.deadlines.closed(connection)
        }
    }

    /// A stream's bytes not yet handed to libmicrohttpd.
    private final class StreamState {
        let stream: any HTTPStream
        var pending = Data()
        init(_ stream: any HTTPStream) { self.stream = stream }
    }

    /// libmicrohttpd asks for the next bytes of a stream on the connection's thread; -1 ends it.
    private static let readStream: MHD_ContentReaderCallback = { cls, _, buf, max in
        guard let cls, let buf else { return -1 }
        let s = Unmanaged<StreamState>.fromOpaque(cls).takeUnretainedValue()
        while s.pending.isEmpty {
            guard let more = s.stream.next() else { return -1 }
            s.pending = more
        }
        let n = min(max, s.pending.count)
        s.pending.withUnsafeBytes { UnsafeMutableRawPointer(buf).copyMemory(from: $0.baseAddress!, byteCount: n) }
        s.pending.removeFirst(n)
        return n
    }

    private static let freeStream: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        Unmanaged<StreamState>.fromOpaque(cls).release()
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let r: OpaquePointer?
        if let stream = response.stream {
            let state = Unmanaged.passRetained(StreamState(stream)).toOpaque()
            r = MHD_create_response_from_callback(UInt64.max, 4096, HTTPServer.readStream, state, HTTPServer.freeStream)
            if r == nil { Unmanaged<StreamState>.fromOpaque(state).release() }
        } else {
            r = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let r else { return .NO }
        defer { MHD_destroy_response(r) }
        _ = MHD_add_response_header(r, "Content-Type", response.contentType)
        for (k, v) in response.headers { _ = MHD_add_response_header(r, k, v) }
        return MHD_queue_response(connection, UInt32(response.status), r)
    }
}

/// The whole-request deadline of every open connection. libmicrohttpd's own
/// timeout is an idle one, which a client sending a byte every few seconds
/// never reaches; here a request that has not arrived whole `deadline`
/// seconds after its connection opened (or its last response was sent) has
/// its socket shut down, which ends the connection on its own thread. Each
/// connection's socket is held as a duplicate until libmicrohttpd says it
/// closed, so the one shut down is always that connection's.
final class ConnectionDeadlines: Sendable {
    private struct Entry {
        var socket: Int32
        /// When the request now arriving must be whole; nil while a handler runs.
        var due: Double?
    }
    let deadline: Double
    /// By connection (libmicrohttpd's handle, as an address).
    private let entries = Mutex<[UInt: Entry]>([:])
    /// The sweeper sleeps on it between sweeps; `stop` ends it at once.
    private let stopSignal = StopSignal()

    init(deadline: Double) { self.deadline = deadline }

    private static func now() -> Double { ProcessInfo.processInfo.systemUptime }

    func opened(_ connection: OpaquePointer, socket: Int32) {
        let copy = socket >= 0 ? dup(socket) : -1
        let due = Self.now() + deadline
        entries.withLock { $0[Self.key(connection)] = Entry(socket: copy, due: due) }
    }

    func arrived(_ connection: OpaquePointer) { entries.withLock { $0[Self.key(connection)]?.due = nil } }

    func restart(_ connection: OpaquePointer) {
        let due = Self.now() + deadline
        entries.withLock { $0[Self.key(connection)]?.due = due }
    }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }

    func closed(_ connection: OpaquePointer) {
        let socket = entries.withLock { $0.removeValue(forKey: Self.key(connection))?.socket }
        if let socket, socket >= 0 { close(socket) }
    }

    func start() {
        JoinableThread.detached(name: "http-deadlines", stackSize: nil) { [self] in
            // A sweep, then until the next is due, or at once when stop() is called.
            while !stopSignal.isStopped {
                sweep()
                guard stopSignal.sleep(min(0.5, deadline / 4)) else { break }
            }
        }
    }

    func stop() {
        stopSignal.stop()
        let left = entries.withLock { e -> [Int32] in defer { e = [:] }; return e.values.map(\.socket) }
        for s in left where s >= 0 { close(s) }
    }

    /// Shuts down the sockets of requests past their deadline.
    func sweep() {
        let now = Self.now()
        entries.withLock { entries in
            for (key, e) in entries {
                guard let due = e.due, now > due, e.socket >= 0 else { continue }
                shutdown(e.socket, Int32(SHUT_RDWR))
                entries[key]?.due = nil
            }
        }
    }
}
