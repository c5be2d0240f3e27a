import CFFmpeg

/// One libavfilter audio graph: `abuffer` inputs named `in0`, `in1`, … and
/// one `abuffersink` named `out`, joined by a filter description in FFmpeg's
/// syntax (`[in0]volume=-6dB[out]`, `[in0][in1]amix=inputs=2[out]`).
final class FFAudioGraph {
    /// What an input's frames are: rate, sample format, channel layout, time base.
    struct Format: Equatable {
        var sampleRate: Int32
        var sampleFormat: AVSampleFormat
        /// FFmpeg's name of the layout (`stereo`, `mono`, `5.1`).
        var layout: String
        var timeBase: AVRational

        static func == (a: Format, b: Format) -> Bool {
            a.sampleRate == b.sampleRate && a.sampleFormat == b.sampleFormat && a.layout == b.layout
                && a.timeBase.num == b.timeBase.num && a.timeBase.den == b.timeBase.den
        }

        /// The format of a decoded frame (a layout without channel order taken as the default one of its count).
        init(of frame: UnsafeMutablePointer<AVFrame>, timeBase: AVRational) {
            sampleRate = frame.pointee.sample_rate
            sampleFormat = AVSampleFormat(rawValue: frame.pointee.format)
            if frame.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC {
                let n = max(1, frame.pointee.ch_layout.nb_channels)
                av_channel_layout_uninit(&frame.pointee.ch_layout)
                av_channel_layout_default(&frame.pointee.ch_layout, n)
            }
            var buf = [CChar](repeating: 0, count: 128)
            av_channel_layout_describe(&frame.pointee.ch_layout, &buf, buf.count)
            layout = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            self.timeBase = timeBase
        }

        init(sampleRate: Int32, sampleFormat: AVSampleFormat, layout: String, timeBase: AVRational) {
            self.sampleRate = sampleRate; self.sampleFormat = sampleFormat; self.layout = layout; self.timeBase = timeBase
        }

        var arguments: String {
            let fmt = av_get_sample_fmt_name(sampleFormat).map { String(cString: $0) } ?? "fltp"
            return "sample_rate=\(sampleRate):sample_fmt=\(fmt):channel_layout=\(layout):time_base=\(timeBase.num)/\(max(1, timeBase.den))"
        }
    }

    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private let sources: [UnsafeMutablePointer<AVFilterContext>]
    private let sink: UnsafeMutablePointer<AVFilterContext>

    /// `frameSize`: the sink delivers frames of exactly this many samples (the last may be shorter); nil: as they come.
    init(inputs: [Format], filters: String, frameSize: Int32? = nil) throws(FFmpegError) {
        guard let g = avfilter_graph_alloc() else { throw .outOfMemory("avfilter_graph_alloc") }
        graph = g
        g.pointee.nb_threads = 1
        var made: [UnsafeMutablePointer<AVFilterContext>] = []
        for (i, f) in inputs.enumerated() {
            var src: UnsafeMutablePointer<AVFilterContext>? = nil
            try ffCheck(avfilter_graph_create_filter(&src, avfilter_get_by_name("abuffer"), "in\(i)", f.arguments, nil, g),
                        "avfilter_graph_create_filter(abuffer \(f.arguments))")
            guard let src else { throw .outOfMemory("avfilter_graph_create_filter") }
            made.append(src)
        }
        var snk: UnsafeMutablePointer<AVFilterContext>? = nil
        try ffCheck(avfilter_graph_create_filter(&snk, avfilter_get_by_name("abuffersink"), "out", nil, nil, g),
                    "avfilter_graph_create_filter(abuffersink)")
        guard let snk else { throw .outOfMemory("avfilter_graph_create_filter") }
        sources = made
        sink = snk
        // The description's open inputs are fed by the sources; its open output feeds the sink.
        var outputs: UnsafeMutablePointer<AVFilterInOut>? = nil
        for (i, src) in made.enumerated().reversed() {
            guard let o = avfilter_inout_alloc() else { throw .outOfMemory("avfilter_inout_alloc") }
            o.pointee.name = av_strdup("in\(i)"); o.pointee.filter_ctx = src; o.pointee.pad_idx = 0; o.pointee.next = outputs
            outputs = o
        }
        var ins = avfilter_inout_alloc()
        defer { avfilter_inout_free(&outputs); avfilter_inout_free(&ins) }
        guard let i = ins else { throw .outOfMemory("avfilter_inout_alloc") }
        i.pointee.name = av_strdup("out"); i.pointee.filter_ctx = snk; i.pointee.pad_idx = 0; i.pointee.next = nil
        try ffCheck(avfilter_graph_parse_ptr(g, filters, &ins, &outputs, nil), "avfilter_graph_parse_ptr(\(filters))")
        try ffCheck(avfilter_graph_config(g, nil), "avfilter_graph_config(\(filters))")
        if let frameSize { av_buffersink_set_frame_size(snk, UInt32(frameSize)) }
    }

    deinit { avfilter_graph_free(&graph) }

    /// Hands `frame` to input `index` (its references are taken); nil ends that input.
    func push(_ frame: FFFrame?, to index: Int = 0) throws(FFmpegError) {
        try ffCheck(av_buffersrc_add_frame_flags(sources[index], frame?.raw, 0), "av_buffersrc_add_frame_flags")
    }

    /// The next frame out into `frame`: 0, or EAGAIN (push more) or EOF.
    func pull(into frame: FFFrame) -> Int32 { av_buffersink_get_frame(sink, frame.raw) }
}
