#if canImport(Glibc)
import Glibc
#endif

/// What a source may read: which FFmpeg protocols and demuxers, which
/// folder files come from, which hosts network sources reach
/// (docs/ARCHITECTURE.md, "Source policy"). `diptych record` uses
/// `commandLine`; `diptych serve` builds its own from `--input-root` and
/// `--allow-source-net`. The protocol and demuxer lists are handed to FFmpeg
/// (`protocol_whitelist`, `format_whitelist`) on every input it opens, the
/// nested ones (HLS segments, RTSP's RTP) included; `classify` refuses what
/// is off the lists before anything opens.
public struct SourcePolicy: Sendable, Hashable, CustomStringConvertible {
    /// FFmpeg protocols a source may use (also inside another: `hls+https`).
    public var protocols: [String]
    /// Demuxers a source may be read with (FFmpeg's names).
    public var formats: [String]
    /// Whether file sources are allowed at all.
    public var files: Bool
    /// The folder file sources must lie in (absolute, links resolved); nil: any.
    public var inputRoot: String?
    /// Addresses network sources may reach. Empty: any but `refusesLocal`'s.
    public var allowedNetworks: [IPNetwork]
    /// Loopback, link-local and unspecified addresses are refused unless
    /// `allowedNetworks` lists them.
    public var refusesLocal: Bool
    /// Ports a listening source may bind (an SRT listener, an RTMP or TCP
    /// listen URL: a publisher pushes to the take). nil: any (the command
    /// line); empty: none (a server without `--allow-source-listen`).
    public var listenPorts: [ClosedRange<Int>]?
    /// Whether a failure to open a network source is told in full (the
    /// command line) or only as "could not be opened" (a server, whose
    /// clients should not learn which internal ports answer).
    public var detailedNetworkErrors: Bool
    /// Whether a source may name a local camera (`v4l2:/dev/videoN`,
    /// `camera:N`): yes on the command line, no on a server without
    /// `--allow-cameras` (a take would read the server's devices).
    public var cameras: Bool

    /// Protocols sources may use: files, and the network protocols of live
    /// and streamed sources. Refused whatever the policy: `concat`,
    /// `subfile`, `data`, `crypto`, `fd`, `pipe` and every other.
    public static let standardProtocols = ["file", "http", "https", "tcp", "tls", "udp", "rtp", "rtsp",
                                           "rtmp", "rtmps", "srt", "hls", "httpproxy"]
    /// Video containers, raw streams and single images (a `--slate`); no
    /// text or playlist-of-files demuxers such as `tty` or `concat`.
    /// (`image2` reads only the file named: a file source must exist, so a
    /// `%d` pattern names none.)
    public static let standardFormats = ["mov", "mp4", "matroska", "webm", "mpegts", "mpeg", "flv", "live_flv",
                                         "avi", "asf", "nut", "ogg", "mxf", "dv", "ivf", "h264", "hevc",
                                         "mpegvideo", "m4v", "mjpeg", "yuv4mpegpipe", "rtsp", "sdp", "rtp",
                                         "hls", "dash", "obu", "av1",
                                         "image2", "png_pipe", "jpeg_pipe", "bmp_pipe", "webp_pipe", "tiff_pipe"]
    /// Protocols that only receive (bind a local port): their host is not
    /// an address the source reaches.
    public static let receivingProtocols: Set<String> = ["udp", "rtp"]

    public init(protocols: [String] = standardProtocols, formats: [String] = standardFormats, files: Bool = true,
                inputRoot: String? = nil, allowedNetworks: [IPNetwork] = [], refusesLocal: Bool = false,
                listenPorts: [ClosedRange<Int>]? = nil, detailedNetworkErrors: Bool = true, cameras: Bool = true) {
        self.protocols = protocols; self.formats = formats; self.files = files; self.inputRoot = inputRoot
        self.allowedNetworks = allowedNetworks; self.refusesLocal = refusesLocal
        self.listenPorts = listenPorts
        self.detailedNetworkErrors = detailedNetworkErrors
        self.cameras = cameras
    }

    /// `diptych record`'s: the standard protocols and demuxers, files from
    /// any folder, any host.
    public static let commandLine = SourcePolicy()

