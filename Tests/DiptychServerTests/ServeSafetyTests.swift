import DiptychCore
import DiptychMedia
import Foundation
import Testing

/// `diptych serve` against a hostile client: sources outside the policy,
/// internal hosts, outputs onto other takes' files, unauthenticated
/// bodies, slow clients holding connections.
@Suite(.serialized) struct ServeSafetyTests {
    init() { MediaLibraries.setLogLevel(.error) }

    private func fixture(_ path: String, size: String = "320x240", frames: Int = 30, codec: [String] = ["-pix_fmt", "yuv420p"]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=\(size):rate=30", "-frames:v", "\(frames)"] + codec + [path]
        try p.run(); p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    /// With --input-root, file sources come from under it only; FFmpeg's
    /// reading protocols are refused; a folder or standard input is 400.
    @Test func sourcesStayUnderTheInputRoot() throws {
        let dir = Scratch(); defer { dir.remove() }
        let outside = Scratch(); defer { outside.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("in"), withIntermediateDirectories: true)
        try fixture(dir.path("in/a.mp4"))
        try fixture(outside.path("b.mp4"))
        try "secret\n".write(toFile: outside.path("secret.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: dir.path("in/escape.mp4"), withDestinationPath: outside.path("b.mp4"))
        let server = try ServeProcess(["--input-root", dir.path("in")], in: dir.path); defer { server.stop() }
        for (primary, reason) in [(outside.path("b.mp4"), "outside the input root"), ("escape.mp4", "outside the input root"),
                                  ("file://" + outside.path("b.mp4"), "outside the input root"),
                                  ("concat:\(dir.path("in/a.mp4"))|\(outside.path("secret.txt"))", "protocol 'concat'"),
                                  ("subfile,,start,0,end,100,,:\(outside.path("secret.txt"))", "protocol 'subfile'"),
                                  ("data:text/plain,hi", "protocol 'data'"), ("pipe:0", "protocol 'pipe'"),
                                  ("-", "standard input"), (".", "is a folder"), ("missing.mp4", "no such file")] {
            let a = try server.request("POST", "/v1/takes", json(["primary": primary, "out": "o.mp4", "duration": 1]))
            #expect(a.status == 400 && a.error.contains(reason), "\(primary): \(a.status) \(a.text)")
        }
        // A switch to a source outside the policy is refused too.
        let ok = try server.request("POST", "/v1/takes", json(["primary": "a.mp4", "secondary": "a.mp4", "out": "ok.mp4",
                                                                "preset": "ultrafast", "audio": "none"]))
        #expect(ok.status == 201, "\(ok.text)")
        let id = try #require(ok.json["id"] as? String)
        let sw = try server.request("POST", "/v1/takes/\(id)/switch", json(["role": "secondary", "source": outside.path("b.mp4")]))
        #expect(sw.status == 400 && sw.error.contains("outside the input root"), "\(sw.text)")
        try server.waitForTake(id) { state($0) == "finished" }
        #expect(try decodeAll(dir.path("ok.mp4")).count == 30)
    }

    /// Overlay images are inputs: under --input-root only, checked before
    /// the take starts, named by their JSON field; one under the root is drawn.
    @Test func overlayImagesStayUnderTheInputRoot() throws {
        let dir = Scratch(); defer { dir.remove() }
        let outside = Scratch(); defer { outside.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("in"), withIntermediateDirectories: true)
        let storage = FrameStorage(zeroedCount: 8 * 8 * 4)
        let logo = VideoFrame(width: 8, height: 8, format: .rgba, planes: [FramePlane(storage: storage, stride: 32)], pts: .zero)
        try PNGWriter.write(logo, to: dir.path("in/logo.png"))
        try PNGWriter.write(logo, to: outside.path("logo.png"))
        let server = try ServeProcess(["--input-root", dir.path("in")], in: dir.path); defer { server.stop() }
        let rect: [String: Any] = ["x": 0.1, "y": 0.1, "width": 0.2, "height": 0.2]
        for (image, reason) in [(outside.path("logo.png"), "outside the input root"), ("missing.png", "no such file"),
                                ("concat:\(dir.path("in/logo.png"))|\(outside.path("logo.png"))", "protocol 'concat'")] {
            let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x180@30", "out": "o.mp4", "duration": 1,
                                                                   "overlays": [["image": image, "rect": rect]]]))
            #expect(a.status == 400 && a.error.contains("overlays[0].image") && a.error.contains(reason), "\(image): \(a.status) \(a.text)")
        }
        let bad = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x180@30", "out": "o.mp4",
                                                                 "overlays": [["image": "logo.png", "rect": rect, "z": "middle"]]]))
        #expect(bad.status == 400 && bad.error.contains("overlays[0].z"), "\(bad.text)")
        let ok = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x180@30", "out": "ok.mp4", "duration": 1,
                                                                "preset": "ultrafast", "audio": "none",
                                                                "overlays": [["image": "logo.png", "rect": rect, "opacity": 0.5]]]))
        #expect(ok.status == 201, "\(ok.text)")
        let id = try #require(ok.json["id"] as? String)
        try server.waitForTake(id) { state($0) == "finished" }
        #expect(try decodeAll(dir.path("ok.mp4")).count == 30)
    }

    /// A network source may reach only the listed networks: the refusal
    /// comes before any connection, and a source that cannot be opened is
    /// told as such, not why (open and closed ports look alike).
    @Test func networkSourcesReachOnlyAllowedHosts() throws {
        let dir = Scratch(); defer { dir.remove() }
        let listener = try TCPListener()
        defer { listener.close() }
        let server = try ServeProcess(["--allow-source-net", "192.0.2.0/24"], in: dir.path); defer { server.stop() }
        for url in ["http://127.0.0.1:\(listener.port)/a.mp4", "tcp://localhost:\(listener.port)", "rtmp://[::1]:\(listener.port)/live/x",
                    "hls+http://127.0.0.%31:\(listener.port)/a.m3u8"] {
            let a = try server.request("POST", "/v1/takes", json(["primary": url, "out": "o.mp4"]))
            #expect(a.status == 400 && a.error.contains("not in the networks sources may reach"), "\(url): \(a.text)")
        }
        #expect(listener.accepted == 0, "the server connected to a refused host")

        // Where loopback is allowed, a closed port and a silent one read the same to the client.
        // (A source not opened before admission counts at the canvas asked for: a small one fits a loaded machine.)
        let open = try ServeProcess([], in: dir.path); defer { open.stop() }
        var answers: [String] = []
        for port in [listener.port, try TCPListener.closedPort()] {
            let a = try open.request("POST", "/v1/takes", json(["primary": "http://127.0.0.1:\(port)/a.mp4", "out": "o\(port).mp4",
                                                                 "primaryTimeout": 1, "size": "320x240"]))
            #expect(a.status >= 400 && a.status < 600, "\(a.text)")
            answers.append(a.error.replacingOccurrences(of: "\(port)", with: "PORT"))
        }
        #expect(answers.count == 2 && answers[0] == answers[1], "\(answers)")
        #expect(answers.first?.contains("could not be opened") == true, "\(answers)")
        #expect(open.stderr.text.contains("could not be opened:"), "the reason goes to the server's log")
    }

    /// Outputs onto another running take's input or output, by any spelling, are 409.
    @Test func outputsNeverOverwriteWhatTakesRead() throws {
        let dir = Scratch(); defer { dir.remove() }
        try fixture(dir.path("in.mp4"), frames: 600)
        try FileManager.default.createSymbolicLink(atPath: dir.path("link"), withDestinationPath: dir.path)
        let before = try Data(contentsOf: URL(fileURLWithPath: dir.path("in.mp4")))
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let a = try server.request("POST", "/v1/takes", json(["primary": dir.path("in.mp4"), "out": "a.mp4", "preset": "ultrafast",
                                                               "audio": "none", "realtime": "on"]))
        #expect(a.status == 201, "\(a.text)")
        let id = try #require(a.json["id"] as? String)
        for out in [dir.path("in.mp4"), "file://" + dir.path("in.mp4"), dir.path("link/in.mp4"), "file:" + dir.path("link/a.mp4")] {
            let b = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": out, "duration": 1]))
            #expect(b.status == 409, "\(out): \(b.text)")
            let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": out]))
            #expect(added.status == 409 || added.status == 400, "\(out): \(added.text)")
        }
        for out in ["/dev/stderr", "/proc/self/fd/2"] {
            let b = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": out, "format": "mpegts", "duration": 1]))
            #expect(b.status == 400 && b.error.contains("not a recording file"), "\(out): \(b.text)")
        }
        _ = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path("in.mp4"))) == before)
    }

    /// Adding an output whose receiver accepts the connection and never
    /// answers delays that output alone: the take's frames go on at their
    /// cadence while it opens, and the add fails with 502 in the end.
    @Test func aSilentReceiverHoldsUpNoFrame() throws {
        let dir = Scratch(); defer { dir.remove() }
        let silent = try TCPListener()
        defer { silent.close() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "out": "main.mp4", "preset": "ultrafast", "audio": "none", "realtime": "on"]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 15 }
        final class Box: @unchecked Sendable { var answer: Answer? }
        let box = Box()
        let adding = DispatchGroup()
        DispatchQueue.global().async(group: adding) {
            box.answer = try? server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "rtmp://127.0.0.1:\(silent.port)/live/x"]))
        }
        Thread.sleep(forTimeInterval: 0.5)
        let before = frames(try server.take(id))
        Thread.sleep(forTimeInterval: 3)
        let after = frames(try server.take(id))
        #expect(silent.accepted >= 1, "the receiver was never reached")
        #expect(after - before >= 45, "\(after - before) frames in 3 s at 30 fps while an output was opening")
        adding.wait()
        #expect(box.answer?.status == 502, "\(box.answer?.text ?? "no answer")")
        // A take whose own output is that receiver: 502 too.
        let silentTake = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30",
                                                                        "out": "rtmp://127.0.0.1:\(silent.port)/live/y"]))
        #expect(silentTake.status == 502, "\(silentTake.text)")
        let deleted = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(deleted.status == 200 && state(deleted.json) == "finished", "\(deleted.text)")
    }

    /// Removing an output whose receiver stopped reading delays only the
    /// answer to that request: the take's frames go on meanwhile.
    @Test func aStalledOutputIsRemovedBesideTheTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let stalled = try TCPListener(receiveBuffer: 4096)
        defer { stalled.close() }
        // Room for a second 720p encode whatever the measured cost: admission is not what this tests.
        let server = try ServeProcess(["--cores", "64"], in: dir.path); defer { server.stop() }
        // Every frame a keyframe: megabytes a second, so the unread connection fills in a few seconds.
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:1280x720@30", "out": "main.mp4", "preset": "ultrafast", "audio": "none",
            "realtime": "on", "keyframeInterval": 0.03, "size": "1280x720"]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "tcp://127.0.0.1:\(stalled.port)", "format": "mpegts"]))
        #expect(added.status == 201, "\(added.text)")
        let index = try #require(added.json["index"] as? Int)
        // Wait until the live output drops frames (the server's log says so): its connection is full.
        let deadline = Date(timeIntervalSinceNow: 30)
        while Date() < deadline && !server.stderr.text.contains("frames dropped in the last second") {
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(server.stderr.text.contains("frames dropped in the last second"), "the stalled output never dropped a frame")
        final class Box: @unchecked Sendable { var answer: Answer? }
        let box = Box()
        let removing = DispatchGroup()
        DispatchQueue.global().async(group: removing) {
            box.answer = try? server.request("DELETE", "/v1/takes/\(id)/outputs/\(index)")
        }
        Thread.sleep(forTimeInterval: 0.5)
        let before = frames(try server.take(id))
        Thread.sleep(forTimeInterval: 3)
        let after = frames(try server.take(id))
        // A take held up by the removal would show none; a 720p take of keyframes encoded twice on a loaded
        // machine may fall behind its 90, so a second's worth is asked.
        #expect(after - before >= 30, "\(after - before) frames in 3 s at 30 fps while an output was being removed")
        removing.wait()
        #expect(box.answer?.status == 200, "\(box.answer?.text ?? "no answer")")
        _ = try server.request("DELETE", "/v1/takes/\(id)")
    }

    /// An output added to a running take is admitted like a take: one more
    /// encode of its canvas must fit the capacity, or 503.
    @Test func addedOutputsAreAdmittedByCost() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--cores", "2"], in: dir.path); defer { server.stop() }
        func model() throws -> Double? {
            ((try server.request("GET", "/healthz")).json["cost"] as? [String: Any])?["cpuSecondsPerMegapixel"] as? Double
        }
        var calibrated: Double?
        let deadline = Date(timeIntervalSinceNow: 120)
        while calibrated == nil && Date() < deadline {
            calibrated = try model()
            if calibrated == nil { Thread.sleep(forTimeInterval: 0.2) }
        }
        let perMegapixel = try #require(calibrated)
        // A canvas that costs about 40 % of the capacity (2 cores × 90 %) by the calibration: the take fits.
        // Once the take runs, the model is what it measures, which may be well below the calibration's
        // (a cheaper preset, no start-up), so the added output is 3 × 3 times the canvas: 3.6 of the
        // capacity by the calibration, refused unless the measured model were under a fifth of it.
        let megapixels = 0.4 * 1.8 / perMegapixel / 30
        let height = max(90, Int((megapixels * 1e6 * 9 / 16).squareRoot()) & ~1)
        let width = (height * 16 / 9) & ~1
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:\(width)x\(height)@30", "out": "main.mp4", "preset": "ultrafast", "audio": "none",
            "realtime": "on", "duration": 20]))
        #expect(created.status == 201, "\(width)x\(height): \(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 30 }
        let added = try server.request("POST", "/v1/takes/\(id)/outputs",
                                       json(["out": "more.ts", "size": "\(width * 3)x\(height * 3)"]))
        let now = try model()
        #expect(added.status == 503, """
            \(width)x\(height), calibrated at \(perMegapixel) CPU s/MP, now \(now.map { "\($0)" } ?? "none"): \(added.text)
            """)
        #expect(!FileManager.default.fileExists(atPath: dir.path("more.ts")))
        _ = try server.request("DELETE", "/v1/takes/\(id)")
    }

    /// A FIFO primary with no writer: 504 after its timeout, no slot kept;
    /// DELETE ends a take still opening it at once.
    @Test func blockingSourcesAreBounded() throws {
        let dir = Scratch(); defer { dir.remove() }
        #expect(mkfifo(dir.path("cam.fifo"), 0o600) == 0)
        let server = try ServeProcess(["--max-takes", "1"], in: dir.path); defer { server.stop() }
        let a = try server.request("POST", "/v1/takes", json(["primary": dir.path("cam.fifo"), "out": "a.mp4", "primaryTimeout": 1,
                                                               "size": "320x240"]))
        #expect(a.status == 504, "\(a.status) \(a.text)")
        #expect(a.error.contains("cam.fifo") && a.error.contains("timed out"), "\(a.text)")
        // The slot is free again.
        let b = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "b.mp4", "duration": 1,
                                                               "preset": "ultrafast"]))
        #expect(b.status == 201, "\(b.text)")
        let bid = try #require(b.json["id"] as? String)
        try server.waitForTake(bid) { state($0) == "finished" }

        let tiny = dir.path("tiny.mkv")
        try fixture(tiny, size: "1x1", frames: 3, codec: ["-c:v", "ffv1"])
        let t = try server.request("POST", "/v1/takes", json(["primary": tiny, "out": "t.mp4"]))
        #expect(t.status == 400 && t.error.contains("1x1"), "\(t.text)")
    }

    /// A take still opening a source that blocks (a FIFO with no writer, a
    /// minute's timeout) is ended at once by DELETE and frees its slot; one
    /// still opening when the server is stopped does not hold up the stop.
    @Test func takesStillOpeningStopAtOnce() throws {
        let dir = Scratch(); defer { dir.remove() }
        #expect(mkfifo(dir.path("cam.fifo"), 0o600) == 0)
        let server = try ServeProcess(["--max-takes", "1"], in: dir.path); defer { server.stop() }
        let body = json(["primary": dir.path("cam.fifo"), "out": "a.mp4", "primaryTimeout": 60, "size": "320x240"])
        // POST answers after its own wait with the take still starting.
        let a = try server.request("POST", "/v1/takes", body)
        #expect(a.status == 201 && state(a.json) == "starting", "\(a.text)")
        let id = try #require(a.json["id"] as? String)
        // The only slot is taken: the server lives but is not ready for another take.
        #expect(try server.request("GET", "/livez").status == 200)
        let full = try server.request("GET", "/readyz")
        #expect(full.status == 503 && full.error.contains("--max-takes"), "\(full.text)")
        let start = Date()
        let deleted = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(Date().timeIntervalSince(start) < 3, "DELETE took \(Date().timeIntervalSince(start)) s")
        #expect(deleted.status == 200, "\(deleted.text)")
        let b = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "b.mp4", "duration": 1,
                                                               "preset": "ultrafast"]))
        #expect(b.status == 201, "the slot stayed taken: \(b.text)")
        let bid = try #require(b.json["id"] as? String)
        try server.waitForTake(bid) { state($0) == "finished" }
        let ready = try server.request("GET", "/readyz")
        #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready.text)")

        // Another one opening when SIGTERM comes: the server stops at once.
        DispatchQueue.global().async { _ = try? server.request("POST", "/v1/takes", body) }
        Thread.sleep(forTimeInterval: 2)
        let stopping = Date()
        server.signal(SIGTERM)
        #expect(server.waitForExit(timeout: 30) == 0)
        #expect(Date().timeIntervalSince(stopping) < 5, "SIGTERM took \(Date().timeIntervalSince(stopping)) s")
    }

    /// The token is checked before the body is read; a request must arrive
    /// whole within --request-timeout; one address holds at most 64
    /// connections, and others still get in.
    @Test func theHTTPFrontHoldsAgainstSlowAndUnauthenticatedClients() throws {
        let dir = Scratch(); defer { dir.remove() }
        try "s3cret\n".write(toFile: dir.path("token"), atomically: true, encoding: .utf8)
        let server = try ServeProcess(["--token-file", dir.path("token"), "--request-timeout", "1"], in: dir.path)
        defer { server.stop() }
        server.token = "s3cret"
        let rss0 = residentKiB(server.process.processIdentifier)
        // The 401 comes back on the head alone, before any byte of the 1 MiB body is sent.
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        for _ in 0..<40 {
            let c = try RawClient(port: server.port)
            _ = c.send(Array("POST /v1/takes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n".utf8))
            let answer = c.readSome()
            #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer)")
            _ = c.send(body)   // the server may already have closed the connection
            c.close()
        }
        let grew = residentKiB(server.process.processIdentifier) - rss0
        #expect(grew < 30_000, "memory grew by \(grew) KiB for 40 refused 1 MiB bodies")

        // A client trickling a byte every 0.3 s is cut off after about a second.
        let slow = try RawClient(port: server.port)
        let start = Date()
        var closed = false
        for byte in Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8) {
            if !slow.send([byte]) { closed = true; break }
            Thread.sleep(forTimeInterval: 0.3)
        }
        #expect(closed || slow.readClosed(), "the slow request was not cut off")
        #expect(Date().timeIntervalSince(start) < 6)

        // /healthz holds JSON numbers or null, never "inf"; duplicate keys are refused.
        let health = try server.request("GET", "/healthz")
        #expect(!health.text.contains("\"inf\""), "\(health.text)")
        let capacity = try #require(health.json["capacity"] as? [String: Any])
        #expect(capacity["gpuMsPerSecond"] is NSNull, "\(health.text)")
        // No NVDEC on a software renderer: no take is placed, and the health says why.
        let decoding = try #require(health.json["decoding"] as? [String: Any])
        #expect((decoding["nvdecUnavailable"] as? String)?.isEmpty == false && decoding["placedCores"] as? Double == 0, "\(health.text)")
        let dup = try server.request("POST", "/v1/takes", #"{"primary": "testsrc:smpte", "out": "a.mp4", "out": "b.mp4"}"#)
        #expect(dup.status == 400 && dup.error.contains("twice"), "\(dup.text)")
        // 80 idle connections from one address: 64 held at most, and a request from another address is answered.
        let held = (0..<80).compactMap { _ in try? RawClient(port: server.port) }
        for c in held { _ = c.send(Array("G".utf8)) }
        Thread.sleep(forTimeInterval: 0.3)
        let stillOpen = held.filter { !$0.readClosed(wait: 0) }.count
        #expect(stillOpen <= 64, "\(stillOpen) connections held by one address")
        let other = try RawClient(port: server.port, source: "127.0.0.2")
        #expect(other.send(Array("GET /healthz HTTP/1.0\r\n\r\n".utf8)))
        #expect(other.readAll().hasPrefix("HTTP/1.") , "another address was shut out")
        held.forEach { $0.close() }

    }
}

/// Resident memory of a process, in KiB.
func residentKiB(_ pid: Int32) -> Int {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}

/// A TCP listener on loopback that counts the connections it accepts.
final class TCPListener: @unchecked Sendable {
    let fd: Int32
    let port: UInt16
    private let lock = NSLock()
    private var count = 0
    private var open = true
    var accepted: Int { lock.withLock { count } }

    /// `receiveBuffer`: the accepted connections' receive buffer (small: a
    /// receiver that stops reading stalls its sender soon).
    init(receiveBuffer: Int32? = nil) throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer { setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(s, 16) == 0 else { Glibc.close(s); throw POSIXError(.EADDRINUSE) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        fd = s
        port = UInt16(bigEndian: a.sin_port)
        let t = Thread { [self] in
            while lock.withLock({ open }) {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 100) > 0 else { continue }
                let c = accept(fd, nil, nil)
                if c >= 0 { lock.withLock { count += 1 } }   // held open, silent
            }
        }
        t.start()
    }

    func close() { lock.withLock { open = false }; Glibc.close(fd) }

    /// A loopback port nothing listens on.
    static func closedPort() throws -> UInt16 {
        let l = try TCPListener()
        let p = l.port
        l.close()
        return p
    }
}

/// A raw TCP client, for requests URLSession will not send (trickled bytes).
final class RawClient {
    let fd: Int32
    /// Connects to 127.0.0.1:`port` from the loopback address `source`.
    init(port: UInt16, source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var from = sockaddr_in()
        from.sin_family = sa_family_t(AF_INET)
        from.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { Glibc.close(fd); throw POSIXError(.EADDRNOTAVAIL) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard r == 0 else { Glibc.close(fd); throw POSIXError(.ECONNREFUSED) }
    }
    deinit { close() }
    private var closedAlready = false
    func close() { if !closedAlready { closedAlready = true; Glibc.close(fd) } }
    /// Whether the bytes went out (false once the server has closed the connection).
    func send(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count }
    /// Whether the server closed the connection (read gives end of stream or an error) within `wait` seconds.
    func readClosed(wait: Double = 2) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(wait * 1000)) > 0 else { return false }
        var b = [UInt8](repeating: 0, count: 4096)
        return recv(fd, &b, b.count, Int32(MSG_DONTWAIT)) <= 0
    }
    /// What the server has sent within `wait` seconds (one read).
    func readSome(wait: Double = 5) -> String {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(wait * 1000)) > 0 else { return "" }
        var b = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &b, b.count, 0)
        return n > 0 ? String(decoding: b[0..<n], as: UTF8.self) : ""
    }

    /// Everything until the server closes (at most 5 s).
    func readAll() -> String {
        var out = [UInt8]()
        let end = Date(timeIntervalSinceNow: 5)
        while Date() < end {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) > 0 else { continue }
            var b = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &b, b.count, 0)
            if n <= 0 { break }
            out += b[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
