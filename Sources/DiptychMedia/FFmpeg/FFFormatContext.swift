import CFFmpeg

/// A demuxer: one `AVFormatContext` opened with `avformat_open_input`.
final class FFInputContext {
    let raw: UnsafeMutablePointer<AVFormatContext>
    /// The reader in place of a protocol, kept until the context is closed.
    private let io: FFCustomIO?
    /// The check of every URL the context opens (its `io_open`), kept as long.
    private let sourceGuard: SourceGuard?

    /// Opens `url`, or reads through `io` when given. `interrupt` is
    /// installed before anything blocks; `format` forces a demuxer instead of
    /// probing; `flags` are added to the context's (`AVFMT_FLAG_NONBLOCK`
    /// for a capture device); `sourceGuard` checks every URL opened for it
    /// and sets FFmpeg's protocol and demuxer whitelists.
    init(url: String, format: UnsafePointer<AVInputFormat>?, options: FFDictionary,
         interrupt: AVIOInterruptCB, flags: Int32 = 0, io: FFCustomIO? = nil, sourceGuard: SourceGuard? = nil) throws(FFmpegError) {
        guard let ctx = avformat_alloc_context() else { throw .outOfMemory("avformat_alloc_context") }
        ctx.pointee.interrupt_callback = interrupt
        ctx.pointee.flags |= flags
        self.io = io
        self.sourceGuard = sourceGuard
        if let sourceGuard {
            sourceGuard.apply(to: options)
            sourceGuard.install(on: ctx)
        }
        if let io {
            ctx.pointee.pb = io.raw
            ctx.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        }
        var fmt: UnsafeMutablePointer<AVFormatContext>? = ctx
        // On failure avformat_open_input frees the context itself.
        try ffCheck(avformat_open_input(&fmt, url, format, &options.raw), "avformat_open_input")
        guard let fmt else { throw .outOfMemory("avformat_open_input") }
        raw = fmt
    }

    deinit { var f: UnsafeMutablePointer<AVFormatContext>? = raw; avformat_close_input(&f) }

    func findStreamInfo() throws(FFmpegError) {
        try ffCheck(avformat_find_stream_info(raw, nil), "avformat_find_stream_info")
    }

    var streamCount: Int { Int(raw.pointee.nb_streams) }
    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { raw.pointee.streams[index]! }

    /// `av_read_frame` into `packet`; the raw code (EOF ends the input).
    func read(_ packet: FFPacket) -> Int32 { av_read_frame(raw, packet.raw) }
}

/// A muxer: one `AVFormatContext` from `avformat_alloc_output_context2`,
/// and the file or connection it writes to.
final class FFOutputContext {
    let raw: UnsafeMutablePointer<AVFormatContext>

    init(muxer: String, url: String) throws(FFmpegError) {
        var fmt: UnsafeMutablePointer<AVFormatContext>? = nil
        try ffCheck(avformat_alloc_output_context2(&fmt, nil, muxer, url), "avformat_alloc_output_context2")
        guard let fmt else { throw .outOfMemory("avformat_alloc_output_context2") }
        raw = fmt
    }

    deinit {
        if raw.pointee.pb != nil && needsFile { avio_closep(&raw.pointee.pb) }
        avformat_free_context(raw)
    }

    /// Whether the muxer writes through an `AVIOContext` this type opens.
    var needsFile: Bool { raw.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0 }
    var io: UnsafeMutablePointer<AVIOContext>? { raw.pointee.pb }
    /// An error the I/O context has recorded (a failed write), else nil.
    var ioError: Int32? { raw.pointee.pb.flatMap { $0.pointee.error < 0 ? $0.pointee.error : nil } }

    func openIO(url: String, options: FFDictionary) throws(FFmpegError) {
        guard needsFile else { return }
        try ffCheck(avio_open2(&raw.pointee.pb, url, AVIO_FLAG_WRITE, &raw.pointee.interrupt_callback, &options.raw), "avio_open2")
    }

    /// Flushes and closes the I/O context (the error of the close, if any, is thrown).
    func closeIO() throws(FFmpegError) {
        guard raw.pointee.pb != nil, needsFile else { return }
        avio_flush(raw.pointee.pb)
        if let e = ioError { avio_closep(&raw.pointee.pb); throw FFmpegError("avio_flush", code: e) }
        try ffCheck(avio_closep(&raw.pointee.pb), "avio_closep")
    }

    var streamCount: Int { Int(raw.pointee.nb_streams) }
    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { raw.pointee.streams[index]! }

    func newStream() throws(FFmpegError) -> UnsafeMutablePointer<AVStream> {
        guard let s = avformat_new_stream(raw, nil) else { throw .outOfMemory("avformat_new_stream") }
        return s
    }
}