    /// A server's: files only under `inputRoot` (none without one when the
    /// server listens beyond loopback), hosts in `allowedNetworks`, and
    /// loopback and link-local refused unless listed when it listens beyond
    /// loopback.
    /// Listening sources only on `listenPorts` (none by default: a take
    /// would otherwise bind any port of the server's host); cameras only
    /// with `cameras` (`--allow-cameras`).
    public static func server(inputRoot: String?, allowedNetworks: [IPNetwork], listensBeyondLoopback: Bool,
                              listenPorts: [ClosedRange<Int>] = [], cameras: Bool = false) -> SourcePolicy {
        SourcePolicy(files: inputRoot != nil || !listensBeyondLoopback, inputRoot: inputRoot,
                     allowedNetworks: allowedNetworks, refusesLocal: listensBeyondLoopback, listenPorts: listenPorts,
                     detailedNetworkErrors: false, cameras: cameras)
    }

    /// `PORT` or `FIRST-LAST`, comma separated (`1935,9000-9010`); nil when malformed.
    public static func parsePorts(_ text: String) -> [ClosedRange<Int>]? {
        var out: [ClosedRange<Int>] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let ends = part.split(separator: "-", omittingEmptySubsequences: false).map { Int($0.filter { $0 != " " }) }
            guard (1...2).contains(ends.count), let a = ends[0], let b = ends.last!, (1...65535).contains(a), (a...65535).contains(b) else { return nil }
            out.append(a...b)
        }
        return out
    }

    /// Whether `url` listens for a publisher rather than pulling from a
    /// host: an SRT listener (`srt://:9000?mode=listener`, or
    /// `mode=rendezvous`), an RTMP URL whose host is the unspecified address
    /// (`rtmp://0.0.0.0:1935/live/key`, opened with FFmpeg's `listen`), a TCP
    /// URL with `listen`. Its protocol and port (nil when it names none).
    public static func listening(_ url: String) -> (scheme: String, port: Int?)? {
        let proto = ffmpegProtocol(of: url)
        guard let scheme = proto.split(separator: "+").last.map(String.init), url.contains("://") else { return nil }
        let query = url.split(separator: "?", maxSplits: 1).dropFirst().first.map {
            $0.split(separator: "&").map { $0.lowercased() }
        } ?? []
        let listens: Bool
        switch scheme {
        case "srt": listens = query.contains("mode=listener") || query.contains("mode=rendezvous")
        case "tcp": listens = query.contains { $0 == "listen" || ($0.hasPrefix("listen=") && $0 != "listen=0") }
        case "rtmp": listens = host(of: url).flatMap(IPAddress.init)?.isUnspecified ?? false
        default: listens = false
        }
        return listens ? (scheme, port(of: url)) : nil
    }

    /// The port of `scheme://[user@]host:port/...`, nil when it names none.
    public static func port(of url: String) -> Int? {
        guard let r = url.range(of: "://") else { return nil }
        var authority = url[r.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") { authority = authority[authority.index(after: close)...] }
        guard let colon = authority.lastIndex(of: ":") else { return nil }
        return Int(authority[authority.index(after: colon)...])
    }

    /// Checks a listening source's port against `listenPorts`.
    public func checkListening(scheme: String, port: Int?, as source: String) -> Result<Void, Refusal> {
        guard let ports = listenPorts else { return .success(()) }
        let allowed = ports.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
        guard !ports.isEmpty else {
            let what = Self.receivingProtocols.contains(scheme) ? "receiving on a port of this host" : "listening for a publisher"
            return .failure(Refusal(source: source, reason: "\(what) is not allowed here (the server has no --allow-source-listen)"))
        }
        guard let port, port > 0 else { return .failure(Refusal(source: source, reason: "names no port to listen on")) }
        guard ports.contains(where: { $0.contains(port) }) else {
            return .failure(Refusal(source: source, reason: "port \(port) is not one sources may listen on (--allow-source-listen \(allowed))"))
        }
        return .success(())
    }

    public var description: String {
        var parts = ["protocols \(protocols.joined(separator: ","))"]
        parts.append(files ? "files from \(inputRoot ?? "any folder")" : "no files")
        if !allowedNetworks.isEmpty { parts.append("hosts in \(allowedNetworks.map(\.description).joined(separator: ","))") }
        else if refusesLocal { parts.append("no loopback or link-local hosts") }
        if let ports = listenPorts {
            parts.append(ports.isEmpty ? "no listening" : "listening on ports " + ports.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ","))
        }
        if !cameras { parts.append("no cameras") }
        return parts.joined(separator: "; ")
    }

    /// What a source URL reaches.
    public enum Target: Hashable, Sendable {
        /// A file, by the path FFmpeg would open.
        case file(path: String)
        /// A network source: its (outermost network) protocol, and its host
        /// (nil for one that listens, `srt://:9000?mode=listener`).
        case network(scheme: String, host: String?)
    }

    /// Why a source may not be opened. `description` names the source.
    public struct Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        public var source: String
        public var reason: String
        public init(source: String, reason: String) { self.source = source; self.reason = reason }
        public var description: String { "\(source): \(reason)" }
    }

    /// The protocol FFmpeg would choose for `url` (as libavformat's
    /// `url_find_protocol` does: the scheme characters before a ':', else `file`).
    public static func ffmpegProtocol(of url: String) -> String {
        let schemeChars = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
        let prefix = url.prefix { schemeChars.contains($0) }
        if url.hasPrefix("subfile,") { return "subfile" }
        guard !prefix.isEmpty, url.dropFirst(prefix.count).first == ":" else { return "file" }
        // A DOS path (`C:\x`, `C:/x`): FFmpeg's file protocol too.
        if prefix.count == 1, let next = url.dropFirst(2).first, next == "\\" || next == "/" { return "file" }
        return prefix.lowercased()
    }

    /// Checks `url` against the protocol list and says what it reaches.
    /// Paths and hosts are checked by `checkFile` and `checkAddresses`.
    public func classify(_ url: String) -> Result<Target, Refusal> {
        let proto = Self.ffmpegProtocol(of: url)
        let layers = proto.split(separator: "+").map(String.init)
        for p in layers where !protocols.contains(p) {
            let why = p == "file" ? "file sources are not allowed here" : "protocol '\(p)' is not allowed for sources (allowed: \(protocols.joined(separator: ", ")))"
            return .failure(Refusal(source: url, reason: why))
        }
        if proto == "file" {
            guard files else {
                return .failure(Refusal(source: url, reason: "file sources are not allowed here (the server has no --input-root)"))
            }
            var path = Substring(url)
            if path.lowercased().hasPrefix("file:") { path = path.dropFirst(5) }
            // `file://host/x` is not a local file: only `file:///x` and `file:/x`.
            if path.hasPrefix("//") && !path.hasPrefix("///") {
                return .failure(Refusal(source: url, reason: "a file: URL must name a local path (file:///path)"))
            }
            while path.hasPrefix("//") { path = path.dropFirst() }
            guard !path.isEmpty else { return .failure(Refusal(source: url, reason: "names no file")) }
            return .success(.file(path: String(path)))
        }
        guard let outer = layers.last else { return .failure(Refusal(source: url, reason: "names no protocol")) }
        // A listener binds a port of this host; it reaches no host. So does a
        // receiving protocol: `udp://` and `rtp://` bind the URL's port to take
        // what a sender pushes (their host is a group to join or a sender).
        if let l = Self.listening(url) {
            if case .failure(let r) = checkListening(scheme: l.scheme, port: l.port, as: url) { return .failure(r) }
            return .success(.network(scheme: outer, host: nil))
        }
        if Self.receivingProtocols.contains(outer) {
            if case .failure(let r) = checkListening(scheme: outer, port: Self.port(of: url), as: url) { return .failure(r) }
            return .success(.network(scheme: outer, host: nil))
        }
        return .success(.network(scheme: outer, host: Self.host(of: url)))
    }

    /// Checks a file source's resolved path (absolute, links resolved)
    /// against the input root.
    public func checkFile(resolved path: String, as source: String) -> Result<Void, Refusal> {
        guard files else { return .failure(Refusal(source: source, reason: "file sources are not allowed here")) }
        guard let root = inputRoot else { return .success(()) }
        let prefix = root.hasSuffix("/") ? root : root + "/"
        guard path == root || path.hasPrefix(prefix) else {
            return .failure(Refusal(source: source, reason: "is outside the input root \(root)"))
        }
        return .success(())
    }

    /// Checks the addresses a network source's host resolved to: every one
    /// must be allowed (a name that also resolves to a refused address is refused).
    public func checkAddresses(_ addresses: [IPAddress], host: String, scheme: String, as source: String) -> Result<Void, Refusal> {
        if Self.receivingProtocols.contains(scheme) { return .success(()) }
        guard !addresses.isEmpty else { return .failure(Refusal(source: source, reason: "host '\(host)' does not resolve")) }
        for a in addresses {
            if !allowedNetworks.isEmpty {
                guard allowedNetworks.contains(where: { $0.contains(a) }) else {
                    return .failure(Refusal(source: source, reason: "host '\(host)' (\(a)) is not in the networks sources may reach (--allow-source-net)"))
                }
            } else if refusesLocal && (a.isLoopback || a.isLinkLocal || a.isUnspecified) {
                return .failure(Refusal(source: source, reason: "host '\(host)' (\(a)) is a loopback or link-local address, which sources may not reach unless --allow-source-net lists it"))
            }
        }
        return .success(())
    }

    /// The host of `scheme://[user@]host[:port]/...` (brackets removed from
    /// an IPv6 literal), nil when it has none (a listener).
    public static func host(of url: String) -> String? {
        guard let r = url.range(of: "://") else { return nil }
        var authority = url[r.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return String(authority) }
            host = authority[authority.index(after: authority.startIndex)..<close]
        } else {
            host = authority.prefix { $0 != ":" }
        }
        return host.isEmpty ? nil : String(host).removingPercentEncodingLoosely()
    }
}

