import DiptychGPU
import Foundation

/// What a run measured (printed, and written by --json).
struct Result: Codable {
    var layout: String
    var canvas: String
    var input: String
    var format: String
    var frames: Int
    var streams: Int
    var contexts: Int
    var direct: String
    /// The pass that drew frames, and how many frames each path took.
    var path: String
    var computeFrames: Int
    var fragmentFrames: Int
    var directFrames: Int
    var staggered: Bool
    /// Image overlays drawn over every composite (`--overlays N`).
    var overlays: Int = 0
    var inFlight: Int
    var api: String
    var platform: String
    var device: String
    var renderer: String
    /// All streams together.
    var compositesPerSecond: Double
    /// Where the input frames' bytes were: pageable or page-locked.
    var hostMemory: String
    /// With --pace: composites offered a second (pace × streams), and the
    /// 99th percentile of how late frames were submitted after their time
    /// (a stream that cannot keep its pace falls behind).
    var offeredPerSecond: Double?
    var submittedLateP99Ms: Double?
    /// How far apart the streams began their measured frames (the clock runs from the first).
    var streamStartSpreadMs: Double
    /// Paced runs: the latest a frame was submitted against its schedule, and
    /// the longest and median time a stream took from its first measured frame to its last one back.
    var submittedLateMaxMs: Double?
    var streamSpanMaxMs: Double
    var streamSpanMedianMs: Double
    /// The longest a stream's closing `flush()` took (not timed: the clock stops at the last frame back).
    var flushMaxMs: Double
    /// Frames that came back (all streams); with --pace, of `frames × streams` offered.
    var delivered: Int
    var latencyP50Ms: Double
    var latencyP99Ms: Double
    var latencyMaxMs: Double
    var gpuTimerQueries: Bool
    /// Per composite, averaged over streams.
    var uploadGPUMs: Double?
    var compositeGPUMs: Double?
    var nv12GPUMs: Double?
    var uploadCPUMs: Double
    var compositeCPUMs: Double
    var nv12CPUMs: Double
    /// What every frame did (`GPUPlan`), as printed and as a value.
    var plan: String
    var gpuPlan: GPUPlan?
}

/// What one stream (one compositor) measured.
struct StreamRun: Sendable {
    var latencies: [Double] = []
    var lateness: [Double] = []
    var pageLocked = false
    /// When its measured frames began, and when its last frame came back (before its closing flush returned).
    var begin: UInt64 = 0
    var end: UInt64 = 0
    /// How long its closing flush() took.
    var flushMs = 0.0
    var stats = GPUStats()
    var info: GPUInfo?
    var plan: GPUPlan?
    var error: String?
}

final class Runs: @unchecked Sendable {
    let lock = NSLock()
    var runs: [StreamRun] = []
    func add(_ r: StreamRun) { lock.lock(); runs.append(r); lock.unlock() }
}

