import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// An NVENC session that fails mid-take (`RecordingNVENC` with libx264 as
/// its engine, failing from its `failAfter`th frame): the output goes on
/// with libx264 at the frame that failed, each container as it can carry
/// the change, and every frame decodes in order (docs/ARCHITECTURE.md,
/// "Encoder paths").
@Suite struct NVENCFallbackTests {
    init() { _ = quietFFmpeg }
    static let size = PixelSize(width: 320, height: 240), rate = FrameRate(30)

    func write(_ path: String, container: ContainerFormat? = nil, codec: VideoCodec = .h264, frames n: Int = 30, failAfter: Int,
               segmentTime: Double? = nil) throws -> MediaWriter {
        let src = try TestPatternSource(name: "counter", size: Self.size, rate: Self.rate)
        let settings = VideoEncoderSettings(size: Self.size, frameRate: Self.rate, codec: codec, encoder: .nvenc, preset: "veryfast")
        let w = try MediaWriter(url: path, container: container, video: settings,
                                nvenc: RecordingNVENC(encodes: true, failAfter: failAfter), segmentTime: segmentTime)
        #expect(w.encoderName == NVENCFacts.encoderName(codec))
        for _ in 0..<n { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        return w
    }

    /// FFmpeg decodes `path` with every error check on, and GStreamer plays it.
    func decodesStrictly(_ path: String) throws -> Bool {
        let gst = try runTool("/usr/bin/gst-launch-1.0", ["-q", "playbin", "uri=file://\(path)", "video-sink=fakesink", "audio-sink=fakesink"])
        #expect(gst.status == 0, "gst-launch \(path): \(gst.output)")
        return try FFmpegCLI.run(["-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", path, "-f", "null", "-"]) == 0
    }

    func expectFallback(_ w: MediaWriter, at frame: Int, continuedIn: String?, from: String = "h264_nvenc", to: String = "libx264",
                        frames: Int = 30) {
        let f = w.encoderFallback
        #expect(f?.from == from && f?.to == to, "\(String(describing: f))")
        #expect(f.map { abs($0.at - Double(frame) / 30) < 1e-9 } == true, "\(String(describing: f))")
        #expect(f?.reason == "Input/output error")
        #expect(f?.continuedIn == continuedIn)
        #expect(w.encoderName == to && w.encoderReason == "\(from) failed mid-take: Input/output error")
        #expect(!w.takesCUDA, "no more CUDA frames are lent")
        #expect(w.framesWritten == frames)
    }

    /// An MP4 file is completed at the failure and the take goes on in its next file.
    @Test func mp4GoesOnInItsNextFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try write(dir.path("x.mp4"), failAfter: 10)
        expectFallback(w, at: 10, continuedIn: dir.path("x-0002.mp4"))
        #expect(w.segments.map(\.path) == [dir.path("x.mp4"), dir.path("x-0002.mp4")])
        #expect(w.segments.map(\.frames) == [10, 20])
        #expect(w.segments.map(\.start) == [0, 10.0 / 30])
        let first = ProbedFile(path: dir.path("x.mp4")), second = ProbedFile(path: dir.path("x-0002.mp4"))
        #expect(first.error == nil && second.error == nil)
        #expect(first.counters == (0..<10).map { Optional($0) })
        #expect(second.counters == (10..<30).map { Optional($0) })
        #expect(second.videoStart == 0 && second.keyframePackets.first == 0)
        #expect(first.durationSeconds.map { abs($0 - 10.0 / 30) < 1e-3 } == true, "\(String(describing: first.durationSeconds))")
        #expect(try decodesStrictly(dir.path("x.mp4")) && decodesStrictly(dir.path("x-0002.mp4")))
    }

