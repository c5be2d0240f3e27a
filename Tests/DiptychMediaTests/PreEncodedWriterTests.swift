import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// Pre-encoded H.264 (what the GPU encoder hands over) through the writers'
/// packet path: Annex B access units with SPS and PPS before each IDR
/// picture, muxed into fragmented MP4, MPEG-TS and HLS, then read back by
/// FFmpeg and GStreamer.
@Suite struct PreEncodedWriterTests {
    init() { _ = quietFFmpeg }

    static let size = PixelSize(width: 320, height: 240)
    static let rate = FrameRate(30)

    /// `count` counter frames encoded by libx264 (through FFmpeg's API) into
    /// Annex B access units, parameter sets in band before each keyframe, no
    /// B-frames: the shape of the GPU encoder's output.
    static func packets(_ count: Int, gop: Int = 30) throws -> [EncodedVideoPacket] {
        let source = try TestPatternSource(name: "counter", size: size, rate: rate)
        let encoder = try PacketEncoder(settings: VideoEncoderSettings(size: size, frameRate: rate, encoder: .x264, preset: "ultrafast", gop: gop))
        var out: [EncodedVideoPacket] = []
        for _ in 0..<count {
            guard let f = try source.nextFrame() else { break }
            out += try encoder.encode(f)
        }
        out += try encoder.finish()
        return out
    }

