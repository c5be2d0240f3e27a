import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychOptions

/// Each output its own encoding (`alsoOut`'s `size`, `codec`, `bitrate`,
/// `maxrate`, `bufsize`, `preset`, `rateDivisor`): a ladder from one take,
/// each rung drawn on the GPU at its own size from the same uploaded
/// pictures and encoded at its own rate, read back with FFmpeg and GStreamer.
@Suite(.serialized) struct LadderTests {
    init() { _ = quietMedia }

    /// What ffprobe says of a file's video stream: size, frames decoded,
    /// average rate, duration, and its packets' bits a second.
    struct Probe { var width: Int; var height: Int; var frames: Int; var rate: String; var duration: Double; var bitsPerSecond: Double }

    static func probe(_ path: String) throws -> Probe {
        let s = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                                             "stream=width,height,nb_read_frames,avg_frame_rate", "-of", "default=nw=1", path])
        #expect(s.status == 0, "\(s.stderr)")
        var f: [String: String] = [:]
        for line in s.stdout.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { f[kv[0]] = kv[1] }
        }
        let d = try run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let duration = Double(d.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .nan
        let p = try run("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=size", "-of", "csv=p=0", path])
        let bytes = p.stdout.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
        return Probe(width: Int(f["width"] ?? "") ?? -1, height: Int(f["height"] ?? "") ?? -1, frames: Int(f["nb_read_frames"] ?? "") ?? -1,
                     rate: f["avg_frame_rate"] ?? "", duration: duration, bitsPerSecond: Double(bytes * 8) / duration)
    }

    /// The issue's ladder: 1080p, 720p and 360p at 4M, 2M and 600k from one
    /// 20 s take (the 360p rung at half the rate), given as JSON. Each file
    /// decodes at its size and rate (FFmpeg and GStreamer), its video's bit
    /// rate within 10 % of its target, and each rung is the main output's
    /// picture at its size (no other layout, no scaler).
    @Test(.timeLimit(.minutes(5)))
    func threeRungLadderDecodesAtItsSizesAndRates() throws {
        let dir = Scratch(); defer { dir.remove() }
        // Moving detail (FFmpeg's testsrc2), so every rung has pictures to spend its bits on.
        let input = dir.path("moving.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t", "20", "-pix_fmt", "yuv420p",
                         "-c:v", "libx264", "-preset", "ultrafast", "-crf", "20", input])
        let config: [String: Any] = [
            "primary": input, "secondary": "testsrc:smpte:640x360@30", "size": "1920x1080", "out": "r1080.mp4",
            "bitrate": "4M", "preset": "ultrafast", "audio": "none", "gpu": "software",
            "alsoOut": [["out": "r720.mp4", "size": "1280x720", "bitrate": "2M"],
                        ["out": "r360.mp4", "size": "640x360", "bitrate": "600k", "rateDivisor": 2]],
        ]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: dir.path("ladder.json")))
        let started = Date()
        let r = try runCLI(["record", "--config", "ladder.json", "--json"], in: dir.url.path, timeout: 280)
        let seconds = Date().timeIntervalSince(started)
        try #require(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.frames == 600 && summary.canvas == "1920x1080" && summary.frameRate == "30")
        #expect(summary.outputs.map(\.canvas) == ["1280x720", "640x360"])
        #expect(summary.outputs.map(\.frameRate) == ["30", "15"])
        #expect(summary.outputs.map(\.bitrate) == [2_000_000, 600_000])
        #expect(summary.outputs.map(\.frames) == [600, 300])
        #expect(r.stderr.contains("output r360.mp4: 640x360 at 15 fps, h264 600000 b/s, preset ultrafast"), "\(r.stderr)")

        let rungs: [(file: String, width: Int, height: Int, frames: Int, rate: String, bits: Double)] = [
            ("r1080.mp4", 1920, 1080, 600, "30/1", 4e6), ("r720.mp4", 1280, 720, 600, "30/1", 2e6), ("r360.mp4", 640, 360, 300, "15/1", 6e5),
        ]
        var report: [String] = []
        for rung in rungs {
            let path = dir.path(rung.file)
            let p = try Self.probe(path)
            report.append("\(rung.file): \(p.width)x\(p.height), \(p.frames) frames at \(p.rate), \(String(format: "%.3f", p.duration)) s, "
                          + String(format: "%.0f b/s (%+.1f %%)", p.bitsPerSecond, (p.bitsPerSecond / rung.bits - 1) * 100))
            #expect(p.width == rung.width && p.height == rung.height, "\(rung.file): \(p.width)x\(p.height)")
            #expect(p.frames == rung.frames && p.rate == rung.rate, "\(rung.file): \(p.frames) frames at \(p.rate)")
            #expect(abs(p.duration - 20) < 0.001, "\(rung.file): \(p.duration) s")
            #expect(abs(p.bitsPerSecond / rung.bits - 1) <= 0.10, "\(rung.file): \(p.bitsPerSecond) b/s for \(rung.bits)")
            // GStreamer: the same size, rate and length, and it plays to the end.
            let gst = try run("/usr/bin/gst-discoverer-1.0", ["-v", path])
            #expect(gst.status == 0 && gst.stdout.contains("Width: \(rung.width)\n") && gst.stdout.contains("Height: \(rung.height)\n")
                    && gst.stdout.contains("Frame rate: \(rung.rate)\n") && gst.stdout.contains("Duration: 0:00:20.000000000"),
                    "\(rung.file): \(gst.stdout)")
            try SplitRecordingTests.decodesCleanly(path)
        }
        // Each rung is the 1080p picture at its size (a scaled copy compares within coding noise;
        // another layout, a missing inset or a stretched picture would not). The 360p rung's
        // frames are the even ones of the take's, at the take's times.
        for (file, size, rate) in [("r720.mp4", "1280:720", "30"), ("r360.mp4", "640:360", "15")] {
            let psnr = try run("/usr/bin/ffmpeg", ["-v", "info", "-t", "4", "-i", dir.path(file), "-t", "4", "-i", dir.path("r1080.mp4"),
                                                   "-lavfi", "[1]fps=\(rate),scale=\(size):flags=bicubic[m];[0][m]psnr", "-f", "null", "-"])
            let line = psnr.stderr.split(separator: "\n").first { $0.contains("PSNR y:") }.map(String.init) ?? ""
            let y = line.split(separator: " ").first { $0.hasPrefix("y:") }.flatMap { Double($0.dropFirst(2)) } ?? 0
            report.append("\(file) against r1080.mp4 scaled: PSNR y \(String(format: "%.1f", y)) dB")
            #expect(y > 28, "\(file) against the 1080p output scaled: \(line)")
        }
        let pts = try SplitRecordingTests.packets(dir.path("r360.mp4"), "v").map(\.pts).sorted()
        #expect(pts.count == 300 && pts.enumerated().allSatisfy { abs($0.element - Double($0.offset) * 2 / 30) < 1e-6 })
        report.append(String(format: "the take: %.1f s here (wall), %.2fx real time", seconds, summary.realtimeFactor))
        print("ladder: " + report.joined(separator: "; "))
    }

    /// The command line's form (`--also-size` ... after an `--also-out`), an
    /// HEVC rung beside an H.264 main output, and a rung at a third of the
    /// rate with a peak rate of its own.
    @Test(.timeLimit(.minutes(2)))
    func commandLineRungsWithTheirOwnCodecAndRate() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:640x480@30", "--secondary", "testsrc:smpte:320x240@30",
                            "--duration", "2", "--preset", "ultrafast", "--audio", "none", "--gpu", "software", "--out", "main.mp4",
                            "--also-out", "hevc.mkv", "--also-size", "320x240", "--also-codec", "hevc", "--also-bitrate", "300k",
                            "--also-preset", "superfast",
                            "--also-out", "third.ts", "--also-size", "160x120", "--also-rate-divisor", "3", "--also-maxrate", "200k",
                            "--also-bufsize", "100k", "--json"], in: dir.url.path)
        try #require(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.frames == 60)
        #expect(summary.outputs.map(\.frames) == [60, 20])
        #expect(summary.outputs.map(\.frameRate) == ["30", "10"])
        // The third rung's own rate control: the take's bit rate brought down to its own peak.
        #expect(r.stderr.contains("output third.ts: 160x120 at 10 fps, h264 200000 b/s (peak 200000), preset ultrafast"), "\(r.stderr)")
        let hevc = try run("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "stream=codec_name,width,height",
                                                "-of", "csv=p=0", dir.path("hevc.mkv")])
        #expect(hevc.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "hevc,320,240", "\(hevc.stdout)")
        let third = try Self.probe(dir.path("third.ts"))
        #expect(third.width == 160 && third.height == 120 && third.frames == 20 && third.rate == "10/1", "\(third)")
        for f in ["main.mp4", "hevc.mkv", "third.ts"] { try SplitRecordingTests.decodesCleanly(dir.path(f)) }
        // The third rung's frames are the take's frames 0, 3, 6, ... at the take's times.
        let pts = try SplitRecordingTests.packets(dir.path("third.ts"), "v").map(\.pts).sorted()
        #expect(pts.count == 20 && zip(pts, pts.dropFirst()).allSatisfy { abs($1 - $0 - 0.1) < 1e-4 }, "\(pts)")
    }

    /// The GPU's own H.264 encoder gives each rung its own stream (size,
    /// rate, a keyframe a second at its rate) from the same render targets.
    @Test(.timeLimit(.minutes(3)))
    func gpuEncoderEncodesEachRungAtItsSize() throws {
        let dir = Scratch(); defer { dir.remove() }
        let reconstructions = try ReconstructionFolder(in: dir)
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "2",
                            "--encoder", "gpu", "--gpu", "software", "--audio", "none", "--out", "main.mp4",
                            "--also-out", "small.mp4", "--also-size", "160x96", "--also-rate-divisor", "2", "--json"], in: dir.url.path,
                           environment: reconstructions.environment)
        try #require(r.status == 0, "\(r.stderr)")
        // Each rung decodes to its own encoder's reconstruction.
        try reconstructions.expectDecoded([dir.path("main.mp4")], width: 320, height: 240)
        try reconstructions.expectDecoded([dir.path("small.mp4")], width: 160, height: 96)
        let main = try Self.probe(dir.path("main.mp4")), small = try Self.probe(dir.path("small.mp4"))
        #expect(main.width == 320 && main.height == 240 && main.frames == 60 && main.rate == "30/1", "\(main)")
        #expect(small.width == 160 && small.height == 96 && small.frames == 30 && small.rate == "15/1", "\(small)")
        let keys = try SplitRecordingTests.packets(dir.path("small.mp4"), "v").filter(\.key).map(\.pts).sorted()
        #expect(keys.count == 2 && abs(keys[0]) < 1e-9 && abs(keys[1] - 1) < 1e-6, "keyframes at \(keys)")
        for f in ["main.mp4", "small.mp4"] { try SplitRecordingTests.decodesCleanly(dir.path(f)) }
    }

    /// A lost GPU context is rebuilt with each output's target at its own
    /// canvas: the rung keeps its size and every frame it takes, at the take's times.
    @Test func rebuiltContextKeepsEachRungsCanvas() throws {
        let dir = Scratch(); defer { dir.remove() }
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("main.mp4"), duration: 2,
                                    extra: ["--secondary-timeout", "120", "--also-out", dir.path("rung.mp4"), "--also-size", "160x120",
                                            "--also-rate-divisor", "2"])
        let summary = try RecordingSession(configuration: config,
                                           hooks: SessionHooks(storage: plentyOfSpace, simulateContextLossAtFrames: [5, 12, 13])).run()
        #expect(summary.gpuRebuilds == 3 && summary.frames == 60 && summary.outputs.map(\.frames) == [30])
        let main = try decodeAll(dir.path("main.mp4")).frames, rung = try decodeAll(dir.path("rung.mp4")).frames
        #expect(main.map(\.counter) == (0..<60).map { Optional($0) })
        #expect(rung.count == 30 && rung.allSatisfy { $0.frame.width == 160 && $0.frame.height == 120 })
        #expect(zip(rung, stride(from: 0, to: 60, by: 2)).allSatisfy { r, k in r.pts == main[k].pts })
    }

    /// Bad values: exit 2, one line naming the option or the JSON field, nothing written.
    @Test(arguments: [
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-size", "641x360"], "--also-size '641x360': width and height must be even"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-size", "0x360"], "--also-size '0x360': width and height must be positive"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-size", "big"], "--also-size 'big': expected WxH"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-rate-divisor", "0"], "--also-rate-divisor '0': must be a whole number 1 to 120"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-rate-divisor", "1.5"], "--also-rate-divisor '1.5': must be a whole number 1 to 120"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-bitrate", "-5"], "--also-bitrate '-5': must be positive"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-codec", "vp9"], "--also-codec 'vp9': expected h264 or hevc"),
        (["--out", "a.mp4", "--also-size", "320x180"], "--also-size '320x180': comes after the --also-out it applies to"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-preset", "turbo"], "alsoOut[0].preset 'turbo': not a libx264 preset"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-bufsize", "1M"], "alsoOut[0].bufsize '1000000': needs alsoOut[0].maxrate"),
        (["--out", "a.mp4", "--encoder", "gpu", "--gpu", "software", "--also-out", "b.mp4", "--also-codec", "hevc"],
         "alsoOut[0].codec 'hevc': --encoder gpu encodes H.264 only"),
        // A margin in pixels the main canvas has room for and the rung has not.
        (["--out", "a.mp4", "--pip-margin", "60px", "--also-out", "b.mp4", "--also-size", "160x90"],
         "alsoOut[0].size '160x90': --pip-margin '60px' leaves no room for the inset on a 160x90 canvas"),
    ])
    func badValuesExitTwo(args: [String], named: String) throws {
        try expectRefusedWritingNothing(args, naming: named)
    }

    /// The same refusals from a `--config` file: the key's path in the one line.
    @Test(arguments: [
        (#"{"size": "641x360"}"#, "alsoOut[0].size: '641x360': width and height must be even"),
        (#"{"size": {"width": 640}}"#, "alsoOut[0].size: needs width and height"),
        (#"{"rateDivisor": 0}"#, "alsoOut[0].rateDivisor: expected a whole number from 1 to 120"),
        (#"{"rateDivisor": 2.5}"#, "alsoOut[0].rateDivisor: expected a whole number from 1 to 120"),
        (#"{"bitrate": "lots"}"#, "alsoOut[0].bitrate: 'lots': expected bits per second"),
        (#"{"bitrate": true}"#, "alsoOut[0].bitrate: expected bits per second as a number"),
        (#"{"codec": "av1"}"#, "alsoOut[0].codec: 'av1': expected h264 or hevc"),
        (#"{"preset": ""}"#, "alsoOut[0].preset: must be a preset name"),
        (#"{"preset": "turbo"}"#, "alsoOut[0].preset 'turbo': not a libx264 preset"),
        (#"{"sise": "640x360"}"#, "alsoOut[0].sise: unknown key (expected bitrate, bufsize, codec, format, hlsListSize, layout"),
    ])
    func badJSONExitsTwo(entry: String, named: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let fields = String(entry.dropFirst().dropLast())
        let json = #"{"primary": "testsrc:counter:320x240@30", "duration": 1, "out": "a.mp4", "alsoOut": [{"out": "b.mp4", "#
            + fields + "}]}"
        try Data(json.utf8).write(to: URL(fileURLWithPath: dir.path("take.json")))
        let r = try runCLI(["record", "--config", "take.json"], in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(named), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == ["take.json"])
    }

    /// The JSON form both ways, the option round trip, and the rules of the
    /// fields: what an output leaves out is the take's; rate control is its
    /// own whole once it sets any of bitrate, maxrate and bufsize; the rate
    /// divides in lowest terms.
    @Test func encodingFieldsAndTheirRules() throws {
        let json = try JSONValue(parsing: Data(#"{"out": "r.mkv", "size": "640x360", "codec": "hevc", "bitrate": "800k", "maxrate": 1000000, "bufsize": "2M", "preset": "faster", "rateDivisor": 2, "segmentTime": 4}"#.utf8), source: "test")
        let spec = try OptionParser.decodeOutput(json, field: "output")
        #expect(spec.segmentTime == 4 && spec.splits)
        #expect(spec.encoding == OutputEncoding(size: PixelSize(width: 640, height: 360), codec: .hevc, bitrate: 800_000, maxrate: 1_000_000,
                                                bufsize: 2_000_000, preset: "faster", rateDivisor: 2))
        var take = try TakeConfiguration.parse(arguments: ["--primary", "testsrc:counter", "--out", "a.mp4", "--bitrate", "4M", "--maxrate", "5M"])
        take.extraOutputs = [spec, OutputSpec(out: "plain.mp4"), OutputSpec(out: "rate.mp4", encoding: OutputEncoding(bitrate: 1_000_000))]
        try take.validate()
        // The JSON form of the take keeps every field (a server's saved configuration, GET's view).
        let encoded = OptionParser.encode(OptionValues(take: take))
        let back = try OptionParser.decode(encoded.data(), source: "test")
        #expect(back.extraOutputs == take.extraOutputs)
        // A rung's rate control is its own; one that sets none has the take's.
        #expect(take.resolvedEncoding(OutputEncoding()).maxrate == 5_000_000 && take.resolvedEncoding(OutputEncoding()).bitrate == 4_000_000)
        let own = take.resolvedEncoding(OutputEncoding(bitrate: 1_000_000))
        #expect(own.bitrate == 1_000_000 && own.maxrate == nil && own.bufsize == nil && own.preset == "veryfast" && own.codec == .h264)
        take.qp = 20; take.maxrate = nil
        #expect(take.resolvedEncoding(OutputEncoding()).qp == 20 && take.resolvedEncoding(OutputEncoding(bitrate: 1_000_000)).qp == nil)
        #expect(take.resolvedEncoding(OutputEncoding(size: PixelSize(width: 640, height: 360))).qp == 20)
        // Rates: the take's over the divisor, in lowest terms.
        #expect(OutputEncoding(rateDivisor: 2).frameRate(take: FrameRate(30)) == FrameRate(15))
        #expect(OutputEncoding(rateDivisor: 2).frameRate(take: FrameRate(30000, 1001)) == FrameRate(15000, 1001))
        #expect(OutputEncoding(rateDivisor: 4).frameRate(take: FrameRate(25)) == FrameRate(25, 4))
        #expect(OutputEncoding().frameRate(take: FrameRate(60)) == FrameRate(60))
        // The command line sets the last --also-out's fields.
        let cli = try TakeConfiguration.parse(arguments: ["--primary", "testsrc:counter", "--out", "a.mp4", "--also-out", "b.mp4",
                                                          "--also-size", "1280x720", "--also-out", "c.mp4", "--also-bitrate", "600k",
                                                          "--also-rate-divisor", "2", "--also-preset", "faster"])
        #expect(cli.extraOutputs.map(\.encoding) == [OutputEncoding(size: .hd720),
                                                      OutputEncoding(bitrate: 600_000, preset: "faster", rateDivisor: 2)])
        // A rung's encoder settings: its size, its rate, a keyframe a second at its rate.
        let r = OutputRendition(cli.extraOutputs[1], take: VideoEncoderSettings(size: .hd1080, frameRate: FrameRate(30)), config: cli)
        #expect(r.canvas == .hd1080 && r.rateDivisor == 2 && r.video.frameRate == FrameRate(15) && r.video.gop == 15)
        #expect(r.video.bitrate == 600_000 && r.video.preset == "faster" && r.takes(0) && !r.takes(1) && r.takes(2))
    }
}
