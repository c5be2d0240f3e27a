import DiptychCore
import Foundation

/// FFmpeg and GStreamer doing our end-to-end case: same files, same geometry
/// (each draw's crop and destination from our `CompositionPlan`), libx264 with
/// the same preset, bitrate, keyframe interval and no B-frames, fragmented MP4.
///
/// Frame rate: the output follows the primary (60 fps, one frame per primary
/// frame), as in Diptych. FFmpeg's `hstack`/`vstack` of a 60 fps and a 30 fps
/// input without a rate set write 153,599 frames at 15360 fps for a 10 s take,
/// so the secondary branch gets `fps=60` and the output `-r 60`; `overlay`
/// already follows its main input. GStreamer's secondary goes through
/// `videorate` to 60 fps and the compositor's output caps say 60/1. Every
/// peer's output frame count is checked (its packets, read with libavformat) against the primary's.
struct Peers {
    let options: BenchOptions
    let ffmpeg = Tools.find("ffmpeg")
    let gst = Tools.find("gst-launch-1.0")

    /// A peer's command for one case: its program (nil when not installed),
    /// arguments, the command as a shell takes it, and its output file.
    struct Command {
        var executable: String?
        var arguments: [String]
        var shown: String
        var output: String
    }

    /// `-threads N` for libx264 where `--ffmpeg-encoder-threads` asks for it.
    var encoderThreads: [String] { options.ffmpegEncoderThreads.map { ["-threads", "\($0)"] } ?? [] }

    func command(_ peer: BenchPeer, layout: LayoutKind, inputs: EndToEndStage.Inputs) -> Command {
        let plan = CompositeStage.plan(layout, canvas: inputs.primarySize, primary: inputs.primarySize, secondary: inputs.secondarySize,
                                       mirrored: options.mirror)
        let out = "\(options.workDir)/\(peer.rawValue)-\(layout.rawValue)-\(inputs.primarySize).mp4"
        let exe: String?, args: [String]
        switch peer {
        case .ffmpeg:
            exe = ffmpeg
            args = ffmpegArguments(layout: layout, plan: plan, inputs: inputs, out: out)
        case .gstreamer:
            exe = gst
            args = gstArguments(plan: plan, inputs: inputs, out: out)
        }
        let shown = ([peer == .ffmpeg ? "ffmpeg" : "gst-launch-1.0"] + args.map { $0.contains(" ") || $0.contains(";") ? "'\($0)'" : $0 }).joined(separator: " ")
        return Command(executable: exe, arguments: args, shown: shown, output: out)
    }

    /// Source crop (pixels) of a draw: identity orientation in the benchmark.
    static func crop(_ d: DrawDescription, source: PixelSize) -> (x: Int, y: Int, w: Int, h: Int) {
        func px(_ v: Double, _ n: Int) -> Int { Int((v * Double(n)).rounded()) }
        return (px(d.crop.x, source.width), px(d.crop.y, source.height), px(d.crop.width, source.width), px(d.crop.height, source.height))
    }

