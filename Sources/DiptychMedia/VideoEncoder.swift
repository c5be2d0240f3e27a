import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// How the video of a take is encoded.
public struct VideoEncoderSettings: Hashable, Sendable {
    public var size: PixelSize
    public var frameRate: FrameRate
    public var codec: VideoCodec
    public var encoder: EncoderChoice
    /// Target bit rate in bits per second (default 10 Mbit/s).
    public var bitrate: Int
    /// x264/x265 preset (`ultrafast` ... `veryslow`).
    public var preset: String
    /// x264/x265 tune (`zerolatency`, `film`, ...), nil for none.
    public var tune: String?
    /// Frames between keyframes; nil = one second.
    public var gop: Int?
    /// Maximum consecutive B-frames; nil = none in MP4/FLV (see `MediaWriter`),
    /// the preset's default in MPEG-TS.
    public var maxBFrames: Int?
    /// Colour signalled in the stream (the frames' YUV encoding).
    public var matrix: ColorMatrix
    public var range: ColorRange
    /// Where VA-API render nodes are looked for.
    public var driDirectory: String
    /// Encoder threads; 0 lets FFmpeg choose.
    public var threads = 0

    public init(size: PixelSize, frameRate: FrameRate, codec: VideoCodec = .h264, encoder: EncoderChoice = .auto,
                bitrate: Int = 10_000_000, preset: String = "veryfast", tune: String? = nil, gop: Int? = nil,
                maxBFrames: Int? = nil, matrix: ColorMatrix = .bt709, range: ColorRange = .limited,
                driDirectory: String = EncoderProbe.defaultDRIDirectory) {
        self.size = size; self.frameRate = frameRate; self.codec = codec; self.encoder = encoder
        self.bitrate = bitrate; self.preset = preset; self.tune = tune; self.gop = gop; self.maxBFrames = maxBFrames
        self.matrix = matrix; self.range = range; self.driDirectory = driDirectory
    }

    /// Keyframe interval in frames (one second unless `gop` is set).
    public var keyframeInterval: Int { gop ?? max(1, Int(frameRate.fps.rounded())) }
}

/// A GPU image shared as a dma-buf (DRM PRIME), for the zero-copy VA-API path.
/// All planes live in the one buffer `fd`. `release` runs when the encoder
/// no longer needs the buffer (the caller may then reuse it or close `fd`).
public struct DMABufFrame: Sendable {
    public var fd: Int32
    /// DRM fourcc (`NV12` = 0x3231564E).
    public var fourcc: UInt32
    /// DRM format modifier (0 = linear).
    public var modifier: UInt64
    public var width: Int
    public var height: Int
    /// Total size of the buffer in bytes.
    public var size: Int
    public var offsets: [Int]
    public var pitches: [Int]
    public var pts: MediaTime
    public var release: (@Sendable () -> Void)?

    public static let fourccNV12: UInt32 = 0x3231_564E

    public init(fd: Int32, fourcc: UInt32 = DMABufFrame.fourccNV12, modifier: UInt64 = 0, width: Int, height: Int,
                size: Int, offsets: [Int], pitches: [Int], pts: MediaTime, release: (@Sendable () -> Void)? = nil) {
        self.fd = fd; self.fourcc = fourcc; self.modifier = modifier; self.width = width; self.height = height
        self.size = size; self.offsets = offsets; self.pitches = pitches; self.pts = pts; self.release = release
    }
}

/// Keeps a `VideoFrame` (or a dma-buf) alive while FFmpeg holds the AVFrame wrapping it.
private final class FrameKeepAlive {
    let frame: VideoFrame?
    let release: (@Sendable () -> Void)?
    init(frame: VideoFrame?, release: (@Sendable () -> Void)? = nil) { self.frame = frame; self.release = release }
    deinit { release?() }
}

private func releaseKeepAlive(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    guard let opaque else { return }
    Unmanaged<FrameKeepAlive>.fromOpaque(opaque).release()
}

private func freeDescriptorAndKeepAlive(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    av_free(data)
    guard let opaque else { return }
    Unmanaged<FrameKeepAlive>.fromOpaque(opaque).release()
}

