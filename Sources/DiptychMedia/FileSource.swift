import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// Shared owner of one AVFrame; the frame is freed when the last plane
/// storage wrapping its buffers is released.
final class AVFrameOwner: @unchecked Sendable {
    let frame: UnsafeMutablePointer<AVFrame>
    init(_ frame: UnsafeMutablePointer<AVFrame>) { self.frame = frame }
    deinit { var f: UnsafeMutablePointer<AVFrame>? = frame; av_frame_free(&f) }
}

/// The `PixelFormat` an AVFrame of `format` is delivered in without conversion.
func directPixelFormat(_ format: AVPixelFormat) -> PixelFormat? {
    switch format {
    case AV_PIX_FMT_NV12: return .nv12
    case AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P: return .i420
    case AV_PIX_FMT_RGBA: return .rgba
    case AV_PIX_FMT_BGRA: return .bgra
    default: return nil
    }
}

func avPixelFormat(_ format: PixelFormat) -> AVPixelFormat {
    switch format {
    case .nv12: return AV_PIX_FMT_NV12
    case .i420: return AV_PIX_FMT_YUV420P
    case .rgba: return AV_PIX_FMT_RGBA
    case .bgra: return AV_PIX_FMT_BGRA
    }
}

func pixelFormatName(_ format: AVPixelFormat) -> String {
    guard let n = av_get_pix_fmt_name(format) else { return "unknown(\(format.rawValue))" }
    return String(cString: n)
}

/// What a non-direct decoder format is converted to: RGBA for RGB and
/// alpha formats, I420 for everything else (one swscale pass).
func conversionTarget(_ format: AVPixelFormat) -> PixelFormat? {
    guard let d = av_pix_fmt_desc_get(format) else { return nil }
    let flags = d.pointee.flags
    if flags & UInt64(AV_PIX_FMT_FLAG_HWACCEL) != 0 || flags & UInt64(AV_PIX_FMT_FLAG_BITSTREAM) != 0 { return nil }
    if flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0 || flags & UInt64(AV_PIX_FMT_FLAG_ALPHA) != 0 { return .rgba }
    return .i420
}

/// Wraps an AVFrame (already in a direct format) as a `VideoFrame` without copying:
/// each plane's storage keeps a reference to the frame.
func wrapFrame(_ frame: UnsafeMutablePointer<AVFrame>, format: PixelFormat, pts: MediaTime,
               matrix: ColorMatrix, range: ColorRange) -> VideoFrame {
    let owner = AVFrameOwner(frame)
    let w = Int(frame.pointee.width), h = Int(frame.pointee.height)
    var planes: [FramePlane] = []
    for i in 0..<format.planeCount {
        let data = diptych_frame_data(frame, Int32(i))!
        let stride = Int(diptych_frame_linesize(frame, Int32(i)))
        let rows = format.planeHeight(plane: i, height: h)
        let storage = FrameStorage(base: UnsafeRawPointer(data), count: stride * rows, release: { _ = owner })
        planes.append(FramePlane(storage: storage, offset: 0, stride: stride))
    }
    return VideoFrame(width: w, height: h, format: format, planes: planes, pts: pts, matrix: matrix, range: range)
}

/// A media file or URL demuxed by libavformat and decoded by libavcodec
/// (frame + slice threads, thread count chosen by FFmpeg).
///
/// Frames whose decoder format the GPU uploads directly (NV12, yuv420p,
/// yuvj420p, RGBA, BGRA) are wrapped without copying; any other format is
/// converted once with libswscale (to I420, or RGBA for RGB/alpha formats).
/// Not thread-safe; use from one thread at a time.
public final class FileSource: VideoSource, @unchecked Sendable {
    public let info: SourceInfo
    public let audioTrack: AudioTrack?
    /// Frames delivered so far.
    public private(set) var framesDelivered = 0
    /// Packets the decoder rejected (corrupted data is skipped, not fatal).
    public private(set) var decodeErrors = 0