    func ffmpegArguments(layout: LayoutKind, plan: CompositionPlan, inputs: EndToEndStage.Inputs, out: String) -> [String] {
        var graph: [String] = []
        var labels: [StreamRole: String] = [:]
        let usesSecondary = plan.draws.contains { $0.role == .secondary }
        for d in plan.draws {
            let src = d.role == .primary ? inputs.primarySize : inputs.secondarySize
            let c = Self.crop(d, source: src)
            var chain: [String] = []
            if d.role == .secondary && layout != .pip { chain.append("fps=60") }
            if c.x != 0 || c.y != 0 || c.w != src.width || c.h != src.height { chain.append("crop=\(c.w):\(c.h):\(c.x):\(c.y)") }
            if c.w != d.destination.width || c.h != d.destination.height {
                chain.append("scale=\(d.destination.width):\(d.destination.height):flags=bilinear")
            }
            if d.orientation.mirrored { chain.append("hflip") }
            if chain.isEmpty { chain.append("null") }
            let label = d.role == .primary ? "p" : "s"
            graph.append("[\(d.role == .primary ? 0 : 1):v]\(chain.joined(separator: ","))[\(label)]")
            labels[d.role] = label
        }
        switch layout {
        case .pip:
            let inset = plan.draws.first { $0.role == .secondary }!.destination
            graph.append("[p][s]overlay=x=\(inset.x):y=\(inset.y):eof_action=repeat[v]")
        case .sideBySide:
            let order = plan.draws.sorted { $0.destination.x < $1.destination.x }.map { labels[$0.role]! }
            graph.append("[\(order[0])][\(order[1])]hstack=inputs=2:shortest=1[v]")
        case .stacked:
            let order = plan.draws.sorted { $0.destination.y < $1.destination.y }.map { labels[$0.role]! }
            graph.append("[\(order[0])][\(order[1])]vstack=inputs=2:shortest=1[v]")
        default:
            graph.append("[p]null[v]")
        }
        var args = ["-hide_banner", "-loglevel", "error", "-y", "-i", inputs.primary]
        if usesSecondary { args += ["-i", inputs.secondary] }
        args += ["-filter_complex", graph.joined(separator: ";"), "-map", "[v]", "-an",
                 "-c:v", "libx264", "-preset", options.preset, "-b:v", "\(options.bitrate)", "-g", "\(options.gop)", "-bf", "0"] + encoderThreads
        if layout == .sideBySide || layout == .stacked { args += ["-r", "60"] }
        args += ["-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", out]
        return args
    }

    /// The PiP case with NVDEC: both inputs decoded to CUDA frames, the
    /// secondary scaled by `scale_cuda` (cropped on the CPU only when the plan
    /// crops it, mirrored on the CPU: there is no CUDA `hflip`). `gpuOverlay`:
    /// the inset uploaded again, `overlay_cuda` onto the primary, `hwdownload`
    /// to NV12; else both downloaded and `overlay` on the CPU. Then libx264.
    func ffmpegCUDAArguments(plan: CompositionPlan, inputs: EndToEndStage.Inputs, out: String, gpuOverlay: Bool = true) -> [String] {
        let inset = plan.draws.first { $0.role == .secondary }!
        let d = inset.destination
        let c = Self.crop(inset, source: inputs.secondarySize)
        let cropped = c.x != 0 || c.y != 0 || c.w != inputs.secondarySize.width || c.h != inputs.secondarySize.height
        var secondary: [String]
        if cropped {
            secondary = ["hwdownload", "format=nv12", "crop=\(c.w):\(c.h):\(c.x):\(c.y)", "scale=\(d.width):\(d.height):flags=bilinear"]
        } else {
            secondary = ["scale_cuda=\(d.width):\(d.height):interp_algo=bilinear", "hwdownload", "format=nv12"]
        }
        if inset.orientation.mirrored { secondary.append("hflip") }
        let graph: String
        if gpuOverlay {
            graph = "[1:v]\((secondary + ["hwupload"]).joined(separator: ","))[s];"
                + "[0:v][s]overlay_cuda=x=\(d.x):y=\(d.y):eof_action=repeat,hwdownload,format=nv12[v]"
        } else {
            graph = "[0:v]hwdownload,format=nv12[p];[1:v]\(secondary.joined(separator: ","))[s];"
                + "[p][s]overlay=x=\(d.x):y=\(d.y):eof_action=repeat[v]"
        }
        let hw = ["-hwaccel", "cuda", "-hwaccel_device", "cu", "-hwaccel_output_format", "cuda"]
        return ["-hide_banner", "-loglevel", "error", "-y", "-init_hw_device", "cuda=cu:0", "-filter_hw_device", "cu"]
            + hw + ["-i", inputs.primary] + hw + ["-i", inputs.secondary]
            + ["-filter_complex", graph, "-map", "[v]", "-an",
               "-c:v", "libx264", "-preset", options.preset, "-b:v", "\(options.bitrate)", "-g", "\(options.gop)", "-bf", "0"] + encoderThreads
            + ["-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", out]
    }

