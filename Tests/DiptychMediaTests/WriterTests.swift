import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

@Suite struct WriterTests {
    init() { _ = quietFFmpeg }

    func writeCounter(to path: String, frames n: Int, size: PixelSize = PixelSize(width: 320, height: 240),
                      rate: FrameRate = FrameRate(30), codec: VideoCodec = .h264, container: ContainerFormat? = nil,
                      audio: AudioTrack? = nil) throws -> MediaWriter {
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: path, container: container,
                                video: VideoEncoderSettings(size: size, frameRate: rate, codec: codec), audio: audio)
        for _ in 0..<n { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        return w
    }

    @Test func roundTripCounterMP4() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("rt.mp4")
        let rate = FrameRate(30)
        let w = try writeCounter(to: path, frames: 60, rate: rate)
        #expect(w.encoderName == "libx264")
        let probe = ProbedFile(path: path)
        #expect(probe.error == nil)
        #expect(probe.streams.map(\.type) == ["video"])
        #expect(probe.frames.count == 60)
        for (k, f) in probe.frames.enumerated() {
            #expect(f.pts == rate.time(ofFrame: Int64(k)), "frame \(k) pts \(f.pts)")
        }
        #expect(probe.counters == (0..<60).map { Optional($0) })
        #expect(probe.durationSeconds == 2.0)
        #expect(probe.videoStreamDuration == 2.0)
        #expect(probe.videoStart == 0)
        // A keyframe every second, one fragment per second.
        #expect(probe.keyframePackets == [0, 30])
        // The free box after moov is the room a clean finish took the mehd from.
        #expect(try topLevelBoxes(path) == ["ftyp", "moov", "free", "moof", "mdat", "moof", "mdat", "mfra"])
    }

    /// With keyframes further apart than a second, fragments are still cut at one second.
    @Test func fragmentsAreAtMostOneSecond() throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(30)
        let path = dir.path("gop.mp4")
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, gop: 90))
        for _ in 0..<90 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        #expect(try topLevelBoxes(path).filter { $0 == "moof" }.count >= 3)
        let probe = ProbedFile(path: path)
        #expect(probe.keyframePackets == [0])
        #expect(probe.counters == (0..<90).map { Optional($0) })
    }

    @Test func badPresetFailsClearly() throws {
        let dir = TempDir(); defer { dir.remove() }
        let e = expectMediaError { _ = try MediaWriter(url: dir.path("p.mp4"), video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30), preset: "warp9")) }
        #expect(e?.description.hasPrefix("encoder libx264 failed: cannot open (320x240 @ 30 fps, preset warp9)") == true, "\(String(describing: e))")
        // A valid tune is accepted.
        let ok = try MediaWriter(url: dir.path("t.mp4"), video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30), tune: "zerolatency"))
        try ok.finish()
    }

    @Test func roundTripMPEGTS() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("rt.ts")
        let rate = FrameRate(25)
        let w = try writeCounter(to: path, frames: 50, rate: rate)
        #expect(w.container == .mpegts)
        let probe = ProbedFile(path: path)
        #expect(probe.error == nil)
        #expect(probe.streams.map(\.codec) == ["h264"])
        #expect(probe.frames.count == 50)
        #expect(probe.frames.enumerated().allSatisfy { $0.element.pts == rate.time(ofFrame: Int64($0.offset)) })
        #expect(probe.counters == (0..<50).map { Optional($0) })
    }

    @Test func roundTripHEVC() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("hevc.mp4")
        let rate = FrameRate(30)
        let w = try writeCounter(to: path, frames: 30, rate: rate, codec: .hevc)
        #expect(w.encoderName == "libx265")
        let probe = ProbedFile(path: path)
        #expect(probe.streams.map(\.codec) == ["hevc"])
        #expect(probe.frames.count == 30)
        #expect(probe.counters == (0..<30).map { Optional($0) })
        #expect(probe.durationSeconds == 1.0)
    }

    /// 29.97 fps: timestamps stay exact (1001/30000 per frame).
    @Test func ntscRateIsExact() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("ntsc.mp4")
        let rate = FrameRate(30000, 1001)
        _ = try writeCounter(to: path, frames: 45, rate: rate)
        let probe = ProbedFile(path: path)
        #expect(probe.frames.count == 45)
        #expect(probe.frames.enumerated().allSatisfy { $0.element.pts == rate.time(ofFrame: Int64($0.offset)) })
        #expect(abs((probe.videoStreamDuration ?? 0) - 45 * 1001 / 30000.0) < 1e-9)
    }

    /// Odd sizes decode fine (see FileSourceTests) but 4:2:0 encoders need even ones: a clear error.
    @Test func oddOutputSizeIsRefusedClearly() throws {
        let dir = TempDir(); defer { dir.remove() }
        let e = expectMediaError { _ = try writeCounter(to: dir.path("odd.mp4"), frames: 10, size: PixelSize(width: 321, height: 241)) }
        #expect(e?.description == "encoder libx264 failed: size 321x241: 4:2:0 video needs an even width and height (use 320x240 or 322x242)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("odd.mp4")))
    }

    @Test func i420AndRGBAFramesAreAccepted() throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize(width: 160, height: 128), rate = FrameRate(30)
        let path = dir.path("mixed.mp4")
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate))
        let i420 = try TestPatternSource(name: "counter", size: size, rate: rate, format: .i420)
        for _ in 0..<10 { try w.write(try #require(try i420.nextFrame())) }
        var rgba = VideoFrame.allocate(width: 160, height: 128, format: .rgba)
        rgba.pts = rate.time(ofFrame: 10)
        try w.write(rgba)
        try w.finish()
        #expect(ProbedFile(path: path).frames.count == 11)
    }

    @Test func wrongFrameSizeIsRejected() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try MediaWriter(url: dir.path("x.mp4"), video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30)))
        let e = expectMediaError { try w.write(VideoFrame.allocate(width: 640, height: 480, format: .nv12)) }
        #expect(e == .invalidFrame(reason: "frame is 640x480, encoder expects 320x240"))
        // The writer is still usable after a rejected frame.
        try w.write(VideoFrame.allocate(width: 320, height: 240, format: .nv12))
        try w.finish()
    }

    @Test func dmaBufNeedsVAAPI() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try MediaWriter(url: dir.path("x.mp4"), video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30)))
        #expect(!w.takesDmaBuf && w.encoderTuning == nil)
        let released = ReleaseFlag()
        let image = DmaBufFrame(width: 320, height: 240, fourcc: DmaBufFrame.nv12, modifier: 0,
                                planes: [.init(fd: -1, offset: 0, stride: 320), .init(fd: -1, offset: 320 * 240, stride: 320)])
        let e = expectMediaError { try w.write(image, pts: .zero, release: { released.set() }) }
        #expect(e?.description.contains("VA-API") == true)
        #expect(released.value)
        // A refused frame leaves the writer usable.
        try w.write(VideoFrame.allocate(width: 320, height: 240, format: .nv12))
        try w.finish()
        #expect(ProbedFile(path: dir.path("x.mp4")).frames.count == 1)
    }

    @Test func unknownContainerIsRefused() {
        let e = expectMediaError { _ = try MediaWriter(url: "/tmp/out.avi", video: VideoEncoderSettings(size: .hd720, frameRate: FrameRate(30))) }
        #expect(e?.description.hasPrefix("/tmp/out.avi: ") == true)
    }

    @Test func unwritableDirectory() {
        let e = expectMediaError { _ = try MediaWriter(url: "/nonexistent/dir/out.mp4", video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30))) }
        #expect(e?.description.hasPrefix("/nonexistent/dir/out.mp4: write failed") == true)
    }

    /// /dev/full fails every write with ENOSPC.
    @Test func storageFullIsDistinct() throws {
        let size = PixelSize(width: 320, height: 240), rate = FrameRate(30)
        do {
            let w = try MediaWriter(url: "/dev/full", container: .mp4, video: VideoEncoderSettings(size: size, frameRate: rate))
            let src = try TestPatternSource(name: "counter", size: size, rate: rate)
            let e = expectMediaError { for _ in 0..<120 { try w.write(try #require(try src.nextFrame())) } }
            #expect(e == .storageFull(path: "/dev/full"))
            try w.finish()  // closes without throwing again
        } catch {
            #expect(error == .storageFull(path: "/dev/full"))
        }
        #expect(MediaError.storageFull(path: "/data/take.mp4").description == "/data/take.mp4: storage full (no space left on device)")
    }

    // MARK: audio

    func makeAV(_ dir: TempDir, audioCodec: String, ext: String) throws -> String {
        let p = dir.path("av.\(ext)")
        try makeAVFile(p, audioCodec: audioCodec)
        return p
    }

    func transcode(_ input: String, to output: String, audio: Bool) throws -> MediaWriter {
        let src = try FileSource(url: input)
        let w = try MediaWriter(url: output, video: VideoEncoderSettings(size: src.info.size, frameRate: src.info.frameRate),
                                audio: audio ? src.audioTrack : nil)
        while let f = try src.nextFrame() { try w.write(f) }
        try w.finish()
        return w
    }

    @Test func audioPassthroughKeepsAAC() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = try makeAV(dir, audioCodec: "aac", ext: "mp4")
        let src = try FileSource(url: input)
        #expect(src.info.hasAudio)
        #expect(src.audioTrack?.codecName == "aac")
        let out = dir.path("out.mp4")
        let w = try transcode(input, to: out, audio: true)
        #expect(w.audioDescription == "copy aac")
        #expect(w.audioPacketsWritten > 80)  // ~2 s of 1024-sample AAC frames at 48 kHz is 94
        let probe = ProbedFile(path: out)
        #expect(probe.streams.map(\.type) == ["video", "audio"])
        #expect(probe.streams.last?.codec == "aac")
        #expect(probe.frames.count == 60)
        #expect(probe.videoStreamDuration == 2.0)
        #expect(probe.durationSeconds == 2.0)
        #expect(probe.videoStart == 0 && probe.audioStart == 0)
    }

    @Test func audioNoneWritesNoAudioStream() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = try makeAV(dir, audioCodec: "aac", ext: "mp4")
        let out = dir.path("mute.mp4")
        let w = try transcode(input, to: out, audio: false)
        #expect(w.audioDescription == "none")
        #expect(ProbedFile(path: out).streams.map(\.type) == ["video"])
    }

    @Test func pcmIsReencodedToAAC() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = try makeAV(dir, audioCodec: "pcm_s16le", ext: "mov")
        let out = dir.path("out.mp4")
        let w = try transcode(input, to: out, audio: true)
        #expect(w.audioDescription == "aac (re-encoded from pcm_s16le)")
        let probe = ProbedFile(path: out)
        #expect(probe.streams.map(\.codec) == ["h264", "aac"])
        #expect(probe.frames.count == 60)
    }

    @Test func audioIntoMPEGTS() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = try makeAV(dir, audioCodec: "aac", ext: "mp4")
        let out = dir.path("out.ts")
        _ = try transcode(input, to: out, audio: true)
        let probe = ProbedFile(path: out)
        #expect(probe.streams.map(\.codec) == ["h264", "aac"])
        #expect(probe.frames.count == 60)
    }

    /// The counter survives real compression at the smallest and a mid size.
    @Test(arguments: [(64, 64, 100_000), (640, 360, 500_000)])
    func counterSurvivesLowBitrate(width: Int, height: Int, bitrate: Int) throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize(width: width, height: height), rate = FrameRate(30)
        let path = dir.path("low.mp4")
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, bitrate: bitrate))
        for _ in 0..<60 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        #expect(ProbedFile(path: path).counters == (0..<60).map { Optional($0) })
    }

    /// A take that starts mid-stream (first pts 10 s) starts at zero in the file.
    @Test func outputStartsAtZero() throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(30)
        let path = dir.path("late.mp4")
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate))
        for _ in 0..<30 {
            var f = try #require(try src.nextFrame())
            f.pts = f.pts + MediaTime(value: 10, timescale: 1)
            try w.write(f)
        }
        try w.finish()
        #expect(w.timestampOrigin == MediaTime(value: 10, timescale: 1))
        let probe = ProbedFile(path: path)
        #expect(probe.videoStart == 0)
        #expect(probe.videoPTS == (0..<30).map { rate.time(ofFrame: Int64($0)) })
        #expect(probe.durationSeconds == 1.0)
    }

    /// Variable frame rate in, the same timestamps out.
    @Test func variableFrameRateIsPreserved() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = dir.path("vfr.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=30", "-frames:v", "20",
                                        "-vf", "setpts='if(lt(N,10),N,10+3*(N-10))'", "-fps_mode", "passthrough",
                                        "-video_track_timescale", "90000", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-bf", "0", input]) == 0)
        let src = try FileSource(url: input)
        let inputPTS = try readAll(src).map(\.pts)
        let again = try FileSource(url: input)
        let out = dir.path("out.mp4")
        let w = try MediaWriter(url: out, video: VideoEncoderSettings(size: again.info.size, frameRate: again.info.frameRate))
        while let f = try again.nextFrame() { try w.write(f) }
        try w.finish()
        let probe = ProbedFile(path: out)
        #expect(probe.videoPTS == inputPTS)
    }

    /// Network outputs go through the same avio path: with no server they fail
    /// quickly with an error naming the URL (never hang).
    @Test(.timeLimit(.minutes(3)), arguments: ["rtmp://127.0.0.1:9/live/test", "srt://127.0.0.1:9"])
    func networkOutputWithoutServerFailsClearly(url: String) throws {
        let start = Date()
        let e = expectMediaError { _ = try MediaWriter(url: url, video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30)), networkTimeout: 2) }
        #expect(e?.description.hasPrefix(url) == true, "\(String(describing: e))")
        #expect(Date().timeIntervalSince(start) < 15)
    }
}

final class ReleaseFlag: @unchecked Sendable {
    private var flag = false
    func set() { flag = true }
    var value: Bool { flag }
}