    /// A raw H.264 stream written by the `ffmpeg` tool, cut into access units.
    static func ffmpegAccessUnits(_ dir: TempDir, frames: Int, gop: Int, aud: Bool) throws -> [(data: [UInt8], keyframe: Bool)] {
        let raw = dir.path(aud ? "aud.h264" : "plain.h264")
        let status = try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "\(frames)",
                                        "-c:v", "libx264", "-preset", "ultrafast", "-g", "\(gop)", "-bf", "0", "-pix_fmt", "yuv420p",
                                        "-x264-params", aud ? "aud=1" : "aud=0", "-bsf:v", "h264_mp4toannexb", "-f", "h264", raw])
        try #require(status == 0)
        return H264AnnexB.accessUnits(in: [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw))))
    }

    @Test(arguments: [true, false])
    func splitsAnAnnexBStreamIntoAccessUnits(aud: Bool) throws {
        let dir = TempDir(); defer { dir.remove() }
        let units = try PreEncodedWriterTests.ffmpegAccessUnits(dir, frames: 45, gop: 15, aud: aud)
        #expect(units.count == 45)
        #expect(units.enumerated().filter(\.element.keyframe).map(\.offset) == [0, 15, 30])
        // Each keyframe carries its SPS and PPS; the stream's parameter sets are found in the first.
        let ps = try #require(H264AnnexB.parameterSets(in: units[0].data))
        #expect(H264AnnexB.nalUnits(in: ps).map { H264AnnexB.type(ps, $0) } == [7, 8])
        #expect(H264AnnexB.parameterSets(in: units[1].data) == nil)
    }

    /// The writer's output for `packets`, read back: every frame, its counter, its time, the keyframes.
    /// Matroska keeps times in milliseconds: there a frame's time is within half of one.
    static func check(_ path: String, frames: Int, keyframes: [Int], sourceLocation: SourceLocation = #_sourceLocation) {
        let within = path.lowercased().hasSuffix(".mkv") ? 0.0005 : 1e-4
        let probe = ProbedFile(path: path)
        #expect(probe.error == nil, sourceLocation: sourceLocation)
        #expect(probe.streams.map(\.codec) == ["h264"], sourceLocation: sourceLocation)
        #expect(probe.frames.count == frames, sourceLocation: sourceLocation)
        #expect(probe.counters == (0..<frames).map { Optional($0) }, sourceLocation: sourceLocation)
        #expect(probe.videoPTS.enumerated().allSatisfy { $0.element.seconds.isApprox(rate.time(ofFrame: Int64($0.offset)).seconds, within: within) },
                "\(probe.videoPTS.prefix(5))", sourceLocation: sourceLocation)
        #expect(probe.keyframePackets == keyframes, sourceLocation: sourceLocation)
    }

    /// Fragmented MP4 and MPEG-TS, with the parameter sets given at open or
    /// taken from the first keyframe: every picture, its time, the keyframes.
    @Test(arguments: [(".mp4", true), (".mp4", false), (".ts", true), (".ts", false), (".mkv", true), (".mkv", false)])
    func writesPackets(ext: String, parameterSetsAtOpen: Bool) throws {
        let dir = TempDir(); defer { dir.remove() }
        let packets = try PreEncodedWriterTests.packets(90)
        #expect(packets.count == 90)
        let out = dir.path("pre" + ext)
        let ps = parameterSetsAtOpen ? H264AnnexB.parameterSets(in: packets[0].data) : nil
        let writer = try MediaWriter(url: out, preEncoded: PreEncodedVideo(size: Self.size, frameRate: Self.rate, parameterSets: ps))
        #expect(writer.isPreEncoded && writer.encoderName == "gpu-h264")
        // The GPU encoder's packets: pts only, dts = pts, no duration (one frame).
        for p in packets { try writer.write(EncodedVideoPacket(data: p.data, pts: p.pts, keyframe: p.isKeyframe)) }
        try writer.finish()
        #expect(writer.framesWritten == 90)
        Self.check(out, frames: 90, keyframes: [0, 30, 60])
        if ext == ".mkv" {
            let gst = try runTool("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "matroskademux", "!", "decodebin", "!", "fakesink"])
            #expect(gst.status == 0, "\(gst.output)")
        }
        guard ext == ".mp4" else { return }
        // The length is written in at the end, as for encoded frames, and GStreamer decodes it.
        let header = try MovieHeader(path: out)
        #expect(header.tracks.count == 1 && header.tracks[0].mdhd == UInt64(3 * header.tracks[0].mdhdTimescale))
        let gst = try runTool("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "decodebin", "!", "fakesink"])
        #expect(gst.status == 0, "\(gst.output)")
        #expect(try gstDiscover(out).duration.map { abs($0 - 3) < 0.05 } == true)
    }

    /// A real H.264 stream from the `ffmpeg` tool, split at its access units,
    /// written into fragmented MP4, MPEG-TS and HLS at 30 fps.
    @Test(arguments: [".mp4", ".ts", ".m3u8"])
    func writesAnFFmpegStream(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let units = try PreEncodedWriterTests.ffmpegAccessUnits(dir, frames: 60, gop: 20, aud: true)
        try #require(units.count == 60)
        let out = dir.path("stream" + ext)
        let writer = try MediaWriter(url: out, preEncoded: PreEncodedVideo(size: Self.size, frameRate: Self.rate))
        for (k, u) in units.enumerated() {
            try writer.write(EncodedVideoPacket(data: u.data, pts: Self.rate.time(ofFrame: Int64(k)), keyframe: u.keyframe))
        }
        try writer.finish()
        let probe = ProbedFile(path: out)
        #expect(probe.error == nil)
        #expect(probe.frames.count == 60)
        #expect(probe.videoPTS.enumerated().allSatisfy { $0.element.seconds.isApprox(Self.rate.time(ofFrame: Int64($0.offset)).seconds) })
        #expect(probe.keyframePackets == [0, 20, 40])
        if ext == ".m3u8" {
            let playlist = try String(contentsOfFile: out, encoding: .utf8)
            #expect(playlist.contains("#EXT-X-ENDLIST"), "\(playlist)")
            #expect(playlist.split(separator: "\n").filter { $0.hasSuffix(".m4s") }.count >= 1, "\(playlist)")
        }
    }

    /// The source's audio alongside pre-encoded video: copied as it is read,
    /// both streams starting at zero and ending together.
    @Test(arguments: [".mp4", ".ts"])
    func audioAlongside(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = dir.path("av.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                        "-t", "2", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-c:a", "aac", input]) == 0)
        let src = try FileSource(url: input)
        let out = dir.path("av" + ext)
        let encoder = try PacketEncoder(settings: VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .x264, preset: "ultrafast"))
        let writer = try MediaWriter(url: out, preEncoded: PreEncodedVideo(size: Self.size, frameRate: Self.rate), audio: src.audioTrack)
        while let f = try src.nextFrame() { for p in try encoder.encode(f) { try writer.write(p) } }
        for p in try encoder.finish() { try writer.write(p) }
        try writer.finish()
        #expect(writer.audioDescription.contains("aac") && writer.audioPacketsWritten > 80, "\(writer.audioDescription)")
        let probe = ProbedFile(path: out)
        #expect(probe.streams.map(\.codec) == ["h264", "aac"])
        #expect(probe.frames.count == 60)
        #expect(probe.videoStart.map { abs($0 - (probe.audioStart ?? -1)) < 0.05 } == true, "\(String(describing: probe.videoStart)) \(String(describing: probe.audioStart))")
        if ext == ".mp4" { #expect(probe.durationSeconds.map { abs($0 - 2) < 0.03 } == true) }
    }

    /// Packets before the first keyframe are dropped (a stream starts at one);
    /// a frame into a pre-encoded writer, or a packet into an encoding one, is refused.
    @Test func startsAtAKeyframeAndRefusesTheOtherInput() throws {
        let dir = TempDir(); defer { dir.remove() }
        let packets = try PreEncodedWriterTests.packets(60)
        let out = dir.path("late.mp4")
        let writer = try MediaWriter(url: out, preEncoded: PreEncodedVideo(size: Self.size, frameRate: Self.rate))
        for p in packets[10...] { try writer.write(p) }
        #expect(writer.packetsBeforeKeyframe == 20)
        let frame = VideoFrame.allocate(width: 320, height: 240, format: .nv12)
        let refused = expectMediaError { try writer.write(frame) }
        #expect(refused.map { "\($0)" }?.contains("takes encoded pictures (gpu-h264), not frames") == true)
        try writer.finish()
        let probe = ProbedFile(path: out)
        #expect(probe.frames.count == 30 && probe.counters.first == 30)
        #expect(probe.videoPTS.first == .zero)   // the output's zero is its first picture

        let encoding = try MediaWriter(url: dir.path("x.mp4"), video: VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .x264, preset: "ultrafast"))
        let e = expectMediaError { try encoding.write(packets[0]) }
        #expect(e.map { "\($0)" }?.contains("libx264 encodes frames itself") == true)
        try encoding.finish()
        // Parameter sets that are none are refused at open.
        let bad = expectMediaError { _ = try MediaWriter(url: dir.path("bad.ts"), preEncoded: PreEncodedVideo(size: Self.size, frameRate: Self.rate, parameterSets: [0, 0, 1, 9, 0xF0])) }
        #expect(bad.map { "\($0)" }?.contains("hold no SPS and PPS") == true)
    }

    /// A pre-encoded take killed with SIGKILL mid-way keeps every fragment
    /// (MP4) or segment (HLS: each listed once complete) completed before.
    @Test(.timeLimit(.minutes(5)), arguments: [".mp4", ".m3u8"])
    func killedPreEncodedTakeKeepsCompletedFragments(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let out = dir.path("killed" + ext)
        let (written, signalled) = try killedWriterFixture(writing: out, extra: ["100000", "encoded"], after: 135)
        #expect(signalled)
        try #require(written >= 135, "fixture stopped after \(written) pictures")
        if ext == ".m3u8" {
            // Segments of about two seconds, cut at the keyframes each second: every complete one is listed.
            // The playlist of a take still going has no end (a reader waits for more): a copy with one is read.
            let playlist = try String(contentsOfFile: out, encoding: .utf8)
            #expect(!playlist.contains("#EXT-X-ENDLIST"))
            let ended = dir.path("ended.m3u8")
            try (playlist + "#EXT-X-ENDLIST\n").write(toFile: ended, atomically: true, encoding: .utf8)
            let probe = ProbedFile(path: ended)
            #expect(probe.error == nil)
            let decoded = probe.frames.count
            #expect(decoded >= 60 && decoded % 30 == 0 && decoded <= written, "decoded \(decoded) of \(written) written")
            #expect(probe.counters == (0..<decoded).map { Optional($0) })
            return
        }
        let probe = ProbedFile(path: out)
        #expect(probe.error == nil)
        let decoded = probe.frames.count
        // Pictures come encoded (no encoder delay here): all whole seconds written.
        #expect(decoded >= written / 30 * 30 - 30 && decoded % 30 == 0, "decoded \(decoded) of \(written) written")
        #expect(probe.counters == (0..<decoded).map { Optional($0) })
        let gst = try runTool("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "decodebin", "!", "fakesink"])
        #expect(gst.status == 0, "\(gst.output)")
    }
}

extension Double {
    func isApprox(_ other: Double, within: Double = 1e-4) -> Bool { abs(self - other) <= within }
}
