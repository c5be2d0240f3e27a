import DiptychCore
import DiptychOptions
import Foundation

/// What `diptych bench` measures. A stage of a case.
public enum BenchStage: String, Sendable, Codable, CaseIterable {
    /// Upload both frames → draw → NV12 readback, pipelined as in production.
    case composite
    /// Decode → composite → encode → mux with the real `RecordingSession`.
    case endToEnd = "e2e"
    /// NVDEC: `--decoder nvdec` against `--decoder cpu` (PSNR), and composites
    /// per second with NVDEC-decoded inputs in CUDA memory (not in the default set).
    case nvdec
}

/// Programs run beside ours on the same inputs (end-to-end stage).
public enum BenchPeer: String, Sendable, Codable, CaseIterable {
    case ffmpeg, gstreamer
}

/// A one-line usage error (`diptych bench` exits 2 with it).
public struct BenchUsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// `diptych bench` options. The default (`--quick`) finishes in a few minutes
/// on a 2-core machine with Mesa's software rasterizer; `--full` is the whole
/// matrix (layouts × 720p/1080p/2160p × RGBA/NV12 × both stages).
public struct BenchOptions: Sendable, Equatable {
    public var layouts: [LayoutKind] = BenchOptions.allLayouts
    public var sizes: [PixelSize] = [.hd1080]
    public var formats: [PixelFormat] = [.nv12, .rgba]
    public var stages: [BenchStage] = [.composite, .endToEnd]
    /// Layouts of the end-to-end stage (quick: PiP and side by side).
    public var e2eLayouts: [LayoutKind] = [.pip, .sideBySide]
    /// Sizes of the end-to-end stage.
    public var e2eSizes: [PixelSize] = [.hd1080]
    /// Measured composites per composite case (after `warmup`).
    public var frames = 120
    public var warmup = 10
    /// Compositors sharing one context in the NVDEC stage's composite rate.
    public var streams = 16
    /// nvdec stage: GL contexts the compositors are dealt to in turn (each its own render thread).
    public var contexts = 1
    /// nvdec stage: frames of compositors sharing a context run phase by phase together (`GPUTuning.frameBatch`).
    public var frameBatch = 16
    /// Seconds of primary video per end-to-end case (60 fps primary, 30 fps secondary).
    public var duration = 10.0
    public var peers: [BenchPeer] = BenchPeer.allCases
    /// x264 preset for us and the peers (the first of `presets`).
    public var preset = "ultrafast"
    /// Every end-to-end case runs once per preset (`--preset ultrafast,veryfast`).
    public var presets = ["ultrafast"]
    /// Concurrent takes (`--pairs`): the end-to-end stage looks for the most
    /// pairs that stay real time instead of timing one pair.
    public var pairs: PairCounts?
    /// The speed (× real time) every take of a `--pairs` trial must keep.
    public var minSpeed = 1.0
    /// Which of `--pairs`' runners run (nil: ours, and FFmpeg's configurations when `--peers` has ffmpeg).
    public var pairRunners: [String]?
    /// `--serve-encoder-threads`, `--serve-contexts`, `--serve-decode-cores`,
    /// `--serve-decode-nice`, `--serve-gpu-takes`: how the serve runners run the server.
    public var serve = ServeRunnerSettings()
    /// `--ffmpeg-encoder-threads`: FFmpeg's libx264 `-threads` in every FFmpeg command (nil: FFmpeg's default).
    public var ffmpegEncoderThreads: Int?
    public var bitrate = 10_000_000
    /// `--keyframe-interval`: seconds from one keyframe to the next, ours and the peers' (`-g`, `key-int-max`).
    public var keyframeInterval = 1.0
    /// The keyframe interval in frames of the 60 fps primary.
    public var gop: Int { max(1, Int((keyframeInterval * 60).rounded())) }
    /// `--encoder`: the encoder of our takes (`diptych record --encoder`, and the server's takes).
    public var encoder = EncoderChoice.auto
    /// `--slices`: slices a picture of our takes (`diptych record --slices`, and the server's takes; nil: one).
    public var slices: Int?
    /// End to end: each case runs this many times, ours and the peers alternating (medians and spreads reported).
    public var repeats = 1
    /// End to end: the secondary is mirrored (our `--mirror-secondary`, FFmpeg's `hflip`, GStreamer's `videoflip`).
    public var mirror = true
    public var gpu = "auto"
    public var json: String?
    public var chart: String? = "bench-fps.svg"
    public var sheet: String? = "bench-layouts.png"
    /// Cached inputs and outputs of the end-to-end stage.
    public var workDir = NSTemporaryDirectory() + "diptych-bench"
    public var full = false

    public static let allLayouts: [LayoutKind] = [.pip, .sideBySide, .stacked, .primaryOnly]
    public static let allSizes: [PixelSize] = [.hd720, .hd1080, PixelSize(width: 3840, height: 2160)]

