import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// Encodes video frames and muxes them, with the source's audio, into a file
/// or a network stream.
///
/// - MP4 is written fragmented (`frag_keyframe+empty_moov+default_base_moof`,
///   fragments of at most one second, each flushed to the file when complete),
///   so a process killed at any moment leaves a playable file holding every
///   fragment but the last. `finish()` writes the rest and the index.
/// - MPEG-TS to files or `srt://`, FLV to `rtmp://`, all through avio
///   (network outputs get a write timeout).
/// - Audio (given an `AudioTrack`): copied without re-encoding when the
///   container can carry the codec, else re-encoded to AAC. No track → no
///   audio stream at all.
/// - Timestamps: frame pts become exact encoder ticks; N frames at F fps
///   last exactly N/F seconds. MP4 and FLV are written without B-frames
///   unless `maxBFrames` asks for them, so every stream starts at zero.
/// - A write failing with ENOSPC throws `MediaError.storageFull`.
///
/// Not thread-safe: call from one thread.
public final class MediaWriter: @unchecked Sendable {
    public let url: String
    public let container: ContainerFormat
    public let settings: VideoEncoderSettings
    /// The encoder in use (`libx264`, `h264_vaapi`, ...).
    public var encoderName: String { encoder.name }
    /// Why that encoder was chosen (e.g. `VA-API unavailable: no /dev/dri`).
    public var encoderReason: String { encoder.selection.reason }
    /// `"libx264 (VA-API unavailable: no /dev/dri)"`.
    public var encoderDescription: String { encoder.selection.description }
    /// How audio is written: `none`, `copy aac`, `aac (re-encoded from pcm_s16le)`.
    public private(set) var audioDescription = "none"
    public private(set) var framesWritten = 0
    /// The first frame's pts: the output's zero. Video and audio timestamps
    /// are written relative to it, so a take starting mid-stream starts at 0.
    public private(set) var timestampOrigin: MediaTime?
    public private(set) var audioPacketsWritten = 0

    private let encoder: VideoEncoder
    private var format: UnsafeMutablePointer<AVFormatContext>?
    private let videoStream: UnsafeMutablePointer<AVStream>
    private var audioStream: UnsafeMutablePointer<AVStream>?
    private let audioTrack: AudioTrack?
    private var audioTranscoder: AudioTranscoder?
    private var pendingAudio: [AudioPacket] = []
    private let deadline: InterruptDeadline
    private let network: Bool
    /// End of the last video frame written, in encoder ticks.
    private var videoEnd: Int64 = 0
    private var firstError: MediaError?
    private var finished = false

