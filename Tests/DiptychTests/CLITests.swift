import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychGPU
import DiptychCUDA

/// The command line as users run it: exit status, one-line errors, signals,
/// crash safety, the JSON summary and the demo.
@Suite(.serialized) struct CLITests {
    init() { _ = quietMedia }

    @Test func helpAndVersion() throws {
        let help = try runCLI(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("record") && help.stdout.contains("--primary SRC"))
        let version = try runCLI(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix("diptych \(DiptychVersion.string)"))
        // No command is bad usage: the usage goes to stderr.
        let bare = try runCLI([])
        #expect(bare.status == 2)
        #expect(bare.stdout.isEmpty && bare.stderr.hasPrefix("usage: diptych <command>"), "\(bare.stderr)")
    }

    /// Bad usage and bad input: exit 2, one line on stderr naming the input, no file.
    @Test(arguments: [
        (["record", "--primary", "/nonexistent/cam.mp4", "--secondary", "none"], "/nonexistent/cam.mp4"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--layout", "diagonal"], "--layout"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--size", "12x0"], "--size"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--bitrate", "-5"], "--bitrate"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--encoder", "vaapi"], "vaapi"),
        // No NVENC on llvmpipe: the one line names what is missing.
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--encoder", "nvenc"],
         "encoder h264_nvenc unavailable: no CUDA device for NVENC: "),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--encoder", "nvenc", "--codec", "hevc"],
         "encoder hevc_nvenc unavailable: no CUDA device for NVENC: "),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--frobnicate"], "--frobnicate"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--keyframe-interval", "1e300"], "--keyframe-interval"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--secondary-timeout", "1e300"], "--secondary-timeout"),
        (["record", "--primary", "testsrc:smpte:320x240@0.0001", "--secondary", "none"], "@0.0001"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--switch-secondary", "1e300=testsrc:smpte"], "--switch-secondary"),
        (["record", "--secondary", "none"], "--primary"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--preview", "/nonexistent/p.png"], "--preview '/nonexistent/p.png': no such folder"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--preview", "/tmp"], "--preview '/tmp': is a folder"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--preview", "/dev/full"], "--preview '/dev/full': is under /dev, not a recording file"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--also-out", "/nonexistent/x.ts"], "--also-out '/nonexistent/x.ts'"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--codec", "hevc", "--size", "8x8"], "--size '8x8': HEVC needs"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--gpu", "99"], "--gpu '99': no EGL device 99"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--gpu", "/dev/dri/renderD250"],
         "--gpu '/dev/dri/renderD250': no such render node"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--encoder", "gpu", "--codec", "hevc"],
         "--encoder 'gpu': encodes H.264 only, not --codec hevc"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--qp", "60"], "--qp '60'"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--bufsize", "1M"], "--bufsize '1000000': needs --maxrate"),
        (["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--qp", "20", "--maxrate", "1M"], "--maxrate '1000000': cannot cap --qp 20"),
        (["transmogrify"], "transmogrify"),
    ])
    func badInputExitsTwo(args: [String], named: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("never.mp4")
        let full = args.first == "record" && !args.contains("--out") ? args + ["--out", out, "--duration", "1"] : args
        let r = try runCLI(full, in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { !$0.isEmpty }
        #expect(lines.count == 1, "one line: \(r.stderr)")
        #expect(r.stderr.contains(named), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    /// A device the machine does not have is bad input (exit 2); a real
    /// failure of the GPU is not.
    @Test func missingGPUIsBadInput() {
        let missing = SessionError.gpu(.noSuchDevice(selection: "99", reason: "no EGL device 99 (this machine has 1 EGL device: 0)"))
        #expect(missing.isBadInput && missing.exitCode == 2)
        #expect(missing.description == "--gpu '99': no EGL device 99 (this machine has 1 EGL device: 0)")
        #expect(SessionError.gpu(.noDisplay(attempts: [])).exitCode == 1)
        #expect(SessionError.gpu(.deviceUnavailable("open /dev/dri/renderD128: Permission denied")).exitCode == 1)
    }

    /// A take with a JSON summary; a 1080p60 primary with a 720p30 secondary
    /// gives 60 fps out (here one second of it).
    @Test func recordWithJSONSummary() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:1920x1080@60", "--secondary", "testsrc:gradient:1280x720@30",
                            "--out", "take.mp4", "--duration", "1", "--json", "--preset", "ultrafast"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.frames == 60)
        #expect(summary.frameRate == "60")
        #expect(summary.canvas == "1920x1080")
        #expect(summary.encoder == "libx264")
        #expect(summary.secondaryFramesShown == 30)
        // llvmpipe: the fragment pass, the direct copy, no CUDA.
        #expect(r.stderr.contains("diptych-gpu: plan: pass=fragment"), "the take log names the plan: \(r.stderr)")
        let plan = try #require(summary.gpuPlan)
        #expect(plan.pass == .fragment && plan.softwareShortcut && plan.cudaFrames == .none, "\(plan)")
        #expect(r.stdout.contains(#""gpuPlan":{"#) || r.stdout.contains(#""gpuPlan" : {"#))
        let (info, frames) = try decodeAll(dir.path("take.mp4"))
        #expect(frames.count == 60)
        #expect(abs((info.duration ?? 0) - 1.0) < 1e-6)
    }

    /// SIGINT and SIGTERM stop through the normal finalize path: exit 0 and a
    /// complete file (trailer written) holding every frame rendered.
    @Test(arguments: [SIGINT, SIGTERM])
    func signalsFinalize(sig: Int32) throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:solid-ff0000:160x120@30",
                            "--out", "take.mp4", "--json"], in: dir.url.path, signal: sig, after: 0.5,
                           once: { occurrences(of: "moof", in: dir.path("take.mp4")) >= 1 })
        #expect(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.stopReason.contains(sig == SIGINT ? "SIGINT" : "SIGTERM"))
        let frames = try decodeAll(dir.path("take.mp4")).frames
        #expect(frames.count == summary.frames)
        #expect(frames.count > 10)
        #expect(frames.map(\.counter) == (0..<frames.count).map { Optional($0) })
        // A complete file ends with the fragment index (mfra) the trailer writes.
        let data = try Data(contentsOf: dir.url.appendingPathComponent("take.mp4"))
        #expect(data.suffix(16).range(of: Data("mfro".utf8)) != nil)
    }

    /// Killed with SIGKILL at an arbitrary moment, the file still plays with
    /// every frame of every completed fragment (one second each), in order.
    /// A fragment is written in several writes, so a kill in the middle of
    /// one leaves the frames of it that were written whole: the count need
    /// not be a whole number of fragments (it was 36 once).
    @Test func sigkillLeavesAPlayableFile() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:solid-ff0000:160x120@30",
                            "--out", "take.mp4"], in: dir.url.path, signal: SIGKILL, after: 0.5,
                           once: { occurrences(of: "moof", in: dir.path("take.mp4")) >= 2 })
        #expect(r.signalled)
        let frames = try decodeAll(dir.path("take.mp4")).frames
        #expect(frames.count >= 30, "at least one whole fragment")
        #expect(frames.map(\.counter) == (0..<frames.count).map { Optional($0) })
    }

    /// `-` reads a Y4M stream on stdin; a live source goes through the cost trial.
    @Test func y4mOnStdin() throws {
        let dir = Scratch(); defer { dir.remove() }
        let y4m = dir.path("in.y4m")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "1", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m])
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: y4m))
        let r = try runCLI(["record", "--primary", "-", "--secondary", "testsrc:solid-00ff00:160x120@30", "--out", "pipe.ts", "--json"],
                           in: dir.url.path, stdin: input)
        #expect(r.status == 0, "\(r.stderr)")
        let (info, frames) = try decodeAll(dir.path("pipe.ts"))
        #expect(frames.count == 25)
        #expect(info.size == PixelSize(width: 320, height: 240))
    }

    /// 4:2:0 inputs of odd sizes (a file, a pattern, a Y4M stream, a
    /// switched-in secondary) lose their last column and row: the take runs
    /// whole, at even sizes.
    @Test func oddSizedInputsAreCroppedToEvenSizes() throws {
        let dir = Scratch(); defer { dir.remove() }
        let odd = dir.path("odd.mkv"), y4m = dir.path("odd.y4m")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=321x241:rate=30", "-t", "1", "-c:v", "ffv1", "-pix_fmt", "yuv420p", odd])
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=161x121:rate=30", "-t", "1", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m])
        let r = try runCLI(["record", "--primary", odd, "--secondary", "testsrc:counter:161x121@30", "--switch-secondary", "0.5=\(odd)",
                            "--duration", "1", "--audio", "none", "--out", "file.mp4"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        let (info, frames) = try decodeAll(dir.path("file.mp4"))
        #expect(frames.count == 30 && info.size == PixelSize(width: 320, height: 240))
        let piped = try runCLI(["record", "--primary", "-", "--secondary", "testsrc:smpte:321x241@30", "--audio", "none", "--out", "pipe.mp4"],
                               in: dir.url.path, stdin: try FileHandle(forReadingFrom: URL(fileURLWithPath: y4m)))
        #expect(piped.status == 0, "\(piped.stderr)")
        let (pipedInfo, pipedFrames) = try decodeAll(dir.path("pipe.mp4"))
        #expect(pipedFrames.count == 30 && pipedInfo.size == PixelSize(width: 160, height: 120))
    }

    /// A 320x240 y4m primary on a pipe: its header and 8 whole frames, then
    /// silence with the pipe left open (the caller closes its write end).
    private func silentPrimary(in dir: Scratch) throws -> Pipe {
        let y4m = dir.path("in.y4m")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "1", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: y4m))
        let pipe = Pipe()
        let frameBytes = 320 * 240 * 3 / 2 + 6
        let header = bytes.firstIndex(of: 0x0A)! + 1
        let head = bytes.prefix(header + 8 * frameBytes)
        let writer = pipe.fileHandleForWriting
        DispatchQueue.global().async { writer.write(head) }
        return pipe
    }

    /// Failure path 1 for the primary: a primary that stops delivering (a
    /// pipe that stays open but silent) finalizes the take with every frame
    /// it delivered, exit 1 and a message naming it.
    @Test func stalledPrimaryFinalizes() throws {
        let dir = Scratch(); defer { dir.remove() }
        let pipe = try silentPrimary(in: dir)
        let r = try runCLI(["record", "--primary", "-", "--secondary", "none", "--out", "stall.mp4", "--primary-timeout", "1"],
                           in: dir.url.path, stdin: pipe.fileHandleForReading)
        try? pipe.fileHandleForWriting.close()
        #expect(r.status == 1, "\(r.stderr)")
        let last = r.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.contains("primary stream interrupted") && last.contains("delivered nothing for 1.0 s"), "\(last)")
        #expect(last.contains("8 frames"), "\(last)")
        #expect(try decodeAll(dir.path("stall.mp4")).frames.count == 8)
    }

    /// A stop while the primary is silent (a pipe left open, a minute's
    /// timeout) ends the take at once: the wait is woken by the stop, and
    /// every frame delivered is in the file.
    @Test func stopWhileThePrimaryIsSilent() throws {
        let dir = Scratch(); defer { dir.remove() }
        let pipe = try silentPrimary(in: dir)
        let start = Date()
        let r = try runCLI(["record", "--primary", "-", "--secondary", "none", "--out", "silent.mp4", "--primary-timeout", "60", "--json"],
                           in: dir.url.path, stdin: pipe.fileHandleForReading, signal: SIGINT, after: 4, timeout: 30)
        let took = Date().timeIntervalSince(start)
        try? pipe.fileHandleForWriting.close()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(took < 10, "the take ended \(took - 4) s after SIGINT")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.stopReason.contains("SIGINT"), "\(summary.stopReason)")
        #expect(summary.frames == 8)
        #expect(try decodeAll(dir.path("silent.mp4")).frames.count == 8)
    }

    /// Recording over an input would destroy it while it is read: refused, exit 2, input intact.
    @Test func outputSameAsInputIsRefused() throws {
        let dir = Scratch(); defer { dir.remove() }
        let input = dir.path("in.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "1", "-pix_fmt", "yuv420p", "-c:v", "libx264", input])
        let before = try Data(contentsOf: URL(fileURLWithPath: input))
        let r = try runCLI(["record", "--primary", "in.mp4", "--secondary", "none", "--out", "./in.mp4"], in: dir.url.path)
        #expect(r.status == 2)
        #expect(r.stderr.contains("is also an input"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: input)) == before)
        let p = try runCLI(["record", "--primary", "in.mp4", "--secondary", "none", "--out", "o.mp4", "--preview", "o.mp4"], in: dir.url.path)
        #expect(p.status == 2)
        #expect(p.stderr.contains("--preview"))
    }

    /// SIGINT while a source is still opening (stdin with no header yet) ends
    /// at once: nothing was recorded, exit 1.
    @Test func interruptBeforeTheTakeStarts() throws {
        let dir = Scratch(); defer { dir.remove() }
        let pipe = Pipe()
        let r = try runCLI(["record", "--primary", "-", "--secondary", "none", "--out", "never.mp4"],
                           in: dir.url.path, stdin: pipe.fileHandleForReading, signal: SIGINT, after: 1.5, timeout: 20)
        try? pipe.fileHandleForWriting.close()
        #expect(r.status == 1)
        #expect(r.stderr.contains("before the take started"))
    }

    /// A critical machine refuses to start a take: exit 1, no file.
    @Test func criticalThermalStateRefusesFromTheCLI() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--out", "hot.mp4",
                            "--thermal-state", "critical"], in: dir.url.path)
        #expect(r.status == 1)
        #expect(r.stderr.contains("not starting: critical thermal state"))
        #expect(!FileManager.default.fileExists(atPath: dir.path("hot.mp4")))
    }

    /// The README's first command: ten seconds of synthetic streams into
    /// demo.mp4 and demo.png in the current folder.
    @Test func demo() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["demo"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        let (info, frames) = try decodeAll(dir.path("demo.mp4"))
        #expect(frames.count == 300)
        #expect(abs((info.duration ?? 0) - 10) < 1e-6)
        let png = try #require(try decodeAll(dir.path("demo.png")).frames.first?.frame)
        #expect(png.width == info.size.width && png.height == info.size.height)
    }

    /// `diptych bench` end to end on a small matrix: table, JSON, chart and contact sheet.
    @Test func bench() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["bench", "--stages", "composite,e2e", "--layouts", "pip,side-by-side", "--sizes", "320x240",
                            "--formats", "nv12", "--frames", "10", "--duration", "1", "--peers", "ffmpeg",
                            "--json", "b.json", "--chart", "b.svg", "--sheet", "b.png", "--work-dir", dir.path("work")],
                           in: dir.url.path, timeout: 300)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("| composite | pip | 320x240 | nv12 |"))
        #expect(r.stdout.contains("| e2e | side-by-side | 320x240 |"))
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.url.appendingPathComponent("b.json")))
        #expect(json is [String: Any])
        #expect(try String(contentsOfFile: dir.path("b.svg"), encoding: .utf8).contains("<svg"))
        let sheet = try #require(try decodeAll(dir.path("b.png")).frames.first?.frame)
        #expect(sheet.width > 0)
        let bad = try runCLI(["bench", "--frames", "-3"], in: dir.url.path)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--frames"))
    }

    /// `diptych bench --pairs`: that many `diptych record` and FFmpeg processes
    /// at once, every output read back; a take that cannot keep the speed is stopped.
    @Test func benchPairs() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["bench", "--stages", "e2e", "--pairs", "1,2", "--sizes", "320x240", "--duration", "1",
                            "--min-speed", "0.02", "--peers", "ffmpeg", "--preset", "ultrafast", "--json", "p.json",
                            "--chart", "none", "--sheet", "none", "--work-dir", dir.path("work")], in: dir.url.path, timeout: 300)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("### Takes at once"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.url.appendingPathComponent("p.json"))) as? [String: Any])
        let results = try #require(json["concurrency"] as? [[String: Any]])
        #expect(results.map { $0["runner"] as? String } == ["diptych", "diptych-serve", "ffmpeg", "ffmpeg-nvdec", "ffmpeg-nvdec-cpu-overlay"])
        // Processes, one server holding both takes (over HTTP), FFmpeg.
        for res in results.prefix(3) {
            #expect(res["maxRealtimePairs"] as? Int == 2, "\(res)")
            let trials = try #require(res["trials"] as? [[String: Any]])
            #expect(trials.map { $0["pairs"] as? Int } == [1, 2])
            for t in trials {
                #expect(t["realtime"] as? Bool == true, "\(t)")
                #expect((t["cpuSecondsPerFrame"] as? Double ?? 0) > 0 && (t["peakMiBPerTake"] as? Double ?? 0) > 10)
            }
        }
        #expect((results[0]["command"] as? String)?.contains("record --primary") == true)
        #expect((results[1]["command"] as? String)?.contains("serve --listen 127.0.0.1:0") == true)
        #expect((results[1]["command"] as? String)?.contains("POST /v1/takes") == true)
        #expect((results[2]["command"] as? String)?.contains("overlay=") == true)
        if !FileManager.default.fileExists(atPath: "/dev/nvidiactl") {
            for res in results.suffix(2) { #expect((res["note"] as? String)?.hasPrefix("skipped:") == true, "\(res)") }
        }
        // Far above what any machine does: the take is stopped, nothing counts as real time, exit 1.
        let slow = try runCLI(["bench", "--stages", "e2e", "--pairs", "1", "--sizes", "320x240", "--duration", "1",
                               "--min-speed", "50", "--peers", "none", "--json", "s.json", "--chart", "none", "--sheet", "none",
                               "--work-dir", dir.path("work")], in: dir.url.path, timeout: 120)
        #expect(slow.status == 1)
        let sj = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.url.appendingPathComponent("s.json"))) as? [String: Any])
        let only = try #require((sj["concurrency"] as? [[String: Any]])?.first)
        #expect(((only["trials"] as? [[String: Any]])?.first?["rssTimelineMiB"] as? [Double]) != nil)
        #expect(only["maxRealtimePairs"] as? Int == 0)
        #expect(((only["trials"] as? [[String: Any]])?.first?["notes"] as? [String])?.first?.contains("still running") == true)
        let bad = try runCLI(["bench", "--pairs", "0"], in: dir.url.path)
        #expect(bad.status == 2 && bad.stderr.contains("--pairs"))
    }

    @Test func probe() throws {
        let r = try runCLI(["probe"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("EGL display ladder"))
        #expect(r.stdout.contains("llvmpipe") || r.stdout.contains("GL_RENDERER"))
        #expect(r.stdout.contains("plan: pass=fragment shortcut=direct-copy staging="), "probe prints the GPU plan: \(r.stdout)")
        #expect(r.stdout.contains("libx264"))
        #expect(r.stdout.contains("GPU H.264 encoder (--encoder gpu): runs: GLES compute on"), "probe says whether the GPU encoder runs: \(r.stdout)")
        #expect(r.stdout.contains("NVENC (--encoder nvenc): absent: no CUDA device for NVENC: "), "probe says why NVENC is absent: \(r.stdout)")
        #expect(r.stdout.contains("libavcodec"))
    }

    /// `probe --json`: the same report as one JSON object a program can read.
    @Test func probeAsJSON() throws {
        let r = try runCLI(["probe", "--json", "--gpu", "software"])
        #expect(r.status == 0, "\(r.stderr)")
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)")
        let gl = try #require(o["gl"] as? [String: Any])
        #expect(((gl["info"] as? [String: Any])?["renderer"] as? String)?.contains("llvmpipe") == true, "\(gl)")
        #expect((gl["planLine"] as? String)?.hasPrefix("plan: pass=fragment") == true)
        #expect((gl["gpuEncoder"] as? String)?.hasPrefix("runs: GLES compute") == true)
        #expect((gl["nvenc"] as? [String: String])?["hevc"]?.hasPrefix("absent: no CUDA device for NVENC: ") == true, "\(gl)")
        let h264 = try #require((o["encoders"] as? [String: Any])?["h264"] as? [[String: Any]])
        #expect(h264.contains { $0["name"] as? String == "libx264" && $0["available"] as? Bool == true })
        #expect((o["autoEncoder"] as? [String: String])?["h264"]?.hasPrefix("libx264") == true)
        #expect((o["libraries"] as? [String])?.contains { $0.hasPrefix("libavcodec") } == true)
        #expect(o["nvdec"] is [String: Any] && o["vaapi"] is [String: Any] && o["cameras"] is [Any])
        let bad = try runCLI(["probe", "--json", "extra"])
        #expect(bad.status == 2)
    }
}

