import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

/// The inset's centre for a take's configuration (from the same layout code the session uses).
func insetCentre(_ config: TakeConfiguration, canvas: PixelSize, secondary: PixelSize) -> (Int, Int) {
    let plan = config.layout.resolve(canvas: canvas,
                                     primary: StreamGeometry(sensorSize: canvas),
                                     secondary: StreamGeometry(sensorSize: secondary, orientation: config.secondaryOrientation))
    let d = plan.draws.first { $0.role == .secondary }!.destination
    return (d.x + d.width / 2, d.y + d.height / 2)
}

@Suite(.serialized) struct SessionTests {
    init() { _ = quietMedia }

    /// Rule 1: the primary is the clock. A 60 fps primary and a 30 fps
    /// secondary give exactly 60 fps out, every timestamp the primary's,
    /// every frame showing the primary frame it came from.
    @Test func primaryDrivesOutput() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4")
        let session = RecordingSession(configuration: try takeConfig(out: out), hooks: SessionHooks(storage: plentyOfSpace))
        let summary = try session.run()
        #expect(summary.frames == 120)
        #expect(summary.normalStop)
        #expect(summary.stopReason == StopReason.durationReached.description)
        // 30 fps secondary under a 60 fps clock: each secondary frame shown twice.
        #expect(summary.secondaryFramesShown == 60)
        #expect(summary.secondaryRepeated == 60)
        #expect(summary.secondaryDropped == 0)