    private let path: String
    private var format: UnsafeMutablePointer<AVFormatContext>?
    private var decoder: UnsafeMutablePointer<AVCodecContext>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private let frame: UnsafeMutablePointer<AVFrame>
    private var scaler: OpaquePointer?
    private let videoIndex: Int32
    private let audioIndex: Int32
    private let timeBase: AVRational
    private let startPTS: Int64
    private let limit: MediaTime?
    private let deadline: InterruptDeadline
    private let defaultMatrix: ColorMatrix
    private var draining = false
    private var finished = false
    private var lastPTS: Int64?
    private var consecutiveErrors = 0
    /// A read error met mid-stream: thrown once the decoder has delivered what it holds.
    private var endError: MediaError?

    /// Opens `url` (a path, a URL, `pipe:N`). `forcedFormat` names a demuxer
    /// (`yuv4mpegpipe`) instead of probing. `displayName` is used in errors.
    public init(url: String, duration: Double? = nil, forcedFormat: String? = nil,
                displayName: String? = nil, networkTimeout: Double = 10) throws(MediaError) {
        let name = displayName ?? url
        path = name
        limit = duration.map { MediaTime(seconds: $0) }
        let network = url.contains("://") && !url.hasPrefix("file://")

        // Plain files: say precisely what is wrong before FFmpeg guesses.
        if !isURL(url) {
            var st = stat()
            if stat(url, &st) != 0 {
                if errno == ENOENT || errno == ENOTDIR { throw .fileNotFound(path: name) }
                throw .openFailed(path: name, detail: String(cString: strerror(errno)))
            }
            if (st.st_mode & S_IFMT) == S_IFDIR { throw .openFailed(path: name, detail: "is a directory") }
            if (st.st_mode & S_IFMT) == S_IFREG && st.st_size == 0 { throw .emptyFile(path: name) }
        }

        deadline = InterruptDeadline(timeout: network ? networkTimeout : 0)
        var fmt: UnsafeMutablePointer<AVFormatContext>? = avformat_alloc_context()
        fmt!.pointee.interrupt_callback = deadline.callback
        var opts: OpaquePointer? = nil
        if network {
            av_dict_set(&opts, "rw_timeout", String(Int(networkTimeout * 1_000_000)), 0)
            av_dict_set(&opts, "reconnect", "0", 0)
        }
        defer { av_dict_free(&opts) }
        let forced = forcedFormat.flatMap { av_find_input_format($0) }
        deadline.arm()
        var r = avformat_open_input(&fmt, url, forced, &opts)
        if r < 0 {
            // avformat_open_input freed the context.
            if deadline.fired { throw .timedOut(path: name) }
            if r == averrorENOENT { throw .fileNotFound(path: name) }
            if r == averrorInvalidData, !isURL(url) {
                if let guessed = FileSource.probeFormat(path: url) {
                    throw .corrupt(path: name, detail: "\(guessed): \(avErrorString(r))")
                }
                throw .unrecognizedFormat(path: name, detail: avErrorString(r))
            }
            throw .openFailed(path: name, detail: avErrorString(r))
        }
        guard let ctx = fmt else { throw .openFailed(path: name, detail: "no format context") }
        format = ctx
        var pkt: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        var frm: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        packet = pkt!
        frame = frm!
        // Until init completes, failures release here; afterwards `close()` does.
        var cleanup = true
        defer {
            if cleanup {
                avformat_close_input(&fmt)
                av_packet_free(&pkt)
                av_frame_free(&frm)
            }
        }
        deadline.arm()
        r = avformat_find_stream_info(ctx, nil)
        if r < 0 {
            if deadline.fired { throw .timedOut(path: name) }
            throw .corrupt(path: name, detail: avErrorString(r))
        }

        // The video stream: the best non-cover-art one.
        var codec: UnsafePointer<AVCodec>? = nil
        var vi: Int32 = -1
        for i in 0..<Int(ctx.pointee.nb_streams) {
            let st = ctx.pointee.streams[i]!
            if st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO,
               st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 {
                vi = av_find_best_stream(ctx, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0)
                break
            }
        }
        if vi < 0 || ctx.pointee.streams[Int(vi)]!.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0 {
            throw .noVideoStream(path: name)
        }
        let stream = ctx.pointee.streams[Int(vi)]!
        let par = stream.pointee.codecpar!
        guard let codec else {
            throw .unsupportedFormat(path: name, detail: "no decoder for codec \(String(cString: avcodec_get_name(par.pointee.codec_id)))")
        }
        if par.pointee.width <= 0 || par.pointee.height <= 0 {
            throw .corrupt(path: name, detail: "video stream has no picture size")
        }
        videoIndex = vi
        timeBase = stream.pointee.time_base

        var dec: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(codec)
        avcodec_parameters_to_context(dec, par)
        dec!.pointee.thread_count = 0
        dec!.pointee.thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE
        dec!.pointee.pkt_timebase = stream.pointee.time_base
        r = avcodec_open2(dec, codec, nil)
        if r < 0 {
            avcodec_free_context(&dec)
            throw .unsupportedFormat(path: name, detail: "cannot open \(String(cString: codec.pointee.name)) decoder: \(avErrorString(r))")
        }
        let pixFmt = dec!.pointee.pix_fmt
        let delivered: PixelFormat
        if let d = directPixelFormat(pixFmt) {
            delivered = d
        } else if let t = conversionTarget(pixFmt) {
            delivered = t
        } else {
            avcodec_free_context(&dec)
            throw .unsupportedFormat(path: name, detail: "pixel format \(pixelFormatName(pixFmt)) cannot be converted")
        }
        decoder = dec

        // Start time: the earliest stream's, so audio and video share one zero.
        let start = ctx.pointee.start_time == avNoPTS ? 0 : ctx.pointee.start_time
        startPTS = av_rescale_q(start, diptych_av_time_base_q(), timeBase)

        // Audio, for passthrough.
        let ai = av_find_best_stream(ctx, AVMEDIA_TYPE_AUDIO, -1, vi, nil, 0)
        if ai >= 0 {
            let ast = ctx.pointee.streams[Int(ai)]!
            audioIndex = ai
            audioTrack = AudioTrack(stream: ast, startOffset: av_rescale_q(start, diptych_av_time_base_q(), ast.pointee.time_base))
        } else {
            audioIndex = -1
            audioTrack = nil
        }
        for i in 0..<Int(ctx.pointee.nb_streams) where Int32(i) != vi && Int32(i) != audioIndex {
            ctx.pointee.streams[i]!.pointee.discard = AVDISCARD_ALL
        }

        // Nominal rate, orientation, colour.
        var rate = av_guess_frame_rate(ctx, stream, nil)
        if rate.num <= 0 || rate.den <= 0 { rate = AVRational(num: 30, den: 1) }
        var rn: Int32 = 0, rd: Int32 = 0
        av_reduce(&rn, &rd, Int64(rate.num), Int64(rate.den), Int64(Int32.max))
        let rotation = FileSource.rotation(of: stream)
        let h = Int(par.pointee.height)
        defaultMatrix = h >= 720 ? .bt709 : .bt601
        let matrix = FileSource.matrix(par.pointee.color_space) ?? defaultMatrix
        let range: ColorRange = (par.pointee.color_range == AVCOL_RANGE_JPEG || pixFmt == AV_PIX_FMT_YUVJ420P
            || pixFmt == AV_PIX_FMT_YUVJ422P || pixFmt == AV_PIX_FMT_YUVJ444P) ? .full : .limited
        var dur: Double? = nil
        if ctx.pointee.duration != avNoPTS && ctx.pointee.duration > 0 {
            dur = Double(ctx.pointee.duration) / Double(AV_TIME_BASE)
        } else if stream.pointee.duration != avNoPTS && stream.pointee.duration > 0 {
            dur = Double(stream.pointee.duration) * av_q2d(timeBase)
        }
        if let d = duration { dur = min(dur ?? d, d) }
        info = SourceInfo(name: name, size: PixelSize(width: Int(par.pointee.width), height: h),
                          frameRate: FrameRate(max(rn, 1), max(rd, 1)),
                          orientation: Orientation(rotation: rotation), matrix: matrix, range: range,
                          pixelFormat: delivered, nativeFormat: pixelFormatName(pixFmt),
                          hasAudio: audioTrack != nil, duration: dur,
                          codec: String(cString: codec.pointee.name))
        cleanup = false
        deadline.disarm()
    }

