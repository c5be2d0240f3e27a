import CFFmpeg
import CVA
import DiptychCore

/// An H.264/HEVC encoder: libx264/libx265 on CPU frames, h264_vaapi/hevc_vaapi
/// on frames uploaded (NV12) or mapped (dma-buf) to VA surfaces, or
/// h264_nvenc/hevc_nvenc on CUDA frames (NV12 in the compositor's CUDA
/// memory, or uploaded from host memory).
///
/// The software path takes NV12 frames without copying (libx264 reads NV12
/// directly; for libx265 only the chroma is de-interleaved into I420).
/// Not thread-safe.
final class VideoEncoder {
    let settings: VideoEncoderSettings
    let selection: EncoderSelection
    let encoder: FFCodecContext
    /// Encoder time base: 1/T with T a multiple of the frame rate's numerator,
    /// so every frame time k·den/num is an exact tick.
    let timeBase: AVRational
    /// One frame duration in `timeBase` ticks.
    let frameTicks: Int64
    let inputFormat: AVPixelFormat
    /// VA-API only: the device and the surface pool frames are uploaded to.
    private(set) var hwDevice: FFBufferRef?
    private(set) var hwFrames: FFBufferRef?
    /// VA-API only: the device's display (dma-bufs are imported on it) and how
    /// its rate control is driven.
    private(set) var vaDisplay: VADisplay?
    private(set) var tuning: VAEncoderTuning?
    /// What opens the encoder and moves frames and packets (FFmpeg's calls;
    /// for NVENC, its backend's: a recording stand-in in tests).
    private(set) var session: any EncoderSession
    /// NVENC only: where its device and session come from.
    let nvenc: (any NVENCBackend)?
    private let packet = FFPacket()
    /// Rewrites the stream's VUI timing to the real frame rate (see `init`).
    private var timing: FFBitstreamFilter?
    let scaler = FFScaler()
    private var lastPTS: Int64?
    private(set) var framesIn = 0
    private var flushed = false

    var context: UnsafeMutablePointer<AVCodecContext> { encoder.raw }

    /// The encoder library's threads end with the context: their time is read first.
    deinit { StageClock.sample() }
    var name: String { selection.name }

