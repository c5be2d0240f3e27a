import DiptychCore
import Foundation

/// One count of takes run at once.
public struct PairTrial: Sendable, Codable {
    public var pairs: Int
    /// Every take finished, wrote the expected frames and duration, at ≥ 1.0× real time (`--min-speed`).
    public var realtime: Bool
    /// The slowest take's speed (content seconds ÷ its wall seconds, start to exit);
    /// nil when a take did not finish in time or failed.
    public var slowest: Double?
    public var wallSeconds: Double
    /// CPU seconds (user + system) of all takes per output frame; nil unless every take finished.
    public var cpuSecondsPerFrame: Double?
    /// CPU time ÷ (wall time × cores): how much of the machine the takes used.
    public var cpuBusy: Double
    /// GPU busy time per output frame and the GPU's and decoder's mean load
    /// (nvidia-smi samples over the trial); nil without nvidia-smi.
    public var gpuMsPerFrame: Double?
    public var gpuBusyPercent: Double?
    public var decoderBusyPercent: Double?
    /// The largest peak resident memory of one take, and how much one grew
    /// from its second fifth to its last fifth (MiB).
    public var peakMiBPerTake: Double
    public var rssGrowthMiB: Double?
    /// One take alone: its resident memory (MiB) once a second.
    public var rssTimelineMiB: [Double]?
    /// Diptych's CPU milliseconds per output frame by pipeline stage (from
    /// the takes' summaries); nil for the peers.
    public var cpuMsPerFrameByStage: StageTimes?
    public var notes: [String] = []
}

/// The concurrency search of one runner at one preset.
public struct ConcurrencyResult: Sendable, Codable {
    public var runner: String
    public var summary: String
    public var preset: String
    public var layout: String
    public var canvas: String
    public var secondary: String
    public var contentSeconds: Double
    /// Seconds from one keyframe to the next (`--keyframe-interval`).
    public var keyframeSeconds: Double
    /// The speed every take had to keep (1.0: real time).
    public var minSpeed: Double
    public var command: String
    public var trials: [PairTrial] = []
    /// The most takes at once that all stayed real time (0: not even one; nil: not run).
    public var maxRealtimePairs: Int?
    public var note: String?

    public var best: PairTrial? { trials.first { $0.pairs == maxRealtimePairs && $0.realtime } }
    public var single: PairTrial? { trials.first { $0.pairs == 1 } }
}

/// `--pairs`: N takes of the same case at once (1080p60 + 720p30 files), for
/// each runner, looking for the largest N at which every take stays real time.
struct ConcurrencyStage {
    let options: BenchOptions
    let log: (String) -> Void
    let cores = ProcessInfo.processInfo.activeProcessorCount

    func measure(_ runner: PairRunner, _ c: PairCase, progress: (String) -> Void) -> ConcurrencyResult {
        var result = ConcurrencyResult(runner: runner.name, summary: runner.summary, preset: c.preset, layout: c.layout.rawValue,
                                       canvas: "\(c.inputs.primarySize)", secondary: "\(c.inputs.secondarySize)",
                                       contentSeconds: c.contentSeconds, keyframeSeconds: c.keyframeSeconds, minSpeed: options.minSpeed,
                                       command: runner.command(for: c, output: "OUT.mp4"))
        if let why = runner.unavailable(for: c) { result.note = "skipped: \(why)"; return result }
        var done: [Int: PairTrial] = [:]
        func trial(_ n: Int) -> PairTrial {
            if let t = done[n] { return t }
            progress("\(runner.name) \(c.preset): \(n) at once")
            let t = run(runner, c, pairs: n)
            log("\(runner.name) \(c.preset) \(n) at once: " + (t.realtime ? "real time" : "not real time")
                + (t.slowest.map { String(format: " (slowest %.2fx)", $0) } ?? "") + (t.notes.first.map { ": \($0)" } ?? ""))
            done[n] = t
            return t
        }
        switch options.pairs ?? .search(max: 1) {
        case .counts(let counts):
            for n in counts { _ = trial(n) }
        case .search(let max):
            let one = trial(1)
            guard one.realtime, max > 1 else { break }
            // Start where the CPU time of one pair says the machine runs out.
            let coresPerPair = (one.cpuSecondsPerFrame ?? 0) * 60
            let estimate = coresPerPair > 0 ? Int(Double(cores) / coresPerPair) : 2
            var lo = 1, hi = max + 1
            var n = Swift.min(max, Swift.max(2, Swift.min(estimate, Int(one.slowest ?? 2))))
            while hi - lo > 1 {
                if trial(n).realtime { lo = n } else { hi = n }
                n = hi == max + 1 ? Swift.min(max, lo + Swift.max(1, lo / 4)) : (lo + hi) / 2
            }
        }
        result.trials = done.values.sorted { $0.pairs < $1.pairs }
        result.maxRealtimePairs = result.trials.filter(\.realtime).map(\.pairs).max() ?? 0
        return result
    }

