import Foundation
import Testing
import CFFmpeg
import DiptychCore
import DiptychCUDA
@testable import DiptychMedia

/// Stands in for NVDEC where there is none: a CPU decoder that says it is
/// NVDEC and fails on cue, the way NVDEC fails mid-take (an error after some
/// frames, a new picture size its setup refuses).
final class StandInNVDEC: NVDECBackend, @unchecked Sendable {
    enum Failure { case afterFrames(Int), onSizeChange, never }
    let failure: Failure
    init(_ failure: Failure) { self.failure = failure }
    var label: String { "stand-in NVDEC" }
    func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport? {
        NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: bitDepth, supported: true, engines: 1,
                          maxSize: PixelSize(width: 8192, height: 8192), minSize: PixelSize(width: 16, height: 16), maxMacroblocks: 1 << 20)
    }
    func makeDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> any FrameDecoder {
        FailingDecoder(try VideoDecoder(stream: stream, codec: codec, path: path), failure: failure)
    }
}

final class FailingDecoder: FrameDecoder {
    let inner: VideoDecoder
    let failure: StandInNVDEC.Failure
    private(set) var lost: String?
    private var received = 0
    private var size: PixelSize?
    init(_ inner: VideoDecoder, failure: StandInNVDEC.Failure) { self.inner = inner; self.failure = failure }
    var kind: DecoderKind { .nvdec }
    var context: FFCodecContext { inner.context }
    var nativeFormat: AVPixelFormat { inner.nativeFormat }
    var deliveredFormat: PixelFormat { inner.deliveredFormat }
    var decoded: FFFrame { inner.decoded }
    func send(_ packet: FFPacket?) -> Int32 { lost != nil ? averrorEINVAL : inner.send(packet) }
    func receive() -> Int32 {
        if lost != nil { return averrorInvalidData }
        if case .afterFrames(let n) = failure, received >= n { return diptych_averror(EIO) }
        let r = inner.receive()
        guard r == 0 else { return r }
        let s = PixelSize(width: Int(decoded.width), height: Int(decoded.height))
        if case .onSizeChange = failure, let old = size, old != s {
            decoded.unref()
            lost = "NVDEC could not set up for \(s) yuv420p"
            return averrorInvalidData
        }
        size = s
        received += 1
        return 0
    }
}

/// Where fall backs were told (the reader thread's callback).
final class Fallbacks: @unchecked Sendable {
    private let lock = NSLock()
    private var told: [DecoderFallback] = []
    func add(_ f: DecoderFallback) { lock.lock(); told.append(f); lock.unlock() }
    var all: [DecoderFallback] { lock.lock(); defer { lock.unlock() }; return told }
}

/// A frame's timestamp and a hash of its luma rows.
struct FramePrint: Hashable {
    var pts: MediaTime
    var size: PixelSize
    var luma: Int
    init(_ f: VideoFrame) {
        pts = f.pts; size = f.size
        var h = Hasher()
        let p = f.planes[0]
        for row in 0..<f.height { h.combine(bytes: UnsafeRawBufferPointer(start: p.baseAddress + row * p.stride, count: f.width)) }
        luma = h.finalize()
    }
}

func prints(_ source: FileSource) throws -> [FramePrint] {
    var out: [FramePrint] = []
    while let f = try source.nextFrame() { out.append(FramePrint(f)) }
    return out
}

