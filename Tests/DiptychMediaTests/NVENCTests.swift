import CFFmpeg
import DiptychCore
import DiptychCUDA
import Foundation
import Synchronization
import Testing
@testable import DiptychMedia

/// NVENC where no engine exists (here, and on the H200): FFmpeg's CUDA device
/// allocated but not opened, and an encoder session that records what it is
/// given and holds each frame, as NVENC does, until told the engine is done
/// with it (`complete`). With `realDevice`, FFmpeg's CUDA device on the
/// driver's device 0 and a frames context made for real (only the session is
/// a stand-in). With `encodes`, the engine is libx264: host frames are
/// "uploaded" as they are and the session encodes them (so a take through
/// the stand-in writes real pictures); `failAfter` frames in, every send
/// fails, as a session does whose engine is lost.
final class RecordingNVENC: NVENCBackend, @unchecked Sendable {   // its record behind a Mutex
    struct Sent: Sendable {
        var format: Int32, width: Int32, height: Int32
        var luma: UInt64, chroma: UInt64, linesizes: [Int32]
        var pts: Int64, keyframe: Bool
        /// The frame's frames context: format, software format, size.
        var framesFormat: Int32, framesSoftware: Int32, framesSize: PixelSize
    }
    struct Opened: Sendable {
        var options: [String: String]
        var pixelFormat: Int32, maxBFrames: Int32, gop: Int32, bitRate: Int64, maxRate: Int64, bufferSize: Int32
        var framesContext: Bool
    }
    struct Record: Sendable {
        var opened: Opened?
        var sent: [Sent] = []
        var framesInitialized = 0
        var drained = false
    }

    let record = Mutex(Record())
    let factsGiven: NVENCFacts
    let realDevice: Bool
    /// Frames the engine holds, oldest first (`av_frame_clone`s: a reference each).
    private let heldLock = NSLock()
    private var held: [UnsafeMutablePointer<AVFrame>] = []

    let encodes: Bool
    let failAfter: Int?

    init(facts: NVENCFacts = EncoderPlanTests.l4, realDevice: Bool = false, encodes: Bool = false, failAfter: Int? = nil) {
        factsGiven = facts; self.realDevice = realDevice; self.encodes = encodes; self.failAfter = failAfter
    }

    func upload(_ frame: FFFrame, into frames: FFBufferRef) throws(FFmpegError) -> FFFrame {
        encodes ? frame : try VideoEncoder.upload(frame, into: frames)
    }

    deinit { complete(Int.max) }

    func facts(codec: VideoCodec) -> NVENCFacts { factsGiven }

