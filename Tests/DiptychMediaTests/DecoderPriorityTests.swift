import Foundation
import Testing
import CFFmpeg
import DiptychCore
@testable import DiptychMedia

/// A CPU decoder whose threads a nice value is asked for (a server's,
/// `DecoderSettings.cpuNice`): FFmpeg's threads it starts yield; the thread
/// that reads and opens it keeps its own.
@Suite struct DecoderPriorityTests {
    /// Makes the CPU decoder NVDEC would be, with a nice value and no clock, and keeps it.
    final class Capture: NVDECBackend, @unchecked Sendable {
        var made: VideoDecoder?
        var label: String { "capture" }
        func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport? {
            NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: bitDepth, supported: true, engines: 1,
                              maxSize: PixelSize(width: 8192, height: 8192), minSize: PixelSize(width: 16, height: 16), maxMacroblocks: 1 << 20)
        }
        func makeDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> any FrameDecoder {
            let d = try VideoDecoder(stream: stream, codec: codec, path: path, threads: 2, nice: 9)
            made = d
            return FailingDecoder(d, failure: .never)
        }
    }

    @Test("The settings' nice value: every frame thread of the decoder has it, counted by the clock; the reading thread keeps its own")
    func theDecodersThreadsYield() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try NVDECFallbackTests.gop(dir)
        let own = CodecThreads.nice(ofThread: 0)
        let clock = DecodeCPUClock()
        var settings = DecoderSettings.cpu
        settings.cpuThreads = 3
        settings.cpuNice = 7
        settings.cpuClock = clock
        let source = try FileSource(url: path, decoding: settings)
        #expect(try source.nextFrame() != nil)
        let threads = clock.liveThreads
        #expect(threads.count >= 3, "\(threads.count) decoder threads")
        // 7, or the process's own where it already runs lower (a value only ever lowers a priority).
        let seven = max(own ?? 0, 7)
        #expect(threads.allSatisfy { CodecThreads.nice(ofThread: $0) == seven }, "\(threads.map { CodecThreads.nice(ofThread: $0) as Any })")
        #expect(CodecThreads.nice(ofThread: 0) == own)
        // Asking for a value nearer the process's than a thread has already leaves the thread where it is.
        #expect(CodecThreads.yield(threads, nice: 3) == threads.count)
        #expect(threads.allSatisfy { CodecThreads.nice(ofThread: $0) == seven })
    }

    @Test("Without a clock, the decoder finds its threads itself and gives them the nice value")
    func withoutAClock() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try NVDECFallbackTests.gop(dir)
        let nine = max(CodecThreads.nice(ofThread: 0) ?? 0, 9)
        let capture = Capture()
        let source = try FileSource(url: path, decoding: DecoderSettings(choice: .nvdec, nvdec: .success(capture)))
        #expect(try source.nextFrame() != nil)
        let d = try #require(capture.made)
        #expect(d.threads.count >= 2, "\(d.threads.count) decoder threads")
        #expect(d.threads.allSatisfy { CodecThreads.nice(ofThread: $0) == nine })
    }
}
