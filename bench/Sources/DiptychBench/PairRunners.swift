import DiptychCore
import Foundation

/// One concurrent case: the inputs, the layout and the encoder settings every take uses.
struct PairCase: Sendable {
    var layout: LayoutKind
    var inputs: EndToEndStage.Inputs
    var preset: String
    var bitrate: Int
    /// Keyframe interval in frames of the 60 fps primary (`--keyframe-interval`).
    var gop: Int
    /// The same in seconds, as the takes are given it.
    var keyframeSeconds: Double { Double(gop) / 60 }
    var gpu: String
    var workDir: String
    /// The secondary is mirrored (`--mirror`).
    var mirrored = true
    /// Our takes' encoder (`--encoder`).
    var encoder = EncoderChoice.auto
    /// Our takes' slices a picture (`--slices`; nil: the encoder's default).
    var slices: Int?
    /// Seconds of output each take writes (the primary's length).
    var contentSeconds: Double { Double(inputs.frames) / 60 }
}

/// How one take of a concurrent trial went.
struct TakeOutcome: Sendable {
    var output: String
    /// Wall seconds from its start to its end; nil when it did not finish in time or failed.
    var seconds: Double?
    var cpuSeconds: Double
    var peakRSSMiB: Double
    var rssGrowthMiB: Double?
    /// Resident memory sampled while it ran (`ChildGroup.sampleInterval`).
    var rssSamplesMiB: [Double] = []
    var failure: String?
    /// Diptych's CPU seconds by pipeline stage (its summary's `cpuStages`;
    /// a server's shared out per take); nil for the peers.
    var cpuStages: StageTimes?
}

/// Runs N takes of one case at once. Every runner here starts N processes;
/// a runner holding N takes in one server process plugs in the same way,
/// returning one outcome per take (CPU and memory then shared out per take).
protocol PairRunner: Sendable {
    /// `diptych`, `ffmpeg`, `ffmpeg-nvdec`.
    var name: String { get }
    /// What it runs, in a few words (the report's legend).
    var summary: String { get }
    /// One take's command line, for the report.
    func command(for c: PairCase, output: String) -> String
    /// Why it cannot run here (missing program, no CUDA), or nil.
    func unavailable(for c: PairCase) -> String?
    /// Starts `pairs` takes at once; takes still running after `deadline` seconds are stopped.
    func run(pairs: Int, case c: PairCase, outputs: [String], deadline: Double) throws -> [TakeOutcome]
}

/// N processes of one program, one take each.
struct ProcessPairRunner: PairRunner {
    let name: String
    let summary: String
    let executable: String?
    let missing: String
    let arguments: @Sendable (PairCase, String) -> [String]
    var check: @Sendable (PairCase) -> String? = { _ in nil }

    func command(for c: PairCase, output: String) -> String {
        ChildCommand(executable: executable ?? name, arguments: arguments(c, output), stdoutPath: "", stderrPath: "").shown
    }

    func unavailable(for c: PairCase) -> String? {
        executable == nil ? missing : check(c)
    }

    func run(pairs: Int, case c: PairCase, outputs: [String], deadline: Double) throws -> [TakeOutcome] {
        guard let executable else { throw BenchRunError(missing) }
        let commands = outputs.map { out in
            ChildCommand(executable: executable, arguments: arguments(c, out), stdoutPath: out + ".stdout", stderrPath: out + ".stderr")
        }
        let ends: [ChildOutcome]
        do throws(ChildGroup.SpawnError) { ends = try ChildGroup.run(commands, deadline: deadline) } catch {
            throw BenchRunError(error.description)
        }
        defer { for out in outputs { try? FileManager.default.removeItem(atPath: out + ".stdout"); try? FileManager.default.removeItem(atPath: out + ".stderr") } }
        // Diptych's JSON summary on standard output: its CPU time by stage.
        let stages = outputs.map { out in
            (try? Data(contentsOf: URL(fileURLWithPath: out + ".stdout"))).flatMap { try? JSONDecoder().decode(StagesOnly.self, from: $0) }?.cpuStages
        }
        return zip(outputs.indices, ends).map { i, e in
            let out = outputs[i]
            let said = e.stderrTail.isEmpty ? "" : " (\(e.stderrTail))"
            let failure: String? = e.killed ? "still running after \(String(format: "%.1f", deadline)) s" + said
                : e.status != 0 ? "exit \(e.status)" + said : nil
            return TakeOutcome(output: out, seconds: failure == nil ? e.seconds : nil, cpuSeconds: e.cpuSeconds,
                               peakRSSMiB: e.peakRSSMiB, rssGrowthMiB: e.rssGrowthMiB, rssSamplesMiB: e.rssSamples, failure: failure,
                               cpuStages: stages[i])
        }
    }
}

/// The part of a take's summary the trials read.
struct StagesOnly: Decodable {
    var cpuStages: StageTimes?
}