@Suite struct CostTrialLadderTests {
    @Test func ladderSteps() {
        #expect(CostTrial.ladder(from: PixelSize(width: 1920, height: 1080)).map(\.description) == ["1920x1080", "1280x720", "854x480", "640x360"])
        #expect(CostTrial.ladder(from: PixelSize(width: 1080, height: 1920)).map(\.description) == ["1080x1920", "720x1280", "480x854", "360x640"])
        #expect(CostTrial.ladder(from: PixelSize(width: 320, height: 240)).map(\.description) == ["320x240"])
    }

    @Test func nothingFitsKeepsTheSmallest() {
        let trial = CostTrial(frames: 4, measure: { _ in [1, 1, 1, 1] })
        let outcome = trial.choose(requested: PixelSize(width: 1280, height: 720), frameRate: FrameRate(30))
        #expect(outcome.canvas == PixelSize(width: 640, height: 360))
        #expect(outcome.messages.last?.contains("no canvas fits") == true)
    }

    /// Under auto the trial encodes with what auto will take: NVENC where
    /// it opens (a recorded L4's facts), the take's settings elsewhere.
    @Test func autoTrialEncodesWithNVENCWhereAutoTakesIt() {
        let l4 = NVENCFacts.available(device: "NVIDIA L4 (CUDA device 1)", cudaDevice: 1, driverAPI: "12.1",
                                      limits: [NVENCCodecLimits(codec: .h264, maxWidth: 4096, maxHeight: 4096, maxBFrames: 4, tenBit: false)])
        let take = VideoEncoderSettings(size: PixelSize(width: 1280, height: 720), frameRate: FrameRate(30), codec: .h264, encoder: .auto,
                                        bitrate: 4_000_000, preset: "veryfast", gop: 30)
        let trial = CostTrial.encoderSettings(take, choice: .auto, nvenc: l4)
        #expect(trial.encoder == .nvenc && trial.cudaDevice == 1)
        #expect(trial.size == take.size && trial.bitrate == take.bitrate)
        let absent = NVENCFacts.unavailable(.noEngine(gpu: "NVIDIA H200 (CUDA device 0)", detail: "unsupported device (2)"))
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: absent).encoder == .auto)
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: nil).encoder == .auto)
        var x264 = take
        x264.encoder = .x264
        #expect(CostTrial.encoderSettings(x264, choice: .x264, nvenc: l4).encoder == .x264)
    }

    /// And the GPU encoder where auto takes it: a hardware GPU without
    /// NVENC, in place of libx264 ultrafast (not veryfast), where no VA-API
    /// device comes before it; the trial then times the composite alone.
    @Test func autoTrialTakesTheGPUEncoderWhereAutoTakesIt() {
        let h200 = GPUEncoderFacts.available(renderer: "NVIDIA H200/PCIe/SSE2", software: false)
        let absent = NVENCFacts.unavailable(.noEngine(gpu: "NVIDIA H200 (CUDA device 0)", detail: "unsupported device (2)"))
        var take = VideoEncoderSettings(size: PixelSize(width: 1280, height: 720), frameRate: FrameRate(30), codec: .h264, encoder: .auto,
                                        bitrate: 4_000_000, preset: "ultrafast", gop: 30)
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: absent, gpu: h200).encoder == .gpu)
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: nil, gpu: h200).encoder == .gpu)
        let llvmpipe = GPUEncoderFacts.available(renderer: "llvmpipe (LLVM 15.0.6, 256 bits)", software: true)
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: absent, gpu: llvmpipe).encoder == .auto)
        let intel = VADeviceReport(path: "/dev/dri/renderD128", vendor: "Intel iHD driver", vaVersion: "1.17", profiles: [
            VAProfileSupport(profile: "VAProfileH264High", entrypoints: ["VAEntrypointEncSliceLP"])], error: nil)
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: absent, gpu: h200,
                                          vaapi: VAAPIReport(directory: "/dev/dri", devices: [intel], problem: nil)).encoder == .auto)
        take.preset = "veryfast"
        #expect(CostTrial.encoderSettings(take, choice: .auto, nvenc: absent, gpu: h200).encoder == .auto)
    }

    @Test func firstThatFitsWins() {
        let trial = CostTrial(frames: 4, measure: { c in Array(repeating: c.height >= 720 ? 0.03 : 0.01, count: 4) })
        let outcome = trial.choose(requested: PixelSize(width: 1920, height: 1080), frameRate: FrameRate(60))
        #expect(outcome.canvas == PixelSize(width: 854, height: 480))
    }
}