    /// `nvenc`: NVENC's backend (nil: FFmpeg's on `settings.cudaDevice`);
    /// `probing`: NVENC is being examined (its facts are not asked for);
    /// `openLog`: told what FFmpeg logged about the encoder while it opened.
    init(settings: VideoEncoderSettings, globalHeader: Bool, nvenc backend: (any NVENCBackend)? = nil, probing: Bool = false,
         openLog: ((String) -> Void)? = nil) throws(MediaError) {
        self.settings = settings
        guard !settings.size.isEmpty else { throw .invalidFrame(reason: "encoder size \(settings.size) is empty") }
        guard settings.encoder != .gpu else {
            throw .encoderUnavailable(encoder: "gpu", reason: "the GPU encoder runs in the GPU stage; an output encoding frames itself cannot use it")
        }
        let sel: EncoderSelection
        if settings.encoder == .nvenc {
            let b = backend ?? NVENCHardware.open(ordinal: settings.cudaDevice ?? 0)
            nvenc = b
            let name = NVENCFacts.encoderName(settings.codec)
            if probing {
                sel = EncoderSelection(name: name, isHardware: false, reason: "NVENC", devicePath: nil)
            } else {
                switch EncoderPlanner.nvencEncoder(codec: settings.codec, facts: b.facts(codec: settings.codec)) {
                case .success(let n): sel = EncoderSelection(name: name, isHardware: false, reason: n.detail, devicePath: nil)
                case .failure(let why): throw .encoderUnavailable(encoder: name, reason: why.reason)
                }
            }
        } else {
            nvenc = nil
            sel = try EncoderProbe.choose(codec: settings.codec, choice: settings.encoder, driDirectory: settings.driDirectory,
                                          preferring: settings.preferredRenderNode)
        }
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
        do { encoder = try FFCodecContext(codec) } catch { throw .encoderFailed(encoder: sel.name, detail: "\(error)") }
        session = nvenc?.session(for: encoder) ?? FFmpegEncoderSession(encoder)
        (timeBase, frameTicks) = VideoEncoder.ticks(for: settings.frameRate)
        inputFormat = sel.isHardware ? AV_PIX_FMT_NV12 : (sel.name == "libx265" ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12)
        configure(globalHeader: globalHeader)

        let options = FFDictionary()
        if sel.isHardware {
            try attachVAAPI(options)
        } else if let nvenc {
            try attachNVENC(options, backend: nvenc)
        } else {
            encoder.raw.pointee.pix_fmt = inputFormat
            options.set("preset", settings.preset)
            // A frame asked to be a keyframe (AV_PICTURE_TYPE_I) is an IDR picture, not an open-GOP I.
            options.set("forced-idr", "1")
            if let t = settings.tune { options.set("tune", t) }
            // A constant quantizer through the library's own parameters (parsed after
            // FFmpeg's settings, so it overrides them): CQP at that QP.
            let cqp = settings.qp.map { "qp=\($0)" }
            if sel.name == "libx265" {
                options.set("x265-params", (["log-level=error"] + (cqp.map { [$0] } ?? [])).joined(separator: ":"))
            } else if let cqp {
                options.set("x264-params", cqp)
            }
        }
        // NVENC says why it did not open in its log, not in its error code: kept for the reason.
        let said = FFLogCapture(object: nvenc == nil ? nil : UnsafeRawPointer(encoder.raw))
        do {
            try StageClock.naming(.encode) { () throws(FFmpegError) in
                defer { said.end() }
                try session.open(options)
            }
        } catch {
            openLog?(said.text)
            let why = said.text.isEmpty ? "" : " (FFmpeg: \(said.text.split(whereSeparator: \.isNewline).joined(separator: "; ")))"
            throw .encoderFailed(encoder: sel.name, detail: "cannot open (\(settings.size) @ \(settings.frameRate) fps, preset \(settings.preset)\(settings.tune.map { ", tune \($0)" } ?? "")\(settings.qp.map { ", qp \($0)" } ?? "")): \(error.message)\(why)")
        }
        openLog?(said.text)
        if let left = options.first {
            throw .encoderFailed(encoder: sel.name, detail: "option \(left.key)=\(left.value) not recognised")
        }
        do {
            timing = try VideoEncoder.timingFilter(for: encoder, codec: settings.codec, rate: settings.frameRate, timeBase: timeBase,
                                                   matrix: settings.matrix, range: settings.range)
        } catch {
            throw .encoderFailed(encoder: sel.name, detail: "stream timing: \(error)")
        }
    }

    /// libx264 states its time base in the VUI (`num_units_in_tick`/`time_scale`),
    /// so the fine 1/90000-style base that keeps timestamps exact would read as
    /// 90000 fps. `h264_metadata`/`hevc_metadata` rewrite the timing to the real
    /// rate (H.264 counts field ticks: time_scale/num_units_in_tick = 2·fps;
    /// HEVC counts frames). Timestamps are left as they are. The same filter
    /// writes the colour description (BT.709 or BT.601, limited or full range)
    /// into the VUI, so it is signalled whatever the encoder or VA driver
    /// writes itself (a VA driver that packs its own sequence headers has no
    /// colour fields in its sequence parameters).
    static func timingFilter(for encoder: FFCodecContext, codec: VideoCodec, rate: FrameRate, timeBase: AVRational,
                             matrix: ColorMatrix, range: ColorRange) throws(FFmpegError) -> FFBitstreamFilter {
        let parameters = FFCodecParameters()
        try encoder.copyParameters(to: parameters.raw)
        let ticks = codec == .h264 ? 2 * Int64(rate.numerator) : Int64(rate.numerator)
        var num: Int32 = 0, den: Int32 = 0
        av_reduce(&num, &den, ticks, Int64(rate.denominator), Int64(Int32.max))
        // ITU-T H.273 codes: 1 = BT.709 (primaries, transfer, matrix); 6 = SMPTE 170M (BT.601).
        let code = matrix == .bt709 ? "1" : "6"
        return try FFBitstreamFilter(codec == .h264 ? "h264_metadata" : "hevc_metadata", parameters: parameters.raw,
                                     timeBase: timeBase, options: ["tick_rate": "\(num)/\(den)", "colour_primaries": code,
                                                                   "transfer_characteristics": code, "matrix_coefficients": code,
                                                                   "video_full_range_flag": range == .full ? "1" : "0"])
    }

