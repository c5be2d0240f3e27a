import Foundation
import Testing
import CFFmpeg
import DiptychCore
import DiptychCUDA
@testable import DiptychMedia
@testable import Diptych

/// A CPU decoder standing in for NVDEC that fails after `failAfter` frames
/// (the session's view of NVDEC stopping mid-take).
private final class FailingNVDEC: NVDECBackend, @unchecked Sendable {
    let failAfter: Int
    init(failAfter: Int) { self.failAfter = failAfter }
    var label: String { "stand-in NVDEC" }
    func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport? {
        NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: bitDepth, supported: true, engines: 1,
                          maxSize: PixelSize(width: 4096, height: 4096), minSize: PixelSize(width: 16, height: 16), maxMacroblocks: 65536)
    }
    func makeDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> any FrameDecoder {
        Decoder(try VideoDecoder(stream: stream, codec: codec, path: path), failAfter: failAfter)
    }
    final class Decoder: FrameDecoder {
        let inner: VideoDecoder
        let failAfter: Int
        var received = 0
        init(_ inner: VideoDecoder, failAfter: Int) { self.inner = inner; self.failAfter = failAfter }
        var kind: DecoderKind { .nvdec }
        var context: FFCodecContext { inner.context }
        var nativeFormat: AVPixelFormat { inner.nativeFormat }
        var deliveredFormat: PixelFormat { inner.deliveredFormat }
        var decoded: FFFrame { inner.decoded }
        var lost: String? { nil }
        func send(_ packet: FFPacket?) -> Int32 { inner.send(packet) }
        func receive() -> Int32 {
            if received >= failAfter { return diptych_averror(EIO) }
            let r = inner.receive()
            if r == 0 { received += 1 }
            return r
        }
    }
}

/// A CUDA frame whose "device memory" is a host frame: interop cannot read
/// it (there is no CUDA here), so the GPU stage must copy it through host memory.
private final class HostHeldFrame: CUDAFrameHolder, @unchecked Sendable {
    let frame: VideoFrame
    init(_ frame: VideoFrame) { self.frame = frame }
    func download() -> VideoFrame? { frame }
}

/// An input whose frames arrive as CUDA payloads (NVDEC's form).
private final class CUDAPayloadInput: TakeInput, @unchecked Sendable {
    let inner: MediaInput
    init(_ inner: MediaInput) { self.inner = inner }
    var info: SourceInfo { inner.info }
    var audioTrack: AudioTrack? { nil }
    func next() throws(MediaError) -> InputFrame? {
        guard let f = try inner.next(), case .cpu(let v) = f.payload else { return nil }
        let c = CUDAFrame(width: v.width, height: v.height, format: .nv12,
                          planes: [.init(address: 1 << 32, pitch: v.width), .init(address: 1 << 33, pitch: v.width)], device: 0)
        return InputFrame(c, pts: f.pts, holder: HostHeldFrame(v))
    }
    func close() { inner.close() }
}