    /// Opens the output and writes its header.
    /// - Parameters:
    ///   - container: nil infers it from `url` (`.mp4`, `.ts`, `rtmp://`, `srt://`).
    ///   - audio: the primary source's audio (`AudioMode.primary`), or nil for no audio track.
    public init(url: String, container: ContainerFormat? = nil, video: VideoEncoderSettings,
                audio: AudioTrack? = nil, networkTimeout: Double = 10) throws(MediaError) {
        guard let container = container ?? ContainerFormat.infer(from: url) else {
            throw .writeFailed(path: url, detail: "cannot tell the container from the name (use .mp4, .ts, rtmp:// or srt://)")
        }
        self.url = url
        self.container = container
        var video = video
        if video.maxBFrames == nil && (container == .mp4 || container == .rtmp) {
            // Fragmented MP4 has no edit list to hide the B-frame reorder delay:
            // with B-frames the muxer shifts every stream by it. Without them
            // video and audio start exactly at zero.
            video.maxBFrames = 0
        }
        self.settings = video
        self.audioTrack = audio
        network = url.contains("://") && !url.hasPrefix("file:")
        deadline = InterruptDeadline(timeout: network ? networkTimeout : 0)

        let muxer = container.muxer
        var fmt: UnsafeMutablePointer<AVFormatContext>? = nil
        var r = avformat_alloc_output_context2(&fmt, nil, muxer, url)
        guard r >= 0, let ctx = fmt else { throw .writeFailed(path: url, detail: "no \(muxer) muxer: \(avErrorString(r))") }
        var ok = false
        defer {
            if !ok {
                if ctx.pointee.pb != nil { avio_closep(&ctx.pointee.pb) }
                avformat_free_context(ctx)
            }
        }
        ctx.pointee.interrupt_callback = deadline.callback
        // Each completed fragment / packet goes to the file at once.
        ctx.pointee.flush_packets = 1
        let globalHeader = ctx.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0
        encoder = try VideoEncoder(settings: video, globalHeader: globalHeader)

        guard let vs = avformat_new_stream(ctx, nil) else { throw .writeFailed(path: url, detail: "cannot add video stream") }
        videoStream = vs
        vs.pointee.time_base = encoder.timeBase
        vs.pointee.avg_frame_rate = encoder.context.pointee.framerate
        r = avcodec_parameters_from_context(vs.pointee.codecpar, encoder.context)
        guard r >= 0 else { throw .writeFailed(path: url, detail: "video parameters: \(avErrorString(r))") }

        if let audio {
            guard let st = avformat_new_stream(ctx, nil) else { throw .writeFailed(path: url, detail: "cannot add audio stream") }
            audioStream = st
            if avformat_query_codec(ctx.pointee.oformat, audio.codecID, FF_COMPLIANCE_NORMAL) == 1 {
                avcodec_parameters_copy(st.pointee.codecpar, audio.parameters)
                st.pointee.codecpar.pointee.codec_tag = 0
                st.pointee.time_base = audio.timeBase
                audioDescription = "copy \(audio.codecName)"
            } else {
                let t = try AudioTranscoder(track: audio, globalHeader: globalHeader, output: url)
                avcodec_parameters_from_context(st.pointee.codecpar, t.encoder)
                st.pointee.time_base = t.encoder.pointee.time_base
                audioTranscoder = t
                audioDescription = "aac (re-encoded from \(audio.codecName))"
            }
        }

        var opts: OpaquePointer? = nil
        defer { av_dict_free(&opts) }
        if network { av_dict_set(&opts, "rw_timeout", String(Int(networkTimeout * 1_000_000)), 0) }
        if ctx.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0 {
            var ioOpts: OpaquePointer? = nil
            av_dict_copy(&ioOpts, opts, 0)
            deadline.arm()
            r = avio_open2(&ctx.pointee.pb, url, AVIO_FLAG_WRITE, &ctx.pointee.interrupt_callback, &ioOpts)
            deadline.disarm()
            av_dict_free(&ioOpts)
            if r < 0 { throw MediaWriter.error(r, path: url, deadline: deadline, doing: "cannot open output") }
        }
        var muxOpts: OpaquePointer? = nil
        defer { av_dict_free(&muxOpts) }
        if container == .mp4 {
            av_dict_set(&muxOpts, "movflags", "frag_keyframe+empty_moov+default_base_moof", 0)
            av_dict_set(&muxOpts, "frag_duration", "1000000", 0)
        }
        format = ctx
        deadline.arm()
        r = avformat_write_header(ctx, &muxOpts)
        if r >= 0 { avio_flush(ctx.pointee.pb); if let e = ctx.pointee.pb?.pointee.error, e < 0 { r = e } }
        deadline.disarm()
        if r < 0 { format = nil; throw MediaWriter.error(r, path: url, deadline: deadline, doing: "header") }
        ok = true
    }

    deinit {
        // finish() should have run; finish best-effort so the file is complete.
        if !finished { try? finish() }
    }

    static func error(_ code: Int32, path: String, deadline: InterruptDeadline, doing: String) -> MediaError {
        if code == averrorENOSPC { return .storageFull(path: path) }
        if deadline.fired || code == averrorExit { return .timedOut(path: path) }
        return .writeFailed(path: path, detail: "\(doing): \(avErrorString(code))")
    }

    private func check(_ r: Int32, _ doing: String) throws(MediaError) {
        var code = r
        if code >= 0, let e = format?.pointee.pb?.pointee.error, e < 0 { code = e }
        guard code < 0 else { return }
        let e = MediaWriter.error(code, path: url, deadline: deadline, doing: doing)
        if firstError == nil { firstError = e }
        throw e
    }

