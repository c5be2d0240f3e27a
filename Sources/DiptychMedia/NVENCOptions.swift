import DiptychCore

/// A take's encoder settings as FFmpeg's h264_nvenc/hevc_nvenc options
/// (docs/ARCHITECTURE.md, "Encoder paths"). Pure: tests check each row.
enum NVENCOptions {
    /// NVENC's preset (`p1` fastest … `p7` best) for an x264/x265 preset name.
    static func preset(_ x264: String) -> String {
        switch x264 {
        case "ultrafast", "superfast": return "p1"
        case "veryfast": return "p2"
        case "faster": return "p3"
        case "fast", "medium": return "p4"
        case "slow": return "p5"
        case "slower": return "p6"
        default: return "p7"   // veryslow, placebo
        }
    }

    /// Whether the output is live: its encoder was asked for no latency
    /// (`tune zerolatency`, which the take gives every live output).
    static func isLive(_ s: VideoEncoderSettings) -> Bool { s.tune?.split(separator: ",").contains("zerolatency") ?? false }

    /// The options, in the order they are set. Live outputs: the
    /// ultra-low-latency tune, no reordering delay, frames out at once, CBR.
    /// Files: the high-quality tune and VBR. Both: a keyframe asked for is an
    /// IDR picture (a split file's cut, a reconnected stream's first
    /// picture); `--qp` is a constant QP instead of a rate, the same for I,
    /// P and B pictures (nvenc's `init_qpI/P/B`).
    static func options(_ s: VideoEncoderSettings) -> [(String, String)] {
        let live = isLive(s)
        var o: [(String, String)] = [("preset", preset(s.preset)), ("tune", live ? "ull" : "hq")]
        if live { o += [("zerolatency", "1"), ("delay", "0")] }
        o.append(("forced-idr", "1"))
        if let qp = s.qp {
            o += [("rc", "constqp"), ("init_qpI", "\(qp)"), ("init_qpP", "\(qp)"), ("init_qpB", "\(qp)")]
        } else {
            o.append(("rc", live ? "cbr" : "vbr"))
        }
        return o
    }
}
