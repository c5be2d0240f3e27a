import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// A media file or URL demuxed by libavformat and decoded by libavcodec on
/// the CPU (see `FrameConverter` for the formats delivered) or by NVDEC into
/// CUDA memory (`DecoderSettings`; a stream NVDEC stops decoding mid-take
/// goes on on the CPU, see `fallBack`). Interlaced input is deinterlaced
/// before a frame is delivered (see `Deinterlacer`), so every frame is
/// progressive. Not thread-safe; use from one thread at a time.
public final class FileSource: VideoSource, @unchecked Sendable {   // FFmpeg format and codec contexts; used by one thread at a time, `interrupt` from any (atomic)
    public private(set) var info: SourceInfo
    public let audioTrack: AudioTrack?
    /// Frames delivered so far.
    public private(set) var framesDelivered = 0
    /// Packets the decoder rejected (corrupted data is skipped, not fatal).
    public private(set) var decodeErrors = 0
    /// Frames that went through the deinterlacer (0 for progressive input).
    public var framesDeinterlaced: Int { deinterlacer?.framesIn ?? 0 }
    /// Where the frames are decoded now (`info.decoder` says where it started).
    public var decoderKind: DecoderKind { decoder?.kind ?? .cpu }
    /// Why and at which frame the stream left NVDEC for the CPU, if it did.
    public internal(set) var fallback: DecoderFallback?

    let path: String
    /// A capture device, read without blocking (`readPacket`).
    let capturing: Bool
    var input: FFInputContext?
    var decoder: (any FrameDecoder)?
    private var deinterlacer: Deinterlacer?
    private var deinterlacerFlushed = false
    private let packet = FFPacket()
    private let filtered = FFFrame()
    let converter: FrameConverter
    let videoIndex: Int32
    private let audioIndex: Int32
    let timeBase: AVRational
    /// The decoded stream and its CPU decoder (for a fall back from NVDEC).
    let stream: UnsafeMutablePointer<AVStream>
    let cpuCodec: UnsafePointer<AVCodec>
    let decoding: DecoderSettings
    /// The container's sample aspect ratio (0/1 when it states none).
    private let containerSAR: AVRational
    let startPTS: Int64
    private let limit: MediaTime?
    private let deadline: InterruptDeadline
    var draining = false
    private var finished = false
    var lastPTS: Int64?
    private var consecutiveErrors = 0
    /// A read error met mid-stream: thrown once the decoder has delivered what it holds.
    private var endError: MediaError?
    /// NVDEC: the packets since the last keyframe, replayed into the CPU decoder on a fall back.
    var replay = PacketReplay()
    /// After a fall back: packets to send before reading more, and the last
    /// timestamp already delivered (frames up to it are decoded again and dropped).
    var replaying: [FFPacket] = []
    var skipThrough: Int64?
    var awaitKeyframe = false
    /// A move to the CPU under way (`DecoderMove`): the keyframe it starts at, and why.
    var moving: (keyframe: FFPacket, reason: String)?
    /// The first frame, decoded at open to check NVDEC really decodes the stream.
    private var primed: InputFrame?

    /// Where an open begins: a checked URL (a file, a FIFO, a network
    /// stream), standard input's Y4M (`pipe:N`), or a capture device.
    enum Target {
        case url(String, network: Bool, path: String?)
        case stdinPipe(String)
        case capture(DeviceCapture)
    }

    /// Opens `url` (a path, a URL, a camera, `pipe:N` with `forcedFormat`
    /// `yuv4mpegpipe`: standard input's Y4M). `forcedFormat` names a
    /// demuxer instead of probing. `displayName` is used in errors.
    /// `decoding` chooses the decoder; `--decoder nvdec` where NVDEC cannot
    /// decode the stream throws `decoderUnavailable` naming what is missing.
    /// `opening` says what the source may read (`refused` otherwise), how
    /// long opening a network source, a FIFO or a camera may block
    /// (`timedOut`), what stops it early, and what a camera is asked for.
    public convenience init(url: String, duration: Double? = nil, forcedFormat: String? = nil, decoding: DecoderSettings = .cpu,
                            displayName: String? = nil, opening: SourceOpening = .commandLine) throws(MediaError) {
        let name = displayName ?? url
        let guardian = SourceGuard(policy: opening.policy, name: name)
        let target: Target
        if forcedFormat == "yuv4mpegpipe" && url.hasPrefix("pipe:") {
            // Standard input (`MediaSources.openY4M`) is read through our own reader, not a protocol.
            target = .stdinPipe(url)
        } else if let capture = try SourceGuard.checkCamera(url, policy: opening.policy, request: opening.camera) {
            target = .capture(capture)
        } else {
            let checked = try guardian.check(url)
            target = .url(checked.url, network: checked.network, path: checked.path)
        }
        try self.init(target: target, name: name, guardian: guardian, duration: duration, forcedFormat: forcedFormat,
                      decoding: decoding, opening: opening)
    }

