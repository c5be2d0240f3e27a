import CFFmpeg
import DiptychCore

/// One libswresample context.
final class FFResampler {
    private(set) var raw: OpaquePointer?
    /// Converts `from`'s layout, format and rate into `to`'s.
    init(from input: UnsafeMutablePointer<AVFrame>, to encoder: UnsafeMutablePointer<AVCodecContext>) throws(FFmpegError) {
        try ffCheck(swr_alloc_set_opts2(&raw, &encoder.pointee.ch_layout, encoder.pointee.sample_fmt, encoder.pointee.sample_rate,
                                        &input.pointee.ch_layout, AVSampleFormat(rawValue: input.pointee.format),
                                        input.pointee.sample_rate, 0, nil), "swr_alloc_set_opts2")
        try ffCheck(swr_init(raw), "swr_init")
    }
    deinit { swr_free(&raw) }
}

/// One `AVAudioFifo` of planar samples.
final class FFAudioFIFO {
    let raw: OpaquePointer
    init(format: AVSampleFormat, channels: Int32) {
        guard let f = av_audio_fifo_alloc(format, channels, 4096) else { fatalError("av_audio_fifo_alloc: out of memory") }
        raw = f
    }
    deinit { av_audio_fifo_free(raw) }
    var count: Int32 { av_audio_fifo_size(raw) }
}

/// Re-encodes a track whose codec the container cannot carry (PCM in MP4,
/// say) to AAC: decode → resample to the AAC encoder's sample format →
/// 1024-sample frames → encode. Timestamps follow the input's first packet.
final class AudioTranscoder {
    let decoder: FFCodecContext
    let encoder: FFCodecContext
    private var resampler: FFResampler?
    private let fifo: FFAudioFIFO
    private let frame = FFFrame()
    private let packet = FFPacket()
    private var nextPTS: Int64?
    private let output: String

    init(track: AudioTrack, globalHeader: Bool, output: String) throws(MediaError) {
        self.output = output
        let fail: (String) -> MediaError = { .encoderFailed(encoder: "aac", detail: "audio from \(track.codecName): \($0)") }
        guard let dcodec = avcodec_find_decoder(track.codecID) else { throw fail("no decoder") }
        guard let ecodec = avcodec_find_encoder(AV_CODEC_ID_AAC) else { throw fail("FFmpeg lacks the AAC encoder") }
        do {
            decoder = try FFCodecContext(decoding: track.parameters.raw, codec: dcodec)
            decoder.raw.pointee.pkt_timebase = track.timeBase
            try decoder.open()
        } catch { throw fail("cannot open decoder: \(error.message)") }
        let d = decoder.raw.pointee
        let rate = d.sample_rate > 0 ? d.sample_rate : 48_000
        let channels = max(1, min(2, d.ch_layout.nb_channels))
        do {
            encoder = try FFCodecContext(ecodec)
            let e = encoder.raw
            e.pointee.sample_rate = rate
            e.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
            av_channel_layout_default(&e.pointee.ch_layout, channels)
            e.pointee.bit_rate = channels == 1 ? 96_000 : 160_000
            e.pointee.time_base = AVRational(num: 1, den: rate)
            if globalHeader { e.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
            try encoder.open()
        } catch { throw fail("cannot open AAC encoder: \(error.message)") }
        fifo = FFAudioFIFO(format: AV_SAMPLE_FMT_FLTP, channels: channels)
    }

    /// Decodes `input` and returns the AAC packets ready (timestamps in the encoder's time base).
    /// `origin` is subtracted from the input's timestamps (the writer's zero).
    func transcode(_ input: AudioPacket, origin: MediaTime) throws(MediaError) -> [FFPacket] {
        if nextPTS == nil, let pts = input.pts {
            nextPTS = max(0, (pts - origin).converted(to: encoder.raw.pointee.time_base.den).value)
        }
        let r = decoder.send(input.packet)
        if r < 0 && r != averrorEAGAIN { return [] }  // a damaged packet: skip it
        try drainDecoder()
        return try encodeFIFO(final: false)
    }

    func flush() throws(MediaError) -> [FFPacket] {
        _ = decoder.send(nil as FFPacket?)
        try drainDecoder()
        var out = try encodeFIFO(final: true)
        _ = encoder.send(nil as UnsafeMutablePointer<AVFrame>?)
        out += receivePackets()
        return out
    }

    private func drainDecoder() throws(MediaError) {
        let e = encoder.raw
        while decoder.receive(frame) == 0 {
            defer { frame.unref() }
            if resampler == nil {
                do { resampler = try FFResampler(from: frame.raw, to: e) } catch {
                    throw .encoderFailed(encoder: "aac", detail: "cannot resample audio for \(output): \(error)")
                }
            }
            let swr = resampler!.raw
            let maxOut = swr_get_out_samples(swr, frame.raw.pointee.nb_samples)
            var buffers: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>? = nil
            let channels = e.pointee.ch_layout.nb_channels
            guard av_samples_alloc_array_and_samples(&buffers, nil, channels, maxOut, e.pointee.sample_fmt, 0) >= 0 else { continue }
            defer { av_freep(&buffers![0]); av_freep(&buffers) }
            let n = swr_convert(swr, buffers, maxOut,
                                UnsafeMutableRawPointer(frame.raw.pointee.extended_data!).assumingMemoryBound(to: UnsafePointer<UInt8>?.self),
                                frame.raw.pointee.nb_samples)
            if n > 0 {
                buffers!.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: Int(channels)) {
                    _ = av_audio_fifo_write(fifo.raw, $0, n)
                }
            }
        }
    }

    private func encodeFIFO(final: Bool) throws(MediaError) -> [FFPacket] {
        var out: [FFPacket] = []
        let e = encoder.raw
        let size = e.pointee.frame_size > 0 ? e.pointee.frame_size : 1024
        while fifo.count >= size || (final && fifo.count > 0) {
            let n = min(size, fifo.count)
            let f = FFFrame()
            f.raw.pointee.nb_samples = n
            f.raw.pointee.format = e.pointee.sample_fmt.rawValue
            f.raw.pointee.sample_rate = e.pointee.sample_rate
            av_channel_layout_copy(&f.raw.pointee.ch_layout, &e.pointee.ch_layout)
            guard av_frame_get_buffer(f.raw, 0) >= 0 else { break }
            _ = UnsafeMutableRawPointer(f.raw.pointee.extended_data!).withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
                av_audio_fifo_read(fifo.raw, $0, n)
            }
            f.raw.pointee.pts = nextPTS ?? 0
            nextPTS = (nextPTS ?? 0) + Int64(n)
            do { try ffCheck(encoder.send(f.raw), "avcodec_send_frame") } catch {
                throw .encoderFailed(encoder: "aac", detail: error.message)
            }
            out += receivePackets()
        }
        return out
    }

    private func receivePackets() -> [FFPacket] {
        var out: [FFPacket] = []
        while encoder.receive(packet) == 0 { out.append(FFPacket(moving: packet.raw)) }
        return out
    }
}
