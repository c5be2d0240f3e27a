import CFFmpeg

/// One `AVCodecContext` (a decoder or an encoder) and its codec.
final class FFCodecContext {
    let raw: UnsafeMutablePointer<AVCodecContext>
    let codec: UnsafePointer<AVCodec>

    init(_ codec: UnsafePointer<AVCodec>) throws(FFmpegError) {
        guard let c = avcodec_alloc_context3(codec) else { throw .outOfMemory("avcodec_alloc_context3") }
        raw = c
        self.codec = codec
    }

    /// A decoder for `parameters` (codec and stream properties copied in).
    convenience init(decoding parameters: UnsafePointer<AVCodecParameters>, codec: UnsafePointer<AVCodec>) throws(FFmpegError) {
        try self.init(codec)
        try ffCheck(avcodec_parameters_to_context(raw, parameters), "avcodec_parameters_to_context")
    }

    deinit { var c: UnsafeMutablePointer<AVCodecContext>? = raw; avcodec_free_context(&c) }

    /// The codec's short name (`h264`, `libx264`, `aac`).
    var name: String { String(cString: codec.pointee.name) }

    /// `avcodec_open2`. Options the codec consumed are removed from `options`.
    func open(_ options: FFDictionary? = nil) throws(FFmpegError) {
        if let options {
            try ffCheck(avcodec_open2(raw, codec, &options.raw), "avcodec_open2")
        } else {
            try ffCheck(avcodec_open2(raw, codec, nil), "avcodec_open2")
        }
    }

    /// `avcodec_send_packet`; nil starts draining. Returns the raw code
    /// (EAGAIN and EOF are part of the protocol, not failures).
    func send(_ packet: FFPacket?) -> Int32 { avcodec_send_packet(raw, packet?.raw) }
    func send(_ frame: UnsafeMutablePointer<AVFrame>?) -> Int32 { avcodec_send_frame(raw, frame) }
    func receive(_ frame: FFFrame) -> Int32 { avcodec_receive_frame(raw, frame.raw) }
    func receive(_ packet: FFPacket) -> Int32 { avcodec_receive_packet(raw, packet.raw) }

    /// Copies this (open) encoder's parameters into `parameters`.
    func copyParameters(to parameters: UnsafeMutablePointer<AVCodecParameters>) throws(FFmpegError) {
        try ffCheck(avcodec_parameters_from_context(parameters, raw), "avcodec_parameters_from_context")
    }
}