    /// Why an NVDEC command line cannot run here (no ffmpeg, no CUDA filters,
    /// no CUDA device, or it fails or hangs), found by running it on the
    /// first 30 frames (stopped after 20 s); nil when it works.
    func cudaProblem(_ arguments: [String], workDir: String) -> String? {
        guard let ffmpeg else { return "ffmpeg not installed" }
        let filters = Tools.run(ffmpeg, ["-hide_banner", "-filters"]).stdout
        for f in ["overlay_cuda", "scale_cuda", "hwupload", "hwdownload"] where !filters.contains(" \(f) ") {
            return "this ffmpeg lacks the \(f) filter"
        }
        let out = workDir + "/nvdec-check.mp4"
        var args = arguments
        args[args.count - 1] = out
        args.insert(contentsOf: ["-frames:v", "30"], at: args.count - 3)
        defer { for f in [out, out + ".out", out + ".err"] { try? FileManager.default.removeItem(atPath: f) } }
        let cmd = ChildCommand(executable: ffmpeg, arguments: args, stdoutPath: out + ".out", stderrPath: out + ".err")
        guard let r = (try? ChildGroup.run([cmd], deadline: 20))?.first else { return "cannot start ffmpeg" }
        if r.killed { return "30 frames took over 20 s (stopped): \(r.stderrTail)" }
        return r.status == 0 ? nil : "failed (exit \(r.status)): \(r.stderrTail)"
    }

    func gstArguments(plan: CompositionPlan, inputs: EndToEndStage.Inputs, out: String) -> [String] {
        let W = plan.canvas.width, H = plan.canvas.height
        var a = ["-q", "-e", "compositor", "name=c", "background=black"]
        var branches: [[String]] = []
        for (i, d) in plan.draws.enumerated() {
            let r = d.destination
            a += ["sink_\(i)::xpos=\(r.x)", "sink_\(i)::ypos=\(r.y)", "sink_\(i)::width=\(r.width)",
                  "sink_\(i)::height=\(r.height)", "sink_\(i)::zorder=\(d.zIndex)"]
            let src = d.role == .primary ? inputs.primarySize : inputs.secondarySize
            let c = Self.crop(d, source: src)
            var b = ["filesrc", "location=\(d.role == .primary ? inputs.primary : inputs.secondary)", "!", "qtdemux", "!",
                     "h264parse", "!", "avdec_h264"]
            if d.role == .secondary { b += ["!", "videorate", "!", "video/x-raw,framerate=60/1"] }
            if c.x != 0 || c.y != 0 || c.w != src.width || c.h != src.height {
                b += ["!", "videocrop", "left=\(c.x)", "top=\(c.y)", "right=\(src.width - c.x - c.w)", "bottom=\(src.height - c.y - c.h)"]
            }
            if d.orientation.mirrored { b += ["!", "videoflip", "method=horizontal-flip"] }
            b += ["!", "c.sink_\(i)"]
            branches.append(b)
        }
        a += ["!", "video/x-raw,format=I420,width=\(W),height=\(H),framerate=60/1", "!",
              "x264enc", "speed-preset=\(options.preset)", "bitrate=\(options.bitrate / 1000)", "key-int-max=\(options.gop)", "bframes=0", "!",
              "h264parse", "!", "mp4mux", "fragment-duration=1000", "!", "filesink", "location=\(out)"]
        for b in branches { a += b }
        return a
    }

    /// Video frames in a file (its packets, read with libavformat).
    func countFrames(_ path: String) -> Int? {
        VideoTrackCount.of(path)?.frames
    }

    func versions() -> (ffmpeg: String?, gstreamer: String?) {
        let f = ffmpeg.map { Tools.run($0, ["-version"]).stdout.split(separator: "\n").first.map(String.init) ?? "ffmpeg" }
        let g = gst.map { Tools.run($0, ["--version"]).stdout.split(separator: "\n").first.map(String.init) ?? "gstreamer" }
        return (f ?? nil, g ?? nil)
    }
}
