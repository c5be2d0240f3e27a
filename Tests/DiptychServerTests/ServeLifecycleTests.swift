import DiptychCore
import DiptychMedia
import Foundation
import Testing

/// How a server and its takes end: SIGTERM finalizes every take, a take
/// that fails ends alone, and the state folder answers after a restart
/// (also after a crash).
@Suite(.serialized) struct ServeLifecycleTests {
    init() { MediaLibraries.setLogLevel(.error) }

    private func endlessTake(_ server: ServeProcess, out: String) throws -> String {
        let a = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30",
            "out": out, "preset": "ultrafast"]))
        #expect(a.status == 201, "\(a.text)")
        return try #require(a.json["id"] as? String)
    }

    /// SIGTERM: no new takes, every take finalized (complete, decodable
    /// files holding every frame counted), exit 0; after a restart on the
    /// same state folder GET still answers with the summaries.
    @Test func sigtermFinalizesEveryTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let stateDir = dir.path("state")
        let server = try ServeProcess(["--state-dir", stateDir], in: dir.path)
        let ids = try (0..<3).map { try endlessTake(server, out: "t\($0).mp4") }
        for id in ids { try server.waitForTake(id) { frames($0) >= 20 } }
        server.signal(SIGTERM)
        #expect(server.waitForExit() == 0, "\(server.stderr.text)")
        for i in 0..<3 {
            let decoded = try decodeAll(dir.path("t\(i).mp4"))
            #expect(decoded.count >= 20)
            #expect(decoded.map { CounterPattern.decode(frame: $0) } == (0..<decoded.count).map { Optional($0) })
        }

        let again = try ServeProcess(["--state-dir", stateDir], in: dir.path); defer { again.stop() }
        for (i, id) in ids.enumerated() {
            let t = try again.take(id)
            #expect(state(t) == "finished", "\(t)")
            let summary = try #require(t["summary"] as? [String: Any])
            #expect((summary["stopReason"] as? String)?.contains("SIGTERM") == true)
            #expect(summary["frames"] as? Int == (try decodeAll(dir.path("t\(i).mp4"))).count)
        }
        #expect((try again.request("GET", "/v1/takes").json["takes"] as? [Any])?.count == 3)
    }

    /// An output added while a take ran stays claimed after a restart: the
    /// state folder keeps its path, so no new take writes over that recording.
    @Test func addedOutputsStayClaimedAfterARestart() throws {
        let dir = Scratch(); defer { dir.remove() }
        let stateDir = dir.path("state")
        let server = try ServeProcess(["--state-dir", stateDir], in: dir.path)
        let id = try endlessTake(server, out: "main.mp4")
        try server.waitForTake(id) { frames($0) >= 10 }
        let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "added.mp4"]))
        #expect(added.status == 201, "\(added.text)")
        try server.waitForTake(id) { frames($0) >= 40 }
        server.signal(SIGTERM)
        #expect(server.waitForExit() == 0, "\(server.stderr.text)")
        #expect(try decodeAll(dir.path("added.mp4")).count > 0)

        let again = try ServeProcess(["--state-dir", stateDir], in: dir.path); defer { again.stop() }
        let r = try again.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "out": "added.mp4", "preset": "ultrafast"]))
        #expect(r.status == 409 && r.text.contains(id), "\(r.status) \(r.text)")
    }

    /// A server killed mid-take: after a restart the take is `failed`, with
    /// the frames its file holds (every complete fragment decodes).
    @Test func takesRunningAtACrashAreReportedFailed() throws {
        let dir = Scratch(); defer { dir.remove() }
        let stateDir = dir.path("state")
        let server = try ServeProcess(["--state-dir", stateDir], in: dir.path)
        let id = try endlessTake(server, out: "crash.mp4")
        try server.waitForTake(id) { frames($0) >= 90 }
        Thread.sleep(forTimeInterval: 1.2)   // fragments are a keyframe interval (1 s) long
        server.signal(SIGKILL)
        server.waitForExit()

        let again = try ServeProcess(["--state-dir", stateDir], in: dir.path); defer { again.stop() }
        let t = try again.take(id)
        #expect(state(t) == "failed", "\(t)")
        #expect((t["error"] as? String)?.contains("server stopped") == true)
        let recovered = try #require(t["recovered"] as? [String: Any])
        #expect(recovered["decodable"] as? Bool == true)
        let n = try #require(recovered["frames"] as? Int)
        #expect(n >= 30)
        let decoded = try decodeAll(dir.path("crash.mp4"))
        #expect(decoded.count == n)
        #expect(decoded.map { CounterPattern.decode(frame: $0) } == (0..<n).map { Optional($0) })
    }

    /// A split take lists its files while it records; running at a crash,
    /// its frames are counted over its files.
    @Test func splitTakeRunningAtACrashCountsItsFiles() throws {
        let dir = Scratch(); defer { dir.remove() }
        let stateDir = dir.path("state")
        let server = try ServeProcess(["--state-dir", stateDir], in: dir.path)
        let r = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "secondary": "none", "realtime": "on", "out": "split.mp4",
            "segmentTime": 1, "preset": "ultrafast", "audio": "none"]))
        try #require(r.status == 201, "\(r.status) \(r.text)")
        let id = try #require(r.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 75 }
        // While it records, the take lists its files so far: the finished ones a second each.
        let running = try server.take(id)
        let listed = try #require(running["segments"] as? [[String: Any]], "\(running)")
        #expect(listed.count >= 2 && listed.first?["path"] as? String == dir.path("split-0001.mp4"), "\(listed)")
        #expect(listed.dropLast().allSatisfy { $0["frames"] as? Int == 30 }, "\(listed)")
        // No other take may write one of its files, nor a split take whose files would be another take's.
        let onItsFile = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "out": "split-0007.mp4", "preset": "ultrafast"]))
        #expect(onItsFile.status == 409 && onItsFile.error.contains("a file of its split output"), "\(onItsFile.text)")
        let plain = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "realtime": "on", "out": "z-0001.mp4", "preset": "ultrafast", "audio": "none"]))
        #expect(plain.status == 201, "\(plain.text)")
        let over = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "out": "z.mp4", "segmentTime": 1, "preset": "ultrafast"]))
        #expect(over.status == 409 && over.error.contains("z-0001.mp4"), "\(over.text)")
        Thread.sleep(forTimeInterval: 0.5)
        server.signal(SIGKILL)
        server.waitForExit()

        let again = try ServeProcess(["--state-dir", stateDir], in: dir.path); defer { again.stop() }
        let t = try again.take(id)
        #expect(state(t) == "failed", "\(t)")
        let recovered = try #require(t["recovered"] as? [String: Any])
        let n = try #require(recovered["frames"] as? Int)
        // Every file before the last is whole; the last, being written at the
        // kill, may hold only its header (as any killed take's file may).
        var paths: [String] = []
        while FileManager.default.fileExists(atPath: dir.path(String(format: "split-%04d.mp4", paths.count + 1))) {
            paths.append(dir.path(String(format: "split-%04d.mp4", paths.count + 1)))
        }
        #expect(paths.count >= 2)
        var decoded = 0
        for path in paths.dropLast() { decoded += try decodeAll(path).count }
        decoded += (try? decodeAll(paths.last ?? "")).map(\.count) ?? 0
        #expect(n >= 60 && n == decoded, "\(recovered), \(decoded) frames decoded from the files")
        #expect(recovered["decodable"] as? Bool == true)
    }

    /// A take whose primary stops delivering ends through its own finalize
    /// path (`failed`, its file complete); the take beside it keeps recording.
    @Test func aFailingTakeEndsAlone() throws {
        let dir = Scratch(); defer { dir.remove() }
        let fifo = dir.path("primary.nut")
        #expect(mkfifo(fifo, 0o600) == 0)
        // One second of video into the pipe, then the writer holds it open and says nothing. The video is
        // made first, so what the take reads comes as soon as it opens the pipe (its timeout is a second).
        let second = dir.path("second.nut")
        let maker = Process()
        maker.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        maker.arguments = ["-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x180:rate=30", "-t", "1", "-c:v", "rawvideo", "-f", "nut", second]
        try maker.run()
        maker.waitUntilExit()
        #expect(maker.terminationStatus == 0)
        let feeder = Process()
        feeder.executableURL = URL(fileURLWithPath: "/bin/sh")
        feeder.arguments = ["-c", "exec 3>\"$0\"; cat \"$1\" >&3; exec sleep 30", fifo, second]
        try feeder.run()
        defer { if feeder.isRunning { kill(feeder.processIdentifier, SIGKILL) }; feeder.waitUntilExit() }

        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let steady = try endlessTake(server, out: "steady.mp4")
        let failing = try server.request("POST", "/v1/takes", json([
            "primary": fifo, "size": "320x180", "out": "failing.mp4", "primaryTimeout": 1, "preset": "ultrafast"]))
        #expect(failing.status == 201, "\(failing.text)")
        let fid = try #require(failing.json["id"] as? String)
        let failed = try server.waitForTake(fid) { state($0) == "failed" }
        #expect((failed["error"] as? String)?.contains("primary stream interrupted") == true, "\(failed)")
        #expect(frames(failed) == 30)
        #expect(try decodeAll(dir.path("failing.mp4")).count == 30)

        let before = frames(try server.take(steady))
        let still = try server.waitForTake(steady) { frames($0) >= before + 30 }
        #expect(state(still) == "recording")
        let deleted = try server.request("DELETE", "/v1/takes/\(steady)")
        #expect(state(deleted.json) == "finished")
        #expect(try decodeAll(dir.path("steady.mp4")).count == frames(deleted.json))
    }
}
