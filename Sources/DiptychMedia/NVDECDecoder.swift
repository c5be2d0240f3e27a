import CFFmpeg
import DiptychCore
import Synchronization

/// A video stream decoded by NVDEC through FFmpeg's `cuda` hwaccel. Frames
/// stay in device memory (`AV_PIX_FMT_CUDA`, NV12 or P010): each is one of
/// NVDEC's output surfaces, mapped until the last reference to the frame goes
/// (FFmpeg 5.1 hands them out without a copy), so the decoder has room for
/// `heldSurfaces` frames the take holds besides the ones it decodes from.
/// When the stream changes beyond what NVDEC decodes (a new size or format
/// its setup refuses), FFmpeg's format negotiation fails and `lost` says why.
final class NVDECDecoder: FrameDecoder {
    let context: FFCodecContext
    let nativeFormat: AVPixelFormat
    let deliveredFormat = PixelFormat.nv12
    let decoded = FFFrame()
    /// The CUDA device the frames live on.
    let ordinal: Int
    var kind: DecoderKind { .nvdec }
    var lost: String? { negotiation.lost.withLock { $0 } }
    private let negotiation = Negotiation()

    /// Frames a take holds at once beyond the decoder's own: the reader's
    /// queue, the clock's pending and held frames, the GPU's frames in flight.
    static let heldSurfaces = 12
    /// NVDEC's limit on a decoder's surfaces.
    static let maximumSurfaces = 32

    /// What format negotiation found (FFmpeg calls `get_format` on the decoding thread).
    final class Negotiation: Sendable {
        let lost = Mutex<String?>(nil)
        let offered = Mutex(false)
    }

    init(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, hardwareDevice: UnsafeMutablePointer<AVBufferRef>,
         ordinal: Int, path: String) throws(MediaError) {
        self.ordinal = ordinal
        do {
            context = try FFCodecContext(decoding: stream.pointee.codecpar, codec: codec)
            let c = context.raw
            c.pointee.hw_device_ctx = av_buffer_ref(hardwareDevice)
            c.pointee.opaque = Unmanaged.passUnretained(negotiation).toOpaque()
            c.pointee.get_format = nvdecGetFormat
            // One thread: the engine decodes; the CPU only parses.
            c.pointee.thread_count = 1
            c.pointee.pkt_timebase = stream.pointee.time_base
            try context.open()
        } catch {
            throw .unsupportedFormat(path: path, detail: "cannot open \(String(cString: codec.pointee.name)) decoder with NVDEC: \(error.message)")
        }
        nativeFormat = AVPixelFormat(rawValue: stream.pointee.codecpar.pointee.format)
    }

    deinit { context.raw.pointee.opaque = nil }

    func send(_ packet: FFPacket?) -> Int32 { context.send(packet) }
    func receive() -> Int32 { context.receive(decoded) }