    /// Encodes and writes one frame (NV12 preferred, any `PixelFormat` accepted),
    /// then any audio the source has read up to this frame's end.
    public func write(_ frame: VideoFrame) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { throw e }
        let origin = timestampOrigin ?? frame.pts
        var frame = frame
        frame.pts = frame.pts - origin
        let packets: [EncodedPacket]
        do { packets = try encoder.encode(frame) } catch {
            if case .invalidFrame = error {} else { firstError = error }
            throw error
        }
        timestampOrigin = origin
        try afterVideo(packets, frameEnd: frame.pts.converted(to: encoder.timeBase.den).value + encoder.frameTicks)
    }

    /// Encodes a dma-buf image (VA-API encoder only; zero copy).
    public func write(_ image: DMABufFrame) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { image.release?(); throw e }
        let origin = timestampOrigin ?? image.pts
        var image = image
        image.pts = image.pts - origin
        let packets = try encoder.encode(image)
        timestampOrigin = origin
        try afterVideo(packets, frameEnd: image.pts.converted(to: encoder.timeBase.den).value + encoder.frameTicks)
    }

    private func afterVideo(_ packets: [EncodedPacket], frameEnd: Int64) throws(MediaError) {
        framesWritten += 1
        videoEnd = max(videoEnd, frameEnd)
        for p in packets { try writeVideoPacket(p) }
        if let audioTrack { try writeAudio(audioTrack.drain()) }
    }

    private func writeVideoPacket(_ p: EncodedPacket) throws(MediaError) {
        guard let format else { return }
        p.packet.pointee.stream_index = videoStream.pointee.index
        av_packet_rescale_ts(p.packet, encoder.timeBase, videoStream.pointee.time_base)
        deadline.arm()
        let r = av_interleaved_write_frame(format, p.packet)
        deadline.disarm()
        try check(r, "video packet")
    }

    /// Writes audio packets from the writer's `AudioTrack` (copied or re-encoded).
    /// Packets past the video written so far wait; at `finish()` those beyond
    /// the last video frame are dropped, so audio never outlasts the video.
    /// `write(_:)` calls this itself with whatever the source has queued.
    public func writeAudio(_ packets: [AudioPacket]) throws(MediaError) {
        guard audioStream != nil else { return }
        pendingAudio.append(contentsOf: packets)
        try writePendingAudio(until: videoEnd)
    }

    private func writePendingAudio(until endTicks: Int64) throws(MediaError) {
        guard let format, let st = audioStream, let track = audioTrack else { pendingAudio.removeAll(); return }
        guard let origin = timestampOrigin else { return }  // audio waits for the first video frame
        let end = encoder.timeBase.mediaTime(endTicks)
        let shift = av_rescale_q(origin.value, AVRational(num: 1, den: origin.timescale), track.timeBase)
        var i = 0
        while i < pendingAudio.count {
            let a = pendingAudio[i]
            guard let sourcePTS = a.pts else { i += 1; continue }
            let pts = sourcePTS - origin
            if pts >= end { break }
            i += 1
            // Skip audio wholly before the first video frame.
            if pts + a.duration <= .zero { continue }
            if let t = audioTranscoder {
                try writeOwned(try t.transcode(a, origin: origin), stream: st, from: t.encoder.pointee.time_base, format: format)
            } else {
                let copy = av_packet_clone(a.packet)!
                var c: UnsafeMutablePointer<AVPacket>? = copy
                defer { av_packet_free(&c) }
                if copy.pointee.pts != avNoPTS { copy.pointee.pts -= shift }
                if copy.pointee.dts != avNoPTS { copy.pointee.dts -= shift }
                try writeAudioPacket(copy, stream: st, from: track.timeBase, format: format)
            }
        }
        pendingAudio.removeFirst(i)
    }

    /// Writes and frees packets the transcoder returned.
    private func writeOwned(_ packets: [UnsafeMutablePointer<AVPacket>], stream: UnsafeMutablePointer<AVStream>,
                            from tb: AVRational, format: UnsafeMutablePointer<AVFormatContext>) throws(MediaError) {
        defer { for p in packets { var q: UnsafeMutablePointer<AVPacket>? = p; av_packet_free(&q) } }
        for p in packets { try writeAudioPacket(p, stream: stream, from: tb, format: format) }
    }

    private func writeAudioPacket(_ p: UnsafeMutablePointer<AVPacket>, stream: UnsafeMutablePointer<AVStream>,
                                  from tb: AVRational, format: UnsafeMutablePointer<AVFormatContext>) throws(MediaError) {
        p.pointee.stream_index = stream.pointee.index
        p.pointee.pos = -1
        av_packet_rescale_ts(p, tb, stream.pointee.time_base)
        deadline.arm()
        let r = av_interleaved_write_frame(format, p)
        deadline.disarm()
        try check(r, "audio packet")
        audioPacketsWritten += 1
    }

    /// Flushes the encoder, writes the remaining audio and the trailer, and
    /// closes the output. If a write already failed (storage full, say),
    /// finish only closes the output (without throwing again): a fragmented
    /// MP4 then holds every fragment completed before the failure.
    public func finish() throws(MediaError) {
        guard !finished else { return }
        finished = true
        defer { close() }
        guard firstError == nil else { return }
        for p in try encoder.flush() { try writeVideoPacket(p) }
        if let audioTrack { pendingAudio.append(contentsOf: audioTrack.drain()) }
        try writePendingAudio(until: videoEnd)
        pendingAudio.removeAll()
        if let t = audioTranscoder, let st = audioStream, let format {
            try writeOwned(try t.flush(), stream: st, from: t.encoder.pointee.time_base, format: format)
        }
        guard let format else { return }
        deadline.arm()
        var r = av_write_trailer(format)
        deadline.disarm()
        try check(r, "trailer")
        if format.pointee.pb != nil {
            avio_flush(format.pointee.pb)
            try check(0, "flush")
            r = avio_closep(&format.pointee.pb)
            try check(r, "close")
        }
    }

    private func close() {
        guard let f = format else { return }
        if f.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0, f.pointee.pb != nil { avio_closep(&f.pointee.pb) }
        avformat_free_context(f)
        format = nil
    }
}
