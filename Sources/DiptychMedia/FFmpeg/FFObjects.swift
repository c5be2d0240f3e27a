import CFFmpeg

// Owners of the small FFmpeg objects: each allocates in init and frees in
// deinit, so a failure anywhere in a setup sequence releases what was made.
// Allocation of these fixed-size structs failing is treated like Swift's own
// allocation failing (a trap), as it only happens when the process is out of memory.

/// One `AVPacket`.
final class FFPacket: @unchecked Sendable {   // AVPacket pointer; one owner at a time, freed at deinit
    let raw: UnsafeMutablePointer<AVPacket>
    init() {
        guard let p = av_packet_alloc() else { fatalError("av_packet_alloc: out of memory") }
        raw = p
    }
    /// Takes the data of `source` (which is left blank).
    convenience init(moving source: UnsafeMutablePointer<AVPacket>) {
        self.init()
        av_packet_move_ref(raw, source)
    }
    /// A new reference to the data of `source`.
    convenience init(referencing source: FFPacket) throws(FFmpegError) {
        self.init()
        try ffCheck(av_packet_ref(raw, source.raw), "av_packet_ref")
    }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = raw; av_packet_free(&p) }
    func unref() { av_packet_unref(raw) }
}

/// One `AVFrame`.
final class FFFrame: @unchecked Sendable {   // AVFrame pointer; one owner at a time, freed at deinit
    let raw: UnsafeMutablePointer<AVFrame>
    init() {
        guard let f = av_frame_alloc() else { fatalError("av_frame_alloc: out of memory") }
        raw = f
    }
    deinit { var f: UnsafeMutablePointer<AVFrame>? = raw; av_frame_free(&f) }
    func unref() { av_frame_unref(raw) }
    /// Moves the references of `source` into this (blank) frame.
    func take(from source: FFFrame) { av_frame_move_ref(raw, source.raw) }

    var width: Int32 { raw.pointee.width }
    var height: Int32 { raw.pointee.height }
    var pixelFormat: AVPixelFormat { AVPixelFormat(rawValue: raw.pointee.format) }
    func data(_ plane: Int) -> UnsafeMutablePointer<UInt8>? { diptych_frame_data(raw, Int32(plane)) }
    func linesize(_ plane: Int) -> Int32 { diptych_frame_linesize(raw, Int32(plane)) }
    /// Pointers and strides of the first four planes (for libswscale).
    var planes: (data: [UnsafeMutablePointer<UInt8>?], strides: [Int32]) {
        ((0..<4).map { data($0) }, (0..<4).map { linesize($0) })
    }

    /// Allocates buffers for a `width`×`height` picture in `format`.
    func allocate(format: AVPixelFormat, width: Int32, height: Int32) throws(FFmpegError) {
        raw.pointee.format = format.rawValue
        raw.pointee.width = width
        raw.pointee.height = height
        try ffCheck(av_frame_get_buffer(raw, 0), "av_frame_get_buffer")
    }
}

/// An `AVDictionary` of options, freed in deinit. After an `..._open` call
/// the entries left are the options nobody recognised.
final class FFDictionary {
    var raw: OpaquePointer?
    init(_ entries: KeyValuePairs<String, String> = [:]) {
        for (k, v) in entries { set(k, v) }
    }
    deinit { av_dict_free(&raw) }
    func set(_ key: String, _ value: String) { av_dict_set(&raw, key, value, 0) }
    /// A copy (for calls that consume the dictionary they are given).
    func copy() -> FFDictionary {
        let c = FFDictionary()
        av_dict_copy(&c.raw, raw, 0)
        return c
    }
    /// The first entry left, if any.
    var first: (key: String, value: String)? {
        guard let e = av_dict_get(raw, "", nil, AV_DICT_IGNORE_SUFFIX) else { return nil }
        return (String(cString: e.pointee.key), String(cString: e.pointee.value))
    }
}

/// One reference to an `AVBufferRef` (a hardware device or frames context).
final class FFBufferRef {
    let raw: UnsafeMutablePointer<AVBufferRef>
    /// Takes ownership of `reference`.
    init(taking reference: UnsafeMutablePointer<AVBufferRef>) { raw = reference }
    deinit { var r: UnsafeMutablePointer<AVBufferRef>? = raw; av_buffer_unref(&r) }
    /// A new reference to the same buffer, owned by the caller (to hand to FFmpeg).
    func newReference() -> UnsafeMutablePointer<AVBufferRef>? { av_buffer_ref(raw) }
}

/// One `AVCodecParameters` (a stream's codec description, copied).
final class FFCodecParameters: @unchecked Sendable {   // AVCodecParameters pointer, not written after the copy
    let raw: UnsafeMutablePointer<AVCodecParameters>
    init() {
        guard let p = avcodec_parameters_alloc() else { fatalError("avcodec_parameters_alloc: out of memory") }
        raw = p
    }
    /// A copy of `source`.
    convenience init(copying source: UnsafePointer<AVCodecParameters>) {
        self.init()
        avcodec_parameters_copy(raw, source)
    }
    deinit { var p: UnsafeMutablePointer<AVCodecParameters>? = raw; avcodec_parameters_free(&p) }
}
