import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychServer

/// `diptych serve` deployed: under systemd (`Type=notify`), the messages a unit's
/// manager reads from `NOTIFY_SOCKET`, received here on a real datagram
/// socket from the real server process; the unit file and the container
/// recipe shipped in `contrib/`.
@Suite(.serialized) struct ServeDeploymentTests {
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

    /// contrib/Dockerfile: non-root, the driver capabilities EGL, NVDEC and
    /// CUDA need, glvnd's vendor file for NVIDIA's EGL, a health check on
    /// /livez, the archive scripts/build-server makes, and an ENTRYPOINT
    /// whose options `diptych serve` accepts (with a token, since it listens
    /// beyond loopback). No container engine runs here: this reads the file.
    @Test func dockerfileRunsTheServerAsItParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("contrib/Dockerfile"), encoding: .utf8)
        // Instructions (continuation lines joined), and heredoc bodies by their target.
        var instructions: [(String, String)] = []
        var heredocs: [String: String] = [:]
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)[...]
        while let line = lines.popFirst() {
            let t = line.trimmingCharacters(in: .whitespaces)
            if t.isEmpty || t.hasPrefix("#") { continue }
            var full = t
            while full.hasSuffix("\\"), let next = lines.popFirst() { full = String(full.dropLast()) + " " + next.trimmingCharacters(in: .whitespaces) }
            let parts = full.split(separator: " ", maxSplits: 1).map(String.init)
            instructions.append((parts[0], parts.count > 1 ? parts[1] : ""))
            if parts[0] == "COPY", let m = full.firstMatch(of: /<<'(\w+)' (\S+)/) {
                var body: [String] = []
                while let l = lines.popFirst(), l != String(m.1) { body.append(l) }
                heredocs[String(m.2)] = body.joined(separator: "\n")
            }
        }
        func all(_ name: String) -> [String] { instructions.filter { $0.0 == name }.map(\.1) }
        #expect(all("FROM").count == 1)
        let user = try #require(all("USER").last)
        #expect(user != "root" && user != "0" && Int(user).map { $0 > 0 } == true, "USER \(user)")
        let env = all("ENV").joined(separator: " ")
        let caps = try #require(env.firstMatch(of: /NVIDIA_DRIVER_CAPABILITIES=(\S+)/)).1.split(separator: ",").map(String.init)
        #expect(Set(caps).isSuperset(of: ["graphics", "video", "compute", "utility"]), "\(caps)")
        let vendor = try #require(heredocs["/usr/share/glvnd/egl_vendor.d/10_nvidia.json"])
        let icd = try #require((try JSONSerialization.jsonObject(with: Data(vendor.utf8)) as? [String: Any])?["ICD"] as? [String: Any])
        #expect(icd["library_path"] as? String == "libEGL_nvidia.so.0")
        #expect(all("HEALTHCHECK").contains { $0.contains("/livez") })
        let build = try String(contentsOf: root.appendingPathComponent("scripts/build-server"), encoding: .utf8)
        let archive = try #require(build.firstMatch(of: /\nname=(\S+)\n/)).1
        #expect(all("COPY").contains { $0.hasPrefix("dist/\(archive).tar.xz ") })
        let entry = try #require(all("ENTRYPOINT").last)
        let argv = try #require(try JSONSerialization.jsonObject(with: Data(entry.utf8)) as? [String])
        #expect(argv.count > 2 && argv[0] == "/opt/diptych/bin/diptych" && argv[1] == "serve", "\(argv)")
        let options = try ServeOptions.parse(Array(argv.dropFirst(2)))
        let listen = try ListenAddress(parsing: options.listen)
        #expect(listen.isLoopback || options.tokenFile != nil, "listens on \(options.listen) without a token")
    }

    /// `--log-format json`: every line on standard error is one JSON object
    /// with time, level and message; a take's lines carry its id, and the
    /// server's life its events (listening, draining, stopped).
    @Test func jsonLogsAreOneObjectALine() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--log-format", "json"], in: dir.path)
        let created = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "j.mp4",
                                                                    "duration": 0.5, "preset": "ultrafast"]))
        let id = try #require(created.json["id"] as? String, "\(created.text)")
        _ = try server.waitForTake(id) { state($0) == "finished" }
        server.signal(SIGTERM)
        #expect(server.waitForExit() == 0)
        let lines = server.stderr.text.split(separator: "\n").map(String.init)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        #expect(!lines.isEmpty && objects.count == lines.count, "not JSON: \(lines.filter { l in (try? JSONSerialization.jsonObject(with: Data(l.utf8))) == nil })")
        let time = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
        for o in objects {
            #expect(o["time"].map { $0.wholeMatch(of: time) != nil } == true && ["debug", "info", "warning", "error"].contains(o["level"] ?? "") && o["message"] != nil, "\(o)")
        }
        let events = objects.compactMap { $0["event"] }
        #expect(events.contains("listening") && events.contains("draining") && events.last == "stopped", "\(events)")
        #expect(objects.contains { $0["take"] == id }, "no line of take \(id): \(lines)")
    }

    /// An unknown log format is refused before anything starts.
    @Test func unknownLogFormatIsRefused() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--log-format", "xml"], in: dir.path, waitForListening: false)
        #expect(server.waitForExit() == 2)
        #expect(server.stderr.text.contains("--log-format 'xml': expected text or json"), "\(server.stderr.text)")
    }

    /// `--log-level`: debug adds every request; warning keeps refusals and
    /// drops the info lines; an unknown level is refused before anything starts.
    @Test func logLevelChoosesTheLines() throws {
        let dir = Scratch(); defer { dir.remove() }
        func objects(_ server: ServeProcess) -> [[String: String]] {
            server.stderr.text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        }
        for level in ["debug", "warning"] {
            let server = try ServeProcess(["--log-format", "json", "--log-level", level], in: dir.path)
            #expect(try server.request("GET", "/v1/takes").status == 200)
            #expect(try server.request("POST", "/v1/takes", "{\"primary\": 5, \"primary\": 6}").status == 400)
            server.signal(SIGTERM)
            #expect(server.waitForExit() == 0)
            let lines = objects(server)
            let listed = lines.first { $0["message"] == "GET /v1/takes → 200" }
            let refused = lines.first { $0["message"] == "POST /v1/takes → 400" }
            #expect(refused?["level"] == "warning", "\(level): \(lines)")
            if level == "debug" {
                #expect(listed?["level"] == "debug", "\(lines)")
                #expect(lines.contains { $0["level"] == "info" && $0["event"] == "listening" })
            } else {
                #expect(listed == nil && lines.allSatisfy { $0["level"] == "warning" || $0["level"] == "error" }, "\(lines)")
            }
        }
        let bad = try ServeProcess(["--log-level", "loud"], in: dir.path, waitForListening: false)
        #expect(bad.waitForExit() == 2)
        #expect(bad.stderr.text.contains("--log-level 'loud': expected debug, info, warning or error"), "\(bad.stderr.text)")
    }
}
