import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

/// Defects a new user hit: a crash at exit after a failed setup, signals and
/// closed pipes that ended takes unsaved, validation that came too late.
@Suite(.serialized) struct ReliabilityTests {
    init() { _ = quietMedia }

    static let files: (primary: String, secondary: String) = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-reliability-\(getpid())")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let p = dir.appendingPathComponent("a.mp4").path, s = dir.appendingPathComponent("b.mp4").path
        for (path, size) in [(p, "640x360"), (s, "320x240")] {
            let r = try? run("/usr/bin/ffmpeg", ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=30",
                                                 "-t", "2", "-pix_fmt", "yuv420p", path])
            precondition(r?.status == 0, "ffmpeg could not make \(path)")
        }
        return (p, s)
    }()

    /// A setup that fails after the GPU and both inputs are open (the output
    /// cannot be created), then exits: the render thread is joined before
    /// the process's exit handlers run. It used to abort with "corrupted
    /// double-linked list" about once in fifty runs.
    static func failingSetup() -> [String] {
        ["record", "--primary", files.primary, "--secondary", files.secondary, "--out", "/nonexistent/folder/take.mp4"]
    }

    @Test func failedSetupExitsCleanlyEveryTime() throws {
        let exe = try #require(diptychExecutable())
        let args = Self.failingSetup()
        // Four at a time, so the machine is loaded as when the crash showed.
        final class Statuses: @unchecked Sendable {
            let lock = NSLock()
            var all: [Int32] = []
            func add(_ s: Int32) { lock.lock(); all.append(s); lock.unlock() }
        }
        let statuses = Statuses()
        DispatchQueue.concurrentPerform(iterations: 96) { _ in
            statuses.add((try? run(exe.path, args))?.status ?? -1)
        }
        #expect(statuses.all.allSatisfy { $0 == 2 }, "exit statuses: \(statuses.all)")
    }

    @Test func failedSetupUnderMemcheck() throws {
        let exe = try #require(diptychExecutable())
        let supp = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/valgrind.supp").path
        let r = try run("/usr/bin/valgrind", ["-q", "--error-exitcode=99", "--suppressions=\(supp)", exe.path] + Self.failingSetup())
        #expect(r.status == 2, "memcheck: \(r.stderr)")
        #expect(!r.stderr.contains("Invalid read") && !r.stderr.contains("Invalid write") && !r.stderr.contains("Invalid free"), "\(r.stderr)")
    }

    /// `diptych record ... 2>&1 | head -1`: the reader of stderr goes away
    /// after the first line; the take still ends normally with every frame.
    @Test func closedStderrNeverEndsATake() throws {
        let exe = try #require(diptychExecutable())
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("piped.mp4")
        let script = "\(exe.path) record --primary testsrc:counter:320x240@30 --secondary testsrc:smpte:160x120@30 "
            + "--out \(out) --duration 2 2>&1 | head -1; exit ${PIPESTATUS[0]}"
        let r = try run("/bin/bash", ["-c", script])
        #expect(r.status == 0, "diptych exit status \(r.status): \(r.stdout)")
        let decoded = try decodeAll(out)
        #expect(decoded.frames.count == 60)
    }

    /// `--out pipe:1 | head -c 1000`: the reader of the stream goes away; a
    /// pipe cannot be reopened, so the take ends at once, exit 1, and says so.
    @Test func aClosedOutputPipeEndsTheTake() throws {
        let exe = try #require(diptychExecutable())
        let script = "\(exe.path) record --primary testsrc:counter:320x240@30 --secondary none --audio none --out pipe:1 "
            + "--format mpegts --duration 30 2>/dev/null | head -c 1000 > /dev/null; exit ${PIPESTATUS[0]}"
        let started = Date()
        let r = try run("/bin/bash", ["-c", script], timeout: 60)
        #expect(r.status == 1, "diptych exit status \(r.status)")
        #expect(Date().timeIntervalSince(started) < 20, "a 30 s take to a closed pipe should end at once")
    }

    /// SIGHUP (a closed terminal, a dropped SSH session) finalizes like SIGTERM.
    @Test func hangupFinalizesTheTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:smpte:160x120@30",
                            "--out", "hup.mp4", "--duration", "60"], in: dir.url.path, signal: SIGHUP, after: 0.5,
                           once: { occurrences(of: "moof", in: dir.path("hup.mp4")) >= 1 })
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.signalled)
        let decoded = try decodeAll(dir.path("hup.mp4"))
        #expect(decoded.frames.count > 0)
        for (i, f) in decoded.frames.enumerated() { #expect(f.counter == i) }
    }

    /// Values refused before anything is opened: exit 2, one line, no file.
    @Test(arguments: [
        (["--size", "16384x16384"], "--size"),
        (["--primary", "testsrc:smpte:16000x16000@30"], "renders canvases up to"),
        (["--primary", "testsrc:smpte:640x360@30", "--pip-margin", "360"], "leaves no room for the inset"),
        (["--layout", "side-by-side", "--also-out", "x.avi"], "--also-out"),
        (["--zoom-secondary", "20"], "--zoom-secondary"),
        (["--preset", "bogus"], "--preset 'bogus'"),
        (["--bitrate", "360"], "--bitrate '360'"),
    ])
    func refusedUpFront(extra: [String], named: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        var args = ["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "testsrc:smpte:160x120@30",
                    "--out", "never.mp4", "--duration", "1"]
        args += extra
        let start = Date()
        let r = try runCLI(args, in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(r.stderr.contains(named), "\(r.stderr)")
        #expect(Date().timeIntervalSince(start) < 20)
        #expect(!FileManager.default.fileExists(atPath: dir.path("never.mp4")))
    }

    /// A huge string in a configuration file is refused at once, and the
    /// error line stays short (the value is not echoed whole).
    @Test func hugeConfigValuesAreBounded() throws {
        let dir = Scratch(); defer { dir.remove() }
        for (name, size) in [("long.json", 8000), ("big.json", 3 << 20)] {
            let json = #"{"primary": "testsrc:smpte:320x240@30", "out": "x.mp4", "preset": ""# + String(repeating: "v", count: size) + #""}"#
            try Data(json.utf8).write(to: URL(fileURLWithPath: dir.path(name)))
            let r = try runCLI(["record", "--config", name], in: dir.url.path)
            #expect(r.status == 2, "\(r.stderr.prefix(300))")
            #expect(r.stderr.utf8.count < 400, "\(r.stderr.utf8.count) bytes of error")
            #expect(r.stderr.contains("--config"))
        }
    }

    /// Unknown keys are refused at every depth, naming the key path.
    @Test(arguments: [
        (#"{"layout": {"kind": "pip", "bogus": 1}}"#, "layout.bogus"),
        (#"{"layout": {"kind": "pip", "pip": {"sise": 0.9}}}"#, "layout.pip.sise"),
        (#"{"layout": {"insetStyle": {"opacityy": 1}}}"#, "layout.insetStyle.opacityy"),
        (#"{"switchSecondary": [{"at": 1, "source": "testsrc:smpte", "x": 2}]}"#, "switchSecondary[0].x"),
        (#"{"alsoOut": [{"out": "b.ts", "layout": {"kind": "stacked", "zoom": 2}}]}"#, "alsoOut[0].layout.zoom"),
    ])
    func nestedUnknownKeysAreRefused(json: String, path: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        try Data(json.utf8).write(to: URL(fileURLWithPath: dir.path("take.json")))
        let r = try runCLI(["record", "--config", "take.json", "--primary", "testsrc:smpte:320x240@30", "--out", "x.mp4"],
                           in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains(path) && r.stderr.contains("unknown key"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("x.mp4")))
    }
}
