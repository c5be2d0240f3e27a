import CFFmpeg

/// One bitstream filter (`AVBSFContext`): packets in, rewritten packets out.
final class FFBitstreamFilter {
    private var raw: UnsafeMutablePointer<AVBSFContext>?

    /// Creates and initialises filter `name` for packets described by
    /// `parameters` in `timeBase`; `options` set its private options
    /// (`tick_rate`, ...) before it starts.
    init(_ name: String, parameters: UnsafePointer<AVCodecParameters>, timeBase: AVRational,
         options: KeyValuePairs<String, String>) throws(FFmpegError) {
        guard let filter = av_bsf_get_by_name(name) else { throw FFmpegError("av_bsf_get_by_name", code: diptych_averror_bsf_not_found()) }
        try ffCheck(av_bsf_alloc(filter, &raw), "av_bsf_alloc")
        guard let ctx = raw else { throw .outOfMemory("av_bsf_alloc") }
        try ffCheck(avcodec_parameters_copy(ctx.pointee.par_in, parameters), "avcodec_parameters_copy")
        ctx.pointee.time_base_in = timeBase
        for (key, value) in options {
            try ffCheck(av_opt_set(ctx.pointee.priv_data, key, value, 0), "av_opt_set(\(key))")
        }
        try ffCheck(av_bsf_init(ctx), "av_bsf_init")
    }

    deinit { av_bsf_free(&raw) }

    /// What comes out (the extradata rewritten too).
    var outputParameters: UnsafePointer<AVCodecParameters> { UnsafePointer(raw!.pointee.par_out) }

    /// Filters `packet` (nil: end of stream) and returns every packet ready.
    /// `packet`'s data is taken.
    func filter(_ packet: FFPacket?) throws(FFmpegError) -> [FFPacket] {
        try ffCheck(av_bsf_send_packet(raw, packet?.raw), "av_bsf_send_packet")
        var out: [FFPacket] = []
        while true {
            let p = FFPacket()
            let r = av_bsf_receive_packet(raw, p.raw)
            if r == averrorEAGAIN || r == averrorEOF { break }
            try ffCheck(r, "av_bsf_receive_packet")
            out.append(p)
        }
        return out
    }
}
