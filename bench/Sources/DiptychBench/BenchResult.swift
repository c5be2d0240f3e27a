import DiptychCore
import Foundation

/// One measured case (a row of the table).
public struct BenchResult: Sendable, Codable {
    public var stage: BenchStage
    public var layout: String
    public var canvas: String
    /// Composite stage: the upload format. End to end: the files' codec and pixel format.
    public var input: String
    /// x264 preset (end to end).
    public var preset: String?
    public var frames: Int
    public var seconds: Double
    public var fps: Double
    /// fps / 60: how many 60 fps streams of this case one process sustains.
    public var realtime60: Double
    public var latencyP50Ms: Double?
    public var latencyP99Ms: Double?
    /// GPU time per pass and composite (timer queries), milliseconds.
    public var gpuUploadMs: Double?
    public var gpuCompositeMs: Double?
    public var gpuNV12Ms: Double?
    /// Frames that took the direct-copy path (composite stage).
    public var directFrames: Int?
    /// The GPU path that ran (the compositor's plan, `diptych-gpu: plan: …` as it logs it).
    public var path: String?
    /// Process CPU time (user + system, all threads) per output frame, milliseconds.
    public var cpuMsPerFrame: Double
    public var peers: [PeerResult] = []
    public var notes: [String] = []
    /// End to end: every run (`--repeat`), in order; the figures above are their medians.
    public var runs: [RunFigures]?
    /// End to end: the process's peak resident memory (median of the runs), MiB.
    public var peakRSSMiB: Double?
    /// End to end: CPU ms per output frame by pipeline stage (medians of the runs' stage timers).
    public var stageMsPerFrame: StageTimes?
    /// The command of one run.
    public var command: String?
}

/// One timed run of one program on an end-to-end case: the whole process,
/// from its start to its exit (`wait4`), with its resident memory sampled.
public struct RunFigures: Sendable, Codable {
    public var frames: Int
    public var seconds: Double
    public var fps: Double
    /// User + system time of all its threads per output frame, milliseconds.
    public var cpuMsPerFrame: Double
    public var peakRSSMiB: Double
    public var minorFaults: Int
    /// Resident memory over the last fifth of the run minus over the second fifth, MiB.
    public var rssGrowthMiB: Double?
    /// The 1-minute load average when the run started.
    public var loadAverage: Double
    /// Ours: CPU ms per output frame by stage, from the take's stage timers
    /// (`other` also holds the process's time outside the take: start-up, exit).
    public var stageMsPerFrame: StageTimes?
}

/// A peer's figure for the same end-to-end case.
public struct PeerResult: Sendable, Codable {
    public var peer: BenchPeer
    /// Nil when skipped or failed (see `note`).
    public var fps: Double?
    public var frames: Int?
    public var cpuMsPerFrame: Double?
    /// Our fps divided by theirs (median of the paired runs' ratios).
    public var ratio: Double?
    public var command: String?
    public var note: String?
    /// Every run, in order (paired with ours by index).
    public var runs: [RunFigures]?
    /// The smallest and largest paired ratio.
    public var ratioRange: [Double]?
    /// Peak resident memory (median of the runs), MiB, and ours divided by it.
    public var peakRSSMiB: Double?
    public var memoryRatio: Double?
}

/// Everything one `diptych bench` run produced.
public struct BenchReport: Sendable, Codable {
    public var version = 1
    public var date: String
    public var command: String
    public var machine: MachineInfo
    public var results: [BenchResult]
    /// `--pairs`: takes at once, per runner and preset.
    public var concurrency: [ConcurrencyResult]?
    /// `--stages nvdec`: NVDEC against the CPU decoder, and the composite rate with its frames.
    var nvdec: NVDECStage.Result?
}

public struct MachineInfo: Sendable, Codable {
    public var cpu: String
    public var cores: Int
    public var memoryGiB: Double
    public var os: String
    public var gpu: String?
    public var ffmpeg: String?
    public var gstreamer: String?

    static func current() -> MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "unknown"
        let osRelease = (try? String(contentsOfFile: "/etc/os-release", encoding: .utf8)) ?? ""
        let os = osRelease.split(separator: "\n").first { $0.hasPrefix("PRETTY_NAME=") }
            .map { $0.dropFirst("PRETTY_NAME=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) } ?? "Linux"
        return MachineInfo(cpu: model, cores: ProcessInfo.processInfo.activeProcessorCount,
                           memoryGiB: (Double(ProcessInfo.processInfo.physicalMemory) / Double(1 << 30) * 10).rounded() / 10,
                           os: os, gpu: nil, ffmpeg: nil, gstreamer: nil)
    }
}

/// CPU time of this process (all threads) or of its waited-for children.
struct CPUClock {
    static func seconds(children: Bool = false) -> Double {
        var u = rusage()
        getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &u)
        return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    }
}

func median(_ values: [Double]) -> Double? {
    let s = values.sorted()
    guard !s.isEmpty else { return nil }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// The 1-minute load average.
func loadAverage() -> Double {
    let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
    return Double(text.split(separator: " ").first ?? "") ?? 0
}

func percentile(_ sorted: [Double], _ q: Double) -> Double? {
    sorted.isEmpty ? nil : sorted[min(sorted.count - 1, Int((q * Double(sorted.count - 1)).rounded()))]
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
