import Foundation
import Testing
import DiptychCore
import DiptychMedia

/// `diptych record` as a hostile user would drive it: sources that would
/// read what they should not, sources that block, outputs onto inputs.
/// Each case fails with one line naming the input, and nothing recorded
/// or read is touched.
@Suite(.serialized) struct SourceSafetyTests {
    init() { _ = quietMedia }

    private func record(_ args: [String], in dir: Scratch, timeout: Double = 60) throws -> CLIResult {
        try runCLI(["record", "--secondary", "none", "--audio", "none", "--preset", "ultrafast"] + args, in: dir.url.path, timeout: timeout)
    }

    /// FFmpeg protocols that read other files or memory are refused before
    /// anything opens; a text file is never rendered as video.
    @Test func refusedProtocolsReadNothing() throws {
        let dir = Scratch(); defer { dir.remove() }
        try "secret line\n".write(toFile: dir.path("secret.txt"), atomically: true, encoding: .utf8)
        for primary in ["concat:/etc/passwd|\(dir.path("secret.txt"))", "subfile,,start,0,end,10,,:\(dir.path("secret.txt"))",
                        "data:text/plain,hello", "crypto:\(dir.path("secret.txt"))", "pipe:0", "fd:0",
                        "cache:\(dir.path("secret.txt"))"] {
            let r = try record(["--primary", primary, "--out", "o.mp4"], in: dir)
            #expect(r.status == 2, "\(primary): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(primary) && lines[0].contains("not allowed"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir.path("o.mp4")))
        }
        // A text file FFmpeg would draw as text (its tty demuxer) is no source.
        let text = try record(["--primary", dir.path("secret.txt"), "--out", "o.mp4"], in: dir)
        #expect(text.status == 2 && text.stderr.contains("secret.txt"), "\(text.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("o.mp4")))
    }

    /// A FIFO with no writer fails after --primary-timeout, naming it (exit 1,
    /// not a hang); SIGTERM ends a take still waiting for one at once.
    @Test func fifoWithoutWriterIsBounded() throws {
        let dir = Scratch(); defer { dir.remove() }
        #expect(mkfifo(dir.path("cam.fifo"), 0o600) == 0)
        let start = Date()
        let r = try record(["--primary", dir.path("cam.fifo"), "--primary-timeout", "1", "--out", "o.mp4"], in: dir, timeout: 30)
        let took = Date().timeIntervalSince(start)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("cam.fifo") && r.stderr.contains("timed out"), "\(r.stderr)")
        #expect(took < 10, "took \(took) s")

        let stopped = Date()
        // With a minute's timeout, only the stop itself can end it this soon.
        let s = try runCLI(["record", "--primary", dir.path("cam.fifo"), "--primary-timeout", "60", "--secondary", "none", "--out", "p.mp4"],
                           in: dir.url.path, signal: SIGTERM, after: 1, timeout: 90)
        #expect(Date().timeIntervalSince(stopped) < 15, "SIGTERM took \(Date().timeIntervalSince(stopped)) s")
        #expect(s.status == 1 && s.stderr.contains("SIGTERM"), "\(s.stderr)")
    }

    /// A FIFO whose writer comes is read to its end like a file.
    @Test func fifoWithWriterRecords() throws {
        let dir = Scratch(); defer { dir.remove() }
        let fifo = dir.path("in.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        // The writer starts a second after the take, which waits for it.
        writer.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "30",
                            "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", fifo]
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { try? writer.run() }
        let r = try record(["--primary", fifo, "--out", "o.mp4"], in: dir)
        writer.waitUntilExit()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try decodeFrameCount(dir.path("o.mp4")) == 30)
    }

    /// A FIFO primary is a live source: when its writer pauses, a live
    /// output keeps its cadence with the last frame, and goes on when the
    /// writer does.
    @Test func aPausingFIFOPrimaryIsHeldOnLiveOutputs() throws {
        let dir = Scratch(); defer { dir.remove() }
        let fifo = dir.path("cam.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let writer = Thread {
            guard let h = FileHandle(forWritingAtPath: fifo) else { return }
            let frame = Data("FRAME\n".utf8) + Data(repeating: 128, count: 64 * 48 * 3 / 2)
            h.write(Data("YUV4MPEG2 W64 H48 F30:1 Ip A1:1 C420jpeg\n".utf8))
            for _ in 0..<30 { h.write(frame) }
            Thread.sleep(forTimeInterval: 2.5)
            for _ in 0..<30 { h.write(frame) }
            try? h.close()
        }
        writer.start()
        let r = try record(["--primary", fifo, "--primary-timeout", "10", "--out", "pipe:1", "--format", "mpegts",
                            "--also-out", "file.mp4"], in: dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("primary interrupted") && r.stderr.contains("primary resumed"), "\(r.stderr)")
        #expect(try decodeFrameCount(dir.path("file.mp4")) == 60, "the file pauses, without held frames")
    }

    /// Frames under 2x2 are bad input at open.
    @Test func tinySourceIsBadInput() throws {
        let dir = Scratch(); defer { dir.remove() }
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=1x1:rate=30", "-frames:v", "5", "-c:v", "ffv1", dir.path("tiny.mkv")])
        let r = try record(["--primary", "tiny.mkv", "--out", "o.mp4"], in: dir)
        #expect(r.status == 2 && r.stderr.contains("tiny.mkv") && r.stderr.contains("1x1"), "\(r.stderr)")
    }

    /// Every spelling of an input as an output is refused, and the input is untouched.
    @Test func outputsNeverOverwriteInputs() throws {
        let dir = Scratch(); defer { dir.remove() }
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "10", "-pix_fmt", "yuv420p", dir.path("in.mp4")])
        try FileManager.default.createSymbolicLink(atPath: dir.path("link"), withDestinationPath: dir.url.path)
        let before = try Data(contentsOf: URL(fileURLWithPath: dir.path("in.mp4")))
        for args in [["--out", "o.mp4", "--preview", "in.mp4"], ["--out", "file://\(dir.path("in.mp4"))"],
                     ["--out", "link/in.mp4"], ["--out", "o.mp4", "--also-out", "file:\(dir.path("link/in.mp4"))"],
                     ["--out", "o.mp4", "--also-out", "file:o.mp4"]] {
            let r = try record(["--primary", "in.mp4"] + args, in: dir)
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("is also an input") || r.stderr.contains("is the same file as --out"), "\(r.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path("in.mp4"))) == before)
        #expect(!FileManager.default.fileExists(atPath: dir.path("o.mp4")))
    }

    /// Outputs that are not regular files are refused (no stream over a log).
    @Test(arguments: ["/dev/stdout", "/dev/stderr", "/proc/self/fd/2"])
    func outputsAreRegularFiles(out: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try record(["--primary", "testsrc:smpte:320x240@30", "--duration", "1", "--out", out, "--format", "mpegts"], in: dir)
        #expect(r.status == 2 && r.stderr.contains(out) && r.stderr.contains("not a recording file"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }
}

/// Frames in a file, decoded with libavcodec.
func decodeFrameCount(_ path: String) throws -> Int {
    let s = try MediaSources.open(.url(path))
    defer { s.close() }
    var n = 0
    while try s.nextFrame() != nil { n += 1 }
    return n
}
