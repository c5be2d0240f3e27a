import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// Opening a `FileSource`: each step owns what it makes (`FFInputContext`,
/// `VideoDecoder`), so a failure at any step releases everything before it.
extension FileSource {
    /// What a file source is, found before FFmpeg opens it.
    enum FileKind { case regular, fifo }

    /// File sources (by resolved path): say precisely what is wrong before
    /// FFmpeg guesses. Regular files and FIFOs are read; folders, devices
    /// and sockets are refused.
    static func checkPlainFile(_ url: String, name: String) throws(MediaError) -> FileKind {
        var st = stat()
        if stat(url, &st) != 0 {
            if errno == ENOENT || errno == ENOTDIR { throw .fileNotFound(path: name) }
            throw .openFailed(path: name, detail: String(cString: strerror(errno)))
        }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: throw .openFailed(path: name, detail: "is a directory")
        case S_IFIFO: return .fifo
        case S_IFREG: break
        default: throw .openFailed(path: name, detail: "is a device or socket, not a media file or FIFO")
        }
        if st.st_size == 0 { throw .emptyFile(path: name) }
        let head = Y4MHeader.readHead(path: url)
        if Y4MHeader.isY4M(head) {
            do { _ = try Y4MHeader.parse(head) } catch { throw .invalidHeader(path: name, format: "Y4M", detail: error.description) }
        }
        return .regular
    }

    /// A FIFO opened without blocking (opening one for reading blocks until
    /// a writer comes), read through our own reader, which waits for the
    /// writer as long as `deadline` allows.
    static func fifoReader(path: String, name: String, deadline: InterruptDeadline) throws(MediaError) -> FFCustomIO {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw .openFailed(path: name, detail: String(cString: strerror(errno))) }
        do { return try FFCustomIO(fd: fd, replay: [], fifo: true, ownsDescriptor: true, interrupted: { deadline.shouldStop() }) } catch {
            throw .openFailed(path: name, detail: "\(error)")
        }
    }

    /// A Y4M stream on descriptor `fd` (`pipe:N`): its header is read and
    /// checked here, then replayed to FFmpeg with the rest of the stream.
    static func y4mPipe(fd: Int32, name: String, deadline: InterruptDeadline) throws(MediaError) -> FFCustomIO {
        guard let head = Y4MHeader.readHead(fd: fd, shouldStop: { deadline.shouldStop() }) else {
            if deadline.interrupted { throw .openFailed(path: name, detail: "interrupted") }
            throw .timedOut(path: name)
        }
        if head.isEmpty { throw .invalidHeader(path: name, format: "Y4M", detail: "the stream is empty") }
        do { _ = try Y4MHeader.parse(head) } catch { throw .invalidHeader(path: name, format: "Y4M", detail: error.description) }
        do { return try FFCustomIO(fd: fd, replay: head, interrupted: { deadline.interrupted }) } catch {
            throw .openFailed(path: name, detail: "\(error)")
        }
    }

    /// Opens the demuxer and reads the stream information.
    /// `fifo`: the resolved path of a FIFO, read through `fifoReader`.
    static func openInput(url: String, fifo: String?, name: String, forcedFormat: String?, network: Bool,
                          networkTimeout: Double, deadline: InterruptDeadline, guardian: SourceGuard) throws(MediaError) -> FFInputContext {
        let options = FFDictionary()
        if network {
            options.set("rw_timeout", String(Int(networkTimeout * 1_000_000)))
            options.set("reconnect", "0")
            // An RTMP URL on the unspecified address waits for a publisher (FFmpeg's `listen`), as long as `deadline` allows.
            if SourcePolicy.listening(url)?.scheme == "rtmp" { options.set("listen", "1") }
        }
        let forced = forcedFormat.flatMap { av_find_input_format($0) }
        var io: FFCustomIO?
        deadline.arm()
        if forcedFormat == "yuv4mpegpipe", url.hasPrefix("pipe:"), let fd = Int32(url.dropFirst(5)) {
            io = try y4mPipe(fd: fd, name: name, deadline: deadline)
        } else if let fifo {
            io = try fifoReader(path: fifo, name: name, deadline: deadline)
        }
        // The file behind the URL (for naming what FFmpeg refused), nil for a network source.
        let localFile = network ? nil : fifo ?? (url.hasPrefix("file:") ? String(url.dropFirst(5)) : url)
        let ctx: FFInputContext
        do {
            ctx = try FFInputContext(url: io == nil ? url : "", format: forced, options: options, interrupt: deadline.callback,
                                     io: io, sourceGuard: guardian)
        } catch {
            if let r = guardian.refusal { throw .refused(path: name, reason: r.reason) }
            if deadline.interrupted { throw .openFailed(path: name, detail: "interrupted") }
            // The interrupt deadline or the protocol's own rw_timeout, whichever ends it first.
            if deadline.fired || error.code == averrorETIMEDOUT { throw .timedOut(path: name) }
            // FFmpeg's whitelists refuse with EINVAL: name the demuxer when it was one.
            if error.code == averrorEINVAL, let file = localFile,
               let demuxer = probeFormat(path: file, byName: true),
               !guardian.policy.formats.contains(where: { demuxer.split(separator: ",").contains(Substring($0)) }) {
                throw .refused(path: name, reason: "would be read by FFmpeg's '\(demuxer)' demuxer, which sources may not use")
            }
            if error.code == averrorENOENT { throw .fileNotFound(path: name) }
            if error.code == averrorInvalidData, let file = localFile {
                if let guessed = probeFormat(path: file) {
                    throw .corrupt(path: name, detail: "\(guessed): \(error.message)")
                }
                throw .unrecognizedFormat(path: name, detail: error.message)
            }
            throw .openFailed(path: name, detail: error.message)
        }
        deadline.arm()
        do { try ctx.findStreamInfo() } catch {
            if let r = guardian.refusal { throw .refused(path: name, reason: r.reason) }
            if deadline.interrupted { throw .openFailed(path: name, detail: "interrupted") }
            if deadline.fired || error.code == averrorETIMEDOUT { throw .timedOut(path: name) }
            throw .corrupt(path: name, detail: error.message)
        }
        return ctx
    }

    /// The video stream to decode (the best one that is not cover art) and its decoder.
    static func videoStream(in ctx: FFInputContext, name: String) throws(MediaError)
        -> (index: Int32, stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>) {
        var codec: UnsafePointer<AVCodec>? = nil
        var vi: Int32 = -1
        let isVideo = { (st: UnsafeMutablePointer<AVStream>) in
            st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO && st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0
        }
        if (0..<ctx.streamCount).contains(where: { isVideo(ctx.stream($0)) }) {
            vi = av_find_best_stream(ctx.raw, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0)
        }
        guard vi >= 0, ctx.stream(Int(vi)).pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else {
            throw .noVideoStream(path: name)
        }
        let stream = ctx.stream(Int(vi))
        let par = stream.pointee.codecpar!
        guard let codec else {
            throw .unsupportedFormat(path: name, detail: "no decoder for codec \(String(cString: avcodec_get_name(par.pointee.codec_id)))")
        }
        if par.pointee.width <= 0 || par.pointee.height <= 0 {
            throw .corrupt(path: name, detail: "video stream has no picture size")
        }
        return (vi, stream, codec)
    }

    /// What the opened input delivers: nominal rate, orientation, colour, length.
    static func describe(name: String, input ctx: FFInputContext, stream: UnsafeMutablePointer<AVStream>,
                         decoder: any FrameDecoder, hasAudio: Bool, limit: Double?) -> SourceInfo {
        let par = stream.pointee.codecpar!
        var rate = av_guess_frame_rate(ctx.raw, stream, nil)
        if rate.num <= 0 || rate.den <= 0 { rate = AVRational(num: 30, den: 1) }
        var rn: Int32 = 0, rd: Int32 = 0
        av_reduce(&rn, &rd, Int64(rate.num), Int64(rate.den), Int64(Int32.max))
        let h = Int(par.pointee.height)
        let pixFmt = decoder.nativeFormat
        let matrix = FileSource.matrix(par.pointee.color_space) ?? (h >= 720 ? .bt709 : .bt601)
        let range: ColorRange = (par.pointee.color_range == AVCOL_RANGE_JPEG || pixFmt == AV_PIX_FMT_YUVJ420P
            || pixFmt == AV_PIX_FMT_YUVJ422P || pixFmt == AV_PIX_FMT_YUVJ444P) ? .full : .limited
        var dur: Double? = nil
        if ctx.raw.pointee.duration != avNoPTS && ctx.raw.pointee.duration > 0 {
            dur = Double(ctx.raw.pointee.duration) / Double(AV_TIME_BASE)
        } else if stream.pointee.duration != avNoPTS && stream.pointee.duration > 0 {
            dur = Double(stream.pointee.duration) * av_q2d(stream.pointee.time_base)
        }
        if let limit { dur = min(dur ?? limit, limit) }
        return SourceInfo(name: name, size: PixelSize(width: Int(par.pointee.width), height: h),
                          frameRate: FrameRate(max(rn, 1), max(rd, 1)),
                          orientation: Orientation(rotation: rotation(of: stream)), matrix: matrix, range: range,
                          pixelFormat: decoder.deliveredFormat, nativeFormat: pixelFormatName(pixFmt),
                          hasAudio: hasAudio, duration: dur, codec: decoder.context.name,
                          sampleAspect: sampleAspect(av_guess_sample_aspect_ratio(ctx.raw, stream, nil)))
    }

    /// FFmpeg's sample aspect ratio (0/1 when unknown) as a `SampleAspectRatio`.
    static func sampleAspect(_ r: AVRational) -> SampleAspectRatio {
        SampleAspectRatio(width: Int(r.num), height: Int(r.den))
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

    /// The demuxer that recognises the first bytes of `path` (and its name's
    /// extension, when `byName`), if any (for error messages).
    static func probeFormat(path: String, byName: Bool = false) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        let cap = 1 << 16
        let buf = UnsafeMutablePointer<UInt8>.allocate(capacity: cap + Int(AVPROBE_PADDING_SIZE))
        defer { buf.deallocate() }
        buf.initialize(repeating: 0, count: cap + Int(AVPROBE_PADDING_SIZE))
        let n = fread(buf, 1, cap, f)
        guard n > 0 else { return nil }
        var score: Int32 = 0
        return (byName ? path : "").withCString { fileName -> String? in
            // No filename: judge by content only (a text file named .mp4 is not MP4).
            var pd = AVProbeData(filename: fileName, buf: buf, buf_size: Int32(n), mime_type: nil)
            guard let fmt = av_probe_input_format2(&pd, 1, &score), score >= 25 else { return nil }
            return String(cString: fmt.pointee.name)
        }
    }
}