@Suite(.serialized) struct NVDECSessionTests {
    static func input(_ s: Scratch) throws -> String {
        let path = s.path("in.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "60", "-c:v", "libx264", "-preset", "ultrafast",
                         "-g", "15", "-pix_fmt", "yuv420p", path])
        return path
    }

    @Test func aStreamNVDECStopsDecodingGoesOnWithoutEndingTheTake() throws {
        let s = Scratch(); defer { s.remove() }
        let path = try Self.input(s)
        let log = LogLines()
        var hooks = SessionHooks(storage: plentyOfSpace, log: { log.add($0) })
        hooks.decoderSettings = { role, settings in
            role == .primary ? DecoderSettings(choice: .auto, nvdec: .success(FailingNVDEC(failAfter: 25)), onFallback: settings.onFallback) : settings
        }
        let config = try takeConfig(primary: path, out: s.path("out.mp4"), duration: nil)
        let summary = try RecordingSession(configuration: config, hooks: hooks).run()
        #expect(summary.frames == 60 && summary.normalStop)
        let primary = try #require(summary.decoders.first { $0.stream == "primary" })
        #expect(primary.decoder == "nvdec" && primary.reason == "NVDEC on stand-in NVDEC: h264 Constrained Baseline 4:2:0 8-bit 320x240")
        #expect(primary.fallback?.frame == 25 && primary.fallback?.reason == "NVDEC: Input/output error")
        #expect(log.contains("primary decoder: nvdec (NVDEC on stand-in NVDEC"))
        #expect(log.contains("warning: primary: NVDEC stopped after frame 25 (0.800 s): NVDEC: Input/output error; decoding on the CPU from there"))
        let out = try decodeAll(s.path("out.mp4"))
        #expect(out.frames.count == 60)
        #expect(zip(out.frames, out.frames.dropFirst()).allSatisfy { $0.pts < $1.pts })
    }

    @Test func decodersAreInTheSummaryAndTheLog() throws {
        let s = Scratch(); defer { s.remove() }
        let path = try Self.input(s)
        let log = LogLines()
        let config = try takeConfig(primary: path, out: s.path("out.mp4"), duration: 1, extra: ["--decoder", "cpu"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, log: { log.add($0) })).run()
        #expect(summary.decoders.count == 1, "a pattern is not decoded")
        #expect(summary.decoders.first.map { [$0.stream, $0.decoder, $0.reason, $0.input] } == ["primary", "cpu", "--decoder cpu", path])
        #expect(log.contains("primary decoder: cpu (--decoder cpu)"))
        let enc = JSONEncoder()
        enc.outputFormatting = .sortedKeys
        #expect(String(decoding: try enc.encode(summary), as: UTF8.self).contains(#""decoders":[{"decoder":"cpu","input":"#))
    }

    /// CUDA payloads the GPU cannot take through interop are copied through
    /// host memory: the take's pictures are those of CPU frames.
    @Test func framesInteropCannotTakeAreCopiedThroughHostMemory() throws {
        let s = Scratch(); defer { s.remove() }
        let log = LogLines()
        func take(_ out: String, cuda: Bool) throws -> TakeSummary {
            var io = TakeIO.media
            if cuda {
                io.openInput = { role, spec, duration, decoding, opening throws(MediaError) in
                    let m = try MediaInput.open(spec, duration: duration, decoding: decoding, opening: opening)
                    return role == .secondary ? CUDAPayloadInput(m) : m
                }
            }
            let config = try takeConfig(primary: "testsrc:smpte:320x240@30", secondary: "testsrc:counter:160x120@30",
                                        out: s.path(out), duration: 1, extra: ["--preset", "ultrafast"])
            return try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, log: { log.add($0) }), io: io).run()
        }
        let reference = try take("cpu.mp4", cuda: false)
        let copied = try take("cuda.mp4", cuda: true)
        #expect(copied.frames == reference.frames && copied.frames == 30)
        #expect(log.contains("NVDEC frames cannot go into the GPU's textures directly"))
        let a = try decodeAll(s.path("cpu.mp4")).frames, b = try decodeAll(s.path("cuda.mp4")).frames
        #expect(a.count == b.count)
        for (x, y) in zip(a, b) { #expect(x.counter == y.counter && yuv(x.frame, 300, 220) == yuv(y.frame, 300, 220)) }
    }

    @Test func theCLIRefusesAnUnknownDecoder() throws {
        let s = Scratch(); defer { s.remove() }
        let path = try Self.input(s)
        let bad = try runCLI(["record", "--primary", path, "--out", s.path("x.mp4"), "--decoder", "gpu"])
        #expect(bad.status == 2 && bad.stderr == "diptych: --decoder 'gpu': expected auto, cpu or nvdec\n")
    }

    /// Whether NVIDIA's driver is missing here (the refusal below needs a machine without it).
    static let withoutCUDA: Bool = { if case .failure = CUDADriver.shared { true } else { false } }()

    @Test(.enabled(if: withoutCUDA, "needs a machine without NVIDIA's driver (this one has it)"))
    func theCLIRefusesNVDECNamingTheInputAndWhatIsMissing() throws {
        let s = Scratch(); defer { s.remove() }
        let path = try Self.input(s)
        guard case .failure(let missing) = CUDADriver.shared else { Issue.record("NVIDIA's driver loaded"); return }
        let r = try runCLI(["record", "--primary", path, "--out", s.path("x.mp4"), "--decoder", "nvdec", "--gpu", "software"])
        #expect(r.status == 2)
        #expect(r.stderr == "diptych: \(path): --decoder nvdec cannot decode it here: \(missing.reason)\n")
        #expect(!FileManager.default.fileExists(atPath: s.path("x.mp4")), "nothing is written")
        let probe = try runCLI(["probe"])
        #expect(probe.stdout.contains("NVDEC: \(missing.reason)"))
        #expect(probe.stdout.contains("FFmpeg decoders through NVDEC: h264 (h264), hevc (hevc)"))
    }
}
