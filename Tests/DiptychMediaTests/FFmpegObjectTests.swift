import Foundation
import Testing
import CFFmpeg
import DiptychCore
@testable import DiptychMedia

@Suite struct FFmpegObjectTests {
    init() { _ = quietFFmpeg }

    /// The one check turns a negative return code into an error naming the call.
    @Test func checkNamesTheCall() {
        #expect(throws: FFmpegError("avcodec_open2", code: averrorEINVAL)) { try ffCheck(averrorEINVAL, "avcodec_open2") }
        #expect(FFmpegError("avcodec_open2", code: averrorEINVAL).description == "avcodec_open2: Invalid argument")
        #expect((try? ffCheck(7, "av_read_frame")) == 7)
        #expect(FFmpegError("av_read_frame", code: averrorEOF).isEndOfFile)
    }

    /// Options a call did not consume stay in the dictionary.
    @Test func dictionaryKeepsUnconsumedOptions() throws {
        let codec = try #require(avcodec_find_encoder(AV_CODEC_ID_PNG))
        let ctx = try FFCodecContext(codec)
        ctx.raw.pointee.width = 16
        ctx.raw.pointee.height = 16
        ctx.raw.pointee.pix_fmt = AV_PIX_FMT_RGBA
        ctx.raw.pointee.time_base = AVRational(num: 1, den: 1)
        let options = FFDictionary(["pred": "none", "bogus-option": "1"])
        try ctx.open(options)
        #expect(options.first?.key == "bogus-option")
        #expect(options.copy().first?.value == "1")
    }

    /// A failed open names the call that failed, and the input.
    @Test func failedOpenNamesTheInput() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("noise.junk")
        try [UInt8](repeating: 0x5a, count: 4096).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        let e = expectMediaError { _ = try FileSource(url: path) }
        #expect(e?.description.hasPrefix("\(path): ") == true, "\(String(describing: e))")
    }

    /// Frames allocated by the owner types are usable and freed with them.
    @Test func frameAllocationAndConversion() throws {
        let src = FFFrame(), dst = FFFrame()
        try src.allocate(format: AV_PIX_FMT_YUV422P, width: 64, height: 32)
        for p in 0..<3 { src.data(p)!.update(repeating: p == 0 ? 200 : 128, count: Int(src.linesize(p)) * 32) }
        try dst.allocate(format: AV_PIX_FMT_YUV420P, width: 64, height: 32)
        try FFScaler().convert(src, into: dst)
        #expect(dst.data(0)![0] == 200)
        #expect(dst.data(1)![0] == 128)
    }
}