    func run(_ runner: PairRunner, _ c: PairCase, pairs: Int) -> PairTrial {
        let outputs = (0..<pairs).map { "\(c.workDir)/pairs-\(runner.name)-\(c.preset)-\(pairs)-\($0).mp4" }
        let content = c.contentSeconds
        let sampler = GPUSampler.start()
        let t0 = now()
        let takes: [TakeOutcome]
        do { takes = try runner.run(pairs: pairs, case: c, outputs: outputs, deadline: content / options.minSpeed) } catch {
            _ = sampler?.stop()
            return PairTrial(pairs: pairs, realtime: false, wallSeconds: now() - t0, cpuBusy: 0, peakMiBPerTake: 0, notes: ["\(error)"])
        }
        let wall = now() - t0
        let gpu = sampler?.stop()
        defer { for out in outputs { try? FileManager.default.removeItem(atPath: out) } }
        let cpu = takes.map(\.cpuSeconds).reduce(0, +)
        var t = PairTrial(pairs: pairs, realtime: true, wallSeconds: wall, cpuBusy: cpu / (wall * Double(cores)),
                          peakMiBPerTake: takes.map(\.peakRSSMiB).max() ?? 0, rssGrowthMiB: takes.compactMap(\.rssGrowthMiB).max())
        if pairs == 1, let samples = takes.first?.rssSamplesMiB {
            let step = max(1, Int((1 / ChildGroup.sampleInterval).rounded()))
            t.rssTimelineMiB = stride(from: 0, to: samples.count, by: step).map { (samples[$0] * 10).rounded() / 10 }
        }
        if let gpu {
            t.gpuBusyPercent = gpu.gpu
            t.decoderBusyPercent = gpu.decoder
        }
        let failed = takes.filter { $0.failure != nil }
        if let f = failed.first {
            t.realtime = false
            t.notes.append("\(failed.count) of \(pairs) takes: \(f.failure!)")
            return t
        }
        let speeds = takes.map { content / $0.seconds! }
        t.slowest = speeds.min()
        let frames = c.inputs.frames * pairs
        t.cpuSecondsPerFrame = cpu / Double(frames)
        let stages = takes.compactMap(\.cpuStages)
        if stages.count == takes.count {
            var sum = StageTimes()
            for st in stages { for k in PipelineStage.allCases { sum[k] += st[k] * 1000 / Double(frames) } }
            t.cpuMsPerFrameByStage = sum
        }
        if let g = gpu?.gpu { t.gpuMsPerFrame = g / 100 * wall * 1000 / Double(frames) }
        if t.slowest! < options.minSpeed { t.realtime = false }
        // Frame counts and durations, read back from every output.
        let frameTime = 1.0 / 60
        for take in takes {
            guard let v = VideoTrackCount.of(take.output) else {
                t.realtime = false; t.notes.append("\(take.output): no video track"); break
            }
            if v.frames != c.inputs.frames || abs(v.seconds - content) > frameTime / 2 {
                t.realtime = false
                t.notes.append("\((take.output as NSString).lastPathComponent): \(v.frames) frames, \(String(format: "%.3f", v.seconds)) s; expected \(c.inputs.frames), \(String(format: "%.3f", content)) s")
                break
            }
        }
        return t
    }
}

/// The GPU's load while a trial runs: `nvidia-smi` sampling every 100 ms
/// (utilization.gpu: time a kernel or graphics work ran; utilization.decoder: NVDEC).
final class GPUSampler {
    let pid: pid_t
    let path: String

    private init(pid: pid_t, path: String) { self.pid = pid; self.path = path }

    static func start() -> GPUSampler? {
        guard let smi = Tools.find("nvidia-smi") ?? ["/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi"]
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        let path = NSTemporaryDirectory() + "diptych-gpu-\(getpid())-\(UInt64(now() * 1e6)).csv"
        let c = ChildCommand(executable: smi, arguments: ["--query-gpu=utilization.gpu,utilization.decoder",
                                                           "--format=csv,noheader,nounits", "-i", "0", "-lms", "100"],
                             stdoutPath: path, stderrPath: "/dev/null")
        guard let pid = try? ChildGroup.spawn(c) else { return nil }
        return GPUSampler(pid: pid, path: path)
    }

    /// Stops sampling; the mean loads in percent (nil when nothing was read).
    func stop() -> (gpu: Double?, decoder: Double?) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let rows = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map {
            $0.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        }
        func mean(_ i: Int) -> Double? {
            let v = rows.compactMap { $0.count > i ? $0[i] : nil }
            return v.isEmpty ? nil : v.reduce(0, +) / Double(v.count)
        }
        return (mean(0), mean(1))
    }
}