    func hardwareDevice() throws(MediaError) -> FFBufferRef {
        if realDevice {
            var ref: UnsafeMutablePointer<AVBufferRef>?
            let options = FFDictionary(["primary_ctx": "1"])
            guard av_hwdevice_ctx_create(&ref, AV_HWDEVICE_TYPE_CUDA, "0", options.raw, 0) >= 0, let ref else {
                throw .encoderUnavailable(encoder: "nvenc", reason: "FFmpeg cannot open CUDA device 0")
            }
            return FFBufferRef(taking: ref)
        }
        guard let ref = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA) else { throw .encoderFailed(encoder: "nvenc", detail: "out of memory") }
        return FFBufferRef(taking: ref)
    }

    func initialize(frames: FFBufferRef) throws(FFmpegError) {
        if realDevice { try ffCheck(av_hwframe_ctx_init(frames.raw), "av_hwframe_ctx_init") }
        record.withLock { $0.framesInitialized += 1 }
    }

    func session(for context: FFCodecContext) -> any EncoderSession { Session(self, context) }

    /// The engine is done with the oldest `n` frames it holds: FFmpeg drops its references.
    func complete(_ n: Int) {
        heldLock.lock()
        let done = Array(held.prefix(n))
        held.removeFirst(done.count)
        heldLock.unlock()
        for f in done { var p: UnsafeMutablePointer<AVFrame>? = f; av_frame_free(&p) }
    }

    var holding: Int { heldLock.lock(); defer { heldLock.unlock() }; return held.count }

    fileprivate func hold(_ f: UnsafeMutablePointer<AVFrame>) { heldLock.lock(); held.append(f); heldLock.unlock() }

    final class Session: EncoderSession {
        let backend: RecordingNVENC
        let context: FFCodecContext
        /// The stand-in engine (`encodes`).
        private var engine: FFCodecContext?
        private var sends = 0
        init(_ b: RecordingNVENC, _ c: FFCodecContext) { backend = b; context = c }
        /// The encoder is freed: FFmpeg lets go of every frame it held.
        deinit { backend.complete(Int.max) }

        func open(_ options: FFDictionary) throws(FFmpegError) {
            var all: [String: String] = [:]
            var e: UnsafeMutablePointer<AVDictionaryEntry>? = nil
            while let next = av_dict_get(options.raw, "", e, AV_DICT_IGNORE_SUFFIX) {
                all[String(cString: next.pointee.key)] = String(cString: next.pointee.value)
                e = next
            }
            av_dict_free(&options.raw)   // every option taken, as the encoder takes its own
            if backend.encodes { try openEngine() }
            let c = context.raw.pointee
            backend.record.withLock {
                $0.opened = Opened(options: all, pixelFormat: c.pix_fmt.rawValue, maxBFrames: c.max_b_frames, gop: c.gop_size,
                                   bitRate: c.bit_rate, maxRate: c.rc_max_rate, bufferSize: c.rc_buffer_size, framesContext: c.hw_frames_ctx != nil)
            }
        }

        /// libx264 (libx265 for HEVC) at the context's size and time base,
        /// its parameter sets the context's (as NVENC's are).
        private func openEngine() throws(FFmpegError) {
            let c = context.raw
            let hevc = c.pointee.codec_id == AV_CODEC_ID_HEVC
            guard let codec = avcodec_find_encoder_by_name(hevc ? "libx265" : "libx264") else {
                throw FFmpegError("avcodec_find_encoder_by_name", code: diptych_averror(ENOENT))
            }
            let e = try FFCodecContext(codec)
            e.raw.pointee.width = c.pointee.width
            e.raw.pointee.height = c.pointee.height
            e.raw.pointee.time_base = c.pointee.time_base
            e.raw.pointee.pix_fmt = hevc ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12
            e.raw.pointee.flags = c.pointee.flags & AV_CODEC_FLAG_GLOBAL_HEADER
            try e.open(FFDictionary(hevc ? ["preset": "ultrafast", "tune": "zerolatency", "x265-params": "log-level=error"]
                                         : ["preset": "ultrafast", "tune": "zerolatency"]))
            if let x = e.raw.pointee.extradata, e.raw.pointee.extradata_size > 0 {
                let n = Int(e.raw.pointee.extradata_size)
                let copy = av_mallocz(n + 64).assumingMemoryBound(to: UInt8.self)
                copy.update(from: x, count: n)
                c.pointee.extradata = copy
                c.pointee.extradata_size = Int32(n)
            }
            engine = e
        }

        func send(_ frame: UnsafeMutablePointer<AVFrame>?) -> Int32 {
            if frame != nil, let limit = backend.failAfter, sends >= limit { return diptych_averror(EIO) }
            if frame != nil { sends += 1 }
            if let engine {
                guard let frame, engine.raw.pointee.pix_fmt == AV_PIX_FMT_YUV420P else { return engine.send(frame) }
                guard let planar = Self.planar(frame) else { return diptych_averror(ENOMEM) }
                return engine.send(planar.raw)
            }
            guard let frame else { backend.record.withLock { $0.drained = true }; backend.complete(Int.max); return 0 }
            guard let clone = av_frame_clone(frame) else { return diptych_averror(ENOMEM) }
            let f = frame.pointee
            let fc = f.hw_frames_ctx.map { UnsafeMutableRawPointer($0.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self).pointee }
            backend.hold(clone)
            backend.record.withLock {
                $0.sent.append(Sent(format: f.format, width: f.width, height: f.height,
                                    luma: diptych_frame_device_plane(frame, 0), chroma: diptych_frame_device_plane(frame, 1),
                                    linesizes: [diptych_frame_linesize(frame, 0), diptych_frame_linesize(frame, 1)],
                                    pts: f.pts, keyframe: f.pict_type == AV_PICTURE_TYPE_I,
                                    framesFormat: fc?.format.rawValue ?? -1, framesSoftware: fc?.sw_format.rawValue ?? -1,
                                    framesSize: PixelSize(width: Int(fc?.width ?? 0), height: Int(fc?.height ?? 0))))
            }
            return 0
        }

        /// An NV12 frame in host memory as I420 (libx265's input).
        static func planar(_ nv12: UnsafeMutablePointer<AVFrame>) -> FFFrame? {
            let f = FFFrame()
            f.raw.pointee.format = AV_PIX_FMT_YUV420P.rawValue
            f.raw.pointee.width = nv12.pointee.width
            f.raw.pointee.height = nv12.pointee.height
            f.raw.pointee.pts = nv12.pointee.pts
            f.raw.pointee.pict_type = nv12.pointee.pict_type
            guard av_frame_get_buffer(f.raw, 0) >= 0 else { return nil }
            let w = Int(nv12.pointee.width), h = Int(nv12.pointee.height)
            for y in 0..<h {
                (diptych_frame_data(f.raw, 0)! + y * Int(diptych_frame_linesize(f.raw, 0)))
                    .update(from: diptych_frame_data(nv12, 0)! + y * Int(diptych_frame_linesize(nv12, 0)), count: w)
            }
            for y in 0..<h / 2 {
                let uv = diptych_frame_data(nv12, 1)! + y * Int(diptych_frame_linesize(nv12, 1))
                let u = diptych_frame_data(f.raw, 1)! + y * Int(diptych_frame_linesize(f.raw, 1))
                let v = diptych_frame_data(f.raw, 2)! + y * Int(diptych_frame_linesize(f.raw, 2))
                for x in 0..<w / 2 { u[x] = uv[2 * x]; v[x] = uv[2 * x + 1] }
            }
            return f
        }

        func receive(_ packet: FFPacket) -> Int32 {
            if let engine { return engine.receive(packet) }
            return backend.record.withLock { $0.drained } ? averrorEOF : averrorEAGAIN
        }
    }
}