        let (info, frames) = try decodeAll(out)
        #expect(info.size == PixelSize(width: 320, height: 240))
        #expect(frames.count == 120)
        for (k, f) in frames.enumerated() {
            #expect(f.pts == FrameRate(60).time(ofFrame: Int64(k)), "frame \(k) pts \(f.pts)")
            #expect(f.counter == k, "frame \(k) shows \(String(describing: f.counter))")
        }
        #expect(abs((info.duration ?? 0) - 2.0) < 1e-6)
        // The inset shows the secondary (red) in every frame.
        let (cx, cy) = insetCentre(session.configuration, canvas: info.size, secondary: PixelSize(width: 160, height: 120))
        #expect(frames.allSatisfy { hue($0.frame, cx, cy) == .red })
    }

    /// A secondary faster than the primary: frames not due before the next
    /// primary frame are dropped and counted; the output still follows the primary.
    @Test func fasterSecondaryIsDroppedNotQueued() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4")
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", secondary: "testsrc:solid-00ff00:160x120@60", out: out, duration: 1)
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
        #expect(summary.frames == 30)
        #expect(summary.secondaryFramesShown == 30)
        #expect(summary.secondaryDropped >= 29)
        #expect(try decodeAll(out).frames.count == 30)
    }

    /// Rule 11: without a secondary the same path records the primary alone.
    @Test func primaryAlone() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("solo.mp4")
        let config = try takeConfig(secondary: "none", out: out, duration: 0.5)
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
        #expect(summary.frames == 30)
        #expect(summary.primaryOnlyFrames == 30)
        let frames = try decodeAll(out).frames
        #expect(frames.map(\.counter) == (0..<30).map { Optional($0) })
    }

    /// Failure path 1: a secondary that ends early is held, then dropped for
    /// the primary alone after the timeout; no output frame is lost.
    @Test func secondaryEndingEarlyFallsBackToPrimary() throws {
        let dir = Scratch(); defer { dir.remove() }
        let short = dir.path("short.mp4")
        try makeFixture(["-f", "lavfi", "-i", "color=c=blue:size=160x120:rate=30", "-t", "0.5", "-pix_fmt", "yuv420p", "-c:v", "libx264", short])
        let out = dir.path("take.mp4")
        let log = LogLines()
        let config = try takeConfig(secondary: short, out: out, duration: 2, extra: ["--secondary-timeout", "0.5"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, log: log.add)).run()
        #expect(summary.frames == 120)
        #expect(summary.normalStop)
        #expect(log.contains("secondary stream ended"))
        let frames = try decodeAll(out).frames
        #expect(frames.count == 120)
        #expect(frames.map(\.counter) == (0..<120).map { Optional($0) })
        let (cx, cy) = insetCentre(config, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 160, height: 120))
        // Shown (held) until 0.5 s + 0.5 s timeout, then the primary alone.
        #expect(hue(frames[10].frame, cx, cy) == .blue)
        #expect(hue(frames[50].frame, cx, cy) == .blue, "the last frame is held during the timeout")
        #expect(hue(frames[100].frame, cx, cy) != .blue, "primary only after the timeout")
        #expect(summary.primaryOnlyFrames >= 50 && summary.primaryOnlyFrames <= 62)
    }

    /// Failure path 2: a lost GPU context is rebuilt from nothing and the
    /// same file continues with every frame, in order.
    @Test func contextLossRebuildsAndContinues() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4")
        let log = LogLines()
        let session = RecordingSession(configuration: try takeConfig(out: out, duration: 1),
                                       hooks: SessionHooks(storage: plentyOfSpace, log: log.add, simulateContextLossAtFrames: [20, 41]))
        let summary = try session.run()
        #expect(summary.gpuRebuilds == 2)
        #expect(summary.frames == 60)
        #expect(log.contains("GPU context lost"))
        let frames = try decodeAll(out).frames
        #expect(frames.map(\.counter) == (0..<60).map { Optional($0) })
        let (cx, cy) = insetCentre(session.configuration, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 160, height: 120))
        #expect(frames.allSatisfy { hue($0.frame, cx, cy) == .red }, "the secondary texture is uploaded again after the rebuild")
    }

    /// Failure path 3, during a take: critical stops and finalizes; the file
    /// keeps every frame before the stop.
    @Test func criticalThermalStateStopsTheTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("hot.mp4")
        final class Heating: ThermalMonitor, @unchecked Sendable {
            let lock = NSLock(); var reads = 0
            func read() -> (state: ThermalState, source: String) {
                lock.lock(); defer { lock.unlock() }
                reads += 1
                return reads > 40 ? (.critical, "test sensor at 101 °C") : (.nominal, "test sensor")
            }
        }
        let session = RecordingSession(configuration: try takeConfig(out: out, duration: nil),
                                       hooks: SessionHooks(thermal: Heating(), storage: plentyOfSpace, monitorInterval: 0))
        #expect(throws: SessionError.self) { try session.run() }
        do { _ = try session.run() } catch { #expect(error.exitCode == 1) }
        let summary = try #require(session.summary)
        #expect(summary.stopReason.contains("critical thermal state"))
        #expect(summary.frames > 30)
        let frames = try decodeAll(out).frames
        #expect(frames.count == summary.frames)
        #expect(frames.map(\.counter) == (0..<frames.count).map { Optional($0) })
    }

    /// Thermal policy before a take: critical refuses to start (no file),
    /// serious drops 1080p to 720p for the whole take.
    @Test func thermalPolicyBeforeTheTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let refused = dir.path("refused.mp4")
        let session = RecordingSession(configuration: try takeConfig(out: refused, extra: ["--thermal-state", "critical"]),
                                       hooks: SessionHooks(storage: plentyOfSpace))
        do { _ = try session.run(); Issue.record("a critical machine started a take") } catch {
            #expect(error.exitCode == 1)
            #expect(error.description.contains("critical thermal state"))
        }
        #expect(!FileManager.default.fileExists(atPath: refused))

        let reduced = dir.path("reduced.mp4")
        let config = try takeConfig(primary: "testsrc:counter:1920x1080@30", secondary: "testsrc:solid-ff0000:320x240@30",
                                    out: reduced, duration: 0.2, extra: ["--thermal-state", "serious"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
        #expect(summary.canvas == "1280x720")
        let (info, frames) = try decodeAll(reduced)
        #expect(info.size == PixelSize(width: 1280, height: 720))
        #expect(frames.count == 6)
    }

    /// Failure path 4: 200 MiB are needed to start; below 100 MiB the take
    /// stops through the finalize path and the file keeps its frames.
    @Test func storagePolicy() throws {
        let dir = Scratch(); defer { dir.remove() }
        let mib: Int64 = 1 << 20
        let refused = dir.path("refused.mp4")
        let s1 = RecordingSession(configuration: try takeConfig(out: refused), hooks: SessionHooks(storage: ScriptedStorageMonitor([150 * mib])))
        do { _ = try s1.run(); Issue.record("started with 150 MiB free") } catch {
            #expect(error.exitCode == 1)
            #expect(error.description.contains(refused))
        }
        #expect(!FileManager.default.fileExists(atPath: refused))

        let out = dir.path("low.mp4")
        let shrinking = ScriptedStorageMonitor([500 * mib, 300 * mib, 200 * mib, 150 * mib, 101 * mib, 99 * mib])
        let s2 = RecordingSession(configuration: try takeConfig(out: out, duration: nil),
                                  hooks: SessionHooks(storage: shrinking, monitorInterval: 0))
        do { _ = try s2.run(); Issue.record("kept recording below 100 MiB") } catch {
            #expect(error.exitCode == 1)
            #expect(error.description.contains("storage low"))
        }
        let summary = try #require(s2.summary)
        let frames = try decodeAll(out).frames
        #expect(frames.count == summary.frames)
        #expect(frames.count >= 3)
        #expect(frames.map(\.counter) == (0..<frames.count).map { Optional($0) })
    }

    /// A disk that fills mid-take (ENOSPC) finalizes what was written and
    /// says so: the file ends at its last complete fragment, its header
    /// holds its length, and the summary counts exactly the frames it holds.
    @Test func diskFullMidTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let mount = dir.path("small")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let m = Process()
        m.executableURL = URL(fileURLWithPath: "/bin/mount")
        m.arguments = ["-t", "tmpfs", "-o", "size=400k", "tmpfs", mount]
        try m.run(); m.waitUntilExit()
        let mounted = m.terminationStatus == 0
        defer {
            if mounted {
                let u = Process(); u.executableURL = URL(fileURLWithPath: "/bin/umount"); u.arguments = [mount]
                try? u.run(); u.waitUntilExit()
            }
        }
        // Without permission to mount a small file system, /dev/full gives ENOSPC at once.
        let out = mounted ? mount + "/full.mp4" : "/dev/full"
        let config = try takeConfig(primary: "testsrc:gradient:320x240@30", out: out, duration: nil,
                                    extra: ["--bitrate", "8M", "--preset", "ultrafast", "--format", "mp4"])
        let session = RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace))
        do { _ = try session.run(); Issue.record("a full disk did not stop the take") } catch {
            #expect(error.exitCode == 1)
            #expect(error.description.contains("storage full") || error.description.contains("No space left"), "\(error)")
        }
        if mounted {
            let summary = try #require(session.summary)
            #expect(summary.stopReason.contains("storage full"))
            let frames = try decodeAll(out).frames
            #expect(frames.count > 0, "the fragments written before the disk filled play")
            #expect(frames.count == summary.frames, "\(frames.count) frames decode, the summary says \(summary.frames)")
            #expect(abs(summary.durationSeconds - Double(frames.count) / 30) < 1e-6)
            // FFmpeg reads it to the end without an error, and its header gives the length it holds.
            let strict = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", out,
                                                     "-c:v", "rawvideo", "-an", "-y", dir.path("strict.nut")])
            #expect(strict.status == 0 && strict.stderr.isEmpty, "\(strict.stderr)")
            let length = try #require(try MediaSources.open(.url(out)).info.duration)
            #expect(abs(length - Double(frames.count) / 30) <= 1.0 / 30 + 1e-6, "the header says \(length) s for \(frames.count) frames")
        }
    }

    /// Every file output's disk is watched: another output whose disk runs
    /// low is closed and reported, and the take goes on (the main output's
    /// low disk ends the take: `storagePolicy` above).
    @Test func everyOutputsDiskIsWatched() throws {
        struct LowFor: StorageMonitor {
            let marker: String
            func freeBytes(at path: String) -> Int64? { path.contains(marker) ? 50 << 20 : 1 << 40 }
        }
        let dir = Scratch(); defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("low"), withIntermediateDirectories: true)
        let out = dir.path("main.mp4"), also = dir.path("low/also.ts")
        let config = try takeConfig(out: out, duration: 3, extra: ["--also-out", also])
        let hooks = SessionHooks(storage: LowFor(marker: "/low/"), monitorInterval: 0.2)
        let summary = try RecordingSession(configuration: config, hooks: hooks).run()
        #expect(summary.frames == 180)
        let closed = try #require(summary.outputs.first { $0.output == also })
        #expect(closed.failure?.contains("storage full") == true && closed.frames < 180, "\(closed)")
        #expect(summary.warnings.contains { $0.contains("output \(also)") && $0.contains("left on its disk") }, "\(summary.warnings)")
    }

    /// Rule 9: replacing the secondary mid-take neither drops nor stalls
    /// output frames; the new stream has another size and rate.
    @Test func hotSwapSecondary() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("swap.mp4")
        let config = try takeConfig(out: out, duration: 2, extra: ["--switch-secondary", "1=testsrc:solid-00ff00:200x200@25"])
        let session = RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace))
        let summary = try session.run()
        #expect(summary.hotSwaps == 1)
        #expect(summary.frames == 120)
        let frames = try decodeAll(out).frames
        #expect(frames.map(\.counter) == (0..<120).map { Optional($0) })
        let before = insetCentre(config, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 160, height: 120))
        let after = insetCentre(config, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 200, height: 200))
        // Opened ahead of time, the new stream takes over exactly at 1 s.
        #expect(hue(frames[59].frame, before.0, before.1) == .red)
        #expect(frames[60...].allSatisfy { hue($0.frame, after.0, after.1) == .green })
        #expect(summary.primaryOnlyFrames == 0, "the old picture stays until the new stream's first frame")
    }

    /// The Swift API: swap a stream and change the layout while the take runs.
    @Test func liveControlFromTheAPI() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("api.mp4")
        let config = try takeConfig(out: out, duration: 1)
        final class Ref: @unchecked Sendable { var session: RecordingSession? }
        let ref = Ref()
        let hooks = SessionHooks(storage: plentyOfSpace, frameCallback: { _, index in
            if index == 20 { ref.session?.switchSource(.secondary, to: .testPattern(name: "solid-0000ff", size: PixelSize(width: 160, height: 120), rate: FrameRate(30))) }
            if index == 30 { Thread.sleep(forTimeInterval: 0.5) }
            if index == 40 { ref.session?.setLayout(.sideBySide) }
        }, frameCallbackInterval: 10)
        let session = RecordingSession(configuration: config, hooks: hooks)
        ref.session = session
        let summary = try session.run()
        #expect(summary.frames == 60)
        #expect(summary.hotSwaps == 1)
        let frames = try decodeAll(out).frames
        #expect(frames.count == 60)
        let (cx, cy) = insetCentre(config, canvas: PixelSize(width: 320, height: 240), secondary: PixelSize(width: 160, height: 120))
        #expect(hue(frames[5].frame, cx, cy) == .red)
        #expect(hue(frames[35].frame, cx, cy) == .blue)
        // Side by side from frame 41 on: the right half is the secondary (blue), whole frames only.
        #expect(hue(frames[55].frame, 240, 120) == .blue)
        #expect(hue(frames[55].frame, 240, 60) == .blue)
        #expect(hue(frames[30].frame, 240, 60) != .blue)
    }

    /// Replacing the primary mid-take: the timeline continues without a gap
    /// or a repeated timestamp, and the new stream (another size) fills the canvas.
    @Test func hotSwapPrimary() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("swap-primary.mp4")
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: out, duration: 2)
        final class Ref: @unchecked Sendable { var session: RecordingSession? }
        let ref = Ref()
        let hooks = SessionHooks(storage: plentyOfSpace, frameCallback: { _, index in
            if index == 20 { ref.session?.switchSource(.primary, to: .testPattern(name: "solid-00ff00", size: PixelSize(width: 640, height: 480), rate: FrameRate(30))) }
            // The loop never waits for a new stream; give this one time to open.
            if index == 30 { Thread.sleep(forTimeInterval: 0.5) }
        }, frameCallbackInterval: 10)
        let session = RecordingSession(configuration: config, hooks: hooks)
        ref.session = session
        let summary = try session.run()
        #expect(summary.hotSwaps == 1)
        #expect(summary.frames == 60)
        let frames = try decodeAll(out).frames
        #expect(frames.count == 60)
        for (k, f) in frames.enumerated() { #expect(f.pts == FrameRate(30).time(ofFrame: Int64(k)), "frame \(k) at \(f.pts)") }
        // Frames up to the switch come from the old primary, in order; then the new one fills the canvas.
        let k = try #require(frames.firstIndex { $0.counter == nil })
        #expect(k > 20 && k <= 32, "switched at frame \(k)")
        #expect(frames[..<k].map(\.counter) == (0..<k).map { Optional($0) })
        #expect(frames[k...].allSatisfy { hue($0.frame, 40, 40) == .green })
    }

    /// The preview is read from the render target the encoder consumes: it
    /// equals the decoded file frame at its timestamp within codec tolerance.
    @Test func previewMatchesTheFile() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4"), png = dir.path("take.png")
        let config = try takeConfig(primary: "testsrc:smpte:320x240@30", secondary: "testsrc:gradient:160x120@30",
                                    out: out, duration: 2, extra: ["--preview", png, "--mirror-secondary"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
        let seconds = try #require(summary.previewSeconds)
        #expect(abs(seconds - 1.0) < 1e-9)
        let preview = try #require(try decodeAll(png).frames.first?.frame)
        #expect(preview.format == .rgba && preview.width == 320 && preview.height == 240)
        let frame = try #require(try decodeAll(out).frames.first { abs($0.pts.seconds - seconds) < 1e-6 }?.frame)
        var se = 0.0, n = 0.0
        for y in stride(from: 1, to: 239, by: 2) {
            for x in stride(from: 1, to: 319, by: 2) {
                let a = rgb(preview, x, y), b = rgb(frame, x, y)
                se += (a.r - b.r) * (a.r - b.r) + (a.g - b.g) * (a.g - b.g) + (a.b - b.b) * (a.b - b.b)
                n += 3
            }
        }
        let psnr = 10 * log10(255 * 255 / max(se / n, 1e-9))
        #expect(psnr >= 35, "preview vs file PSNR \(psnr) dB")
    }

    /// Rule 4: a canvas whose measured cost is over budget rolls back to a
    /// smaller one with a message; the take goes on.
    @Test func costBudgetRollsBack() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("rolled.mp4")
        let log = LogLines()
        let config = try takeConfig(primary: "testsrc:counter:1280x720@30", out: out, duration: 0.2)
        let hooks = SessionHooks(storage: plentyOfSpace, log: log.add, costTrial: .always,
                                 costMeasurement: { canvas in Array(repeating: canvas.height > 500 ? 0.050 : 0.004, count: 12) })
        let summary = try RecordingSession(configuration: config, hooks: hooks).run()
        #expect(summary.canvas == "854x480")
        #expect(log.contains("1280x720 costs 50.0 ms a frame, over the 26.7 ms budget for 30 fps: rolling back to 854x480"))
        let (info, frames) = try decodeAll(out)
        #expect(info.size == PixelSize(width: 854, height: 480))
        #expect(frames.count == 6)
    }

    /// An explicit `--size` over budget is kept and said so (in the log and
    /// the summary's warnings); `--over-budget` chooses otherwise: roll back,
    /// or do not start.
    @Test func anExplicitSizeOverBudgetIsTheUsersChoice() throws {
        let dir = Scratch(); defer { dir.remove() }
        let measure: @Sendable (PixelSize) -> [Double] = { canvas in Array(repeating: canvas.height > 500 ? 0.050 : 0.004, count: 12) }
        func take(_ extra: [String]) throws -> (Result<TakeSummary, SessionError>, LogLines) {
            let log = LogLines()
            let config = try takeConfig(primary: "testsrc:counter:1280x720@30", out: dir.path("s\(extra.count).mp4"), duration: 0.2,
                                        extra: ["--size", "1280x720"] + extra)
            let hooks = SessionHooks(storage: plentyOfSpace, log: log.add, costTrial: .always, costMeasurement: measure)
            let session = RecordingSession(configuration: config, hooks: hooks)
            do throws(SessionError) { return (.success(try session.run()), log) } catch { return (.failure(error), log) }
        }
        let (kept, log) = try take([])
        let summary = try kept.get()
        #expect(summary.canvas == "1280x720")
        #expect(summary.warnings.contains { $0.contains("canvas 1280x720 is over its measured budget") && $0.contains("--over-budget keep") },
                "\(summary.warnings)")
        #expect(log.contains("warning: canvas 1280x720 is over its measured budget"))
        let reduced = try take(["--over-budget", "reduce"]).0.get()
        #expect(reduced.canvas == "854x480")
        guard case .failure(let refused) = try take(["--over-budget", "refuse", "--audio", "none"]).0 else {
            Issue.record("--over-budget refuse started the take"); return
        }
        #expect(refused.exitCode == 1 && refused.description.contains("not starting: canvas 1280x720 is over budget"), "\(refused)")
    }

    /// The real cost trial (GPU + encoder) accepts a small canvas.
    @Test func realCostTrialAcceptsSmallCanvas() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("trial.mp4")
        let config = try takeConfig(primary: "testsrc:counter:160x120@10", secondary: "testsrc:solid-ff0000:64x64@10", out: out, duration: 0.5)
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, costTrial: .always)).run()
        #expect(summary.canvas == "160x120")
        #expect(summary.frames == 5)
    }

    /// Rule 6: audio is decided at the start: the primary's AAC is copied, and
    /// `--audio none` writes no audio track at all (not a silent one).
    @Test func audioFollowsThePrimaryOrIsAbsent() throws {
        let dir = Scratch(); defer { dir.remove() }
        let input = dir.path("with-audio.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                         "-t", "1", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-c:a", "aac", "-shortest", input])
        func streams(_ path: String) throws -> String {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
            p.arguments = ["-v", "error", "-show_entries", "stream=codec_type,codec_name,duration", "-of", "csv=p=0", path]
            let pipe = Pipe(); p.standardOutput = pipe
            try p.run(); p.waitUntilExit()
            return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        for audio in ["primary", "none"] {
            // Every output carries the take's audio, `--also-out` ones too.
            let out = dir.path("out-\(audio).mp4"), also = dir.path("also-\(audio).ts")
            let config = try takeConfig(primary: input, out: out, duration: nil, extra: ["--audio", audio, "--also-out", also])
            let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace)).run()
            #expect(summary.frames == 30)
            for path in [out, also] {
                let found = try streams(path)
                if audio == "primary" {
                    #expect(found.contains("aac,audio"), "\(path): \(found)")
                } else {
                    #expect(!found.contains("audio"), "\(path): \(found)")
                }
            }
            if audio == "primary" { #expect(summary.audio.contains("aac")) }
        }
    }

    /// Bad input fails before anything is written, as `.badInput` (exit 2).
    @Test(arguments: [
        (["--primary", "/nonexistent/a.mp4"], "/nonexistent/a.mp4"),
        (["--primary", "testsrc:nosuchpattern"], "nosuchpattern"),
        (["--secondary", "/nonexistent/b.mp4"], "/nonexistent/b.mp4"),
    ])
    func badSources(args: [String], named: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("never.mp4")
        var full = ["--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:solid-ff0000:160x120@30", "--out", out]
        for i in stride(from: 0, to: args.count, by: 2) {
            if let j = full.firstIndex(of: args[i]) { full[j + 1] = args[i + 1] }
        }
        let session = RecordingSession(configuration: try TakeConfiguration.parse(arguments: full), hooks: SessionHooks(storage: plentyOfSpace))
        do { _ = try session.run(); Issue.record("bad input accepted") } catch {
            #expect(error.exitCode == 2)
            #expect(error.description.contains(named))
            #expect(!error.description.contains("\n"))
        }
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}