    /// The stream's codec parameters as the muxer must see them (extradata
    /// with the rewritten timing).
    func copyParameters(to parameters: UnsafeMutablePointer<AVCodecParameters>) throws(FFmpegError) {
        if let timing {
            try ffCheck(avcodec_parameters_copy(parameters, timing.outputParameters), "avcodec_parameters_copy")
        } else {
            try encoder.copyParameters(to: parameters)
        }
    }

    /// T = lcm(90000, num) when it fits, else num itself; one frame is den·T/num ticks.
    static func ticks(for rate: FrameRate) -> (timeBase: AVRational, frameTicks: Int64) {
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        let num = Int64(rate.numerator), den = Int64(rate.denominator)
        var ticks = 90_000 / gcd(90_000, num) * num
        if ticks > Int64(Int32.max) / 4 { ticks = num }
        return (AVRational(num: 1, den: Int32(ticks)), den * ticks / num)
    }

    /// Size, timing, GOP, rate, slices and colour signalling.
    private func configure(globalHeader: Bool) {
        let c = encoder.raw
        c.pointee.width = Int32(settings.size.width)
        c.pointee.height = Int32(settings.size.height)
        c.pointee.time_base = timeBase
        c.pointee.framerate = AVRational(num: settings.frameRate.numerator, den: settings.frameRate.denominator)
        c.pointee.gop_size = Int32(settings.keyframeInterval)
        // A constant quantizer has no bit rate (libx264/libx265 take a rate over `qp`).
        c.pointee.bit_rate = settings.qp == nil ? Int64(settings.bitrate) : 0
        if let maxrate = settings.maxrate, let buffer = settings.vbvBuffer {
            c.pointee.rc_max_rate = Int64(maxrate)
            c.pointee.rc_buffer_size = Int32(clamping: buffer)
        }
        if let b = settings.maxBFrames { c.pointee.max_b_frames = Int32(b) }
        // libx264, h264_nvenc and h264_vaapi cut each picture into this many slices.
        if let n = settings.slices, settings.codec == .h264 { c.pointee.slices = Int32(n) }
        c.pointee.thread_count = Int32(clamping: max(0, settings.threads))
        c.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        if settings.matrix == .bt709 {
            c.pointee.colorspace = AVCOL_SPC_BT709; c.pointee.color_primaries = AVCOL_PRI_BT709; c.pointee.color_trc = AVCOL_TRC_BT709
        } else {
            c.pointee.colorspace = AVCOL_SPC_SMPTE170M; c.pointee.color_primaries = AVCOL_PRI_SMPTE170M; c.pointee.color_trc = AVCOL_TRC_SMPTE170M
        }
        if globalHeader { c.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
    }

    /// The VA-API device on the selected render node, a pool of NV12 surfaces
    /// (frames uploaded from host memory), and the entrypoint and rate control
    /// its driver offers (`VAEncoderTuning`).
    private func attachVAAPI(_ options: FFDictionary) throws(MediaError) {
        encoder.raw.pointee.pix_fmt = AV_PIX_FMT_VAAPI
        var dev: UnsafeMutablePointer<AVBufferRef>? = nil
        let r = av_hwdevice_ctx_create(&dev, AV_HWDEVICE_TYPE_VAAPI, selection.devicePath, nil, 0)
        guard r >= 0, let dev else {
            throw .encoderUnavailable(encoder: name, reason: "cannot create VA-API device on \(selection.devicePath ?? "default"): \(avErrorString(r))")
        }
        let device = FFBufferRef(taking: dev)
        hwDevice = device
        if case .success(let va) = VALibrary.shared, let display = diptych_vaapi_display(device.raw) {
            vaDisplay = display
            let t = VAEncoderTuning.query(display: display, va: va, codec: settings.codec, bitrate: settings.bitrate,
                                          live: settings.tune == "zerolatency")
            tuning = t
            if t.lowPower { options.set("low_power", "1") }
            if let qp = settings.qp {
                // Constant QP: FFmpeg's VA-API encoders take the quantizer as global_quality.
                options.set("rc_mode", "CQP")
                encoder.raw.pointee.global_quality = Int32(qp)
            } else if let rc = t.rateControl {
                options.set("rc_mode", rc.rawValue)
                encoder.raw.pointee.rc_max_rate = Int64(settings.maxrate ?? t.maxRate)
                encoder.raw.pointee.rc_buffer_size = Int32(clamping: settings.vbvBuffer ?? t.bufferSize)
            }
        }
        guard let fr = av_hwframe_ctx_alloc(device.raw) else { throw .encoderFailed(encoder: name, detail: "av_hwframe_ctx_alloc: out of memory") }
        let frames = FFBufferRef(taking: fr)
        let fc = UnsafeMutableRawPointer(frames.raw.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self)
        fc.pointee.format = AV_PIX_FMT_VAAPI
        fc.pointee.sw_format = AV_PIX_FMT_NV12
        fc.pointee.width = encoder.raw.pointee.width
        fc.pointee.height = encoder.raw.pointee.height
        fc.pointee.initial_pool_size = 16
        do { try ffCheck(av_hwframe_ctx_init(frames.raw), "av_hwframe_ctx_init") } catch {
            throw .encoderUnavailable(encoder: name, reason: "cannot create VA surfaces \(settings.size) NV12: \(error.message)")
        }
        hwFrames = frames
        encoder.raw.pointee.hw_frames_ctx = frames.newReference()
    }

    /// NVENC's CUDA device (the compositor's, on its primary context), a
    /// frames context of NV12 CUDA frames (the compositor's pictures are
    /// wrapped as its frames; host frames are uploaded into its pool), and
    /// the take's settings as NVENC's options: a preset from the x264 one,
    /// the low-latency tune without reordering delay for live outputs (`tune
    /// zerolatency`) and high quality for files, no B-frames unless asked
    /// for, IDR pictures where a keyframe is asked for (`forced-idr`), CBR
    /// for live outputs and VBR for files within `--maxrate`/`--bufsize`, or
    /// a constant QP (`--qp`).
    private func attachNVENC(_ options: FFDictionary, backend: any NVENCBackend) throws(MediaError) {
        let c = encoder.raw
        c.pointee.pix_fmt = AV_PIX_FMT_CUDA
        let device = try backend.hardwareDevice()
        hwDevice = device
        guard let fr = av_hwframe_ctx_alloc(device.raw) else { throw .encoderFailed(encoder: name, detail: "av_hwframe_ctx_alloc: out of memory") }
        let frames = FFBufferRef(taking: fr)
        let fc = UnsafeMutableRawPointer(frames.raw.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self)
        fc.pointee.format = AV_PIX_FMT_CUDA
        fc.pointee.sw_format = AV_PIX_FMT_NV12
        fc.pointee.width = c.pointee.width
        fc.pointee.height = c.pointee.height
        // No frame is made ahead: the compositor's own pictures are wrapped; uploads take from the pool as they come.
        fc.pointee.initial_pool_size = 0
        do { try backend.initialize(frames: frames) } catch {
            throw .encoderUnavailable(encoder: name, reason: "cannot make CUDA frames \(settings.size) NV12: \(error.message)")
        }
        hwFrames = frames
        c.pointee.hw_frames_ctx = frames.newReference()
        for (k, v) in NVENCOptions.options(settings) { options.set(k, v) }
        if settings.qp == nil {
            // The VBV: a live output's CBR needs one; a file's VBR is capped by it when --maxrate is given.
            if settings.maxrate == nil && settings.tune == "zerolatency" {
                c.pointee.rc_max_rate = Int64(settings.bitrate)
                c.pointee.rc_buffer_size = Int32(clamping: settings.bitrate)
            }
        } else {
            c.pointee.bit_rate = 0
        }
        c.pointee.max_b_frames = Int32(settings.maxBFrames ?? 0)
    }

    /// The frame's pts in encoder ticks, kept strictly increasing.
    func ticks(for pts: MediaTime) -> Int64 {
        var t = pts.converted(to: timeBase.den).value
        if let last = lastPTS, t <= last { t = last + 1 }
        lastPTS = t
        return t
    }

    /// Encodes `frame` (NV12 preferred; I420/RGBA/BGRA are converted) and
    /// returns the packets that came out (timestamps in `timeBase`, durations
    /// set). `keyframe` makes the frame an IDR picture (a split output's cut).
    func encode(_ frame: VideoFrame, keyframe: Bool = false) throws(MediaError) -> [FFPacket] {
        guard frame.width == settings.size.width, frame.height == settings.size.height else {
            throw .invalidFrame(reason: "frame is \(frame.size), encoder expects \(settings.size)")
        }
        guard frame.planes.count >= frame.format.planeCount else {
            throw .invalidFrame(reason: "\(frame.format.rawValue) frame has \(frame.planes.count) planes")
        }
        let av = try StageClock.measure(.convert) { () throws(MediaError) in try makeAVFrame(frame) }
        av.raw.pointee.pts = ticks(for: frame.pts)
        if keyframe { av.raw.pointee.pict_type = AV_PICTURE_TYPE_I }
        if let hwFrames {
            let hw: FFFrame
            do throws(FFmpegError) {
                if let nvenc { hw = try nvenc.upload(av, into: hwFrames) } else { hw = try VideoEncoder.upload(av, into: hwFrames) }
            } catch {
                throw .encoderFailed(encoder: name, detail: "upload to \(nvenc == nil ? "VA surface" : "CUDA frame"): \(error.message)")
            }
            hw.raw.pointee.pts = av.raw.pointee.pts
            hw.raw.pointee.pict_type = av.raw.pointee.pict_type
            return try send(hw)
        }
        return try send(av)
    }

    /// The software encoder that takes over from this one (NVENC) where it
    /// failed mid-take with `failure` (`takenOverBySoftware`).
    func softwareSuccessor(globalHeader: Bool, streamGoesOn: Bool, failure: String) throws(MediaError) -> VideoEncoder {
        do {
            return try VideoEncoder(settings: settings.takenOverBySoftware(streamGoesOn: streamGoesOn), globalHeader: globalHeader)
        } catch {
            throw .encoderFailed(encoder: name, detail: "\(failure); the software encoder could not take over: \(error)")
        }
    }

    /// A frame of `frames`' pool holding `frame`'s pictures (VA-API, NVENC).
    static func upload(_ frame: FFFrame, into frames: FFBufferRef) throws(FFmpegError) -> FFFrame {
        let hw = FFFrame()
        try ffCheck(av_hwframe_get_buffer(frames.raw, hw.raw, 0), "av_hwframe_get_buffer")
        try ffCheck(av_hwframe_transfer_data(hw.raw, frame.raw, 0), "av_hwframe_transfer_data")
        return hw
    }

    /// Drains the encoder (end of stream). Further `encode` calls are a bug.
    func flush() throws(MediaError) -> [FFPacket] {
        guard !flushed else { return [] }
        flushed = true
        return try send(nil)
    }

    func send(_ frame: FFFrame?) throws(MediaError) -> [FFPacket] {
        precondition(!flushed || frame == nil, "VideoEncoder.encode after flush")
        let r = session.send(frame?.raw)
        if r < 0 && r != averrorEOF { throw .encoderFailed(encoder: name, detail: avErrorString(r)) }
        if frame != nil { framesIn += 1 }
        var out: [FFPacket] = []
        while true {
            let rr = session.receive(packet)
            if rr == averrorEAGAIN || rr == averrorEOF { break }
            if rr < 0 { throw .encoderFailed(encoder: name, detail: avErrorString(rr)) }
            // FFmpeg 5.1's libx264 leaves duration 0: the muxer needs it for the last sample.
            if packet.raw.pointee.duration <= 0 { packet.raw.pointee.duration = frameTicks }
            out.append(FFPacket(moving: packet.raw))
        }
        guard let timing else { return out }
        do {
            var filtered: [FFPacket] = []
            for p in out { filtered += try timing.filter(p) }
            if frame == nil { filtered += try timing.filter(nil) }
            return filtered
        } catch {
            throw .encoderFailed(encoder: name, detail: "stream timing: \(error)")
        }
    }
}
