import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychOptions

/// The take's audio (docs/ARCHITECTURE.md, "Take audio"): both streams'
/// audio mixed at their gains in every output, a flash and a beep within a
/// frame of each other, audio that follows a source's reconnect; each read
/// back with FFmpeg (decoded to PCM and measured here).
@Suite(.serialized) struct TakeAudioTests {
    init() { _ = quietMedia }

    static let rate = 48_000.0

    /// The first audio stream of `path` decoded by `ffmpeg` to 48 kHz float
    /// samples (its first channel), and the time of its first sample from the file's start
    /// (the video's frames are timed from there too, `decodeAll`).
    static func audio(_ path: String) throws -> (samples: [Float], start: Double) {
        let raw = path + ".f32"
        let r = try run("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", path, "-vn", "-af", "pan=mono|c0=c0", "-ar", "48000", "-f", "f32le", raw])
        #expect(r.status == 0, "\(r.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: raw))
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "a:0", "-show_entries", "stream=start_time:format=start_time",
                                                 "-of", "default=noprint_wrappers=1:nokey=1", path])
        let times = probe.stdout.split(separator: "\n").compactMap { Double($0) }
        // Stream's start, then the format's (the earliest stream's).
        let start = times.count >= 2 ? times[0] - times[1] : 0
        return (samples, start)
    }

    /// The amplitude of `frequency` over `samples[range]` (one DFT bin, Goertzel).
    static func level(_ samples: [Float], _ frequency: Double, _ range: Range<Int>) -> Double {
        let w = 2 * Double.pi * frequency / rate
        let c = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for i in range {
            let s = Double(samples[i]) + c * s1 - s2
            s2 = s1; s1 = s
        }
        let power = s1 * s1 + s2 * s2 - c * s1 * s2
        return 2 * sqrt(max(0, power)) / Double(range.count)
    }

    /// `seconds` of a 320x240 picture with a sine of `frequency` Hz (mono
    /// `rate` Hz AAC, amplitude 0.5) in an MP4 file.
    static func toneClip(_ path: String, video: String, frequency: Int, seconds: Double, rate: Int = 48_000, channels: Int = 1) throws {
        try makeFixture(["-f", "lavfi", "-i", "\(video)=size=320x240:rate=30", "-f", "lavfi",
                         "-i", "aevalsrc=0.5*sin(2*PI*\(frequency)*t):s=\(rate):c=\(channels == 1 ? "mono" : "stereo")",
                         "-t", "\(seconds)", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", path])
    }

    /// The lavfi inputs of a black picture with a white flash at `at` seconds
    /// for a tenth of a second, and silence with a 1 kHz beep at the same time;
    /// with `every`, again every `every` seconds after (whichever a reconnect
    /// slowed by a loaded machine reaches first is there to be found).
    static func flashAndBeep(at t: Double, every: Double? = nil) -> [String] {
        // When the flash is on, its arguments separated by `comma` (the audio filter's are escaped).
        func on(_ comma: String) -> String {
            guard let every else { return "between(t\(comma)\(t)\(comma)\(t + 0.1))" }
            return "gte(t\(comma)\(t))*lt(mod(t-\(t)\(comma)\(every))\(comma)0.1)"
        }
        return ["-f", "lavfi", "-i", "color=black:size=320x240:rate=30,drawbox=c=white:t=fill:enable='\(on(","))'",
                "-f", "lavfi", "-i", "aevalsrc=if(\(on("\\,"))\\,0.95*sin(2*PI*1000*t)\\,0):s=44100"]
    }

    /// Where the flash and the beep (its first sample above 0.5, louder than any other sound
    /// of these tests) are in `path` (seconds from its start), after `after` seconds.
    static func flashAndBeepTimes(_ path: String, after: Double = 0) throws -> (flash: Double?, beep: Double?) {
        let frames = try decodeAll(path).frames
        let flash = frames.first { $0.pts.seconds >= after && yuv($0.frame, 160, 120).y > 128 }?.pts.seconds
        let (samples, start) = try audio(path)
        let from = max(0, Int(((after - start) * rate).rounded()))
        let beep = samples.indices.dropFirst(from).first { abs(samples[$0]) > 0.5 }.map { start + Double($0) / rate }
        return (flash, beep)
    }

    /// A primary with a 440 Hz tone (44.1 kHz) and a secondary sent by
    /// FFmpeg over UDP with a 1 kHz tone (stereo), mixed with the secondary
    /// 6 dB down: the file, the MPEG-TS beside it (`--also-out`) and the SRT
    /// stream a receiver on loopback got all hold both tones, the
    /// secondary's at half the primary's amplitude, and nothing between them.
    @Test(.timeLimit(.minutes(2))) func mixedAudioHasBothTonesInEveryOutput() throws {
        let dir = Scratch(); defer { dir.remove() }
        let primary = dir.path("primary.mp4")
        try Self.toneClip(primary, video: "testsrc", frequency: 440, seconds: 5, rate: 44_100, channels: 2)
        let udp = "udp://127.0.0.1:\(LiveReceiver.freePort())"
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        sender.arguments = ["-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "smptebars=size=160x120:rate=30",
                            "-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*1000*t):s=48000:c=stereo", "-t", "30",
                            "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-g", "15", "-pix_fmt", "yuv420p",
                            "-c:a", "aac", "-f", "mpegts", udp]
        sender.standardError = FileHandle.nullDevice
        // It outlasts a take slow to start; ended when the test is.
        try sender.run()
        // Only while it runs: Foundation's terminate() signals the pid even after the process has ended, when it
        // may be another process's (the suite starts many; pids wrap at 32,768 here).
        defer { if sender.isRunning { sender.terminate() }; sender.waitUntilExit() }
        let live = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: live, path: dir.path("live.ts"))
        let r = try runCLI(["record", "--primary", primary, "--secondary", udp, "--audio", "mix", "--secondary-gain", "-6",
                            "--realtime", "on", "--out", dir.path("take.mp4"), "--also-out", dir.path("take.ts"),
                            "--also-out", live + "?latency=1000000", "--duration", "4", "--json", "--preset", "ultrafast"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(receiver.waitForEnd(timeout: 20))
        #expect(r.stderr.contains("audio: aac 48 kHz stereo, mix of primary 0 dB + secondary -6 dB"), "\(r.stderr)")
        for path in [dir.path("take.mp4"), dir.path("take.ts"), dir.path("live.ts")] {
            let (samples, _) = try Self.audio(path)
            #expect(samples.count > Int(3.5 * Self.rate), "\(path): \(samples.count) samples")
            guard samples.count > Int(3.5 * Self.rate) else { continue }
            // The last two seconds: the UDP secondary has been delivering for a while.
            let window = Int(1.5 * Self.rate)..<Int(3.5 * Self.rate)
            let a440 = Self.level(samples, 440, window), a1000 = Self.level(samples, 1000, window)
            let a700 = Self.level(samples, 700, window)
            #expect(abs(a440 - 0.5) < 0.05, "\(path): 440 Hz at \(a440)")
            #expect(abs(a1000 - 0.25) < 0.03, "\(path): 1 kHz at \(a1000) (6 dB under 0.5)")
            #expect(a700 < 0.01, "\(path): 700 Hz at \(a700)")
        }
    }

    /// A flash and a beep at the same time of the primary land within one
    /// frame time of each other in every output (MP4, Matroska, MPEG-TS),
    /// whatever each container's start.
    @Test(.timeLimit(.minutes(2))) func aFlashAndABeepStayInSyncInEveryOutput() throws {
        let dir = Scratch(); defer { dir.remove() }
        let primary = dir.path("flash.mp4")
        try makeFixture(Self.flashAndBeep(at: 1.5) + ["-t", "3", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                                                      "-c:a", "aac", primary])
        let secondary = dir.path("tone.mp4")
        try Self.toneClip(secondary, video: "smptebars", frequency: 300, seconds: 3)
        let r = try runCLI(["record", "--primary", primary, "--secondary", secondary, "--audio", "mix", "--secondary-gain", "-20",
                            "--out", dir.path("take.mp4"), "--also-out", dir.path("take.mkv"), "--also-out", dir.path("take.ts"),
                            "--json", "--preset", "ultrafast"])
        #expect(r.status == 0, "\(r.stderr)")
        for path in [dir.path("take.mp4"), dir.path("take.mkv"), dir.path("take.ts")] {
            let (flash, beep) = try Self.flashAndBeepTimes(path)
            let f = try #require(flash, "\(path): no flash"), b = try #require(beep, "\(path): no beep")
            #expect(abs(f - 1.5) < 0.04, "\(path): the flash at \(f) s")
            #expect(abs(b - f) < 1.0 / 30, "\(path): the beep at \(b) s, the flash at \(f) s")
        }
    }

    /// A UDP primary whose sender (440 Hz) stops for 2 s and comes back as
    /// another sender with a flash and a beep: the take reconnects, and in
    /// the live stream (which held frames meanwhile) and in the file (which
    /// paused) the tone is heard before and the beep lands within a frame of
    /// the flash after.
    @Test(.timeLimit(.minutes(2))) func audioFollowsAReconnectInSync() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let source = "udp://127.0.0.1:\(port)"
        func sender(_ inputs: [String], seconds: Double) -> [String] {
            ["-v", "error", "-nostdin", "-re"] + inputs + ["-t", "\(seconds)", "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency",
                                                         "-g", "15", "-pix_fmt", "yuv420p", "-c:a", "aac", "-f", "mpegts", source]
        }
        let tone = sender(["-f", "lavfi", "-i", "color=blue:size=320x240:rate=30", "-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*440*t):s=48000"],
                          seconds: 3)
        let flash = sender(Self.flashAndBeep(at: 4, every: 2.5), seconds: 11)
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            // Sent once the take has bound the port: what comes before is lost.
            _ = LiveReceiver.waitBound(port: port, udp: true, timeout: 30)
            _ = try? run("/usr/bin/ffmpeg", tone, timeout: 30)
            Thread.sleep(forTimeInterval: 2)
            _ = try? run("/usr/bin/ffmpeg", flash, timeout: 30)
        }
        let live = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: live, path: dir.path("live.ts"))
        // The first flash comes 4 s into the second sender, about 10 s after the first sender starts,
        // and another every 2.5 s, so a reconnect slowed by a loaded machine (the stream found again,
        // its first keyframe) still meets one in the take's 14 s.
        let r = try runCLI(["record", "--primary", source, "--secondary", "none", "--out", live + "?latency=1000000",
                            "--also-out", dir.path("file.mp4"), "--duration", "14", "--json", "--preset", "ultrafast"])
        _ = group.wait(timeout: .now() + 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(receiver.waitForEnd(timeout: 20))
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.heldFrames > 20, "\(summary.heldFrames) held frames")
        for path in [dir.path("file.mp4"), dir.path("live.ts")] {
            let (samples, start) = try Self.audio(path)
            let early = Int((start + 0.5) * Self.rate)..<Int((start + 2.0) * Self.rate)
            #expect(samples.count > early.upperBound && Self.level(samples, 440, early) > 0.3, "\(path): the first sender's tone")
            // After the outage: the second sender's first flash and beep the take received.
            let (flashAt, beepAt) = try Self.flashAndBeepTimes(path, after: 3)
            let f = try #require(flashAt, "\(path): no flash"), b = try #require(beepAt, "\(path): no beep")
            // Within a frame, plus the one AAC frame (1024 samples) by which
            // the live sender's own encoder may place its audio off its
            // video (its priming): the source carries that, not the take.
            #expect(abs(b - f) < 1.0 / 30 + 1024.0 / 48000, "\(path): the beep at \(b) s, the flash at \(f) s")
        }
    }

    /// Bad audio options are one line naming the option, exit 2.
    @Test(arguments: [
        (["--audio", "stereo"], "--audio"),
        (["--audio", "mix", "--secondary", "none"], "--audio"),
        (["--secondary-gain", "-6"], "--secondary-gain"),
        (["--audio", "mix", "--primary-gain", "40"], "--primary-gain"),
        (["--audio", "mix", "--primary-gain", "loud"], "--primary-gain"),
    ])
    func badAudioOptionsExitTwo(args: [String], named option: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        var a = ["record", "--primary", "testsrc:counter:320x240@30", "--duration", "1", "--out", dir.path("o.mp4")]
        if !args.contains("--secondary") { a += ["--secondary", "testsrc:smpte:160x120@30"] }
        let r = try runCLI(a + args)
        #expect(r.status == 2, "\(args): \(r.stderr)")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(option), "\(args): \(r.stderr)")
    }

    /// The new fields in JSON (a config file, the server's take body) and their refusals.
    @Test func audioFieldsInJSON() throws {
        let c = try OptionParser.decode(Data(#"{"primary": "a.mp4", "secondary": "b.mp4", "audio": "mix", "primaryGain": -3, "secondaryGain": "-6dB", "out": "o.mp4"}"#.utf8),
                                        source: "t.json")
        #expect(c.audio == .mix && c.primaryGain == -3 && c.secondaryGain == -6)
        try c.validate()
        var v = OptionValues()
        v.take = c
        #expect(try OptionParser.decode(OptionParser.encode(v).data(), source: "back.json") == c)
        let refused = try OptionParser.decode(Data(#"{"primary": "a.mp4", "secondaryGain": -6, "out": "o.mp4"}"#.utf8), source: "t.json")
        #expect(throws: ConfigurationError.self) { try refused.validate() }
    }
}