    deinit { close() }

    /// Makes a blocked network read return (thread-safe; the next or current
    /// `nextFrame` throws `readFailed(... interrupted)`). Plain files and pipes
    /// do not block on FFmpeg's interrupt check.
    public func interrupt() { deadline.interrupt() }

    public func close() {
        finished = true
        if decoder != nil { avcodec_free_context(&decoder) }
        if format != nil {
            avformat_close_input(&format)
            var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p)
            var f: UnsafeMutablePointer<AVFrame>? = frame; av_frame_free(&f)
        }
        if scaler != nil { sws_freeContext(scaler); scaler = nil }
        audioTrack?.markEnded()
    }

    public func nextFrame() throws(MediaError) -> VideoFrame? {
        guard let dec = decoder, let fmt = format else { return nil }
        while !finished {
            let r = avcodec_receive_frame(dec, frame)
            if r == 0 {
                consecutiveErrors = 0
                if let out = try deliver() { return out }
                continue
            }
            if r == averrorEOF {
                finish()
                if let e = endError { endError = nil; throw e }
                return nil
            }
            if r != averrorEAGAIN {
                try noteDecodeError(r)
                continue
            }
            if draining {
                finish()
                if let e = endError { endError = nil; throw e }
                return nil
            }
            deadline.arm()
            let rr = av_read_frame(fmt, packet)
            deadline.disarm()
            if rr < 0 {
                if deadline.interrupted {
                    finish()
                    throw .readFailed(path: path, detail: "interrupted")
                }
                if deadline.fired { throw .timedOut(path: path) }
                if rr != averrorEOF && framesDelivered == 0 && decodeErrors > 0 {
                    throw .corrupt(path: path, detail: avErrorString(rr))
                }
                // A truncated tail (invalid data) ends the stream like EOF; an I/O
                // error (a network source disconnecting) is thrown after the
                // frames still in the decoder.
                if rr != averrorEOF && rr != averrorInvalidData {
                    endError = .readFailed(path: path, detail: avErrorString(rr))
                }
                // Drain what the decoder holds.
                draining = true
                avcodec_send_packet(dec, nil)
                continue
            }
            if packet.pointee.stream_index == videoIndex {
                let s = avcodec_send_packet(dec, packet)
                av_packet_unref(packet)
                if s < 0 && s != averrorEAGAIN { try noteDecodeError(s) }
            } else if packet.pointee.stream_index == audioIndex, let audio = audioTrack {
                audio.enqueue(moving: packet)
            } else {
                av_packet_unref(packet)
            }
        }
        return nil
    }

    private func finish() {
        finished = true
        audioTrack?.markEnded()
    }

    private func noteDecodeError(_ code: Int32) throws(MediaError) {
        decodeErrors += 1
        consecutiveErrors += 1
        // Corrupted packets are skipped; a stream that never decodes is an error.
        if consecutiveErrors >= 64 {
            finish()
            if framesDelivered == 0 { throw .corrupt(path: path, detail: "decoder: \(avErrorString(code))") }
            throw .readFailed(path: path, detail: "decoder: \(avErrorString(code)) (\(consecutiveErrors) packets in a row)")
        }
    }

    /// Turns the decoded `frame` into a VideoFrame (or nil when past the duration limit).
    private func deliver() throws(MediaError) -> VideoFrame? {
        var ts = frame.pointee.best_effort_timestamp
        if ts == avNoPTS { ts = frame.pointee.pts }
        if ts == avNoPTS {
            // No timestamp: continue from the previous one at the nominal rate.
            let step = av_rescale_q(1, AVRational(num: info.frameRate.denominator, den: info.frameRate.numerator), timeBase)
            ts = (lastPTS ?? startPTS - max(step, 1)) + max(step, 1)
        }
        lastPTS = ts
        let pts = timeBase.mediaTime(ts - startPTS)
        if let limit, pts >= limit {
            av_frame_unref(frame)
            finish()
            return nil
        }
        let matrix = FileSource.matrix(frame.pointee.colorspace) ?? info.matrix
        let fmt = AVPixelFormat(rawValue: frame.pointee.format)
        let owned = av_frame_alloc()!
        if let direct = directPixelFormat(fmt), (0..<direct.planeCount).allSatisfy({ diptych_frame_linesize(frame, Int32($0)) > 0 }) {
            av_frame_move_ref(owned, frame)
            let range: ColorRange = (owned.pointee.color_range == AVCOL_RANGE_JPEG || fmt == AV_PIX_FMT_YUVJ420P) ? .full : info.range
            framesDelivered += 1
            return wrapFrame(owned, format: direct, pts: pts, matrix: matrix, range: direct.isYUV ? range : .full)
        }
        defer { av_frame_unref(frame) }
        guard let target = conversionTarget(fmt) else {
            var o: UnsafeMutablePointer<AVFrame>? = owned; av_frame_free(&o)
            finish()
            throw .unsupportedFormat(path: path, detail: "pixel format \(pixelFormatName(fmt)) cannot be converted")
        }
        let w = frame.pointee.width, h = frame.pointee.height
        owned.pointee.format = avPixelFormat(target).rawValue
        owned.pointee.width = w
        owned.pointee.height = h
        var r = av_frame_get_buffer(owned, 0)
        if r >= 0 {
            scaler = sws_getCachedContext(scaler, w, h, fmt, w, h, avPixelFormat(target), SWS_BILINEAR, nil, nil, nil)
            if scaler == nil { r = -1 }
        }
        if r < 0 {
            var o: UnsafeMutablePointer<AVFrame>? = owned; av_frame_free(&o)
            finish()
            throw .unsupportedFormat(path: path, detail: "cannot convert \(pixelFormatName(fmt)) to \(target.rawValue)")
        }
        var srcPlanes: [UnsafePointer<UInt8>?] = (0..<4).map { UnsafePointer(diptych_frame_data(frame, Int32($0))) }
        var srcStrides: [Int32] = (0..<4).map { diptych_frame_linesize(frame, Int32($0)) }
        var dstPlanes: [UnsafeMutablePointer<UInt8>?] = (0..<4).map { diptych_frame_data(owned, Int32($0)) }
        var dstStrides: [Int32] = (0..<4).map { diptych_frame_linesize(owned, Int32($0)) }
        _ = sws_scale(scaler, &srcPlanes, &srcStrides, 0, h, &dstPlanes, &dstStrides)
        framesDelivered += 1
        return wrapFrame(owned, format: target, pts: pts, matrix: matrix, range: target.isYUV ? .limited : .full)
    }

    static func matrix(_ space: AVColorSpace) -> ColorMatrix? {
        switch space {
        case AVCOL_SPC_BT709: return .bt709
        case AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M, AVCOL_SPC_SMPTE240M, AVCOL_SPC_FCC: return .bt601
        default: return nil
        }
    }

    /// Clockwise rotation that makes the stream upright, from its display matrix.
    /// `av_display_rotation_get` gives the counter-clockwise angle the matrix
    /// applies; the picture must be turned by its negation (as ffmpeg's autorotate does).
    static func rotation(of stream: UnsafeMutablePointer<AVStream>) -> Rotation {
        var size: Int = 0
        guard let data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size), size >= 36 else { return .r0 }
        let ccw = data.withMemoryRebound(to: Int32.self, capacity: 9) { av_display_rotation_get($0) }
        guard ccw.isFinite else { return .r0 }
        let cw = Int((-ccw / 90).rounded()) * 90
        return Rotation(degrees: cw) ?? .r0
    }

    /// The demuxer that recognises the first bytes of `path`, if any (for error messages).
    static func probeFormat(path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        let cap = 1 << 16
        let buf = UnsafeMutablePointer<UInt8>.allocate(capacity: cap + Int(AVPROBE_PADDING_SIZE))
        defer { buf.deallocate() }
        buf.initialize(repeating: 0, count: cap + Int(AVPROBE_PADDING_SIZE))
        let n = fread(buf, 1, cap, f)
        guard n > 0 else { return nil }
        var score: Int32 = 0
        return "".withCString { noName -> String? in
            // No filename: judge by content only (a text file named .mp4 is not MP4).
            var pd = AVProbeData(filename: noName, buf: buf, buf_size: Int32(n), mime_type: nil)
            guard let fmt = av_probe_input_format2(&pd, 1, &score), score >= 25 else { return nil }
            return String(cString: fmt.pointee.name)
        }
    }
}
