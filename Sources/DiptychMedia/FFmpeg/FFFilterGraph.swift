import CFFmpeg

/// One libavfilter graph with a single video input (`buffer`) and output
/// (`buffersink`): frames in, filtered frames out.
final class FFFilterGraph {
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>

    /// Builds `buffer → filters → buffersink` for frames of `width`×`height`
    /// in `format`, timestamps in `timeBase`. `filters` is a filter chain in
    /// FFmpeg's syntax (`bwdif=mode=send_frame`).
    init(filters: String, width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational,
         sampleAspect: AVRational) throws(FFmpegError) {
        guard let g = avfilter_graph_alloc() else { throw .outOfMemory("avfilter_graph_alloc") }
        graph = g
        g.pointee.nb_threads = 0
        let sar = sampleAspect.num > 0 ? sampleAspect : AVRational(num: 1, den: 1)
        let args = "video_size=\(width)x\(height):pix_fmt=\(format.rawValue):time_base=\(timeBase.num)/\(max(1, timeBase.den)):pixel_aspect=\(sar.num)/\(sar.den)"
        var src: UnsafeMutablePointer<AVFilterContext>? = nil, snk: UnsafeMutablePointer<AVFilterContext>? = nil
        try ffCheck(avfilter_graph_create_filter(&src, avfilter_get_by_name("buffer"), "in", args, nil, g), "avfilter_graph_create_filter(buffer)")
        try ffCheck(avfilter_graph_create_filter(&snk, avfilter_get_by_name("buffersink"), "out", nil, nil, g), "avfilter_graph_create_filter(buffersink)")
        guard let src, let snk else { throw .outOfMemory("avfilter_graph_create_filter") }
        source = src
        sink = snk
        // The chain's open input is fed by "in"; its open output feeds "out".
        var outputs = avfilter_inout_alloc(), inputs = avfilter_inout_alloc()
        defer { avfilter_inout_free(&outputs); avfilter_inout_free(&inputs) }
        guard let o = outputs, let i = inputs else { throw .outOfMemory("avfilter_inout_alloc") }
        o.pointee.name = av_strdup("in"); o.pointee.filter_ctx = src; o.pointee.pad_idx = 0; o.pointee.next = nil
        i.pointee.name = av_strdup("out"); i.pointee.filter_ctx = snk; i.pointee.pad_idx = 0; i.pointee.next = nil
        try ffCheck(avfilter_graph_parse_ptr(g, filters, &inputs, &outputs, nil), "avfilter_graph_parse_ptr(\(filters))")
        try ffCheck(avfilter_graph_config(g, nil), "avfilter_graph_config(\(filters))")
    }

    deinit { avfilter_graph_free(&graph) }

    /// Whether FFmpeg has filter `name`.
    static func has(_ name: String) -> Bool { avfilter_get_by_name(name) != nil }

    /// Hands `frame` to the graph (its references are taken; `frame` is left
    /// blank). nil marks the end of the stream, so the graph flushes.
    func push(_ frame: FFFrame?) throws(FFmpegError) {
        try ffCheck(av_buffersrc_add_frame_flags(source, frame?.raw, 0), "av_buffersrc_add_frame_flags")
    }

    /// The next filtered frame into `frame`: 0, or EAGAIN (push more) or EOF.
    func pull(into frame: FFFrame) -> Int32 { av_buffersink_get_frame(sink, frame.raw) }
}