/// Counts the releases of the pictures handed to the encoder.
final class Releases: Sendable {
    let counts = Mutex<[Int: Int]>([:])
    func release(_ i: Int) -> @Sendable () -> Void { { [self] in counts.withLock { $0[i, default: 0] += 1 } } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    func count(_ i: Int) -> Int { counts.withLock { $0[i] ?? 0 } }
}

/// The NVENC encoder's wiring (docs/ARCHITECTURE.md, "Encoder paths"): its
/// frames are the composite's CUDA memory, their lifetimes end when NVENC is
/// done, and the take's settings become NVENC's options.
@Suite struct NVENCEncoderTests {
    static let size = PixelSize(width: 320, height: 240)
    static let pitch = 512

    static func settings(_ change: (inout VideoEncoderSettings) -> Void = { _ in }) -> VideoEncoderSettings {
        var s = VideoEncoderSettings(size: size, frameRate: FrameRate(30), encoder: .nvenc, preset: "veryfast")
        change(&s)
        return s
    }

    /// Picture `i`: device memory as the compute pass's ring lays it out (luma, then chroma after `height` rows).
    static func picture(_ i: Int, size: PixelSize = size) -> CUDANV12Picture {
        let base: UInt64 = 0x7f00_0000_0000 + UInt64(i) * 0x10_0000
        return CUDANV12Picture(luma: base, chroma: base + UInt64(pitch * size.height), pitch: pitch, width: size.width, height: size.height)
    }

    @Test func framesPointAtTheCompositesMemory() throws {
        let nvenc = RecordingNVENC()
        let encoder = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
        #expect(encoder.name == "h264_nvenc")
        let releases = Releases()
        for i in 0..<4 {
            _ = try encoder.encode(Self.picture(i), pts: MediaTime(value: Int64(i), timescale: 30), release: releases.release(i), keyframe: i == 2)
        }
        let r = nvenc.record.withLock { $0 }
        #expect(r.framesInitialized == 1)
        #expect(r.sent.count == 4)
        for (i, s) in r.sent.enumerated() {
            let p = Self.picture(i)
            #expect(s.format == AV_PIX_FMT_CUDA.rawValue)
            #expect(s.luma == p.luma && s.chroma == p.chroma, "frame \(i) names the picture's planes")
            #expect(s.linesizes == [Int32(Self.pitch), Int32(Self.pitch)])
            #expect(s.width == 320 && s.height == 240)
            #expect(s.framesFormat == AV_PIX_FMT_CUDA.rawValue && s.framesSoftware == AV_PIX_FMT_NV12.rawValue && s.framesSize == Self.size)
            #expect(s.keyframe == (i == 2))
        }
        #expect(r.sent.map(\.pts) == r.sent.map(\.pts).sorted() && Set(r.sent.map(\.pts)).count == 4)
        #expect(r.sent[1].pts - r.sent[0].pts == encoder.frameTicks)
    }

