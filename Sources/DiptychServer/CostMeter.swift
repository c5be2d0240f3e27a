import Foundation

/// The process's CPU time (all threads), from `CLOCK_PROCESS_CPUTIME_ID`.
enum ProcessCPU {
    static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Turns what the server runs into a `CostModel`: every second the server
/// samples the process CPU time and each take's output megapixels and GPU
/// milliseconds; over the last `window` seconds, cost per megapixel is CPU
/// (or GPU) time divided by the megapixels produced. Until the window holds
/// `minMegapixels` of output the model is the start-up calibration's, and
/// before that has run there is none (admission waits for it).
final class CostMeter: @unchecked Sendable {
    struct TakeCounters: Hashable, Sendable {
        var id: String
        var megapixels: Double
        var gpuMs: Double
    }
    private struct Sample { var time: Double; var cpu: Double; var megapixels: Double; var gpuMs: Double }

    private let lock = NSCondition()
    private var calibration: CostModel?
    private var current: CostModel?
    private var calibrationFailure: String?
    private let window: Double
    private let minMegapixels: Double
    private var samples: [Sample] = []
    private var lastSeen: [String: TakeCounters] = [:]
    private var totalMegapixels = 0.0
    private var totalGpuMs = 0.0

    /// A meter waiting for its calibration (`calibrated` or `calibrationFailed`).
    init(window: Double = 10, minMegapixels: Double = 20) {
        self.window = window; self.minMegapixels = minMegapixels
    }

    convenience init(calibration: CostModel, window: Double = 10, minMegapixels: Double = 20) {
        self.init(window: window, minMegapixels: minMegapixels)
        calibrated(calibration)
    }

    func calibrated(_ model: CostModel) {
        lock.withLock { calibration = model; current = model; lock.broadcast() }
    }

    func calibrationFailed(_ why: String) {
        lock.withLock { calibrationFailure = why; lock.broadcast() }
    }

    /// The model now; nil while the calibration runs (or after it failed).
    var model: CostModel? { lock.withLock { current } }

    /// Why the calibration failed, once it has.
    var failure: String? { lock.withLock { calibrationFailure } }

    /// Waits for the calibration; the model, or 503 with why there is none.
    func waitForModel() -> Result<CostModel, RequestError> {
        lock.lock(); defer { lock.unlock() }
        while current == nil && calibrationFailure == nil { lock.wait() }
        if let current { return .success(current) }
        return .failure(.unavailable("no cost model: \(calibrationFailure ?? "")"))
    }
    /// Output megapixels of every take so far.
    var megapixels: Double { lock.withLock { totalMegapixels } }

    /// Records one sample: `cpu` is the process CPU seconds now, `takes`
    /// the cumulative counters of the takes running (a take that ended is
    /// simply absent; what it produced stays counted).
    func sample(time: Double, cpu: Double, takes: [TakeCounters]) {
        lock.lock(); defer { lock.unlock() }
        var seen: [String: TakeCounters] = [:]
        for t in takes {
            let last = lastSeen[t.id] ?? TakeCounters(id: t.id, megapixels: 0, gpuMs: 0)
            totalMegapixels += max(0, t.megapixels - last.megapixels)
            totalGpuMs += max(0, t.gpuMs - last.gpuMs)
            seen[t.id] = t
        }
        lastSeen = seen
        samples.append(Sample(time: time, cpu: cpu, megapixels: totalMegapixels, gpuMs: totalGpuMs))
        while let first = samples.first, time - first.time > window { samples.removeFirst() }
        guard let a = samples.first, let b = samples.last else { return }
        let mp = b.megapixels - a.megapixels
        guard mp >= minMegapixels, let calibration else { return }
        let gpu = b.gpuMs - a.gpuMs
        current = CostModel(cpuSecondsPerMegapixel: (b.cpu - a.cpu) / mp,
                            gpuMsPerMegapixel: gpu > 0 ? gpu / mp : calibration.gpuMsPerMegapixel,
                            source: String(format: "measured over the last %.0f s (%.0f megapixels)", b.time - a.time, mp))
    }
}