    /// The FFmpeg decoder that decodes `id` through NVDEC (a CUDA device
    /// configuration, not a wrapper such as `h264_cuvid`), if this FFmpeg has one.
    static func ffmpegDecoder(for id: AVCodecID) -> UnsafePointer<AVCodec>? {
        var opaque: UnsafeMutableRawPointer?
        while let c = av_codec_iterate(&opaque) {
            guard c.pointee.id == id, av_codec_is_decoder(c) != 0, c.pointee.capabilities & AV_CODEC_CAP_HARDWARE == 0 else { continue }
            var i: Int32 = 0
            while let cfg = avcodec_get_hw_config(c, i) {
                if cfg.pointee.device_type == AV_HWDEVICE_TYPE_CUDA, cfg.pointee.methods & Int32(AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0 {
                    return c
                }
                i += 1
            }
        }
        return nil
    }

    /// A decoded frame's planes as a `CUDAFrame`, its references moved into
    /// the returned holder (which keeps NVDEC's surface until it goes).
    func cudaFrame(from frame: FFFrame, pts: MediaTime, matrix: ColorMatrix, range: ColorRange,
                   sampleAspect: SampleAspectRatio, path: String) throws(MediaError) -> (CUDAFrame, NVDECFrameHolder) {
        guard frame.pixelFormat == AV_PIX_FMT_CUDA, let hw = frame.raw.pointee.hw_frames_ctx else {
            throw .readFailed(path: path, detail: "NVDEC delivered a \(pixelFormatName(frame.pixelFormat)) frame")
        }
        let sw = hw.pointee.data.withMemoryRebound(to: AVHWFramesContext.self, capacity: 1) { $0.pointee.sw_format }
        let format: CUDAFrame.Format
        switch sw {
        case AV_PIX_FMT_NV12: format = .nv12
        case AV_PIX_FMT_P010LE: format = .p010
        default: throw .unsupportedFormat(path: path, detail: "NVDEC frames in \(pixelFormatName(sw)) (the compositor takes NV12 and P010)")
        }
        let full = frame.raw.pointee.color_range == AVCOL_RANGE_JPEG
        let planes = (0..<2).map { CUDAFrame.Plane(address: UInt64(UInt(bitPattern: frame.data($0))), pitch: Int(frame.linesize($0))) }
        let picture = CUDAFrame(width: Int(frame.width), height: Int(frame.height), format: format, planes: planes, device: ordinal,
                                matrix: matrix, range: full ? .full : range, sampleAspect: sampleAspect)
        let owned = FFFrame()
        owned.take(from: frame)
        return (picture, NVDECFrameHolder(owned, pts: pts, matrix: matrix, range: picture.range, sampleAspect: sampleAspect))
    }
}

/// FFmpeg's format negotiation (`AVCodecContext.get_format`): NVDEC's
/// `AV_PIX_FMT_CUDA` with a frames context sized for the frames a take
/// holds, or nothing (the decoder then fails the packet and the source falls
/// back to the CPU, `FileSource`) when NVDEC is not offered or could not be set up.
private func nvdecGetFormat(_ ctx: UnsafeMutablePointer<AVCodecContext>?, _ formats: UnsafePointer<AVPixelFormat>?) -> AVPixelFormat {
    guard let ctx, let formats, let opaque = ctx.pointee.opaque else { return AV_PIX_FMT_NONE }
    let n = Unmanaged<NVDECDecoder.Negotiation>.fromOpaque(opaque).takeUnretainedValue()
    var i = 0, offered = false
    while formats[i] != AV_PIX_FMT_NONE { if formats[i] == AV_PIX_FMT_CUDA { offered = true }; i += 1 }
    let what = "\(ctx.pointee.coded_width)x\(ctx.pointee.coded_height) \(pixelFormatName(ctx.pointee.sw_pix_fmt))"
    guard offered else {
        // Offered before in this negotiation: FFmpeg's NVDEC setup refused it.
        let tried = n.offered.withLock { t in defer { t = false }; return t }
        n.lost.withLock { $0 = $0 ?? (tried ? "NVDEC could not set up for \(what)" : "FFmpeg has no NVDEC path for \(what)") }
        return AV_PIX_FMT_NONE
    }
    if let why = framesContext(ctx) {
        n.lost.withLock { $0 = $0 ?? "NVDEC frames for \(what): \(why)" }
        return AV_PIX_FMT_NONE
    }
    n.offered.withLock { $0 = true }
    return AV_PIX_FMT_CUDA
}

/// Installs the decoder's frames context: FFmpeg's parameters with room for
/// `NVDECDecoder.heldSurfaces` more surfaces, and a pool that allocates
/// nothing (NVDEC's mapped surfaces are the frames, as FFmpeg's own default does).
private func framesContext(_ ctx: UnsafeMutablePointer<AVCodecContext>) -> String? {
    var frames: UnsafeMutablePointer<AVBufferRef>?
    var r = avcodec_get_hw_frames_parameters(ctx, ctx.pointee.hw_device_ctx, AV_PIX_FMT_CUDA, &frames)
    guard r >= 0, let frames else { return "avcodec_get_hw_frames_parameters: \(avErrorString(r))" }
    frames.pointee.data.withMemoryRebound(to: AVHWFramesContext.self, capacity: 1) { fc in
        fc.pointee.initial_pool_size = min(Int32(NVDECDecoder.maximumSurfaces), fc.pointee.initial_pool_size + 3 + Int32(NVDECDecoder.heldSurfaces))
        fc.pointee.pool = av_buffer_pool_init(0, { _ in av_buffer_create(nil, 0, nil, nil, 0) })
        fc.pointee.free = { fc in av_buffer_pool_uninit(&fc!.pointee.pool) }
    }
    r = av_hwframe_ctx_init(frames)
    var f: UnsafeMutablePointer<AVBufferRef>? = frames
    guard r >= 0 else { av_buffer_unref(&f); return "av_hwframe_ctx_init: \(avErrorString(r))" }
    av_buffer_unref(&ctx.pointee.hw_frames_ctx)
    ctx.pointee.hw_frames_ctx = frames
    return nil
}

/// Holds one NVDEC frame (its mapped surface) for as long as any copy of
/// the `InputFrame` that carries it exists; the compositor keeps it until
/// the GPU work that read it has completed.
final class NVDECFrameHolder: CUDAFrameHolder, @unchecked Sendable {
    private let frame: FFFrame
    private let lock = Mutex(())
    let pts: MediaTime
    let matrix: ColorMatrix
    let range: ColorRange
    let sampleAspect: SampleAspectRatio

    init(_ frame: FFFrame, pts: MediaTime, matrix: ColorMatrix, range: ColorRange, sampleAspect: SampleAspectRatio) {
        self.frame = frame; self.pts = pts; self.matrix = matrix; self.range = range; self.sampleAspect = sampleAspect
    }

    /// `av_hwframe_transfer_data` into host memory (NV12, or I420 from P010).
    func download() -> VideoFrame? {
        lock.withLock { _ -> VideoFrame? in
            let host = FFFrame()
            guard av_hwframe_transfer_data(host.raw, frame.raw, 0) >= 0 else { return nil }
            host.raw.pointee.color_range = frame.raw.pointee.color_range
            var v = try? FrameConverter(path: "NVDEC frame").videoFrame(from: host, pts: pts, matrix: matrix, range: range)
            v?.sampleAspect = sampleAspect
            return v
        }
    }
}