    public init() {}

    public static let usage = """
    usage: diptych bench [options]
      --quick              the default: composite stage for every layout at 1080p (NV12, RGBA);
                           end to end for pip and side-by-side at 1080p, with the peers
      --full               every layout x 720p, 1080p, 2160p x NV12, RGBA, both stages
      --layouts L,...      pip, side-by-side, stacked, primary-only (both stages)
      --sizes S,...        720p, 1080p, 2160p or WxH (both stages)
      --formats F,...      nv12, rgba (composite stage input)
      --stages S,...       composite, e2e, nvdec (NVDEC against the CPU decoder: PSNR of the two takes,
                           composites/s with NVDEC-decoded inputs; not in the default set)
      --frames N           measured composites per composite case and per nvdec stream (default 120)
      --streams N          nvdec stage: compositors (default 16), dealt in turn to --contexts GL contexts
      --contexts N         nvdec stage: GL contexts, each with its own render thread (default 1)
      --frame-batch N      nvdec stage: frames of compositors sharing a context run phase by phase
                           together, 1 to 256 (default 16; 1: one at a time)
      --duration SECONDS   primary video per end-to-end case (default 10)
      --peers P,...|none   ffmpeg, gstreamer (default both; a missing one is skipped with a note)
      --preset P,...       x264 presets for us and the peers, each a case of its own (default ultrafast)
      --repeat N           end to end: run each case N times, ours and the peers alternating (medians, spreads)
      --mirror on|off      end to end: mirror the secondary in every layout (default on)
      --pairs N|N,M,...    end to end with takes at once: N looks for the largest count from 1 to N at which
                           every take stays real time, a list tries exactly those counts (PiP, 1080p60 + 720p30
                           unless --layouts/--sizes say otherwise; FFmpeg runs as many processes, CPU and NVDEC)
      --min-speed X        with --pairs: the speed every take must keep, x real time (default 1.0)
      --pair-runners R,... with --pairs: diptych (a diptych record process per take; NVDEC where the GPU has it),
                           diptych-cpu (--decoder cpu), diptych-serve (every take in one diptych serve, over HTTP),
                           diptych-serve-cpu, ffmpeg, ffmpeg-nvdec, ffmpeg-nvdec-cpu-overlay (default: diptych,
                           diptych-serve and FFmpeg's; diptych alone without the ffmpeg peer)
      --serve-encoder-threads N  with the serve runners: diptych serve --encoder-threads N
      --serve-contexts N   with the serve runners: diptych serve --contexts N (GL contexts the takes share)
      --serve-decode-cores N  with the serve runners: diptych serve --decode-cores N (cores the takes it decodes
                           on the CPU instead of NVDEC may fill; 0: none)
      --serve-decode-nice N  with the serve runners: diptych serve --decode-nice N (the nice value of its takes'
                           CPU decoders' threads; 0: the server's own)
      --serve-gpu-takes N  with the serve runners: the first N takes of each trial encode on the GPU (--encoder gpu),
                           the rest with --encoder's encoder (which must not be gpu then)
      --ffmpeg-encoder-threads N  FFmpeg's libx264 with -threads N in every FFmpeg command (default: FFmpeg's)
      --encoder auto|x264|vaapi|nvenc|gpu  the encoder of our end-to-end takes (default auto; nvenc:
                           NVENC where the GPU has an engine; gpu: the GPU H.264 encoder, --bitrate its
                           rate; the peers keep libx264 at --preset;
                           nvdec stage: gpu encodes every composite on the GPU, QP 26, instead of reading it back)
      --slices N           our end-to-end takes cut each picture into N slices (diptych record --slices; default 1)
      --keyframe-interval S  end to end: seconds from one keyframe to the next, ours and the peers'
                           (default 1; at least one frame of the 60 fps primary, at most 3600)
      --gpu SEL            auto|software|N|/dev/dri/renderDN|device|surfaceless
      --json FILE          the results as JSON
      --chart FILE.svg     fps per layout as an SVG bar chart (default bench-fps.svg; --chart none)
      --sheet FILE.png     one composite of each layout (default bench-layouts.png; --sheet none)
      --work-dir DIR       cached input files and outputs (default $TMPDIR/diptych-bench)
    """

