import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychOptions

/// Live sources that go away and come back (docs/ARCHITECTURE.md, "Source
/// recovery"), with real FFmpeg senders on loopback: a UDP sender that
/// restarts with its timestamps from zero, an SRT sender whose connection
/// drops, a TCP sender whose stream ends in a take with `--duration`, a priority list that fails over to a pattern and back, a
/// secondary lost and shown again. Every output keeps its cadence and its
/// timestamps run on without a gap.
@Suite(.serialized) struct SourceRecoveryTests {
    init() { _ = quietMedia }

    /// `ffmpeg` sending `seconds` of a solid `colour` at 30 fps as MPEG-TS
    /// (H.264, a keyframe every half second) to `url` in real time.
    static func sender(_ colour: String, seconds: Double, size: String = "320x240", to url: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "color=c=\(colour):size=\(size):rate=30", "-t", "\(seconds)",
                       "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-g", "15", "-pix_fmt", "yuv420p",
                       "-f", "mpegts", url]
        p.standardInput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Runs `steps` one after the other on another thread: a sender to its
    /// end, a pause, or a wait (up to 30 s) until the take has bound the
    /// UDP port the senders send to (what is sent before is lost).
    enum Step { case send(String, Double), pause(Double), takeListening }
    static func senders(_ steps: [Step], size: String = "320x240", to url: String, waitBound port: Int? = nil,
                        udp: Bool = true) -> DispatchGroup {
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            for step in steps {
                switch step {
                case .pause(let s): Thread.sleep(forTimeInterval: s)
                case .takeListening:
                    if let port = URLComponents(string: url)?.port { _ = LiveReceiver.waitBound(port: port, udp: true, timeout: 30) }
                case .send(let colour, let s): (try? sender(colour, seconds: s, size: size, to: url))?.waitUntilExit()
                }
            }
        }
        if let port { _ = LiveReceiver.waitBound(port: port, udp: udp, timeout: 10) }
        return group
    }

    /// Timestamps one frame time apart from the first to the last.
    static func expectContiguous(_ frames: [DecodedFrame], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (i, (a, b)) in zip(frames, frames.dropFirst()).enumerated() where abs((b.pts - a.pts).seconds - 1.0 / 30) > 0.002 {
            Issue.record("\(what): frame \(i + 1) at \(b.pts.seconds) s follows \(a.pts.seconds) s", sourceLocation: sourceLocation)
            return
        }
    }

    /// A take of `frames` frames whose primary went from a blue sender to a
    /// red one across an outage: the live stream has every frame but those
    /// dropped, the file every frame but those held, both contiguous, the
    /// file from 0 and blue, both ending red (`after` says why).
    static func expectAcrossOutage(_ summary: TakeSummary, live: [DecodedFrame], file: [DecodedFrame], frames: Int, after: String,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(live.count == frames - summary.droppedFrames, "\(live.count) live frames, \(summary.droppedFrames) dropped", sourceLocation: sourceLocation)
        expectContiguous(live, "live", sourceLocation: sourceLocation)
        #expect(file.count == frames - summary.heldFrames, "\(file.count) file frames, \(summary.heldFrames) held", sourceLocation: sourceLocation)
        #expect(file.first?.pts == .zero, sourceLocation: sourceLocation)
        expectContiguous(file, "file", sourceLocation: sourceLocation)
        #expect(file.first.map { hue($0.frame, 160, 120) } == .blue, sourceLocation: sourceLocation)
        #expect(file.last.map { hue($0.frame, 160, 120) } == .red, "\(after)", sourceLocation: sourceLocation)
        #expect(live.last.map { hue($0.frame, 160, 120) } == .red, sourceLocation: sourceLocation)
    }

    static func summary(_ r: CLIResult) throws -> TakeSummary {
        try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
    }

    /// What a take across an outage said and recorded.
    struct OutageTake {
        var source: String
        var stderr: String
        var summary: TakeSummary
        var live: [DecodedFrame]
        var file: [DecodedFrame]
    }

    /// A take of `seconds` s whose primary is `scheme`://127.0.0.1 on a free
    /// port, fed by `steps` (listening there with `listen`, the senders'
    /// query, once bound), with a live SRT output and a file: checks that it
    /// exited 0 and the live stream ended, and returns what it said and recorded.
    static func takeAcrossOutage(_ scheme: String, listen: String? = nil, steps: [Step], seconds: Int,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws -> OutageTake {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let source = "\(scheme)://127.0.0.1:\(port)"
        let out = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: out, path: dir.path("live.ts"))
        let senders = Self.senders(steps, to: source + (listen ?? ""), waitBound: listen == nil ? nil : port, udp: scheme == "udp")
        let r = try runCLI(["record", "--primary", source, "--secondary", "none", "--out", out + "?latency=1000000",
                            "--also-out", dir.path("file.mp4"), "--duration", "\(seconds)", "--json", "--preset", "ultrafast"])
        _ = senders.wait(timeout: .now() + 20)
        #expect(r.status == 0, "\(r.stderr)", sourceLocation: sourceLocation)
        #expect(receiver.waitForEnd(timeout: 20), sourceLocation: sourceLocation)
        return OutageTake(source: source, stderr: r.stderr, summary: try Self.summary(r),
                          live: try decodeAll(receiver.path).frames, file: try decodeAll(dir.path("file.mp4")).frames)
    }

    /// A UDP primary whose sender stops for 2 s and restarts with its
    /// timestamps from zero (another colour): the live stream keeps 30 fps
    /// with the held frame, the file pauses, both without a gap in their
    /// timestamps, and the frames after the outage are the new sender's.
    @Test(.timeLimit(.minutes(2))) func aUDPPrimaryWhoseSenderRestartsKeepsTheCadence() throws {
        let take = try Self.takeAcrossOutage("udp", steps: [.takeListening, .send("blue", 3), .pause(2), .send("red", 8)], seconds: 8)
        #expect(take.stderr.contains("primary timestamps jumped"), "\(take.stderr)")
        let summary = take.summary
        #expect(summary.frames == 240, "\(summary.frames) frames")
        #expect((30...100).contains(summary.heldFrames), "\(summary.heldFrames) held frames")
        Self.expectAcrossOutage(summary, live: take.live, file: take.file, frames: 240,
                                after: "the frames after the outage come from the restarted sender")
    }

    /// An SRT primary whose sender (the listener) goes away for 2 s: the
    /// take reopens it with backoff, says so, and the file runs on.
    @Test(.timeLimit(.minutes(2))) func anSRTPrimaryThatDropsIsReopened() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let source = "srt://127.0.0.1:\(port)"
        let senders = Self.senders([.send("blue", 3), .pause(2), .send("red", 8)], to: source + "?mode=listener", waitBound: port)
        let r = try runCLI(["record", "--primary", source, "--secondary", "none", "--out", dir.path("file.mp4"), "--duration", "7",
                            "--json", "--preset", "ultrafast"])
        _ = senders.wait(timeout: .now() + 20)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("reopening it for up to 30 s"), "\(r.stderr)")
        let summary = try Self.summary(r)
        let reconnect = try #require(summary.sourceSwitches.first, "\(summary.sourceSwitches)")
        #expect(reconnect.role == "primary" && reconnect.reason == .reconnect && reconnect.to == source, "\(reconnect)")
        #expect(reconnect.downSeconds > 1 && reconnect.downSeconds < 10, "\(reconnect)")
        let file = try decodeAll(dir.path("file.mp4")).frames
        #expect(file.count == 210, "\(file.count) frames")
        Self.expectContiguous(file, "file")
        #expect(file.first.map { hue($0.frame, 160, 120) } == .blue)
        #expect(file.last.map { hue($0.frame, 160, 120) } == .red)
    }

    /// A TCP primary whose sender (the listener) ends its stream after 2 s
    /// and listens again 1 s later, in a take with `--duration`: the end of
    /// a live stream is a loss, not the end of a stream of known length (the
    /// take's duration is the take's, not the source's), so the take reopens
    /// it; the live stream keeps 30 fps with the held frame, the file pauses,
    /// both without a gap, and the take runs its full 6 s.
    @Test(.timeLimit(.minutes(2))) func aLivePrimaryThatEndsIsReopenedInATakeWithADuration() throws {
        let take = try Self.takeAcrossOutage("tcp", listen: "?listen=1", steps: [.send("blue", 2), .pause(1), .send("red", 8)], seconds: 6)
        let source = take.source
        #expect(take.stderr.contains("primary \(source) ended; reopening it for up to 30 s"), "\(take.stderr)")
        let summary = take.summary
        let reconnect = try #require(summary.sourceSwitches.first, "\(take.stderr)")
        #expect(summary.sourceSwitches.count == 1, "\(summary.sourceSwitches)")
        #expect(reconnect.role == "primary" && reconnect.reason == .reconnect && reconnect.to == source, "\(reconnect)")
        #expect(reconnect.downSeconds > 0.5 && reconnect.downSeconds < 6, "\(reconnect)")
        #expect(summary.frames == 180, "\(summary.frames) frames")
        #expect((15...150).contains(summary.heldFrames), "\(summary.heldFrames) held frames")
        let live = take.live
        Self.expectAcrossOutage(summary, live: live, file: take.file, frames: 180,
                                after: "the frames after the end come from the restarted sender")
        // During the gap the live stream shows the held (blue) frame; the restarted sender's red from the reconnect on.
        func liveAt(_ seconds: Double) -> Hue? {
            live.first { $0.pts.seconds >= seconds - 1e-6 }.map { hue($0.frame, 160, 120) }
        }
        #expect(liveAt(reconnect.at - 0.1) == .blue, "held before the reconnect at \(reconnect.at) s")
        #expect(liveAt(reconnect.at + 0.2) == .red, "the new sender after the reconnect at \(reconnect.at) s")
    }

    /// A primary list (a UDP stream, then a green pattern): when the stream
    /// stops the take fails over after the grace, and once the stream is
    /// back and steady for `--source-failback` it fails back; the live
    /// stream has every frame time filled and no gap, and the summary lists both switches.
    @Test(.timeLimit(.minutes(2))) func aPrimaryListFailsOverAndBack() throws {
        let dir = Scratch(); defer { dir.remove() }
        let source = "udp://127.0.0.1:\(LiveReceiver.freePort())"
        let pattern = "testsrc:solid-00ff00:320x240@30"
        let out = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: out, path: dir.path("live.ts"))
        let senders = Self.senders([.takeListening, .send("blue", 3), .pause(3), .send("red", 10)], to: source)
        let r = try runCLI(["record", "--primary", source, "--primary-fallback", pattern, "--source-failback", "2", "--secondary", "none",
                            "--out", out + "?latency=1000000", "--also-out", dir.path("file.mp4"), "--duration", "11",
                            "--json", "--preset", "ultrafast"])
        _ = senders.wait(timeout: .now() + 20)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(receiver.waitForEnd(timeout: 20))
        #expect(r.stderr.contains("primary failed over from \(source) to \(pattern)"), "\(r.stderr)")
        #expect(r.stderr.contains("primary failed back from \(pattern) to \(source)"), "\(r.stderr)")
        let summary = try Self.summary(r)
        #expect(summary.sourceSwitches.map(\.reason) == [.failover, .failback], "\(summary.sourceSwitches)")
        #expect(summary.frames == 330)
        let switches = summary.sourceSwitches
        let live = try decodeAll(receiver.path).frames
        #expect(live.count == 330 - summary.droppedFrames, "\(live.count) live frames")
        Self.expectContiguous(live, "live")
        // Blue, then green from the failover, red from the failback.
        func hueAt(_ seconds: Double) -> Hue? {
            live.first { $0.pts.seconds >= seconds - 1e-6 }.map { hue($0.frame, 160, 120) }
        }
        #expect(hueAt(1) == .blue)
        if switches.count == 2 {
            #expect(hueAt(switches[0].at + 0.2) == .green, "at \(switches[0].at + 0.2) s")
            #expect(hueAt(switches[1].at + 0.2) == .red, "at \(switches[1].at + 0.2) s")
        }
        let file = try decodeAll(dir.path("file.mp4")).frames
        #expect(file.count == 330 - summary.heldFrames)
        Self.expectContiguous(file, "file")
    }

    /// A UDP secondary whose sender stops for 4 s: its last frame is held,
    /// then hidden (the primary alone), and once the sender is back it is
    /// reopened and shown again; the output never waits for it.
    @Test(.timeLimit(.minutes(2))) func aLostSecondaryIsHiddenThenShownAgain() throws {
        let dir = Scratch(); defer { dir.remove() }
        let source = "udp://127.0.0.1:\(LiveReceiver.freePort())"
        let senders = Self.senders([.takeListening, .send("blue", 3), .pause(4), .send("red", 6)], size: "160x120", to: source)
        let r = try runCLI(["record", "--primary", "testsrc:solid-00ff00:320x240@30", "--secondary", source, "--realtime", "on",
                            "--secondary-timeout", "1", "--duration", "11", "--out", dir.path("file.mp4"), "--json", "--preset", "ultrafast"])
        _ = senders.wait(timeout: .now() + 20)
        #expect(r.status == 0, "\(r.stderr)")
        let summary = try Self.summary(r)
        let back = try #require(summary.sourceSwitches.first, "\(r.stderr)")
        #expect(back.role == "secondary" && back.reason == .reconnect, "\(back)")
        #expect(summary.primaryOnlyFrames > 30, "\(summary.primaryOnlyFrames) frames without the secondary")
        let file = try decodeAll(dir.path("file.mp4")).frames
        #expect(file.count == 330)
        Self.expectContiguous(file, "file")
        // The inset (bottom right): blue, then the primary alone (green), then red.
        func insetAt(_ seconds: Double) -> Hue? {
            file.first { $0.pts.seconds >= seconds - 1e-6 }.map { hue($0.frame, 270, 200) }
        }
        #expect(insetAt(2) == .blue)
        #expect(insetAt(back.at - 0.3) == .green, "hidden before it came back at \(back.at) s")
        #expect(insetAt(min(back.at + 1, 10.5)) == .red, "shown again after \(back.at) s")
    }

    // MARK: The options

    /// The CLI, the JSON form and validation: lists, the window and the failback.
    @Test func optionsAndTheirJSONForm() throws {
        var c = try TakeConfiguration.parse(arguments: ["--primary", "srt://a:9000", "--primary-fallback", "rtsp://b/live",
                                                        "--primary-fallback", "testsrc:smpte", "--source-reconnect-window", "12",
                                                        "--source-failback", "3", "--out", "o.mp4"])
        #expect(c.sources(.primary).map(\.description) == ["srt://a:9000", "rtsp://b/live", "testsrc:smpte:1920x1080@30"])
        #expect(c.sourceReconnectWindow == 12 && c.sourceFailback == 3)
        try c.validate()
        let back = try TakeConfiguration(jsonData: c.jsonData())
        #expect(back == c)
        let json = try #require(String(data: c.jsonData(), encoding: .utf8))
        #expect(json.contains("\"primary\" : [") && json.contains("\"sourceReconnectWindow\" : 12"), "\(json)")

        let fromJSON = try TakeConfiguration(jsonData: Data(#"{"primary": "a.mp4", "secondary": ["udp://127.0.0.1:5000", "testsrc:gradient"], "out": "o.mp4"}"#.utf8))
        #expect(fromJSON.secondary == .url("udp://127.0.0.1:5000") && fromJSON.secondaryFallbacks.count == 1)

        func refusal(_ json: String) -> ConfigurationError? {
            do { try TakeConfiguration(jsonData: Data(json.utf8)).validate(); return nil } catch { return error }
        }
        #expect(refusal(#"{"primary": [], "out": "o.mp4"}"#)?.description.contains("primary: expected a source or a non-empty list") == true)
        #expect(refusal(#"{"primary": ["a.mp4", 5], "out": "o.mp4"}"#)?.description.contains("primary[1]: expected a string") == true)
        #expect(refusal(#"{"primary": ["a.mp4", "none"], "out": "o.mp4"}"#)?.field == "--primary-fallback")
        #expect(refusal(#"{"primary": ["-", "a.mp4"], "out": "o.mp4"}"#)?.field == "--primary")
        #expect(refusal(#"{"primary": ["a.mp4", "b.mp4"], "sourceReconnectWindow": 0, "out": "o.mp4"}"#)?.field == "--source-reconnect-window")
        #expect(refusal(#"{"primary": "a.mp4", "sourceReconnectWindow": -1, "out": "o.mp4"}"#)?.field == "--source-reconnect-window")
        #expect(refusal(#"{"primary": "a.mp4", "sourceFailback": 0, "out": "o.mp4"}"#)?.field == "--source-failback")
        c = TakeConfiguration()
        c.primary = .url("a.mp4"); c.output = "o.mp4"; c.secondaryFallbacks = [.url("b.mp4")]
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }

    /// Bad values exit 2 with one line naming the option.
    @Test func badValuesExitTwoNamingTheOption() throws {
        let dir = Scratch(); defer { dir.remove() }
        for (args, option) in [(["--source-reconnect-window", "-3"], "--source-reconnect-window"),
                               (["--source-failback", "abc"], "--source-failback"),
                               (["--primary-fallback", "none"], "--primary-fallback"),
                               (["--secondary-fallback", "testsrc:smpte"], "--secondary-fallback")] {
            let r = try runCLI(["record", "--primary", "testsrc:smpte:64x64@30", "--out", dir.path("o.mp4")] + args)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && r.stderr.contains(option), "\(args): \(r.stderr)")
        }
    }

    /// Pushed streams have no source to reopen: the C API's option strings refuse the source options and say why.
    @Test func embeddingRefusesSourceOptions() {
        for flag in ["--source-reconnect-window", "--source-failback", "--primary-fallback"] {
            do {
                _ = try EmbeddedConfiguration.parse(arguments: ["--size", "64x64", "--fps", "30", flag, "5"])
                Issue.record("\(flag) was taken")
            } catch {
                #expect("\(error)".contains(flag) && "\(error)".contains("frames come from the host"), "\(error)")
            }
        }
    }

    /// The pure rules: backoff, what is a network source, what starts a new timeline, how a switch is called.
    @Test func recoveryRules() {
        #expect((0...6).map { SourceRecovery.backoff(afterFailures: $0) } == [0.5, 1, 2, 4, 8, 8, 8])
        for u in ["srt://h:1", "rtmp://h/app/key", "rtsp://h/s", "udp://127.0.0.1:5000", "http://h/a.m3u8", "hls+https://h/a.m3u8"] {
            #expect(SourceRecovery.isNetwork(.url(u)), "\(u)")
        }
        for s in [SourceSpec.url("a.mp4"), .url("file:a.mp4"), .stdin, .testPattern(name: "smpte", size: .hd1080, rate: FrameRate(30)), .none] {
            #expect(!SourceRecovery.isNetwork(s), "\(s)")
        }
        let fd = FrameRate(30).frameDuration
        let t = MediaTime(seconds: 10)
        #expect(!SourceRecovery.isDiscontinuity(previous: t, next: t + fd, frameDuration: fd))
        #expect(!SourceRecovery.isDiscontinuity(previous: t, next: t + MediaTime(seconds: 0.3), frameDuration: fd))
        #expect(SourceRecovery.isDiscontinuity(previous: t, next: MediaTime(seconds: 0), frameDuration: fd))
        #expect(SourceRecovery.isDiscontinuity(previous: t, next: t, frameDuration: fd))
        #expect(SourceRecovery.isDiscontinuity(previous: t, next: t + MediaTime(seconds: 3), frameDuration: fd))
        #expect(SourceRecovery.reason(from: 1, to: 1) == .reconnect)
        #expect(SourceRecovery.reason(from: 0, to: 2) == .failover)
        #expect(SourceRecovery.reason(from: 2, to: 0) == .failback)
    }
}