extension String {
    /// `%XX` escapes decoded (a host spelled `127.0.0.%31` is 127.0.0.1);
    /// malformed escapes are kept as they are.
    func removingPercentEncodingLoosely() -> String {
        guard contains("%") else { return self }
        var bytes: [UInt8] = []
        var u = Array(utf8)[...]
        while let b = u.first {
            if b == UInt8(ascii: "%"), u.count >= 3, let v = UInt8(String(decoding: u.dropFirst().prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v); u = u.dropFirst(3)
            } else { bytes.append(b); u = u.dropFirst() }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// An IPv4 or IPv6 address (IPv4-mapped IPv6 addresses are taken as the IPv4 address).
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 or 16 bytes, network order.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            self.bytes = Array(bytes[12...])
        } else {
            self.bytes = bytes
        }
    }

    /// Parses a numeric address (`127.0.0.1`, `::1`, `::ffff:10.0.0.1`).
    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v4) { Array($0) })
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
            return
        }
        return nil
    }

    public var isV4: Bool { bytes.count == 4 }
    public var isLoopback: Bool { isV4 ? bytes[0] == 127 : bytes == Array(repeating: 0, count: 15) + [1] }
    public var isLinkLocal: Bool { isV4 ? bytes[0] == 169 && bytes[1] == 254 : bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 }
    public var isUnspecified: Bool { bytes.allSatisfy { $0 == 0 } }

    public var description: String {
        if isV4 { return bytes.map(String.init).joined(separator: ".") }
        var a = in6_addr()
        withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: bytes) }
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count)) != nil else { return "?" }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A network in CIDR form (`10.0.0.0/8`, `fd00::/8`; a bare address is one host).
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    public let prefixLength: Int

    /// Parses `ADDRESS[/BITS]`; nil when malformed.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let a = IPAddress(String(parts[0])) else { return nil }
        let bits = a.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let n = Int(parts[1]), n >= 0, n <= (a.isV4 && parts[0].contains(":") ? 128 : bits) else { return nil }
            // `::ffff:10.0.0.0/104` is `10.0.0.0/8`.
            length = a.isV4 && parts[0].contains(":") ? max(0, n - 96) : n
        }
        address = a; prefixLength = length
    }

    public func contains(_ a: IPAddress) -> Bool {
        guard a.bytes.count == address.bytes.count else { return false }
        var left = prefixLength
        for (x, y) in zip(a.bytes, address.bytes) {
            guard left > 0 else { return true }
            let mask: UInt8 = left >= 8 ? 0xff : ~(0xff >> UInt8(left))
            if x & mask != y & mask { return false }
            left -= 8
        }
        return true
    }

    public var description: String { "\(address)/\(prefixLength)" }
}