    @Test func lifetimesEndWhenNVENCIsDone() throws {
        let nvenc = RecordingNVENC()
        let encoder = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
        let releases = Releases()
        for i in 0..<5 { _ = try encoder.encode(Self.picture(i), pts: MediaTime(value: Int64(i), timescale: 30), release: releases.release(i)) }
        // The encoder's own reference is gone once the frame is sent: only NVENC's holds the picture.
        #expect(releases.total == 0 && nvenc.holding == 5)
        nvenc.complete(2)
        #expect(releases.count(0) == 1 && releases.count(1) == 1 && releases.total == 2)
        nvenc.complete(1)
        #expect(releases.count(2) == 1 && releases.total == 3)
        _ = try encoder.flush()
        #expect((0..<5).allSatisfy { releases.count($0) == 1 }, "each picture released exactly once")
        #expect(nvenc.holding == 0)
    }

    @Test func heldPicturesGoBackWithTheEncoder() throws {
        let nvenc = RecordingNVENC()
        let releases = Releases()
        do {
            let encoder = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
            for i in 0..<3 { _ = try encoder.encode(Self.picture(i), pts: MediaTime(value: Int64(i), timescale: 30), release: releases.release(i)) }
            #expect(releases.total == 0)
        }
        #expect((0..<3).allSatisfy { releases.count($0) == 1 })
    }