    /// Parses the arguments after `bench`. `-h`/`--help` → nil (print usage).
    public static func parse(_ arguments: [String]) throws(BenchUsageError) -> BenchOptions? {
        var o = BenchOptions()
        var explicitLayouts = false, explicitSizes = false
        if arguments.contains("-h") || arguments.contains("--help") { return nil }
        let valued = ["--layouts", "--sizes", "--formats", "--stages", "--frames", "--streams", "--contexts", "--frame-batch", "--duration", "--peers", "--preset", "--presets",
                      "--repeat", "--mirror",
                      "--pairs", "--pair-runners", "--encoder", "--slices", "--keyframe-interval", "--serve-encoder-threads", "--serve-contexts", "--serve-decode-cores", "--serve-decode-nice", "--serve-gpu-takes", "--ffmpeg-encoder-threads", "--min-speed", "--gpu", "--json", "--chart", "--sheet", "--work-dir"]
        let reader = ArgumentReader(valued.map { ($0, true) } + [("--quick", false), ("--full", false)])
        let given: [(flag: String, value: String?)]
        do { given = try reader.read(arguments) } catch { throw BenchUsageError("\(error) (see diptych bench --help)") }
        var current = ""
        func value(_ flag: String) throws(BenchUsageError) -> String { current }
        /// A whole number in `range`; `expected` ends the error ("--flag 'x': expected …").
        func count(_ flag: String, _ range: ClosedRange<Int>, _ expected: String) throws(BenchUsageError) -> Int {
            guard let n = Int(current), range.contains(n) else { throw BenchUsageError("\(flag) '\(current)': expected \(expected)") }
            return n
        }
        func list(_ flag: String) throws(BenchUsageError) -> [String] {
            let items = current.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard !items.isEmpty, !items.contains("") else { throw BenchUsageError("\(flag) expects a comma-separated list") }
            return items
        }
        for (a, v) in given {
            current = v ?? ""
            switch a {
            case "--quick": o.full = false
            case "--full": o.full = true
            case "--layouts":
                var ls: [LayoutKind] = []
                for item in try list(a) {
                    guard let k = LayoutKind(rawValue: item), allLayouts.contains(k) else {
                        throw BenchUsageError("--layouts '\(item)': expected pip, side-by-side, stacked or primary-only")
                    }
                    ls.append(k)
                }
                o.layouts = ls; explicitLayouts = true
            case "--sizes":
                var ss: [PixelSize] = []
                for item in try list(a) {
                    guard let s = parseSize(item) else { throw BenchUsageError("--sizes '\(item)': expected 720p, 1080p, 2160p or WxH (even)") }
                    ss.append(s)
                }
                o.sizes = ss; explicitSizes = true
            case "--formats":
                var fs: [PixelFormat] = []
                for item in try list(a) {
                    guard let f = PixelFormat(rawValue: item), f == .nv12 || f == .rgba else {
                        throw BenchUsageError("--formats '\(item)': expected nv12 or rgba")
                    }
                    fs.append(f)
                }
                o.formats = fs
            case "--stages":
                var st: [BenchStage] = []
                for item in try list(a) {
                    guard let s = BenchStage(rawValue: item == "end-to-end" ? "e2e" : item) else {
                        throw BenchUsageError("--stages '\(item)': expected composite, e2e or nvdec")
                    }
                    st.append(s)
                }
                o.stages = st
            case "--frames":
                o.frames = try count(a, 1...1_000_000, "a positive number")
            case "--streams":
                o.streams = try count(a, 1...256, "1 to 256")
            case "--contexts":
                o.contexts = try count(a, 1...16, "1 to 16")
            case "--frame-batch":
                o.frameBatch = try count(a, 1...256, "1 to 256")
            case "--duration":
                let v = try value(a)
                guard let d = Double(v), d >= 0.5, d <= 3600 else { throw BenchUsageError("--duration '\(v)': expected seconds, 0.5 to 3600") }
                o.duration = d
            case "--peers":
                let v = try list(a)
                if v == ["none"] { o.peers = [] } else {
                    var ps: [BenchPeer] = []
                    for item in v {
                        guard let p = BenchPeer(rawValue: item) else { throw BenchUsageError("--peers '\(item)': expected ffmpeg, gstreamer or none") }
                        ps.append(p)
                    }
                    o.peers = ps
                }
            case "--encoder":
                let v = try value(a)
                guard let e = EncoderChoice(rawValue: v) else {
                    throw BenchUsageError("--encoder '\(v)': expected \(EncoderChoice.allCases.map(\.rawValue).joined(separator: "|"))")
                }
                o.encoder = e
            case "--slices":
                o.slices = try count(a, 1...TakeConfiguration.maxSlices, "1 to \(TakeConfiguration.maxSlices)")
            case "--keyframe-interval":
                let v = try value(a)
                guard let s = Double(v), s >= 1.0 / 60, s <= 3600 else {
                    throw BenchUsageError("--keyframe-interval '\(v)': expected seconds, one frame (1/60) to 3600")
                }
                o.keyframeInterval = s
            case "--preset", "--presets":
                let known = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"]
                let v = try list(a)
                for item in v where !known.contains(item) {
                    throw BenchUsageError("--preset '\(item)': expected an x264 preset (ultrafast ... veryslow)")
                }
                o.presets = v; o.preset = v[0]
            case "--repeat":
                o.repeats = try count(a, 1...20, "a count from 1 to 20")
            case "--mirror":
                let v = try value(a)
                guard v == "on" || v == "off" else { throw BenchUsageError("--mirror '\(v)': expected on or off") }
                o.mirror = v == "on"
            case "--pairs":
                o.pairs = try PairCounts.parse(try value(a))
            case "--pair-runners":
                let v = try list(a)
                for item in v where !PairRunners.names.contains(item) {
                    throw BenchUsageError("--pair-runners '\(item)': expected \(PairRunners.names.joined(separator: ", "))")
                }
                o.pairRunners = v
            case "--serve-encoder-threads":
                o.serve.encoderThreads = try count(a, 1...256, "a whole number from 1 to 256")
            case "--serve-contexts":
                o.serve.contexts = try count(a, 1...64, "a whole number from 1 to 64")
            case "--serve-decode-cores":
                o.serve.decodeCores = try count(a, 0...4096, "a whole number from 0 to 4096")
            case "--serve-decode-nice":
                o.serve.decodeNice = try count(a, CodecThreads.niceRange, "a whole number from 0 to 19")
            case "--serve-gpu-takes":
                o.serve.gpuTakes = try count(a, 0...PairCounts.limit, "a whole number from 0 to \(PairCounts.limit)")
            case "--ffmpeg-encoder-threads":
                o.ffmpegEncoderThreads = try count(a, 1...256, "a whole number from 1 to 256")
            case "--min-speed":
                let v = try value(a)
                guard let x = Double(v), x >= 0.01, x <= 100 else { throw BenchUsageError("--min-speed '\(v)': expected a speed from 0.01 to 100") }
                o.minSpeed = x
            case "--gpu":
                let v = try value(a)
                do throws(ConfigurationError) { try TakeConfiguration.checkGPU(v) } catch { throw BenchUsageError("\(error)") }
                o.gpu = v
            case "--json": o.json = try value(a)
            case "--chart": let v = try value(a); o.chart = v == "none" ? nil : v
            case "--sheet": let v = try value(a); o.sheet = v == "none" ? nil : v
            case "--work-dir": o.workDir = try value(a)
            default:
                throw BenchUsageError("unknown option '\(a)' (see diptych bench --help)")
            }
            _ = v
        }
        // The nvdec stage's own flags do nothing elsewhere: where it does not run, they are a mistake, not a no-op.
        if !o.stages.contains(.nvdec), let flag = given.map(\.flag).first(where: { ["--streams", "--contexts", "--frame-batch"].contains($0) }) {
            throw BenchUsageError("\(flag) sets the nvdec stage, which --stages does not run here "
                + "(\(o.stages.map(\.rawValue).joined(separator: ", "))); add nvdec to --stages")
        }
        if o.serve.gpuTakes != nil && o.encoder == .gpu {
            throw BenchUsageError("--serve-gpu-takes: the other takes encode with --encoder's encoder, which is gpu here too (give --encoder x264 or auto)")
        }
        if o.full {
            if !explicitLayouts { o.layouts = allLayouts }
            if !explicitSizes { o.sizes = allSizes }
            o.e2eLayouts = o.layouts
            o.e2eSizes = o.sizes
        } else {
            if explicitLayouts { o.e2eLayouts = o.layouts } else if o.pairs != nil { o.e2eLayouts = [.pip] }
            if explicitSizes { o.e2eSizes = o.sizes }
        }
        return o
    }

    static func parseSize(_ s: String) -> PixelSize? {
        switch s.lowercased() {
        case "720p": return .hd720
        case "1080p": return .hd1080
        case "2160p", "4k": return PixelSize(width: 3840, height: 2160)
        default:
            guard let p = PixelSize(parsing: s), p.width >= 64, p.height >= 64, p.width % 2 == 0, p.height % 2 == 0,
                  p.width <= 8192, p.height <= 8192 else { return nil }
            return p
        }
    }
}

/// How many takes at once the end-to-end stage tries (`--pairs`).
public enum PairCounts: Sendable, Equatable, Codable {
    /// The largest count from 1 to N at which every take stays real time.
    case search(max: Int)
    /// Exactly these counts, ascending.
    case counts([Int])

    public static let limit = 256

    static func parse(_ text: String) throws(BenchUsageError) -> PairCounts {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var counts: [Int] = []
        for item in items {
            guard let n = Int(item), n >= 1, n <= limit else {
                throw BenchUsageError("--pairs '\(text)': expected a count from 1 to \(limit) or a comma-separated list of them")
            }
            counts.append(n)
        }
        return counts.count == 1 ? .search(max: counts[0]) : .counts(Array(Set(counts)).sorted())
    }
}
