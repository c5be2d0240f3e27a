import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychServer

/// `diptych serve` under systemd (`Type=notify`): the messages a unit's
/// manager reads from `NOTIFY_SOCKET`, received here on a real datagram
/// socket from the real server process, and the unit file shipped in
/// `contrib/`.
@Suite(.serialized) struct ServeSystemdTests {
    /// A datagram socket bound to a path, as systemd's notification socket is.
    final class NotifySocket {
        let fd: Int32
        let path: String
        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw CancellationError() }
            var a = sockaddr_un()
            a.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &a.sun_path) { b in
                for (i, c) in path.utf8.enumerated() where i < b.count - 1 { b[i] = c }
            }
            let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            guard r == 0 else { close(fd); throw CancellationError() }
        }
        deinit { close(fd); unlink(path) }

        /// The next message, or nil after `timeout` seconds.
        func receive(timeout: Double) -> String? {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(timeout * 1000)) == 1 else { return nil }
            var buf = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buf, buf.count, 0)
            return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
        }

        /// Messages until one holds `line` (a whole line), or nil after `timeout`.
        func wait(for line: String, timeout: Double) -> (found: String?, seen: [String]) {
            var seen: [String] = []
            let deadline = Date(timeIntervalSinceNow: timeout)
            while Date() < deadline {
                guard let m = receive(timeout: deadline.timeIntervalSinceNow) else { break }
                seen.append(m)
                if m.split(separator: "\n").contains(where: { $0 == line }) { return (m, seen) }
            }
            return (nil, seen)
        }
    }

    /// READY=1 after calibration (with its status), watchdog pings at half
    /// WATCHDOG_USEC, STOPPING=1 when SIGTERM starts the drain, exit 0.
    @Test func notifiesReadyWatchdogAndStopping() throws {
        let dir = Scratch(); defer { dir.remove() }
        let sock = try NotifySocket(path: dir.path("notify.sock"))
        let server = try ServeProcess([], in: dir.path, environment: ["NOTIFY_SOCKET": sock.path, "WATCHDOG_USEC": "400000"])
        defer { server.stop() }
        let ready = sock.wait(for: "READY=1", timeout: 120)
        let status = ready.found?.split(separator: "\n").first { $0.hasPrefix("STATUS=") }
        #expect(ready.found != nil && status?.contains("listening on port \(server.port)") == true, "\(ready.seen) \(server.stderr.text)")
        let readyz = try server.request("GET", "/readyz")
        #expect(readyz.status == 200, "READY=1 came before /readyz was ready: \(readyz.text)")
        var pings = 0
        let until = Date(timeIntervalSinceNow: 1.5)
        while Date() < until, let m = sock.receive(timeout: until.timeIntervalSinceNow) { if m == "WATCHDOG=1" { pings += 1 } }
        #expect(pings >= 3, "\(pings) watchdog pings in 1.5 s at WATCHDOG_USEC 400000")
        server.signal(SIGTERM)
        let stopping = sock.wait(for: "STOPPING=1", timeout: 30)
        #expect(stopping.found?.contains("STATUS=finalizing every take") == true, "\(stopping.seen)")
        #expect(server.waitForExit() == 0)
    }

    /// A NOTIFY_SOCKET with a bad WATCHDOG_USEC is refused at start, naming it.
    @Test func badWatchdogIsRefused() throws {
        let dir = Scratch(); defer { dir.remove() }
        let sock = try NotifySocket(path: dir.path("notify.sock"))
        let server = try ServeProcess([], in: dir.path, waitForListening: false,
                                      environment: ["NOTIFY_SOCKET": sock.path, "WATCHDOG_USEC": "soon"])
        #expect(server.waitForExit() != 0)
        #expect(server.stderr.text.contains("WATCHDOG_USEC 'soon'"), "\(server.stderr.text)")
    }

    /// The unit in contrib/: Type=notify with a watchdog, a drain on SIGTERM,
    /// and an ExecStart whose options `diptych serve` accepts.
    @Test func unitFileStartsTheServerAsItParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unit = try String(contentsOf: root.appendingPathComponent("contrib/diptych-serve.service"), encoding: .utf8)
        var service: [String: [String]] = [:]
        var section = ""
        for raw in unit.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") { section = line; continue }
            guard section == "[Service]", let eq = line.firstIndex(of: "=") else { continue }
            service[String(line[..<eq]), default: []].append(String(line[line.index(after: eq)...]))
        }
        #expect(service["Type"] == ["notify"])
        #expect(service["KillSignal"] == ["SIGTERM"])
        #expect(service["WatchdogSec"].flatMap { $0.first }.flatMap { Int($0) }.map { $0 > 2 } == true)
        let exec = try #require(service["ExecStart"]?.first).split(separator: " ").map(String.init)
        #expect(exec.count > 2 && exec[0].hasSuffix("/diptych") && exec[1] == "serve", "\(exec)")
        let options = try ServeOptions.parse(Array(exec.dropFirst(2)))
        #expect(options.stateDir != nil && options.outputRoot != nil)
    }
}