    @Test func aRefusedPictureIsReleasedAtOnce() throws {
        let nvenc = RecordingNVENC()
        let encoder = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
        let releases = Releases()
        #expect(throws: MediaError.self) {
            try encoder.encode(Self.picture(0, size: PixelSize(width: 640, height: 480)), pts: .zero, release: releases.release(0))
        }
        #expect(throws: MediaError.self) {
            try encoder.encode(CUDANV12Picture(luma: 0, chroma: 0, pitch: 512, width: 320, height: 240), pts: .zero, release: releases.release(1))
        }
        #expect(releases.count(0) == 1 && releases.count(1) == 1 && nvenc.record.withLock { $0.sent.isEmpty })
        // An encoder that takes frames in host memory refuses CUDA pictures, releasing them.
        let x264 = try VideoEncoder(settings: Self.settings { $0.encoder = .x264 }, globalHeader: true)
        #expect(throws: MediaError.self) { try x264.encode(Self.picture(2), pts: .zero, release: releases.release(2)) }
        #expect(releases.count(2) == 1)
        // A CUDA frame the encoder did not lend is refused; an encoder that is not NVENC lends none.
        let foreign = CUDAFrameTarget(picture: Self.picture(3), owner: NSObject())
        #expect(throws: MediaError.self) { try encoder.encode(lent: foreign, pts: .zero) }
        #expect(x264.lendCUDAFrame(Self.size) == nil)
    }

    /// A file: the high-quality tune, VBR at the bit rate, no B-frames, IDR on demand.
    @Test func fileSettings() throws {
        let nvenc = RecordingNVENC()
        _ = try VideoEncoder(settings: Self.settings { $0.bitrate = 6_000_000; $0.gop = 60 }, globalHeader: true, nvenc: nvenc)
        let o = try #require(nvenc.record.withLock { $0.opened })
        #expect(o.options == ["preset": "p2", "tune": "hq", "forced-idr": "1", "rc": "vbr"])
        #expect(o.pixelFormat == AV_PIX_FMT_CUDA.rawValue && o.framesContext)
        #expect(o.maxBFrames == 0 && o.gop == 60 && o.bitRate == 6_000_000 && o.maxRate == 0)
    }

    /// A live output: ultra-low latency, no reordering delay, CBR with a one-second VBV; --maxrate/--bufsize when given.
    @Test func liveSettings() throws {
        let nvenc = RecordingNVENC()
        _ = try VideoEncoder(settings: Self.settings { $0.tune = "zerolatency"; $0.bitrate = 4_000_000; $0.preset = "ultrafast" },
                             globalHeader: false, nvenc: nvenc)
        let o = try #require(nvenc.record.withLock { $0.opened })
        #expect(o.options == ["preset": "p1", "tune": "ull", "zerolatency": "1", "delay": "0", "forced-idr": "1", "rc": "cbr"])
        #expect(o.maxBFrames == 0 && o.bitRate == 4_000_000 && o.maxRate == 4_000_000 && o.bufferSize == 4_000_000)
        let capped = RecordingNVENC()
        _ = try VideoEncoder(settings: Self.settings { $0.bitrate = 4_000_000; $0.maxrate = 5_000_000; $0.bufsize = 2_000_000 },
                             globalHeader: true, nvenc: capped)
        let c = try #require(capped.record.withLock { $0.opened })
        #expect(c.options["rc"] == "vbr" && c.maxRate == 5_000_000 && c.bufferSize == 2_000_000)
    }

    /// --qp: a constant QP, no rate; B-frames where asked for.
    @Test func constantQP() throws {
        let nvenc = RecordingNVENC()
        _ = try VideoEncoder(settings: Self.settings { $0.qp = 23; $0.maxBFrames = 2; $0.preset = "slow" }, globalHeader: true, nvenc: nvenc)
        let o = try #require(nvenc.record.withLock { $0.opened })
        #expect(o.options == ["preset": "p5", "tune": "hq", "forced-idr": "1", "rc": "constqp", "init_qpI": "23", "init_qpP": "23", "init_qpB": "23"])
        #expect(o.bitRate == 0 && o.maxBFrames == 2)
    }

    @Test(arguments: [("ultrafast", "p1"), ("superfast", "p1"), ("veryfast", "p2"), ("faster", "p3"), ("fast", "p4"),
                      ("medium", "p4"), ("slow", "p5"), ("slower", "p6"), ("veryslow", "p7"), ("placebo", "p7")])
    func presets(x264: String, nvenc: String) { #expect(NVENCOptions.preset(x264) == nvenc) }

    /// Where NVENC cannot open, the encoder is refused naming what is missing; nothing is opened.
    @Test func absentNVENCIsRefused() throws {
        let nvenc = RecordingNVENC(facts: EncoderPlanTests.h200NVENC)
        #expect {
            _ = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
        } throws: { e in
            (e as? MediaError)?.description == "encoder h264_nvenc unavailable: " + EncoderPlanTests.h200Absent
        }
        #expect(nvenc.record.withLock { $0.opened == nil && $0.framesInitialized == 0 })
    }

    /// What FFmpeg logs about the encoder while it opens is kept (NVENC says why there, not in its code).
    @Test func openLogIsKept() throws {
        let codec = try #require(avcodec_find_encoder_by_name("libx264"))
        let c = try FFCodecContext(codec)
        c.raw.pointee.width = 15; c.raw.pointee.height = 15
        c.raw.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        c.raw.pointee.time_base = AVRational(num: 1, den: 30)
        let capture = FFLogCapture(object: UnsafeRawPointer(c.raw))
        #expect(throws: FFmpegError.self) { try c.open() }
        capture.end()
        #expect(capture.text.contains("width not divisible by 2"), "\(capture.text)")
        #expect(FFLogCapture(object: nil).text.isEmpty)
    }

    /// With a CUDA driver: the frames context is made on the driver's device
    /// (primary context) and frames wrap real device memory; NVENC's open is
    /// still the recording stand-in (the H200 has no engine).
    @Test(.enabled(if: (try? CUDADriver.shared.get()) != nil, "needs the NVIDIA driver (CUDA device 0)"))
    func realCUDAMemory() throws {
        let nvenc = RecordingNVENC(realDevice: true)
        let encoder = try VideoEncoder(settings: Self.settings(), globalHeader: true, nvenc: nvenc)
        let driver = try CUDADriver.shared.get()
        let context = try driver.primaryContext(ordinal: 0)
        let memory = try CUDAExportableMemory(context: context, bytes: Self.pitch * 360)
        let releases = Releases()
        let p = CUDANV12Picture(luma: memory.address, chroma: memory.address + UInt64(Self.pitch * 240), pitch: Self.pitch, width: 320, height: 240)
        _ = try encoder.encode(p, pts: .zero, release: releases.release(0))
        let s = try #require(nvenc.record.withLock { $0.sent.first })
        #expect(s.luma == memory.address && s.framesSoftware == AV_PIX_FMT_NV12.rawValue)
        nvenc.complete(1)
        #expect(releases.count(0) == 1)
        // A frame of the encoder's own pool, lent to be filled device to device, comes back as itself.
        let lent = try #require(encoder.lendCUDAFrame(Self.size))
        #expect(encoder.lendCUDAFrame(PixelSize(width: 640, height: 480)) == nil)
        _ = try encoder.encode(lent: lent, pts: MediaTime(value: 1, timescale: 30), keyframe: true)
        let again = try #require(nvenc.record.withLock { $0.sent.last })
        #expect(again.luma == lent.picture.luma && again.chroma == lent.picture.chroma && again.keyframe)
        #expect(again.linesizes == [Int32(lent.picture.pitch), Int32(lent.picture.pitch)])
    }
}