    /// Opens a capture device through libavdevice: a camera's
    /// (`SourceGuard.checkCamera` chose its mode), or any device input the
    /// build has (the tests open lavfi's `testsrc` this way). Not checked
    /// against a source policy: callers name the device themselves.
    convenience init(capture: DeviceCapture, name: String, duration: Double? = nil, decoding: DecoderSettings = .cpu,
                     opening: SourceOpening = .commandLine) throws(MediaError) {
        try self.init(target: .capture(capture), name: name, guardian: SourceGuard(policy: opening.policy, name: name),
                      duration: duration, forcedFormat: nil, decoding: decoding, opening: opening)
    }

    private init(target: Target, name: String, guardian: SourceGuard, duration: Double?, forcedFormat: String?,
                 decoding: DecoderSettings, opening: SourceOpening) throws(MediaError) {
        path = name
        converter = FrameConverter(path: name)
        self.decoding = decoding
        limit = duration.map { MediaTime(seconds: $0) }
        var url = "", network = false, file: String?, stdinPipe = false, capture: DeviceCapture?
        switch target {
        case .url(let u, let n, let p): url = u; network = n; file = p
        case .stdinPipe(let u): url = u; stdinPipe = true
        case .capture(let c): capture = c
        }
        capturing = capture != nil
        let kind = try file.map { (p) throws(MediaError) in try FileSource.checkPlainFile(p, name: name) }
        // Regular files never block; a network source, a FIFO waiting for its writer, a silent
        // standard input or a camera that stops delivering may.
        deadline = InterruptDeadline(timeout: network || kind == .fifo || stdinPipe || capturing ? opening.timeout : 0,
                                     cancel: opening.cancel)
        let ctx: FFInputContext
        do {
            if let capture {
                ctx = try FileSource.openCapture(capture, name: name, deadline: deadline, guardian: guardian)
            } else {
                ctx = try FileSource.openInput(url: url, fifo: kind == .fifo ? file : nil, name: name,
                                               forcedFormat: forcedFormat, network: network,
                                               networkTimeout: opening.timeout, deadline: deadline, guardian: guardian)
            }
        } catch {
            if network && !opening.policy.detailedNetworkErrors {
                switch error {
                case .refused: throw error
                default: throw .unreachable(path: name, detail: error.description)
                }
            }
            throw error
        }
        input = ctx
        let (vi, stream, codec) = try FileSource.videoStream(in: ctx, name: name)
        videoIndex = vi
        self.stream = stream
        cpuCodec = codec
        timeBase = stream.pointee.time_base
        containerSAR = stream.pointee.sample_aspect_ratio
        let (dec, decision) = try FileSource.openDecoder(stream: stream, codec: codec, decoding: decoding, name: name)
        decoder = dec

        // Start time: the earliest stream's, so audio and video share one zero.
        let start = ctx.raw.pointee.start_time == avNoPTS ? 0 : ctx.raw.pointee.start_time
        startPTS = av_rescale_q(start, diptych_av_time_base_q(), timeBase)

        // Audio, for passthrough; every other stream is discarded.
        let ai = av_find_best_stream(ctx.raw, AVMEDIA_TYPE_AUDIO, -1, vi, nil, 0)
        audioIndex = ai >= 0 ? ai : -1
        audioTrack = ai >= 0 ? AudioTrack(stream: ctx.stream(Int(ai)),
                                          startOffset: av_rescale_q(start, diptych_av_time_base_q(), ctx.stream(Int(ai)).pointee.time_base))
                             : nil
        for i in 0..<ctx.streamCount where Int32(i) != vi && Int32(i) != audioIndex {
            ctx.stream(i).pointee.discard = AVDISCARD_ALL
        }
        var described = FileSource.describe(name: name, input: ctx, stream: stream, decoder: dec,
                                            hasAudio: audioTrack != nil, limit: duration)
        described.decoder = decision
        if let order = FieldOrder(stream.pointee.codecpar.pointee.field_order) {
            described.interlaced = order
            do {
                deinterlacer = try Deinterlacer(width: dec.context.raw.pointee.width, height: dec.context.raw.pointee.height,
                                                format: dec.nativeFormat, timeBase: timeBase)
            } catch {
                throw .unsupportedFormat(path: name, detail: "interlaced \(described.size) video cannot be deinterlaced: \(error)")
            }
            described.deinterlacer = deinterlacer?.filter
        }
        described.capture = capture?.description
        info = described
        if dec.kind == .nvdec { try prime() }
        deadline.disarm()
    }

