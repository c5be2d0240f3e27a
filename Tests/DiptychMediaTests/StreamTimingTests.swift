import Foundation
import Testing
import CFFmpeg
import DiptychCore
@testable import DiptychMedia

/// The H.264/HEVC streams state the real frame rate in their VUI timing
/// (readers such as GStreamer's h264parse take it from there, in MPEG-TS
/// and SRT where no container field says it).
@Suite struct StreamTimingTests {
    init() { _ = quietFFmpeg }

    @Test(arguments: [VideoCodec.h264, .hevc], ["ts", "mp4"])
    func vuiStatesTheFrameRate(codec: VideoCodec, ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        for rate in [FrameRate(30), FrameRate(30000, 1001), FrameRate(25)] {
            let path = dir.path("rate.\(ext)")
            let size = PixelSize(width: 160, height: 120)
            let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
            let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, codec: codec, preset: "ultrafast"))
            for _ in 0..<10 { try w.write(try #require(try src.nextFrame())) }
            try w.finish()
            let stated = try #require(try bitstreamFrameRate(path: path), "no VUI timing in \(codec) .\(ext)")
            #expect(stated.num == rate.numerator && stated.den == rate.denominator,
                    "\(codec) .\(ext) at \(rate): VUI says \(stated.num)/\(stated.den)")
            // The timestamps are untouched: still exact frame times.
            let probe = ProbedFile(path: path)
            #expect(probe.frames.count == 10)
            #expect(probe.frames.enumerated().allSatisfy { $0.element.pts == rate.time(ofFrame: Int64($0.offset)) })
        }
    }

    /// GStreamer reads the rate from the stream in MPEG-TS (it said 90000/1).
    @Test(arguments: [VideoCodec.h264, .hevc], ["ts", "mp4"])
    func gstreamerReadsTheFrameRate(codec: VideoCodec, ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("gst.\(ext)")
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(30000, 1001)
        let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: rate, codec: codec, preset: "ultrafast"))
        for _ in 0..<30 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        #expect(try gstDiscover(path).frameRate == "30000/1001")
    }

    /// Annex B packets for an embedding host carry the same timing in band.
    @Test func packetEncoderStatesTheFrameRate() throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(60)
        let enc = try PacketEncoder(settings: VideoEncoderSettings(size: size, frameRate: rate, preset: "ultrafast"))
        let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
        var bytes: [UInt8] = []
        for _ in 0..<5 { for p in try enc.encode(try #require(try src.nextFrame())) { bytes += p.data } }
        for p in try enc.finish() { bytes += p.data }
        let path = dir.path("annexb.h264")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let stated = try #require(try bitstreamFrameRate(path: path))
        #expect(stated.num == 60 && stated.den == 1, "VUI says \(stated.num)/\(stated.den)")
    }
}