/// Why NVENC is absent, from what the engine and FFmpeg answered.
@Suite struct NVENCAbsenceTests {
    static let h200 = "NVIDIA H200 (CUDA device 0)"

    @Test(arguments: [
        (1, "no NVENC engine on this GPU (NVIDIA H200 (CUDA device 0): its encode session does not open: no encode device (1))"),
        (2, "no NVENC engine on this GPU (NVIDIA H200 (CUDA device 0): its encode session does not open: unsupported device (2))"),
        (5, "no NVENC engine on this GPU (NVIDIA H200 (CUDA device 0): its encode session does not open: device does not exist (5))"),
        (10, "NVENC session limit reached on NVIDIA H200 (CUDA device 0) (out of memory (10)): too many encode sessions are open"),
        (21, "NVENC session limit reached on NVIDIA H200 (CUDA device 0) (incompatible client key (21)): too many encode sessions are open"),
        (15, "NVIDIA driver too old for FFmpeg's NVENC encoders: its encode session refuses the API version (invalid version (15))"),
        (20, "NVENC did not open: OpenEncodeSessionEx: generic error (20)"),
    ])
    func sessionStatus(status: Int, reason: String) {
        #expect(NVENCAbsence.session(status: status, gpu: Self.h200, codec: .h264)?.description == reason)
        #expect(NVENCAbsence.session(status: 0, gpu: Self.h200, codec: .h264) == nil)
    }

    /// FFmpeg 5.1's nvenc messages as it logs them when the open fails.
    @Test(arguments: [
        ("OpenEncodeSessionEx failed: unsupported device (2): (no details)", NVENCAbsence.noEngine(gpu: h200, detail: "its encode session does not open: unsupported device (2)")),
        ("OpenEncodeSessionEx failed: out of memory (10): (no details)", .sessionLimit(gpu: h200, detail: "out of memory (10)")),
        ("Cannot load libnvidia-encode.so.1\nThe minimum required Nvidia driver for nvenc is 470.57.02 or newer",
         .noEncodeLibrary("Cannot load libnvidia-encode.so.1; The minimum required Nvidia driver for nvenc is 470.57.02 or newer")),
        ("Driver does not support the required nvenc API version. Required: 11.1 Found: 11.0",
         .driverTooOld("Driver does not support the required nvenc API version. Required: 11.1 Found: 11.0")),
        ("No capable devices found", .noEngine(gpu: h200, detail: "No capable devices found")),
        ("Codec not supported", .codecUnsupported(gpu: h200, codec: .h264, detail: "Codec not supported")),
        ("", .openFailed("avcodec_open2: Function not implemented")),
    ])
    func ffmpegLog(log: String, absence: NVENCAbsence) {
        #expect(NVENCAbsence.ffmpegOpen(log: log, error: "avcodec_open2: Function not implemented", gpu: Self.h200, codec: .h264) == absence)
    }