/// One compressed video packet, timestamps in `timeBase`.
final class EncodedPacket {
    let packet: UnsafeMutablePointer<AVPacket>
    init(moving src: UnsafeMutablePointer<AVPacket>) { packet = av_packet_alloc(); av_packet_move_ref(packet, src) }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
}

/// An H.264/HEVC encoder: libx264/libx265 on CPU frames, or h264_vaapi/hevc_vaapi
/// on frames uploaded (NV12) or mapped (dma-buf) to VA surfaces.
///
/// The software path takes NV12 frames without copying (libx264 reads NV12
/// directly; for libx265 only the chroma is de-interleaved into I420).
/// Not thread-safe.
final class VideoEncoder {
    let settings: VideoEncoderSettings
    let selection: EncoderSelection
    let context: UnsafeMutablePointer<AVCodecContext>
    /// Encoder time base: 1/T with T a multiple of the frame rate's numerator,
    /// so every frame time k·den/num is an exact tick.
    let timeBase: AVRational
    /// One frame duration in `timeBase` ticks.
    let frameTicks: Int64
    private let inputFormat: AVPixelFormat
    private var hwDevice: UnsafeMutablePointer<AVBufferRef>?
    private var hwFrames: UnsafeMutablePointer<AVBufferRef>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private var scaler: OpaquePointer?
    private var lastPTS: Int64?
    private(set) var framesIn = 0
    private var flushed = false

