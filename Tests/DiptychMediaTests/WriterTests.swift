import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

@Suite struct WriterTests {
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
    }
}