    /// HEVC: libx265 takes over from hevc_nvenc.
    @Test func hevcGoesOnWithLibx265() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try write(dir.path("x.mp4"), codec: .hevc, failAfter: 10)
        expectFallback(w, at: 10, continuedIn: dir.path("x-0002.mp4"), from: "hevc_nvenc", to: "libx265")
        let first = ProbedFile(path: dir.path("x.mp4")), second = ProbedFile(path: dir.path("x-0002.mp4"))
        #expect(first.streams.map(\.codec) == ["hevc"] && second.streams.map(\.codec) == ["hevc"])
        #expect(first.counters == (0..<10).map { Optional($0) })
        #expect(second.counters == (10..<30).map { Optional($0) })
        #expect(try decodesStrictly(dir.path("x.mp4")) && decodesStrictly(dir.path("x-0002.mp4")))
    }

    /// An embedding host's packets (Annex B, parameter sets in band) go on
    /// from libx264's first IDR at the frame that failed: one stream that decodes whole.
    @Test func packetsGoOnInBand() throws {
        let dir = TempDir(); defer { dir.remove() }
        let src = try TestPatternSource(name: "counter", size: Self.size, rate: Self.rate)
        let settings = VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .nvenc, preset: "veryfast")
        let e = try PacketEncoder(settings: settings, nvenc: RecordingNVENC(encodes: true, failAfter: 10))
        #expect(e.encoderName == "h264_nvenc")
        var packets: [EncodedVideoPacket] = []
        for _ in 0..<30 { packets += try e.encode(try #require(try src.nextFrame())) }
        packets += try e.finish()
        #expect(e.encoderFallback?.from == "h264_nvenc" && e.encoderFallback?.to == "libx264" && e.encoderName == "libx264")
        #expect(e.encoderFallback.map { abs($0.at - 10.0 / 30) < 1e-9 } == true)
        #expect(packets.count == 30 && packets[10].isKeyframe)
        #expect(packets.map(\.pts) == (0..<30).map { Self.rate.time(ofFrame: Int64($0)) })
        let path = dir.path("x.h264")
        try Data(packets.flatMap(\.data)).write(to: URL(fileURLWithPath: path))
        #expect(ProbedFile(path: path).counters == (0..<30).map { Optional($0) })
        #expect(try FFmpegCLI.run(["-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", path, "-f", "null", "-"]) == 0)
    }

    /// The source's audio goes on too: each file's audio starts with its video, none lost at the cut.
    @Test func audioGoesOnInTheNextFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let input = dir.path("av.mp4")
        try makeAVFile(input)
        let src = try FileSource(url: input)
        let settings = VideoEncoderSettings(size: src.info.size, frameRate: src.info.frameRate, encoder: .nvenc, preset: "veryfast")
        let w = try MediaWriter(url: dir.path("x.mp4"), video: settings, nvenc: RecordingNVENC(encodes: true, failAfter: 24), audio: src.audioTrack)
        while let f = try src.nextFrame() { try w.write(f) }
        try w.finish()
        #expect(w.encoderFallback?.continuedIn == dir.path("x-0002.mp4"))
        let first = ProbedFile(path: dir.path("x.mp4")), second = ProbedFile(path: dir.path("x-0002.mp4"))
        #expect(first.streams.map(\.type) == ["video", "audio"] && second.streams.map(\.type) == ["video", "audio"])
        #expect(first.frames.count == 24 && second.frames.count == 36)
        #expect(second.videoStart == 0 && second.audioStart.map { $0 >= 0 && $0 < 0.05 } == true, "\(String(describing: second.audioStart))")
        let audio = [first, second].compactMap(\.durationSeconds).reduce(0, +)
        #expect(abs(audio - 2.0) < 0.1, "the two files last \(audio) s")
        #expect(try decodesStrictly(dir.path("x.mp4")) && decodesStrictly(dir.path("x-0002.mp4")))
    }

    /// A stream goes on in itself: MPEG-TS (the new encoder's IDR carries
    /// its SPS and PPS) and FLV, what RTMP carries (a new sequence header).
    @Test(arguments: [("x.ts", nil, 12), ("x.flv", ContainerFormat.rtmp, 7)])
    func aStreamGoesOnInItself(name: String, container: ContainerFormat?, failAfter: Int) throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try write(dir.path(name), container: container, failAfter: failAfter)
        expectFallback(w, at: failAfter, continuedIn: nil)
        #expect(w.segments.isEmpty)
        let probe = ProbedFile(path: dir.path(name))
        #expect(probe.error == nil)
        #expect(probe.counters == (0..<30).map { Optional($0) })
        #expect(try decodesStrictly(dir.path(name)))
    }

    /// A split output cuts its file early at the failure, and its files last their length again from there.
    @Test func aSplitOutputBeginsItsNextFileThere() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try write(dir.path("x.mp4"), frames: 60, failAfter: 20, segmentTime: 0.5)
        expectFallback(w, at: 20, continuedIn: dir.path("x-0003.mp4"), frames: 60)
        #expect(w.segments.map(\.frames) == [15, 5, 15, 15, 10])
        let counters = (1...5).map { ProbedFile(path: dir.path("x-000\($0).mp4")).counters }
        #expect(counters == [(0..<15), (15..<20), (20..<35), (35..<50), (50..<60)].map { $0.map { Optional($0) } })
        for i in 1...5 { #expect(try decodesStrictly(dir.path("x-000\(i).mp4"))) }
    }

    /// A failure before anything was written: the file begins again, whole.
    @Test func aFileNothingWasWrittenToBeginsAgain() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try write(dir.path("x.mp4"), failAfter: 0)
        expectFallback(w, at: 0, continuedIn: nil)
        #expect(w.segments.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.path("x-0002.mp4")))
        #expect(ProbedFile(path: dir.path("x.mp4")).counters == (0..<30).map { Optional($0) })
        #expect(try decodesStrictly(dir.path("x.mp4")))
    }

    /// HLS cannot change encoder mid-playlist (its init segment holds the
    /// old parameter sets): the output ends there, saying why, its playlist
    /// completed with what was encoded.
    @Test func hlsEndsSayingWhy() throws {
        let dir = TempDir(); defer { dir.remove() }
        let error = expectMediaError { _ = try write(dir.path("x.m3u8"), frames: 60, failAfter: 40) }
        #expect(error?.description.contains("h264_nvenc") == true)
        #expect(error?.description.contains("an HLS output cannot change its encoder mid-playlist, so it ends here") == true, "\(String(describing: error))")
        let playlist = try String(contentsOfFile: dir.path("x.m3u8"), encoding: .utf8)
        #expect(playlist.contains("#EXT-X-PLAYLIST-TYPE:VOD") && playlist.hasSuffix("#EXT-X-ENDLIST\n"), "\(playlist)")
        let n = try runTool("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames",
                                                 "-of", "csv=p=0", dir.path("x.m3u8")])
        #expect(n.output.split(separator: "\n").first == "40", "\(n.output)")   // the stream, then its program's copy of it
    }

    /// The continuation never writes over a file: one there already ends the output as before.
    @Test func theNextFileIsNeverWrittenOver() throws {
        let dir = TempDir(); defer { dir.remove() }
        try Data("keep".utf8).write(to: URL(fileURLWithPath: dir.path("x-0002.mp4")))
        let error = expectMediaError { _ = try write(dir.path("x.mp4"), failAfter: 10) }
        #expect(error?.description.contains("exists already") == true, "\(String(describing: error))")
        #expect(try String(contentsOfFile: dir.path("x-0002.mp4"), encoding: .utf8) == "keep")
        #expect(ProbedFile(path: dir.path("x.mp4")).counters == (0..<10).map { Optional($0) })
    }
}