    /// Decodes the first frame with NVDEC, so a stream it cannot decode is
    /// found before the take starts: an error for `--decoder nvdec`, the CPU
    /// from the first frame for `auto`.
    private func prime() throws(MediaError) {
        primed = try nextDecoded()
        guard let f = fallback else { return }
        if decoding.choice == .nvdec {
            close()
            throw .decoderUnavailable(path: path, reason: f.reason)
        }
        info.decoder = DecoderDecision(.cpu, reason: "NVDEC did not decode the first frame: \(f.reason)")
        fallback = nil
    }

    deinit { close() }

    /// Makes a blocked network read, or a camera's wait for a frame, return
    /// (thread-safe; the next or current `nextFrame` throws
    /// `readFailed(... interrupted)`). Plain files and pipes do not block on
    /// FFmpeg's interrupt check.
    public func interrupt() { deadline.interrupt() }

    public func close() {
        finished = true
        decoder = nil
        deinterlacer = nil
        input = nil
        audioTrack?.markEnded()
    }

    public func nextInput() throws(MediaError) -> InputFrame? {
        if let p = primed { primed = nil; return p }
        // The reading thread's part of decoding (and demuxing) counts where the decoders' threads do.
        guard let clock = decoding.cpuClock, decoderKind == .cpu else { return try nextDecoded() }
        let t0 = StageClock.threadSeconds()
        defer { clock.add(StageClock.threadSeconds() - t0) }
        return try nextDecoded()
    }

    /// The next frame in host memory (an NVDEC frame is copied down).
    public func nextFrame() throws(MediaError) -> VideoFrame? {
        guard let f = try nextInput() else { return nil }
        switch f.payload {
        case .cpu(let v): return v
        case .cuda(_, let holder):
            guard let v = holder.download() else { throw .readFailed(path: path, detail: "cannot copy an NVDEC frame to host memory") }
            return v
        case .dmaBuf: throw .readFailed(path: path, detail: "a dma-buf frame")
        }
    }

    func nextDecoded() throws(MediaError) -> InputFrame? {
        guard input != nil else { return nil }
        while !finished, let decoder, let input {
            if let d = deinterlacer {
                let r = d.pull(into: filtered)
                if r == 0 {
                    if let out = try deliver(filtered) { return out }
                    continue
                }
                if r == averrorEOF { return try endOfStream() }
            }
            let r = decoder.receive()
            if r == 0 {
                consecutiveErrors = 0
                if isAlreadyDelivered(decoder.decoded) { continue }
                if decoder.kind == .nvdec, decoder.decoded.raw.pointee.interlaced_frame != 0 {
                    try fallBack("interlaced frames are deinterlaced on the CPU")
                    continue
                }
                if let d = try deinterlacing(decoder.decoded) {
                    do { try d.push(decoder.decoded) } catch { finish(); throw .readFailed(path: path, detail: "deinterlacing: \(error)") }
                    continue
                }
                if let out = try deliver(decoder.decoded) { return out }
                continue
            }
            if decoder.kind == .nvdec, r != averrorEAGAIN, r != averrorEOF || decoder.lost != nil {
                try fallBack(decoder.lost ?? "NVDEC: \(avErrorString(r))")
                continue
            }
            if moving != nil {
                try finishMove()
                continue
            }
            if r == averrorEOF || (r == averrorEAGAIN && draining) {
                // The deinterlacer holds a frame or two: flush it, then end.
                if let d = deinterlacer, !deinterlacerFlushed {
                    deinterlacerFlushed = true
                    do { try d.push(nil) } catch { return try endOfStream() }
                    continue
                }
                return try endOfStream()
            }
            if r != averrorEAGAIN {
                try noteDecodeError(r)
                continue
            }
            if try sendReplayed() { continue }
            deadline.arm()
            let rr = FileSource.read(input, into: packet, waiting: capturing ? FileSource.capturePause : nil, deadline: deadline)
            deadline.disarm()
            if rr < 0 {
                try readEnded(rr)
                // Drain what the decoder holds.
                draining = true
                _ = decoder.send(nil)
                continue
            }
            if packet.raw.pointee.stream_index == videoIndex {
                if let reason = moveStarting(at: packet) { try beginMove(at: packet, because: reason) } else { try sendVideo(packet) }
                packet.unref()
            } else if packet.raw.pointee.stream_index == audioIndex, let audio = audioTrack {
                audio.enqueue(moving: packet.raw)
            } else {
                packet.unref()
            }
        }
        return nil
    }

