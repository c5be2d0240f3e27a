import CFFmpeg
import DiptychCore

/// Re-encodes a track whose codec the container cannot carry (PCM in MP4,
/// say) to AAC: decode → resample to the AAC encoder's sample format →
/// 1024-sample frames → encode. Timestamps follow the input's first packet.
final class AudioTranscoder {
    let decoder: UnsafeMutablePointer<AVCodecContext>
    let encoder: UnsafeMutablePointer<AVCodecContext>
    private var resampler: OpaquePointer?
    private let fifo: OpaquePointer
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var nextPTS: Int64?
    private let output: String

    init(track: AudioTrack, globalHeader: Bool, output: String) throws(MediaError) {
        self.output = output
        let fail: (String) -> MediaError = { .encoderFailed(encoder: "aac", detail: "audio from \(track.codecName): \($0)") }
        guard let dcodec = avcodec_find_decoder(track.codecID) else { throw fail("no decoder") }
        guard let ecodec = avcodec_find_encoder(AV_CODEC_ID_AAC) else { throw fail("FFmpeg lacks the AAC encoder") }
        var dec: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(dcodec)
        avcodec_parameters_to_context(dec, track.parameters)
        dec!.pointee.pkt_timebase = track.timeBase
        var r = avcodec_open2(dec, dcodec, nil)
        guard r >= 0 else { avcodec_free_context(&dec); throw fail("cannot open decoder: \(avErrorString(r))") }
        var enc: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(ecodec)
        let rate = dec!.pointee.sample_rate > 0 ? dec!.pointee.sample_rate : 48_000
        enc!.pointee.sample_rate = rate
        enc!.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
        let channels = max(1, min(2, dec!.pointee.ch_layout.nb_channels))
        av_channel_layout_default(&enc!.pointee.ch_layout, channels)
        enc!.pointee.bit_rate = channels == 1 ? 96_000 : 160_000
        enc!.pointee.time_base = AVRational(num: 1, den: rate)
        if globalHeader { enc!.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        r = avcodec_open2(enc, ecodec, nil)
        guard r >= 0 else {
            avcodec_free_context(&enc); avcodec_free_context(&dec)
            throw fail("cannot open AAC encoder: \(avErrorString(r))")
        }
        decoder = dec!
        encoder = enc!
        fifo = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, channels, 4096)
        frame = av_frame_alloc()
        packet = av_packet_alloc()
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder; avcodec_free_context(&d)
        var e: UnsafeMutablePointer<AVCodecContext>? = encoder; avcodec_free_context(&e)
        swr_free(&resampler)
        av_audio_fifo_free(fifo)
        var f: UnsafeMutablePointer<AVFrame>? = frame; av_frame_free(&f)
        var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p)
    }

    /// Decodes `input` and returns the AAC packets ready (timestamps in the encoder's time base).
    /// `origin` is subtracted from the input's timestamps (the writer's zero).
    func transcode(_ input: AudioPacket, origin: MediaTime) throws(MediaError) -> [UnsafeMutablePointer<AVPacket>] {
        if nextPTS == nil, let pts = input.pts {
            nextPTS = max(0, (pts - origin).converted(to: encoder.pointee.time_base.den).value)
        }
        let r = avcodec_send_packet(decoder, input.packet)
        if r < 0 && r != averrorEAGAIN { return [] }  // a damaged packet: skip it
        try drainDecoder()
        return try encodeFIFO(final: false)
    }

    func flush() throws(MediaError) -> [UnsafeMutablePointer<AVPacket>] {
        avcodec_send_packet(decoder, nil)
        try drainDecoder()
        var out = try encodeFIFO(final: true)
        avcodec_send_frame(encoder, nil)
        out += receivePackets()
        return out
    }

    private func drainDecoder() throws(MediaError) {
        while avcodec_receive_frame(decoder, frame) == 0 {
            defer { av_frame_unref(frame) }
            if resampler == nil {
                let r = swr_alloc_set_opts2(&resampler, &encoder.pointee.ch_layout, encoder.pointee.sample_fmt, encoder.pointee.sample_rate,
                                            &frame.pointee.ch_layout, AVSampleFormat(rawValue: frame.pointee.format), frame.pointee.sample_rate, 0, nil)
                guard r >= 0, swr_init(resampler) >= 0 else {
                    throw .encoderFailed(encoder: "aac", detail: "cannot resample audio for \(output)")
                }
            }
            let maxOut = swr_get_out_samples(resampler, frame.pointee.nb_samples)
            var buffers: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>? = nil
            let channels = encoder.pointee.ch_layout.nb_channels
            guard av_samples_alloc_array_and_samples(&buffers, nil, channels, maxOut, encoder.pointee.sample_fmt, 0) >= 0 else { continue }
            defer { av_freep(&buffers![0]); av_freep(&buffers) }
            let n = swr_convert(resampler, buffers, maxOut,
                                UnsafeMutableRawPointer(frame.pointee.extended_data!).assumingMemoryBound(to: UnsafePointer<UInt8>?.self),
                                frame.pointee.nb_samples)
            if n > 0 {
                buffers!.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: Int(channels)) {
                    _ = av_audio_fifo_write(fifo, $0, n)
                }
            }
        }
    }

    private func encodeFIFO(final: Bool) throws(MediaError) -> [UnsafeMutablePointer<AVPacket>] {
        var out: [UnsafeMutablePointer<AVPacket>] = []
        let size = encoder.pointee.frame_size > 0 ? encoder.pointee.frame_size : 1024
        while av_audio_fifo_size(fifo) >= size || (final && av_audio_fifo_size(fifo) > 0) {
            let n = min(size, av_audio_fifo_size(fifo))
            let f = av_frame_alloc()!
            var fp: UnsafeMutablePointer<AVFrame>? = f
            defer { av_frame_free(&fp) }
            f.pointee.nb_samples = n
            f.pointee.format = encoder.pointee.sample_fmt.rawValue
            f.pointee.sample_rate = encoder.pointee.sample_rate
            av_channel_layout_copy(&f.pointee.ch_layout, &encoder.pointee.ch_layout)
            guard av_frame_get_buffer(f, 0) >= 0 else { break }
            _ = UnsafeMutableRawPointer(f.pointee.extended_data!).withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
                av_audio_fifo_read(fifo, $0, n)
            }
            f.pointee.pts = nextPTS ?? 0
            nextPTS = (nextPTS ?? 0) + Int64(n)
            let r = avcodec_send_frame(encoder, f)
            if r < 0 { throw .encoderFailed(encoder: "aac", detail: avErrorString(r)) }
            out += receivePackets()
        }
        return out
    }

    private func receivePackets() -> [UnsafeMutablePointer<AVPacket>] {
        var out: [UnsafeMutablePointer<AVPacket>] = []
        while avcodec_receive_packet(encoder, packet) == 0 {
            let p = av_packet_alloc()!
            av_packet_move_ref(p, packet)
            out.append(p)
        }
        return out
    }
}