    init(settings: VideoEncoderSettings, globalHeader: Bool) throws(MediaError) {
        self.settings = settings
        guard !settings.size.isEmpty else { throw .invalidFrame(reason: "encoder size \(settings.size) is empty") }
        let sel = try EncoderProbe.choose(codec: settings.codec, choice: settings.encoder, driDirectory: settings.driDirectory)
        selection = sel
        let size = settings.size
        guard size.width % 2 == 0, size.height % 2 == 0 else {
            let down = PixelSize(width: size.width & ~1, height: size.height & ~1)
            let up = PixelSize(width: (size.width + 1) & ~1, height: (size.height + 1) & ~1)
            throw .encoderFailed(encoder: sel.name, detail: "size \(size): 4:2:0 video needs an even width and height (use \(down) or \(up))")
        }
        guard let codec = avcodec_find_encoder_by_name(sel.name) else {
            throw .encoderUnavailable(encoder: sel.name, reason: "FFmpeg lacks the encoder")
        }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(codec)
        guard let c = ctx else { throw .encoderFailed(encoder: sel.name, detail: "out of memory") }
        let rate = settings.frameRate
        // T = lcm(90000, num) when it fits, else num itself.
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        let num = Int64(rate.numerator), den = Int64(rate.denominator)
        var ticks = 90_000 / gcd(90_000, num) * num
        if ticks > Int64(Int32.max) / 4 { ticks = num }
        timeBase = AVRational(num: 1, den: Int32(ticks))
        frameTicks = den * ticks / num

        c.pointee.width = Int32(settings.size.width)
        c.pointee.height = Int32(settings.size.height)
        c.pointee.time_base = timeBase
        c.pointee.framerate = AVRational(num: rate.numerator, den: rate.denominator)
        c.pointee.gop_size = Int32(settings.keyframeInterval)
        c.pointee.bit_rate = Int64(settings.bitrate)
        if let b = settings.maxBFrames { c.pointee.max_b_frames = Int32(b) }
        c.pointee.thread_count = Int32(clamping: max(0, settings.threads))
        c.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        if settings.matrix == .bt709 {
            c.pointee.colorspace = AVCOL_SPC_BT709; c.pointee.color_primaries = AVCOL_PRI_BT709; c.pointee.color_trc = AVCOL_TRC_BT709
        } else {
            c.pointee.colorspace = AVCOL_SPC_SMPTE170M; c.pointee.color_primaries = AVCOL_PRI_SMPTE170M; c.pointee.color_trc = AVCOL_TRC_SMPTE170M
        }
        if globalHeader { c.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }

        var opts: OpaquePointer? = nil
        defer { av_dict_free(&opts) }
        let fail: (String) -> MediaError = { .encoderFailed(encoder: sel.name, detail: $0) }
        if sel.isHardware {
            inputFormat = AV_PIX_FMT_NV12
            c.pointee.pix_fmt = AV_PIX_FMT_VAAPI
            var dev: UnsafeMutablePointer<AVBufferRef>? = nil
            var r = av_hwdevice_ctx_create(&dev, AV_HWDEVICE_TYPE_VAAPI, sel.devicePath, nil, 0)
            guard r >= 0, let dev else {
                avcodec_free_context(&ctx)
                throw .encoderUnavailable(encoder: sel.name, reason: "cannot create VA-API device on \(sel.devicePath ?? "default"): \(avErrorString(r))")
            }
            hwDevice = dev
            var frames: UnsafeMutablePointer<AVBufferRef>? = av_hwframe_ctx_alloc(dev)
            let fc = UnsafeMutableRawPointer(frames!.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self)
            fc.pointee.format = AV_PIX_FMT_VAAPI
            fc.pointee.sw_format = AV_PIX_FMT_NV12
            fc.pointee.width = c.pointee.width
            fc.pointee.height = c.pointee.height
            fc.pointee.initial_pool_size = 16
            r = av_hwframe_ctx_init(frames)
            guard r >= 0 else {
                av_buffer_unref(&frames); av_buffer_unref(&hwDevice); avcodec_free_context(&ctx)
                throw .encoderUnavailable(encoder: sel.name, reason: "cannot create VA surfaces \(settings.size) NV12: \(avErrorString(r))")
            }
            hwFrames = frames
            c.pointee.hw_frames_ctx = av_buffer_ref(frames)
        } else {
            let isX265 = sel.name == "libx265"
            inputFormat = isX265 ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12
            c.pointee.pix_fmt = inputFormat
            av_dict_set(&opts, "preset", settings.preset, 0)
            if let t = settings.tune { av_dict_set(&opts, "tune", t, 0) }
            if isX265 { av_dict_set(&opts, "x265-params", "log-level=error", 0) }
        }
        packet = av_packet_alloc()
        let r = avcodec_open2(c, codec, &opts)
        if r < 0 {
            var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p)
            av_buffer_unref(&hwFrames); av_buffer_unref(&hwDevice); avcodec_free_context(&ctx)
            throw fail("cannot open (\(settings.size) @ \(rate) fps, preset \(settings.preset)\(settings.tune.map { ", tune \($0)" } ?? "")): \(avErrorString(r))")
        }
        if let left = av_dict_get(opts, "", nil, AV_DICT_IGNORE_SUFFIX) {
            let key = String(cString: left.pointee.key), value = String(cString: left.pointee.value)
            var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p)
            av_buffer_unref(&hwFrames); av_buffer_unref(&hwDevice); avcodec_free_context(&ctx)
            throw fail("option \(key)=\(value) not recognised")
        }
        context = c
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        av_buffer_unref(&hwFrames)
        av_buffer_unref(&hwDevice)
        var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p)
        if scaler != nil { sws_freeContext(scaler) }
    }

    var name: String { selection.name }

    /// The frame's pts in encoder ticks, kept strictly increasing.
    private func ticks(for pts: MediaTime) -> Int64 {
        var t = pts.converted(to: timeBase.den).value
        if let last = lastPTS, t <= last { t = last + 1 }
        lastPTS = t
        return t
    }

    /// Encodes `frame` (NV12 preferred; I420/RGBA/BGRA are converted) and
    /// returns the packets that came out (timestamps in `timeBase`, durations set).
    func encode(_ frame: VideoFrame) throws(MediaError) -> [EncodedPacket] {
        guard frame.width == settings.size.width, frame.height == settings.size.height else {
            throw .invalidFrame(reason: "frame is \(frame.size), encoder expects \(settings.size)")
        }
        guard frame.planes.count >= frame.format.planeCount else {
            throw .invalidFrame(reason: "\(frame.format.rawValue) frame has \(frame.planes.count) planes")
        }
        var av: UnsafeMutablePointer<AVFrame>? = try makeAVFrame(frame)
        defer { av_frame_free(&av) }
        av!.pointee.pts = ticks(for: frame.pts)
        if selection.isHardware {
            var hw: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
            defer { av_frame_free(&hw) }
            var r = av_hwframe_get_buffer(hwFrames, hw, 0)
            if r >= 0 { r = av_hwframe_transfer_data(hw, av, 0) }
            guard r >= 0 else { throw .encoderFailed(encoder: name, detail: "upload to VA surface: \(avErrorString(r))") }
            hw!.pointee.pts = av!.pointee.pts
            return try send(hw)
        }
        return try send(av)
    }

    /// Encodes a dma-buf NV12 image by mapping it to a VA surface (VA-API only).
    func encode(_ image: DMABufFrame) throws(MediaError) -> [EncodedPacket] {
        guard selection.isHardware, let hwFrames else {
            image.release?()
            throw .invalidFrame(reason: "dma-buf frames need the VA-API encoder; \(name) takes CPU frames")
        }
        guard image.width == settings.size.width, image.height == settings.size.height, !image.offsets.isEmpty,
              image.offsets.count == image.pitches.count, image.offsets.count <= 4 else {
            image.release?()
            throw .invalidFrame(reason: "dma-buf \(image.width)x\(image.height) with \(image.offsets.count) planes, encoder expects \(settings.size) NV12")
        }
        // The DRM-PRIME frame: data[0] is the descriptor, buf[0] owns it and the dma-buf keep-alive.
        var src: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        defer { av_frame_free(&src) }
        let desc = av_mallocz(MemoryLayout<AVDRMFrameDescriptor>.size)!.assumingMemoryBound(to: AVDRMFrameDescriptor.self)
        let offsets = image.offsets.map { $0 }, pitches = image.pitches.map { $0 }
        diptych_drm_descriptor_fill(desc, image.fd, image.size, image.modifier, image.fourcc, Int32(offsets.count), offsets, pitches)
        let keep = Unmanaged.passRetained(FrameKeepAlive(frame: nil, release: image.release)).toOpaque()
        let buf = av_buffer_create(UnsafeMutableRawPointer(desc).assumingMemoryBound(to: UInt8.self),
                                   MemoryLayout<AVDRMFrameDescriptor>.size, freeDescriptorAndKeepAlive, keep, 0)
        src!.pointee.format = AV_PIX_FMT_DRM_PRIME.rawValue
        src!.pointee.width = Int32(image.width)
        src!.pointee.height = Int32(image.height)
        diptych_frame_set_buf(src, 0, buf)
        diptych_frame_set_plane(src, 0, UnsafeMutableRawPointer(desc).assumingMemoryBound(to: UInt8.self), 0)
        // Map into a VA surface of the encoder's frames context (vaapi map_to from DRM PRIME).
        var dst: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        defer { av_frame_free(&dst) }
        dst!.pointee.format = AV_PIX_FMT_VAAPI.rawValue
        dst!.pointee.hw_frames_ctx = av_buffer_ref(hwFrames)
        let r = av_hwframe_map(dst, src, Int32(AV_HWFRAME_MAP_READ))
        guard r >= 0 else { throw .encoderFailed(encoder: name, detail: "map dma-buf (fourcc 0x\(String(image.fourcc, radix: 16)), modifier 0x\(String(image.modifier, radix: 16))) to VA surface: \(avErrorString(r))") }
        dst!.pointee.pts = ticks(for: image.pts)
        return try send(dst)
    }

    /// Drains the encoder (end of stream). Further `encode` calls are a bug.
    func flush() throws(MediaError) -> [EncodedPacket] {
        guard !flushed else { return [] }
        flushed = true
        return try send(nil)
    }

    private func send(_ frame: UnsafeMutablePointer<AVFrame>?) throws(MediaError) -> [EncodedPacket] {
        precondition(!flushed || frame == nil, "VideoEncoder.encode after flush")
        let r = avcodec_send_frame(context, frame)
        if r < 0 && r != averrorEOF { throw .encoderFailed(encoder: name, detail: avErrorString(r)) }
        if frame != nil { framesIn += 1 }
        var out: [EncodedPacket] = []
        while true {
            let rr = avcodec_receive_packet(context, packet)
            if rr == averrorEAGAIN || rr == averrorEOF { break }
            if rr < 0 { throw .encoderFailed(encoder: name, detail: avErrorString(rr)) }
            // FFmpeg 5.1's libx264 leaves duration 0: the muxer needs it for the last sample.
            if packet.pointee.duration <= 0 { packet.pointee.duration = frameTicks }
            out.append(EncodedPacket(moving: packet))
        }
        return out
    }

    /// Wraps `frame` as an AVFrame in `inputFormat`, without copying when the
    /// formats match; the AVFrame's buffer keeps `frame` alive.
    private func makeAVFrame(_ frame: VideoFrame) throws(MediaError) -> UnsafeMutablePointer<AVFrame> {
        let av = av_frame_alloc()!
        av.pointee.width = Int32(frame.width)
        av.pointee.height = Int32(frame.height)
        av.pointee.format = inputFormat.rawValue
        av.pointee.color_range = frame.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        let keep = Unmanaged.passRetained(FrameKeepAlive(frame: frame)).toOpaque()
        let p0 = UnsafeMutablePointer(mutating: frame.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self))
        diptych_frame_set_buf(av, 0, av_buffer_create(p0, frame.planes[0].availableBytes, releaseKeepAlive, keep, Int32(AV_BUFFER_FLAG_READONLY)))
        let srcFormat = avPixelFormat(frame.format)
        if srcFormat == inputFormat {
            for i in 0..<frame.format.planeCount {
                let p = frame.planes[i]
                diptych_frame_set_plane(av, Int32(i), UnsafeMutablePointer(mutating: p.baseAddress.assumingMemoryBound(to: UInt8.self)), Int32(p.stride))
            }
            return av
        }
        // NV12 → I420 for libx265: Y stays where it is, only the chroma is de-interleaved.
        if frame.format == .nv12 && inputFormat == AV_PIX_FMT_YUV420P {
            let cw = (frame.width + 1) / 2, ch = (frame.height + 1) / 2
            let chroma = av_buffer_alloc(2 * cw * ch)!
            diptych_frame_set_buf(av, 1, chroma)
            let u = chroma.pointee.data!, v = u + cw * ch
            let uv = frame.planes[1]
            let src = uv.baseAddress.assumingMemoryBound(to: UInt8.self)
            for y in 0..<ch {
                let row = src + y * uv.stride, ur = u + y * cw, vr = v + y * cw
                for x in 0..<cw { ur[x] = row[2 * x]; vr[x] = row[2 * x + 1] }
            }
            diptych_frame_set_plane(av, 0, p0, Int32(frame.planes[0].stride))
            diptych_frame_set_plane(av, 1, u, Int32(cw))
            diptych_frame_set_plane(av, 2, v, Int32(cw))
            return av
        }
        // Anything else: one swscale pass into a new buffer.
        var tmp: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        tmp!.pointee.width = av.pointee.width; tmp!.pointee.height = av.pointee.height
        tmp!.pointee.format = inputFormat.rawValue
        var r = av_frame_get_buffer(tmp, 0)
        scaler = sws_getCachedContext(scaler, Int32(frame.width), Int32(frame.height), srcFormat,
                                      Int32(frame.width), Int32(frame.height), inputFormat, SWS_BILINEAR, nil, nil, nil)
        if scaler == nil { r = -1 }
        guard r >= 0 else {
            av_frame_free(&tmp)
            var a: UnsafeMutablePointer<AVFrame>? = av; av_frame_free(&a)
            throw .invalidFrame(reason: "cannot convert \(frame.format.rawValue) to \(pixelFormatName(inputFormat))")
        }
        var srcPtrs: [UnsafePointer<UInt8>?] = [nil, nil, nil, nil]
        var srcStrides: [Int32] = [0, 0, 0, 0]
        for i in 0..<frame.format.planeCount {
            srcPtrs[i] = frame.planes[i].baseAddress.assumingMemoryBound(to: UInt8.self)
            srcStrides[i] = Int32(frame.planes[i].stride)
        }
        let t = tmp!
        var dstPtrs: [UnsafeMutablePointer<UInt8>?] = (0..<4).map { diptych_frame_data(t, Int32($0)) }
        var dstStrides: [Int32] = (0..<4).map { diptych_frame_linesize(t, Int32($0)) }
        _ = sws_scale(scaler, &srcPtrs, &srcStrides, 0, Int32(frame.height), &dstPtrs, &dstStrides)
        t.pointee.color_range = av.pointee.color_range
        var a: UnsafeMutablePointer<AVFrame>? = av; av_frame_free(&a)
        return t
    }
}