    /// The stream is over: nil, or the read error met before the end.
    private func endOfStream() throws(MediaError) -> InputFrame? {
        finish()
        if let e = endError { endError = nil; throw e }
        return nil
    }

    /// The deinterlacer `frame` goes through: the one made at open for an
    /// interlaced stream, or one made now for the first frame flagged
    /// interlaced in a stream whose parameters did not say so.
    private func deinterlacing(_ frame: FFFrame) throws(MediaError) -> Deinterlacer? {
        if let deinterlacer { return deinterlacer }
        guard frame.raw.pointee.interlaced_frame != 0 else { return nil }
        do {
            deinterlacer = try Deinterlacer(width: frame.width, height: frame.height, format: frame.pixelFormat, timeBase: timeBase)
        } catch {
            finish()
            throw .unsupportedFormat(path: path, detail: "interlaced \(frame.width)x\(frame.height) video cannot be deinterlaced: \(error)")
        }
        return deinterlacer
    }

    /// `av_read_frame` returned `code` < 0: throws for an interruption, a
    /// timeout or an unreadable start; otherwise the stream drains (an I/O
    /// error is thrown after the frames still in the decoder).
    private func readEnded(_ code: Int32) throws(MediaError) {
        if deadline.interrupted {
            finish()
            throw .readFailed(path: path, detail: "interrupted")
        }
        if deadline.fired || code == averrorETIMEDOUT { throw .timedOut(path: path) }
        if code != averrorEOF && framesDelivered == 0 && decodeErrors > 0 {
            throw .corrupt(path: path, detail: avErrorString(code))
        }
        // A truncated tail (invalid data) ends the stream like EOF.
        if code != averrorEOF && code != averrorInvalidData {
            endError = .readFailed(path: path, detail: avErrorString(code))
        }
    }

    func finish() {
        finished = true
        audioTrack?.markEnded()
    }

    func noteDecodeError(_ code: Int32) throws(MediaError) {
        decodeErrors += 1
        consecutiveErrors += 1
        // Corrupted packets are skipped; a stream that never decodes is an error.
        if consecutiveErrors >= 64 {
            finish()
            if framesDelivered == 0 { throw .corrupt(path: path, detail: "decoder: \(avErrorString(code))") }
            throw .readFailed(path: path, detail: "decoder: \(avErrorString(code)) (\(consecutiveErrors) packets in a row)")
        }
    }

    /// Turns a decoded (or deinterlaced) frame into an InputFrame (or nil when past the duration limit).
    private func deliver(_ frame: FFFrame) throws(MediaError) -> InputFrame? {
        var ts = frame.raw.pointee.best_effort_timestamp
        if ts == avNoPTS { ts = frame.raw.pointee.pts }
        if ts == avNoPTS {
            // No timestamp: continue from the previous one at the nominal rate.
            let step = max(1, av_rescale_q(1, AVRational(num: info.frameRate.denominator, den: info.frameRate.numerator), timeBase))
            ts = (lastPTS ?? startPTS - step) + step
        }
        let previous = lastPTS
        lastPTS = ts
        let pts = timeBase.mediaTime(ts - startPTS)
        if let limit, pts >= limit {
            frame.unref()
            finish()
            return nil
        }
        let matrix = FileSource.matrix(frame.raw.pointee.colorspace) ?? info.matrix
        // The container's ratio wins over the bitstream's, as av_guess_sample_aspect_ratio does.
        let sar = containerSAR.num > 0 ? containerSAR : frame.raw.pointee.sample_aspect_ratio
        let aspect = sar.num > 0 ? FileSource.sampleAspect(sar) : info.sampleAspect
        do {
            let out: InputFrame
            if frame.pixelFormat == AV_PIX_FMT_CUDA, let nvdec = decoder as? NVDECDecoder {
                switch try nvdec.cudaFrame(from: frame, pts: pts, matrix: matrix, range: info.range, sampleAspect: aspect, path: path) {
                case .success(let (picture, holder)):
                    out = InputFrame(picture, pts: pts, holder: holder)
                case .failure(let e):
                    // The CPU decoder decodes this frame again.
                    frame.unref()
                    lastPTS = previous
                    try fallBack("NVDEC: \(e)")
                    return nil
                }
            } else {
                var v = try converter.videoFrame(from: frame, pts: pts, matrix: matrix, range: info.range)
                v.sampleAspect = aspect
                out = InputFrame(v)
            }
            framesDelivered += 1
            return out
        } catch {
            finish()
            throw error
        }
    }
}
