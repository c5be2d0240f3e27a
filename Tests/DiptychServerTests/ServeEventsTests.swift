import DiptychCore
import Foundation
import Glibc
import Testing

/// `GET /v1/events`: server-sent events read by a real client over a socket
/// from the real server process, resumed with `Last-Event-ID`, ended when the
/// server stops.
@Suite(.serialized) struct ServeEventsTests {
    /// A minimal server-sent events client: one GET on a plain socket, frames parsed as they come.
    final class EventClient {
        struct Event { var id: Int; var type: String; var data: [String: String] }
        let fd: Int32
        /// The response's head.
        private var buffer = ""
        private(set) var closed = false

        init(port: UInt16, lastEventID: Int? = nil, query: String = "") throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard r == 0 else { close(fd); throw CancellationError() }
            var head = "GET /v1/events\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            if let lastEventID { head += "Last-Event-ID: \(lastEventID)\r\n" }
            head += "\r\n"
            _ = head.withCString { send(fd, $0, strlen($0), 0) }
        }
        deinit { close(fd) }

        /// Bytes as they came off the socket (head, then chunked body) and the body decoded so far.
        private var raw = [UInt8]()
        private var body = ""
        private var headDone = false

        /// Reads once (until `deadline`); false at the deadline or the end of the stream.
        private func fill(until deadline: Date) -> Bool {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            guard poll(&p, 1, ms) == 1 else { return false }
            var bytes = [UInt8](repeating: 0, count: 8192)
            let n = recv(fd, &bytes, bytes.count, 0)
            if n <= 0 { closed = true; return false }
            raw += bytes[0..<n]
            decode()
            return true
        }

        /// Moves whole chunks (`SIZE\r\nDATA\r\n`, HTTP/1.1 chunked transfer) from `raw` into `body`.
        private func decode() {
            let crlf: [UInt8] = [13, 10]
            func find(_ pattern: [UInt8], from: Int) -> Int? {
                guard raw.count >= pattern.count + from else { return nil }
                for i in from...(raw.count - pattern.count) where Array(raw[i..<i + pattern.count]) == pattern { return i }
                return nil
            }
            if !headDone {
                guard let end = find(crlf + crlf, from: 0) else { return }
                buffer = String(decoding: raw[0..<end], as: UTF8.self)
                raw.removeFirst(end + 4)
                headDone = true
            }
            while let line = find(crlf, from: 0) {
                guard let size = Int(String(decoding: raw[0..<line], as: UTF8.self), radix: 16) else { closed = true; return }
                guard raw.count >= line + 2 + size + 2 else { return }
                body += String(decoding: raw[(line + 2)..<(line + 2 + size)], as: UTF8.self)
                raw.removeFirst(line + 2 + size + 2)
                if size == 0 { closed = true; return }
            }
        }

        /// The status line's code, once the head has arrived.
        func status(timeout: Double) -> Int? {
            let deadline = Date(timeIntervalSinceNow: timeout)
            while !headDone && !closed && Date() < deadline { _ = fill(until: deadline) }
            guard let line = buffer.split(separator: "\r\n").first else { return nil }
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }

