import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// The fixture executable built next to the test bundle (.build/<config>/).
func fixtureExecutable(_ name: String) -> URL? {
    var dirs = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL]
    dirs.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug"))
    return dirs.map { $0.appendingPathComponent(name) }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
}

@Suite struct CrashSafetyTests {
    init() { _ = quietFFmpeg }

    /// A recording killed with SIGKILL mid-take leaves a playable MP4 holding
    /// every fragment (one second each) completed before the kill.
    @Test(.timeLimit(.minutes(5)))
    func killedRecordingKeepsCompletedFragments() throws {
        let dir = TempDir(); defer { dir.remove() }
        let out = dir.path("killed.mp4")
        // 4.5 s of media (135 frames) handed to the writer, then SIGKILL.
        let (written, signalled) = try killedWriterFixture(writing: out, after: 135)
        #expect(signalled)
        try #require(written >= 135, "fixture stopped after \(written) frames")

        let probe = ProbedFile(path: out)
        #expect(probe.error == nil)
        let decoded = probe.frames.count
        print("SIGKILL after \(written) frames written: \(decoded) frames decoded")
        // Fragments close at each keyframe (every 30 frames) once the encoder
        // (a few frames of delay) has emitted it: all whole seconds but the last.
        let encoderDelay = 10
        #expect(decoded >= (written - encoderDelay) / 30 * 30, "decoded \(decoded) of \(written) written")
        #expect(decoded % 30 == 0, "only whole fragments reach the file (decoded \(decoded))")
        #expect(probe.counters == (0..<decoded).map { Optional($0) })
        #expect(probe.frames.enumerated().allSatisfy { $0.element.pts == FrameRate(30).time(ofFrame: Int64($0.offset)) })
        // Still the plain fragmented file: no length in the movie header (a
        // clean finish writes it), and GStreamer plays it as well.
        let header = try MovieHeader(path: out)
        #expect(header.duration == 0 && header.fragmentDuration == nil)
        #expect(try topLevelBoxes(out).prefix(4) == ["ftyp", "moov", "free", "moof"])
        let gst = try runTool("/usr/bin/gst-discoverer-1.0", [out])
        #expect(gst.status == 0 && gst.output.contains("H.264"), "\(gst.output)")
    }

    /// A Matroska recording killed with SIGKILL mid-take keeps every cluster
    /// (a second, begun at a keyframe) finished before the kill, which FFmpeg
    /// and GStreamer read without the index a clean finish writes.
    @Test(.timeLimit(.minutes(5)))
    func killedMatroskaKeepsCompletedClusters() throws {
        let dir = TempDir(); defer { dir.remove() }
        let out = dir.path("killed.mkv")
        let (written, signalled) = try killedWriterFixture(writing: out, after: 135)
        #expect(signalled)
        try #require(written >= 135, "fixture stopped after \(written) frames")
        let probe = ProbedFile(path: out)
        #expect(probe.error == nil)
        let decoded = probe.frames.count
        // Whole clusters: all but the one being filled (and the encoder's few frames of delay).
        let encoderDelay = 10
        #expect(decoded >= (written - encoderDelay) / 30 * 30 - 30, "decoded \(decoded) of \(written) written")
        #expect(decoded > 0 && probe.counters == (0..<decoded).map { Optional($0) })
        // Matroska keeps times in milliseconds.
        #expect(probe.frames.enumerated().allSatisfy { abs($0.element.pts.seconds - FrameRate(30).time(ofFrame: Int64($0.offset)).seconds) <= 0.0005 })
        let gst = try runTool("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "matroskademux", "!", "decodebin", "!", "fakesink"])
        #expect(gst.status == 0, "\(gst.output)")
    }

    /// The same fixture, allowed to finish, writes every frame.
    @Test(.timeLimit(.minutes(3)))
    func fixtureFinishesCleanly() throws {
        let exe = try #require(fixtureExecutable("diptych-writer-fixture"))
        let dir = TempDir(); defer { dir.remove() }
        let out = dir.path("done.mp4")
        let child = Process()
        child.executableURL = exe
        child.arguments = [out, "100000", "45"]
        child.standardOutput = FileHandle.nullDevice
        try child.run()
        child.waitUntilExit()
        #expect(child.terminationStatus == 0)
        let probe = ProbedFile(path: out)
        #expect(probe.frames.count == 45)
        #expect(probe.durationSeconds == 1.5)
    }

    /// `-` reads Y4M from standard input: ffmpeg | diptych-writer-fixture --stdin.
    @Test(.timeLimit(.minutes(3)))
    func stdinY4M() throws {
        let exe = try #require(fixtureExecutable("diptych-writer-fixture"))
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25",
                            "-frames:v", "30", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", "-"]
        let pipe = Pipe(), out = Pipe()
        ffmpeg.standardOutput = pipe
        let child = Process()
        child.executableURL = exe
        child.arguments = ["--stdin"]
        child.standardInput = pipe
        child.standardOutput = out
        try child.run()
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        #expect(child.terminationStatus == 0)
        #expect(text == "320x240 25 i420 30 29/25\n")
    }
}
