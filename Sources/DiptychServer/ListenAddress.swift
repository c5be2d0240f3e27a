import Foundation

/// `--listen HOST:PORT`: an IPv4 or IPv6 address (`[::1]:8737`) or a host
/// name resolved once at start, and a port (0 picks a free one).
public struct ListenAddress: Sendable, CustomStringConvertible {
    public static let defaultText = "127.0.0.1:8737"

    public let host: String
    public let port: UInt16
    /// The resolved socket address (`sockaddr_in` or `sockaddr_in6`).
    private let storage: sockaddr_storage
    public let isIPv6: Bool

    /// Parses and resolves `text`; the error names `--listen` and says why.
    public init(parsing text: String) throws(ServerError) {
        func bad(_ why: String) -> ServerError { .badUsage("--listen '\(text)': \(why)") }
        var host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw bad("expected [IPv6]:PORT")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                throw bad("expected HOST:PORT, e.g. 127.0.0.1:8737 (IPv6 as [::1]:8737)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw bad("the host is empty") }
        guard let port = UInt16(portText) else { throw bad("the port must be a number from 0 to 65535") }

        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(String(host), nil, &hints, &list)
        guard rc == 0, let first = list else { throw bad("cannot resolve the host (\(String(cString: gai_strerror(rc))))") }
        defer { freeaddrinfo(list) }
        // Prefer IPv4 when a name resolves to both.
        var chosen = first
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let a = p { if a.pointee.ai_family == AF_INET { chosen = a; break }; p = a.pointee.ai_next }
        var ss = sockaddr_storage()
        withUnsafeMutableBytes(of: &ss) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: chosen.pointee.ai_addr, count: Int(chosen.pointee.ai_addrlen)))
        }
        let v6 = chosen.pointee.ai_family == AF_INET6
        isIPv6 = v6
        let portBE = port.bigEndian
        withUnsafeMutableBytes(of: &ss) { raw in
            if v6 { raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = portBE }
            else { raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = portBE }
        }
        self.host = String(host)
        self.port = port
        storage = ss
    }

    /// Whether the address is loopback only (127.0.0.0/8, ::1, or ::ffff:127.x).
    public var isLoopback: Bool {
        var ss = storage
        return withUnsafeBytes(of: &ss) { raw in
            if isIPv6 {
                let a = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_addr
                let b = withUnsafeBytes(of: a) { Array($0) }
                if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }
                return b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff && b[12] == 127
            }
            let a = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_addr
            return withUnsafeBytes(of: a) { $0[0] } == 127
        }
    }

    /// Runs `body` with the socket address.
    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        var ss = storage
        return withUnsafePointer(to: &ss) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Errors of the server at its edge: `badUsage` exits 2, `runtime` exits 1.
public enum ServerError: Error, Hashable, Sendable, CustomStringConvertible {
    case badUsage(String)
    case runtime(String)

    public var description: String {
        switch self { case .badUsage(let m), .runtime(let m): m }
    }
    public var exitCode: Int32 {
        switch self { case .badUsage: 2; case .runtime: 1 }
    }
}