        /// The next event frame (comments skipped), or nil at the deadline or the end of the stream.
        func next(timeout: Double) -> Event? {
            let deadline = Date(timeIntervalSinceNow: timeout)
            while true {
                while let end = body.range(of: "\n\n") {
                    let frame = String(body[..<end.lowerBound])
                    body = String(body[end.upperBound...])
                    var id = -1, type = "", data: [String: String] = [:]
                    for line in frame.split(separator: "\n") {
                        if line.hasPrefix("id: ") { id = Int(line.dropFirst(4)) ?? -1 }
                        if line.hasPrefix("event: ") { type = String(line.dropFirst(7)) }
                        if line.hasPrefix("data: ") {
                            data = (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: String]) ?? [:]
                        }
                    }
                    if id >= 0 { return Event(id: id, type: type, data: data) }
                }
                if closed || Date() >= deadline { return nil }
                _ = fill(until: deadline)
            }
        }

        /// Whether the server ends the stream within `timeout`.
        func endsWithin(_ timeout: Double) -> Bool {
            let deadline = Date(timeIntervalSinceNow: timeout)
            while !closed && Date() < deadline { _ = fill(until: deadline) }
            return closed
        }
    }

    @Test func takeEventsInOrderResumedAndEndedWithTheServer() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path)
        let stream = try EventClient(port: server.port)
        #expect(stream.status(timeout: 10) == 200)
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "out": "e.mp4", "duration": 4, "realtime": "on", "preset": "ultrafast"]))
        let id = try #require(created.json["id"] as? String, "\(created.text)")
        _ = try server.waitForTake(id) { frames($0) > 3 }
        #expect(try server.request("PATCH", "/v1/takes/\(id)", json(["layout": ["kind": "side-by-side"]])).status == 200)
        var seen: [EventClient.Event] = []
        while let e = stream.next(timeout: 30) {
            seen.append(e)
            if e.type == "finished" || e.type == "failed" { break }
        }
        #expect(seen.map(\.type) == ["created", "started", "layout-changed", "finished"], "\(seen.map { "\($0.id) \($0.type)" })")
        #expect(seen.allSatisfy { $0.data["take"] == id && $0.data["time"] != nil })
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.id + 1 == $1.id })
        #expect(seen.last?.data["frames"] == "120", "\(seen.last?.data ?? [:])")

        // A client that saw up to `started` reconnects and is given what it missed.
        let started = try #require(seen.first { $0.type == "started" })
        let resumed = try EventClient(port: server.port, lastEventID: started.id)
        #expect(resumed.status(timeout: 10) == 200)
        let missed = [resumed.next(timeout: 10), resumed.next(timeout: 10)].compactMap { $0 }
        #expect(missed.map(\.type) == ["layout-changed", "finished"] && missed.first?.id == started.id + 1, "\(missed.map(\.type))")
        let bad = try EventClient(port: server.port, lastEventID: nil, query: "?after=x")
        #expect(bad.status(timeout: 10) == 400)

        // Stopping the server ends every stream; the server exits 0.
        server.signal(SIGTERM)
        #expect(stream.endsWithin(30) && resumed.endsWithin(30))
        #expect(server.waitForExit() == 0)
    }

    /// `ffmpeg` listening for RTMP on loopback, the stream thrown away; `kill` is SIGKILL (a receiver that vanished).
    final class RTMPReceiver {
        let process = Process()
        init(url: String, port: Int) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            process.arguments = ["-loglevel", "error", "-nostdin", "-listen", "1", "-i", url, "-c", "copy", "-f", "null", "-"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Listening before the take connects (/proc/net/tcp: nothing connects to it to find out).
            let hex = String(format: ":%04X", port), deadline = Date(timeIntervalSinceNow: 15)
            while Date() < deadline {
                let rows = (try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8))?.split(separator: "\n") ?? []
                if rows.contains(where: { let f = $0.split(separator: " "); return f.count > 3 && f[1].hasSuffix(hex) && f[3] == "0A" }) { return }
                Thread.sleep(forTimeInterval: 0.05)
            }
            Issue.record("ffmpeg did not listen on \(url)")
        }
        func kill() { if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }; process.waitUntilExit() }
        deinit { if process.isRunning { kill() } }
    }

    /// A take whose secondary (Y4M through a FIFO) goes quiet, and whose
    /// RTMP output's receiver is killed and started again: `source-lost`
    /// (the secondary's read timed out after `secondaryTimeout`),
    /// `output-lost` and `output-back`, each once, in the take's order.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "the sender and receiver are ffmpeg (scripts/setup)"),
          .timeLimit(.minutes(2)))
    func lostAndBackEventsOfASourceAndAnOutput() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path)
        defer { server.stop() }
        let rtmpPort = freePort()
        let out = "rtmp://127.0.0.1:\(rtmpPort)/live/take"
        var receiver = try RTMPReceiver(url: out, port: rtmpPort)
        // The secondary: Y4M through a FIFO, 2 s of frames, then nothing (the writer holds it open).
        let y4m = dir.path("sec.y4m"), fifo = dir.path("sec-fifo.y4m")
        let made = Process()
        made.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        made.arguments = ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30", "-frames:v", "180",
                          "-pix_fmt", "yuv420p", y4m]
        try made.run(); made.waitUntilExit()
        try #require(made.terminationStatus == 0 && mkfifo(fifo, 0o600) == 0)
        let data = try Data(contentsOf: URL(fileURLWithPath: y4m))
        let header = data.prefix { $0 != 0x0A }.count + 1, frameBytes = 6 + 160 * 120 * 3 / 2
        let writer = DispatchGroup()
        writer.enter()
        DispatchQueue.global().async {
            defer { writer.leave() }
            signal(SIGPIPE, SIG_IGN)   // a reader gone is an error of the write, not the end of the test process
            guard let h = FileHandle(forWritingAtPath: fifo) else { return }   // waits for the take to open it
            defer { try? h.close() }
            do {
                try h.write(contentsOf: data.prefix(header))
                for i in 0..<60 {
                    try h.write(contentsOf: data.subdata(in: (header + i * frameBytes)..<(header + (i + 1) * frameBytes)))
                    Thread.sleep(forTimeInterval: 1.0 / 30)
                }
                Thread.sleep(forTimeInterval: 4)
            } catch {
                Issue.record("the take stopped reading its secondary early: \(error)")
            }
        }
        let stream = try EventClient(port: server.port)
        #expect(stream.status(timeout: 10) == 200)
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x240@30", "secondary": fifo, "secondaryTimeout": 1, "out": out,
            "duration": 12, "realtime": "on", "preset": "ultrafast"]))
        let id = try #require(created.json["id"] as? String, "\(created.text)")
        _ = try server.waitForTake(id) { frames($0) > 30 }
        // The receiver goes at 1 s and is back at 3 s (the output's second attempt, 2 s after its first, finds it).
        receiver.kill()
        Thread.sleep(forTimeInterval: 2)
        receiver = try RTMPReceiver(url: out, port: rtmpPort)

        var seen: [EventClient.Event] = []
        while let e = stream.next(timeout: 40) {
            seen.append(e)
            if e.type == "finished" || e.type == "failed" { break }
        }
        let types = seen.map(\.type)
        for t in ["source-lost", "output-lost", "output-back"] {
            #expect(types.filter { $0 == t }.count == 1, "\(t): \(types)")
        }
        #expect(types.last == "finished", "\(seen.map { "\($0.type) \($0.data)" })")
        func index(_ t: String) -> Int { types.firstIndex(of: t) ?? -1 }
        #expect(index("output-lost") < index("output-back"), "\(types)")
        _ = writer.wait(timeout: .now() + 10)
        let lost = seen.first { $0.type == "source-lost" }?.data ?? [:]
        // Whichever saw the silence first: the reader's timeout or the take's wait for a frame.
        #expect(lost["role"] == "secondary" && lost["take"] == id, "\(lost)")
        #expect(lost["reason"]?.contains("timed out") == true || lost["reason"]?.contains("nothing for 1") == true, "\(lost)")
        let outLost = seen.first { $0.type == "output-lost" }?.data ?? [:]
        #expect(outLost["index"] == "0" && outLost["out"] == out && outLost["reason"]?.isEmpty == false, "\(outLost)")
        let back = seen.first { $0.type == "output-back" }?.data ?? [:]
        #expect(back["index"] == "0" && (Double(back["seconds"] ?? "") ?? 0) >= 1, "\(back)")
    }
}