enum PairRunners {
    /// The `diptych` executable running this benchmark (or the one beside it / on PATH).
    static func diptychExecutable() -> String? {
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            if (exe as NSString).lastPathComponent == "diptych" { return exe }
            let beside = ((exe as NSString).deletingLastPathComponent as NSString).appendingPathComponent("diptych")
            if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        }
        return Tools.find("diptych")
    }

    /// `diptych record`, one process per take, with the CLI's defaults for the
    /// layout: NVDEC into the GPU where it has it (`--decoder auto`), or with
    /// `--decoder cpu` (`diptych-cpu`).
    static func diptych(decoder: DecoderChoice = .auto) -> ProcessPairRunner {
        ProcessPairRunner(name: decoder == .cpu ? "diptych-cpu" : "diptych",
                          summary: decoder == .cpu ? "diptych record --decoder cpu: CPU decode, GPU composite, --encoder's encoder (by default auto's), fragmented MP4"
                                                   : "diptych record: NVDEC decode where the GPU has it (else CPU), GPU composite, --encoder's encoder (by default auto's), fragmented MP4",
                          executable: diptychExecutable(), missing: "the diptych executable was not found") { c, out in
            ["record"] + takeArguments(c, out, decoder: decoder) + ["--json"]
        }
    }

    /// One take's `diptych record` options (the same take a server is sent).
    static func takeArguments(_ c: PairCase, _ out: String, decoder: DecoderChoice) -> [String] {
        ["--primary", c.inputs.primary, "--secondary", c.inputs.secondary, "--layout", c.layout.rawValue]
        + (c.mirrored ? ["--mirror-secondary"] : [])
        + ["--preset", c.preset, "--bitrate", "\(c.bitrate)", "--keyframe-interval", "\(c.keyframeSeconds)",
         "--audio", "none", "--gpu", c.gpu, "--decoder", decoder.rawValue, "--encoder", c.encoder.rawValue, "--out", out]
        + (c.slices.map { ["--slices", "\($0)"] } ?? [])
    }

    /// FFmpeg on the CPU: software decode, `overlay`/`hstack`/`vstack`, libx264.
    static func ffmpeg(_ peers: Peers) -> ProcessPairRunner {
        ProcessPairRunner(name: "ffmpeg", summary: "ffmpeg: CPU decode, CPU filters, libx264",
                          executable: peers.ffmpeg, missing: "ffmpeg not installed") { c, out in
            let plan = CompositeStage.plan(c.layout, canvas: c.inputs.primarySize, primary: c.inputs.primarySize, secondary: c.inputs.secondarySize,
                                           mirrored: c.mirrored)
            return peers.ffmpegArguments(layout: c.layout, plan: plan, inputs: c.inputs, out: out)
        }
    }

    /// FFmpeg with NVDEC: CUDA decode, then `scale_cuda` + `overlay_cuda` and
    /// `hwdownload` (`gpuOverlay`), or `hwdownload` and the CPU's `overlay`; libx264 (PiP only).
    static func ffmpegNVDEC(_ peers: Peers, gpuOverlay: Bool) -> ProcessPairRunner {
        @Sendable func args(_ c: PairCase, _ out: String) -> [String] {
            let plan = CompositeStage.plan(c.layout, canvas: c.inputs.primarySize, primary: c.inputs.primarySize, secondary: c.inputs.secondarySize,
                                           mirrored: c.mirrored)
            return peers.ffmpegCUDAArguments(plan: plan, inputs: c.inputs, out: out, gpuOverlay: gpuOverlay)
        }
        var r = ProcessPairRunner(name: gpuOverlay ? "ffmpeg-nvdec" : "ffmpeg-nvdec-cpu-overlay",
                                  summary: gpuOverlay ? "ffmpeg: NVDEC decode, overlay_cuda, hwdownload, libx264"
                                                      : "ffmpeg: NVDEC decode, hwdownload, CPU overlay, libx264",
                                  executable: peers.ffmpeg, missing: "ffmpeg not installed", arguments: args)
        r.check = { c in
            guard c.layout == .pip else { return "the NVDEC configurations are PiP only" }
            return peers.cudaProblem(args(c, "check.mp4"), workDir: c.workDir)
        }
        return r
    }

    /// Every runner `--pairs` knows, by name.
    static let names = ["diptych", "diptych-cpu", "diptych-serve", "diptych-serve-cpu", "ffmpeg", "ffmpeg-nvdec", "ffmpeg-nvdec-cpu-overlay"]
    /// Those `--pairs` runs without `--pair-runners` (with the ffmpeg peer).
    static let defaultNames = ["diptych", "diptych-serve", "ffmpeg", "ffmpeg-nvdec", "ffmpeg-nvdec-cpu-overlay"]

    static func all(_ peers: Peers, serve: ServeRunnerSettings = ServeRunnerSettings()) -> [PairRunner] {
        [diptych(), diptych(decoder: .cpu),
         ServePairRunner(decoder: .auto, settings: serve), ServePairRunner(decoder: .cpu, settings: serve),
         ffmpeg(peers), ffmpegNVDEC(peers, gpuOverlay: true), ffmpegNVDEC(peers, gpuOverlay: false)]
    }
}
