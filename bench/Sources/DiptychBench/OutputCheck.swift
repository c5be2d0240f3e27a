import CFFmpeg

/// The video track of a written file as its demuxer sees it: packets and
/// duration, read with libavformat.
struct VideoTrackCount: Sendable, Equatable {
    var frames: Int
    var seconds: Double

    /// Nil when the file cannot be opened or has no video stream.
    static func of(_ path: String) -> VideoTrackCount? {
        var ctx: UnsafeMutablePointer<AVFormatContext>? = nil
        guard avformat_open_input(&ctx, path, nil, nil) >= 0, let c = ctx else { return nil }
        defer { avformat_close_input(&ctx) }
        let index = av_find_best_stream(c, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0, let stream = c.pointee.streams[Int(index)] else { return nil }
        guard let pkt = av_packet_alloc() else { return nil }
        defer { var p: UnsafeMutablePointer<AVPacket>? = pkt; av_packet_free(&p) }
        var frames = 0
        var end = Int64.min
        while av_read_frame(c, pkt) >= 0 {
            if pkt.pointee.stream_index == index {
                frames += 1
                if pkt.pointee.pts != diptych_av_nopts_value() { end = max(end, pkt.pointee.pts + pkt.pointee.duration) }
            }
            av_packet_unref(pkt)
        }
        let tb = stream.pointee.time_base
        let start = stream.pointee.start_time == diptych_av_nopts_value() ? 0 : stream.pointee.start_time
        // The track's own duration where the demuxer knows it (fragmented MP4:
        // the sum of the sample durations), else the end of the last packet.
        let ticks = stream.pointee.duration > 0 ? stream.pointee.duration : end == .min ? 0 : end - start
        let seconds = Double(ticks) * Double(tb.num) / Double(tb.den)
        return VideoTrackCount(frames: frames, seconds: seconds)
    }
}
