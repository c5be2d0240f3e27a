import Foundation
import Testing

/// A real receiver on loopback: `ffmpeg` listening for SRT (the stream's
/// bytes as they arrive, through its raw `data` format: no probing, no
/// delay) or for RTMP (`-listen 1`, copied to MPEG-TS), read here with the
/// arrival time of every chunk (to check pacing) and written to `path`.
final class LiveReceiver: @unchecked Sendable {
    let url: String
    let path: String
    private let process = Process()
    private let lock = NSLock()
    private var arrivals: [(Date, Int)] = []
    private let done = DispatchSemaphore(value: 0)

    /// A free TCP/UDP port on 127.0.0.1 (bound and released).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// A socket listening on 127.0.0.1:`port` that never accepts: the kernel
    /// completes each connection, and nothing ever answers. Closed by `close`.
    static func silentListener(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(fd, 16)
        return fd
    }

    /// Starts `ffmpeg` listening at `url` (`rtmp://127.0.0.1:P/live/x` or `srt://127.0.0.1:P`).
    init(url: String, path: String) throws {
        self.url = url
        self.path = path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        if url.hasPrefix("srt://") {
            // 1 s of SRT latency: a loaded test machine delays packets, and SRT drops those later than that.
            process.arguments = ["-loglevel", "error", "-nostdin", "-f", "data", "-i", url + "?mode=listener&latency=1000000",
                                 "-map", "0", "-c", "copy", "-flush_packets", "1", "-f", "data", "pipe:1"]
        } else {
            process.arguments = ["-loglevel", "error", "-nostdin", "-listen", "1", "-i", url, "-c", "copy",
                                 "-flush_packets", "1", "-f", "mpegts", "pipe:1"]
        }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try process.run()
        let reader = out.fileHandleForReading
        DispatchQueue.global().async { [self] in
            var total = 0
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                total += chunk.count
                lock.lock(); arrivals.append((Date(), total)); lock.unlock()
                file.write(chunk)
            }
            try? file.close()
            done.signal()
        }
        // Listening before the take connects (a loaded machine starts ffmpeg late).
        if let port = Self.port(of: url), Self.waitBound(port: port, udp: url.hasPrefix("srt://"), timeout: 15) { return }
        Thread.sleep(forTimeInterval: 0.5)
    }

    /// The port of `scheme://host:P[/...]`.
    static func port(of url: String) -> Int? {
        guard let hostPort = url.split(separator: "/").dropFirst().first, let p = hostPort.split(separator: ":").last else { return nil }
        return Int(p.prefix { $0.isNumber })
    }

    /// Waits until a socket of this machine is listening on TCP `port`, or
    /// bound to UDP `port` (read from /proc/net: nothing connects to it).
    static func waitBound(port: Int, udp: Bool, timeout: Double) -> Bool {
        let hex = String(format: ":%04X", port)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for table in udp ? ["udp", "udp6"] : ["tcp", "tcp6"] {
                let rows = (try? String(contentsOfFile: "/proc/net/\(table)", encoding: .utf8))?.split(separator: "\n").dropFirst() ?? []
                for row in rows {
                    let f = row.split(separator: " ")
                    // local_address is field 1, st field 3: 0A is LISTEN (TCP); a UDP socket bound to the port is enough.
                    if f.count > 3, f[1].hasSuffix(hex), udp || f[3] == "0A" { return true }
                }
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    /// Seconds from the first bytes received to the last but one chunk (a
    /// last partial read can wait for the connection's end).
    var arrivalSpan: Double {
        lock.lock(); defer { lock.unlock() }
        guard arrivals.count >= 2 else { return 0 }
        return arrivals[arrivals.count - 2].0.timeIntervalSince(arrivals[0].0)
    }

    /// Kills the receiver at once (a crashed or vanished server).
    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        waitForEnd(timeout: 5)
    }

    /// Waits until the stream has ended (the sender closed) and the file is complete.
    @discardableResult
    func waitForEnd(timeout: Double) -> Bool {
        let ok = done.wait(timeout: .now() + timeout) == .success
        if !ok && process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL); _ = done.wait(timeout: .now() + 5) }
        process.waitUntilExit()
        return ok
    }
}
