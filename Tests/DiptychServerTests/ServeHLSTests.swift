import DiptychCore
import DiptychMedia
import Foundation
import Testing

/// HLS takes on a server: the playlist and its segments are claimed while
/// the take runs, and a take running when the server died is counted over
/// the segments its live playlist names.
@Suite(.serialized) struct ServeHLSTests {
    init() { MediaLibraries.setLogLevel(.error) }

    @Test(.timeLimit(.minutes(2)))
    func hlsTakeIsClaimedAndRecoveredAfterACrash() throws {
        let dir = Scratch(); defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("live"), withIntermediateDirectories: true)
        let stateDir = dir.path("state")
        let server = try ServeProcess(["--state-dir", stateDir], in: dir.path)
        let r = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "secondary": "none", "realtime": "on", "out": "live/index.m3u8",
            "segmentTime": 1, "hlsListSize": 2, "preset": "ultrafast", "audio": "none"]))
        try #require(r.status == 201, "\(r.status) \(r.text)")
        let id = try #require(r.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 100 }
        // No other take may write its playlist or one of its segments.
        let same = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "out": "live/index.m3u8", "preset": "ultrafast"]))
        #expect(same.status == 409 && same.error.contains("is writing it"), "\(same.text)")
        let segment = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "out": "live/index-0009.m4s", "format": "mp4", "preset": "ultrafast"]))
        #expect(segment.status == 409 && segment.error.contains("a file of its HLS output"), "\(segment.text)")
        Thread.sleep(forTimeInterval: 0.3)
        server.signal(SIGKILL)
        server.waitForExit()

        // The live playlist the crash left: whole segments, the last two listed.
        let playlist = try String(contentsOfFile: dir.path("live/index.m3u8"), encoding: .utf8)
        #expect(!playlist.contains("#EXT-X-ENDLIST"), "\(playlist)")
        let listed = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        #expect(listed.count == 2, "\(playlist)")
        var decoded = 0
        for name in listed {
            var data = try Data(contentsOf: URL(fileURLWithPath: dir.path("live/index-init.mp4")))
            data.append(try Data(contentsOf: URL(fileURLWithPath: dir.path("live/\(name)"))))
            let whole = dir.path("whole-\(name).mp4")
            try data.write(to: URL(fileURLWithPath: whole))
            decoded += try decodeAll(whole).count
        }
        #expect(decoded == 60)

        // After the restart the take is failed, its frames counted over the
        // segments the playlist names (a reader of the live playlist as it
        // is would wait for more).
        let started = Date()
        let again = try ServeProcess(["--state-dir", stateDir], in: dir.path); defer { again.stop() }
        #expect(Date().timeIntervalSince(started) < 30)
        let t = try again.take(id)
        #expect(state(t) == "failed", "\(t)")
        let recovered = try #require(t["recovered"] as? [String: Any])
        #expect(recovered["decodable"] as? Bool == true, "\(recovered)")
        #expect(recovered["frames"] as? Int == decoded, "\(recovered)")
        // The playlist is left as the crash left it.
        #expect(try String(contentsOfFile: dir.path("live/index.m3u8"), encoding: .utf8) == playlist)
        // Its files are the take's recordings: a new take may not write the playlist.
        let over = try again.request("POST", "/v1/takes", json([
            "primary": "testsrc:smpte:320x240@30", "out": "live/index.m3u8", "preset": "ultrafast"]))
        #expect(over.status == 409 && over.error.contains("holds the recording of take \(id)"), "\(over.text)")
    }
}