@Suite(.serialized) struct NVDECFallbackTests {
    /// 90 frames of 640x360 H.264 at 30 fps, a keyframe every 30, with
    /// B-frames (decode order differs). `open`: in open GOPs, each keyframe
    /// after the first an I picture (not an IDR) whose two leading B
    /// pictures, after it in decoding order, refer to the P picture before it.
    static func gop(_ dir: TempDir, open: Bool = false) throws -> String {
        let path = dir.path(open ? "open.mp4" : "gop.mp4")
        try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-frames:v", "90", "-c:v", "libx264",
                           "-preset", "ultrafast", "-g", "30", "-keyint_min", "30", "-sc_threshold", "0", "-bf", "2",
                           "-x264-params", "b-adapt=0" + (open ? ":open-gop=1" : ""), "-pix_fmt", "yuv420p", path])
        return path
    }

    static func settings(_ failure: StandInNVDEC.Failure, _ choice: DecoderChoice = .auto, told: Fallbacks) -> DecoderSettings {
        DecoderSettings(choice: choice, nvdec: .success(StandInNVDEC(failure)), onFallback: { told.add($0) })
    }

    @Test func anErrorMidStreamGoesOnOnTheCPUWithEveryFrame() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        let reference = try prints(FileSource(url: path))
        #expect(reference.count == 90)
        let told = Fallbacks()
        let source = try FileSource(url: path, decoding: Self.settings(.afterFrames(40), told: told))
        #expect(source.info.decoder == DecoderDecision(.nvdec, reason: "NVDEC on stand-in NVDEC: h264 Main 4:2:0 8-bit 640x360"))
        #expect(source.decoderKind == .nvdec)
        let got = try prints(source)
        #expect(got == reference, "every frame once, in order, with the CPU decoder's pixels")
        #expect(source.decoderKind == .cpu)
        #expect(told.all.count == 1 && told.all == [source.fallback!])
        #expect(source.fallback?.frame == 40)
        #expect(source.fallback?.reason == "NVDEC: Input/output error")
        #expect(abs((source.fallback?.seconds ?? 0) - 39.0 / 30) < 1e-6)
    }

    /// A move asked for mid-stream (`DecoderMove`) waits for the next
    /// keyframe, drains NVDEC of the frames it holds there and goes on on
    /// the CPU from it: every frame once, in order, none decoded twice.
    @Test func aMoveAskedForGoesOnOnTheCPUFromTheNextKeyframe() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        let reference = try prints(FileSource(url: path))
        let (told, move, clock) = (Fallbacks(), DecoderMove(), DecodeCPUClock())
        var settings = Self.settings(.never, told: told)
        settings.move = move
        settings.cpuClock = clock
        let source = try FileSource(url: path, decoding: settings)
        var got: [FramePrint] = []
        for _ in 0..<35 { let f = try source.nextFrame(); got.append(FramePrint(try #require(f))) }
        #expect(source.decoderKind == .nvdec && source.fallback == nil)
        // While NVDEC decodes, the clock counts nothing (the reading thread is counted only on the CPU).
        #expect(clock.seconds == 0)
        move.request("asked")
        move.request("asked again")
        while let f = try source.nextFrame() { got.append(FramePrint(f)) }
        #expect(got == reference, "every frame once, in order")
        #expect(source.decoderKind == .cpu)
        #expect(told.all == [source.fallback!])
        // The keyframe after the request is frame 60: NVDEC gave the 60 before it.
        #expect(source.fallback?.frame == 60 && source.fallback?.reason == "asked" && source.fallback?.requested == true)
        #expect(abs((source.fallback?.seconds ?? 0) - 59.0 / 30) < 1e-6)
        #expect(source.fallback?.description == "after frame 60 (1.967 s), as asked: asked")
        #expect(clock.seconds > 0)
    }

    /// A move at an open GOP's keyframe: the CPU decoder decodes again from
    /// the keyframe before it (the packets kept since), so the leading
    /// pictures have their references; every frame once, in order.
    @Test func aMoveAtAnOpenGOPsKeyframeLosesNoFrame() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir, open: true)
        let reference = try prints(FileSource(url: path))
        #expect(reference.count == 90)
        // Asked within the first GOP, the second, and near the second's end.
        for askAt in [20, 35, 50] {
            let (told, move) = (Fallbacks(), DecoderMove())
            var settings = Self.settings(.never, told: told)
            settings.move = move
            let source = try FileSource(url: path, decoding: settings)
            var got: [FramePrint] = []
            for _ in 0..<askAt { let f = try source.nextFrame(); got.append(FramePrint(try #require(f))) }
            move.request("asked")
            while let f = try source.nextFrame() { got.append(FramePrint(f)) }
            let differ = zip(got, reference).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
            #expect(got.count == reference.count && differ.isEmpty,
                    "asked at frame \(askAt): \(got.count) frames, these differ from a CPU decode: \(differ.prefix(8))")
            #expect(source.decoderKind == .cpu && told.all == [source.fallback!])
            #expect(source.fallback?.requested == true && source.fallback?.reason == "asked")
        }
    }

    /// NVDEC failing while it drains for a move: the fall back's replay and
    /// the held keyframe give every frame still, once.
    @Test func aFailureWhileMovingLosesNoFrame() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        let reference = try prints(FileSource(url: path))
        for failAt in 56...60 {
            let (told, move) = (Fallbacks(), DecoderMove())
            var settings = Self.settings(.afterFrames(failAt), told: told)
            settings.move = move
            let source = try FileSource(url: path, decoding: settings)
            let first = try source.nextFrame()
            var got = [FramePrint(try #require(first))]
            move.request("asked")
            while let f = try source.nextFrame() { got.append(FramePrint(f)) }
            #expect(got == reference, "NVDEC failing after \(failAt) frames")
            #expect(told.all.count == 1 && source.decoderKind == .cpu)
        }
    }

    @Test func aSizeNVDECCannotFollowGoesOnOnTheCPU() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        // 640x360 for a second, then 320x180: one H.264 stream in MPEG-TS with a new SPS at the change.
        let a = dir.path("a.ts"), b = dir.path("b.ts"), both = dir.path("both.ts")
        for (p, size, offset) in [(a, "640x360", "0"), (b, "320x180", "1")] {
            try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=30", "-frames:v", "30", "-c:v", "libx264", "-preset", "ultrafast",
                               "-g", "15", "-bf", "0", "-pix_fmt", "yuv420p", "-output_ts_offset", offset, p])
        }
        try FFmpegCLI.run(["-i", "concat:\(a)|\(b)", "-c", "copy", both])
        let reference = try prints(FileSource(url: both))
        #expect(reference.count == 60 && reference.last?.size == PixelSize(width: 320, height: 180))
        let told = Fallbacks()
        let source = try FileSource(url: both, decoding: Self.settings(.onSizeChange, told: told))
        #expect(try prints(source) == reference)
        #expect(source.fallback?.frame == 30)
        #expect(source.fallback?.reason == "NVDEC could not set up for 320x180 yuv420p")
        #expect(told.all.count == 1)
    }

    @Test func tooManyPacketsSinceTheKeyframeResumeAtTheNextOne() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        let reference = try prints(FileSource(url: path))
        let source = try FileSource(url: path, decoding: Self.settings(.afterFrames(40), told: Fallbacks()))
        source.replay = PacketReplay(maximumPackets: 4)
        let got = try prints(source)
        #expect(source.fallback?.frame == 40)
        // Frames 0-39 from NVDEC, then nothing until the keyframe at 60, then the rest: all the CPU decoder's pictures.
        #expect(Array(got.prefix(40)) == Array(reference.prefix(40)))
        #expect(Array(got.suffix(30)) == Array(reference.suffix(30)))
        #expect(got.count == 70)
        #expect(zip(got, got.dropFirst()).allSatisfy { $0.pts < $1.pts })
    }

    @Test func aFirstFrameNVDECCannotDecodeIsTheCPUForAutoAndAnErrorForNVDEC() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        let told = Fallbacks()
        let auto = try FileSource(url: path, decoding: Self.settings(.afterFrames(0), told: told))
        #expect(auto.info.decoder == DecoderDecision(.cpu, reason: "NVDEC did not decode the first frame: NVDEC: Input/output error"))
        #expect(auto.fallback == nil && told.all.isEmpty)
        #expect(try prints(auto).count == 90)
        #expect(throws: MediaError.decoderUnavailable(path: path, reason: "NVDEC: Input/output error")) {
            try FileSource(url: path, decoding: Self.settings(.afterFrames(0), .nvdec, told: told))
        }
    }

    /// Whether NVIDIA's driver is missing here.
    static let withoutCUDA: Bool = { if case .failure = CUDADriver.shared { true } else { false } }()

    @Test(.enabled(if: withoutCUDA, "needs a machine without NVIDIA's driver (this one has it)"))
    func withoutTheDriverNVDECIsRefusedNamingWhatIsMissing() throws {
        _ = quietFFmpeg
        guard case .failure(let missing) = CUDADriver.shared else { Issue.record("NVIDIA's driver loaded"); return }
        let dir = TempDir(); defer { dir.remove() }
        let path = try Self.gop(dir)
        do {
            _ = try FileSource(url: path, decoding: .with(.nvdec, cudaDevice: .success(0)))
            Issue.record("--decoder nvdec opened without a driver")
        } catch {
            #expect(error == .decoderUnavailable(path: path, reason: missing.reason))
            #expect(error.description == "\(path): --decoder nvdec cannot decode it here: \(missing.reason)")
            #expect(missing.reason.contains("libcuda.so.1"))
        }
        let auto = try FileSource(url: path, decoding: .with(.auto, cudaDevice: .success(0)))
        #expect(auto.info.decoder == DecoderDecision(.cpu, reason: missing.reason))
        let cpu = try FileSource(url: path, decoding: .with(.cpu, cudaDevice: .success(0)))
        #expect(cpu.info.decoder == DecoderDecision(.cpu, reason: "--decoder cpu"))
        #expect(NVDECReport.current().problem == missing.reason)
    }

    @Test func streamTraitsComeFromTheParameters() throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        for (name, args, codec, depth, chroma) in [
            ("a.mp4", ["-c:v", "libx264", "-pix_fmt", "yuv420p"], "h264", 8, ChromaSubsampling.yuv420),
            ("b.mp4", ["-c:v", "libx264", "-pix_fmt", "yuv422p"], "h264", 8, .yuv422),
            ("c.mp4", ["-c:v", "libx265", "-pix_fmt", "yuv420p10le", "-x265-params", "log-level=error"], "hevc", 10, .yuv420),
        ] {
            try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "3"] + args + [dir.path(name)])
            let ctx = try FileSource.openInput(url: dir.path(name), fifo: nil, name: name, forcedFormat: nil, network: false, networkTimeout: 1,
                                               deadline: InterruptDeadline(timeout: 0),
                                               guardian: SourceGuard(policy: .commandLine, name: name))
            let (_, stream, _) = try FileSource.videoStream(in: ctx, name: name)
            let t = StreamDecodeTraits(stream: stream)
            #expect(t.codec == codec && t.bitDepth == depth && t.chroma == chroma && !t.interlaced, "\(name): \(t)")
            #expect(t.size == PixelSize(width: 320, height: 240))
            #expect(t.nvdecDecoder == codec, "Debian's FFmpeg decodes \(codec) through NVDEC")
        }
    }

    @Test func theReplayKeepsPacketsFromTheLastKeyframe() throws {
        var r = PacketReplay(maximumPackets: 3)
        func packet(key: Bool) -> FFPacket {
            let p = FFPacket()
            _ = av_new_packet(p.raw, 16)
            if key { p.raw.pointee.flags |= AV_PKT_FLAG_KEY }
            return p
        }
        r.record(packet(key: true)); r.record(packet(key: false))
        #expect(r.take()?.count == 2)
        #expect(r.take()?.count == 0)
        for _ in 0..<4 { r.record(packet(key: false)) }
        #expect(r.take() == nil, "more than it keeps: resume at a keyframe")
        r.record(packet(key: false)); r.record(packet(key: false)); r.record(packet(key: false)); r.record(packet(key: false))
        r.record(packet(key: true))
        #expect(r.take()?.count == 1, "a keyframe starts over")
    }
}