    static func report(_ change: (inout NVENCDeviceReport) -> Void) -> NVENCDeviceReport {
        var r = NVENCDeviceReport(label: "NVIDIA L4 (CUDA device 0)", ordinal: 0, driverAPI: "12.1", builtAPI: "11.1", driverNewEnough: true,
                                  sessionStatus: 0, codecs: [NVENCCodecLimits(codec: .h264, maxWidth: 4096, maxHeight: 4096, maxBFrames: 4, tenBit: false)])
        change(&r)
        return r
    }

    /// The engine's answer, machine by machine.
    @Test func engineAnswers() {
        #expect(NVENCProbe.absence(in: Self.report { _ in }, codec: .h264) == nil)
        #expect(NVENCProbe.absence(in: Self.report { $0.label = Self.h200; $0.sessionStatus = 2; $0.codecs = [] }, codec: .h264)
                == .noEngine(gpu: Self.h200, detail: "its encode session does not open: unsupported device (2)"))
        #expect(NVENCProbe.absence(in: Self.report { $0.driverAPI = "11.0"; $0.driverNewEnough = false; $0.sessionStatus = nil }, codec: .h264)?.description
                == "NVIDIA driver too old for FFmpeg's NVENC encoders: it takes NVENC API 11.0, FFmpeg's encoders need 11.1")
        #expect(NVENCProbe.absence(in: Self.report { _ in }, codec: .hevc)?.description
                == "NVENC on NVIDIA L4 (CUDA device 0) does not encode HEVC (the engine lists h264)")
    }

    /// `diptych probe`'s lines: each codec with its own limits, or one line where all are absent alike.
    @Test func probeLines() {
        #expect(NVENCFacts.probeLines([(.h264, EncoderPlanTests.l4), (.hevc, EncoderPlanTests.l4)]) == [
            "h264_nvenc: present on NVIDIA L4 (CUDA device 0), NVENC API 12.1; h264 up to 4096x4096, 4 B-frames",
            "hevc_nvenc: present on NVIDIA L4 (CUDA device 0), NVENC API 12.1; hevc up to 8192x8192, 5 B-frames, 10-bit"])
        #expect(NVENCFacts.probeLines([(.h264, EncoderPlanTests.l4H264Only), (.hevc, EncoderPlanTests.l4H264Only)])[1]
                == "hevc_nvenc: absent: NVENC on NVIDIA L4 (CUDA device 0) does not encode HEVC (the engine lists h264)")
        #expect(NVENCFacts.probeLines([(.h264, EncoderPlanTests.h200NVENC), (.hevc, EncoderPlanTests.h200NVENC)])
                == ["absent: " + EncoderPlanTests.h200Absent])
    }

    /// This machine as the take finds it: a software renderer has no CUDA device.
    @Test func withoutCUDA() {
        let f = NVENCProbe.facts(codec: .h264, cudaDevice: .failure(CUDAUnavailable("the GL context runs on a software renderer (llvmpipe)")))
        #expect(f == .unavailable(.noCUDA("the GL context runs on a software renderer (llvmpipe)")))
        #expect("\(NVENCAbsence.noCUDA("x"))" == "no CUDA device for NVENC: x")
    }

    /// On a machine with the NVIDIA driver: NVENC is examined for real on
    /// device 0, and where it is absent the reason names what is missing,
    /// never FFmpeg's bare error. On the H200: no engine.
    @Test(.enabled(if: (try? CUDADriver.shared.get()) != nil, "needs the NVIDIA driver (CUDA device 0)"))
    func thisMachinesDevice() {
        for codec in VideoCodec.allCases {
            switch NVENCProbe.facts(codec: codec, cudaDevice: .success(0)) {
            case .available(_, let ordinal, _, let limits):
                #expect(ordinal == 0 && limits.contains { $0.codec == codec })
            case .unavailable(let a):
                if case .openFailed = a { Issue.record("NVENC's absence not named: \(a)") }
                let name = CUDADriver.shared.map { $0.deviceName(0) }
                if case .success(let n) = name, n.contains("H200") || n.contains("H100") || n.contains("A100") {
                    guard case .noEngine = a else { Issue.record("\(n): expected no engine, got \(a)"); continue }
                }
            }
        }
    }
}
