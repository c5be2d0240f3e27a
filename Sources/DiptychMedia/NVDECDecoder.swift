import CFFmpeg
import DiptychCore
import DiptychCUDA
import Synchronization

/// A video stream decoded by NVDEC through FFmpeg's `cuda` hwaccel. Frames
/// stay in device memory (`AV_PIX_FMT_CUDA`, NV12 or P010). FFmpeg 5.1 hands
/// out NVDEC's output surfaces themselves, mapped until the frame goes, and a
/// decoder has few of them (its pictures in use, plus `heldSurfaces`): a take
/// that held them through its queues would starve the decoder. So each frame
/// is copied device to device into a picture of the decoder's
/// `CUDAPicturePool` and the surface goes back to the decoder once that copy
/// has completed (FFmpeg 6 does the same by default); the take holds the copy.
/// The pool's pictures are shareable: a compositor on the same device reads
/// the copy where it lies instead of copying it again (docs/ARCHITECTURE.md,
/// "Pictures read in place").
/// When the stream changes beyond what NVDEC decodes (a new size or format
/// its setup refuses), FFmpeg's format negotiation fails and `lost` says why.
final class NVDECDecoder: FrameDecoder {
    let context: FFCodecContext
    let nativeFormat: AVPixelFormat
    let deliveredFormat = PixelFormat.nv12
    let decoded = FFFrame()
    /// The CUDA device the frames live on.
    let ordinal: Int
    /// Where each decoded frame is copied (its surface then goes back at once).
    let pictures: CUDAPicturePool
    var kind: DecoderKind { .nvdec }
    var lost: String? { negotiation.lost.withLock { $0 } }
    private let negotiation = Negotiation()

    /// Surfaces beyond the decoder's own pictures: the frame being copied out,
    /// and room for the decoder to run ahead of the copies.
    static let heldSurfaces = 4
    /// NVDEC's limit on a decoder's surfaces.
    static let maximumSurfaces = 32

    /// What format negotiation found (FFmpeg calls `get_format` on the decoding thread).
    final class Negotiation: Sendable {
        let lost = Mutex<String?>(nil)
        let offered = Mutex(false)
    }

    init(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, hardwareDevice: UnsafeMutablePointer<AVBufferRef>,
         cuda: CUDAPrimaryContext, path: String) throws(MediaError) {
        ordinal = cuda.ordinal
        do throws(CUDAError) { pictures = try CUDAPicturePool(context: cuda, shareable: true) } catch {
            throw .unsupportedFormat(path: path, detail: "NVDEC: \(error)")
        }
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

    /// A decoded frame as a `CUDAFrame` in a picture of `pictures`: copied
    /// there, after which `frame` is blanked (its surface back to the decoder).
    /// Throws `CUDAError` when the copy fails (`frame` is then left as it was).
    func cudaFrame(from frame: FFFrame, pts: MediaTime, matrix: ColorMatrix, range: ColorRange,
                   sampleAspect: SampleAspectRatio, path: String) throws(MediaError) -> Result<(CUDAFrame, NVDECFrameHolder), CUDAError> {
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
        var picture = CUDAFrame(width: Int(frame.width), height: Int(frame.height), format: format, planes: [], device: ordinal,
                                matrix: matrix, range: full ? .full : range, sampleAspect: sampleAspect)
        let sources = (0..<2).map { i in
            (address: UInt64(UInt(bitPattern: frame.data(i))), pitch: Int(frame.linesize(i)),
             rowBytes: picture.rowBytes(plane: i), rows: picture.rows(plane: i))
        }
        let copy: CUDAPicture
        do throws(CUDAError) { copy = try pictures.copy(sources) } catch { return .failure(error) }
        frame.unref()
        picture.planes = copy.planes.map { CUDAFrame.Plane(address: $0.address, pitch: $0.pitch) }
        return .success((picture, NVDECFrameHolder(copy, pool: pictures, frame: picture, pts: pts)))
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

/// Holds one NVDEC frame's picture (device memory of the decoder's pool)
/// for as long as any copy of the `InputFrame` that carries it exists; the
/// compositor keeps it until the GPU work that read it has completed.
final class NVDECFrameHolder: CUDAPictureHolder, Sendable {
    private let picture: CUDAPicture
    private let pool: CUDAPicturePool
    private let frame: CUDAFrame
    let pts: MediaTime

    init(_ picture: CUDAPicture, pool: CUDAPicturePool, frame: CUDAFrame, pts: MediaTime) {
        self.picture = picture; self.pool = pool; self.frame = frame; self.pts = pts
    }

    var sharedMemory: (any ShareableDeviceMemory)? { picture.memory }

    /// The planes copied into host memory (NV12, or I420 from P010).
    func download() -> VideoFrame? {
        let host = FFFrame()
        do {
            try host.allocate(format: frame.format == .nv12 ? AV_PIX_FMT_NV12 : AV_PIX_FMT_P010LE,
                              width: Int32(frame.width), height: Int32(frame.height))
        } catch { return nil }
        let destinations = (0..<2).compactMap { i in host.data(i).map { (UnsafeMutableRawPointer($0), Int(host.linesize(i))) } }
        guard destinations.count == 2, (try? pool.download(picture, to: destinations)) != nil else { return nil }
        var v = try? FrameConverter(path: "NVDEC frame").videoFrame(from: host, pts: pts, matrix: frame.matrix, range: frame.range)
        v?.sampleAspect = frame.sampleAspect
        return v
    }
}
