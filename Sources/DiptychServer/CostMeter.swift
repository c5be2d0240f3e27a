import DiptychCore
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
/// (or GPU) time divided by the megapixels produced. The CPU time of the
/// decoding the server placed on the CPU (`DecodePlacement`), as those
/// takes' clocks counted it (`DecodeCPUClock`), is taken out first, since
/// admission charges it apart (`CostModel.decodeCores`), and over
/// `minDecodedMegapixels` decoded it is the decode figure: what decoding
/// costs on this machine's inputs, where the calibration's clip is only a
/// guess at them. Until the window holds `minMegapixels` of output the
/// model is the start-up calibration's, and before that has run there is
/// none (admission waits for it).
final class CostMeter: Sendable {
    struct TakeCounters: Hashable, Sendable {
        var id: String
        var megapixels: Double
        var gpuMs: Double
        /// Input megapixels decoded on the CPU by the server's placement, and the CPU seconds that took.
        var cpuDecodedMegapixels = 0.0
        var cpuDecodeSeconds = 0.0
    }
    private struct Sample {
        var time: Double; var cpu: Double; var megapixels: Double; var gpuMs: Double; var decoded: Double; var decodeSeconds: Double
    }

    private struct State {
        var calibration: CostModel?
        var current: CostModel?
        var calibrationFailure: String?
        var samples: [Sample] = []
        var lastSeen: [String: TakeCounters] = [:]
        var totalMegapixels = 0.0
        var totalGpuMs = 0.0
        var totalDecoded = 0.0
        var totalDecodeSeconds = 0.0
        /// The decode figure the placed takes measured last (CPU s per megapixel, and over how many).
        var learnedDecode: (figure: Double, megapixels: Double)?
    }
    private let state = Condition(State())
    private let window: Double
    private let minMegapixels: Double
    private let minDecodedMegapixels: Double

    /// A meter waiting for its calibration (`calibrated` or `calibrationFailed`).
    init(window: Double = 10, minMegapixels: Double = 20, minDecodedMegapixels: Double = 200) {
        self.window = window; self.minMegapixels = minMegapixels; self.minDecodedMegapixels = minDecodedMegapixels
    }

    convenience init(calibration: CostModel, window: Double = 10, minMegapixels: Double = 20, minDecodedMegapixels: Double = 200) {
        self.init(window: window, minMegapixels: minMegapixels, minDecodedMegapixels: minDecodedMegapixels)
        calibrated(calibration)
    }

    func calibrated(_ model: CostModel) {
        state.update { $0.calibration = model; $0.current = model }
    }

    func calibrationFailed(_ why: String) {
        state.update { $0.calibrationFailure = why }
    }

    /// The model now; nil while the calibration runs (or after it failed).
    var model: CostModel? { state.withLock { $0.current } }

    /// The decode figure the placed takes measured (CPU s per megapixel), once they have.
    var learnedDecodeFigure: Double? { state.withLock { $0.learnedDecode?.figure } }

    /// Why the calibration failed, once it has.
    var failure: String? { state.withLock { $0.calibrationFailure } }

    /// Waits for the calibration; the model, or 503 with why there is none.
    func waitForModel() -> Result<CostModel, RequestError> {
        state.wait(until: { $0.current != nil || $0.calibrationFailure != nil }) { s, _ in
            if let current = s.current { return .success(current) }
            return .failure(.unavailable("no cost model: \(s.calibrationFailure ?? "")"))
        }
    }
    /// Output megapixels of every take so far.
    var megapixels: Double { state.withLock { $0.totalMegapixels } }

    /// Records one sample: `cpu` is the process CPU seconds now, `takes`
    /// the cumulative counters of the takes running (a take that ended is
    /// simply absent; what it produced stays counted).
    func sample(time: Double, cpu: Double, takes: [TakeCounters]) {
        let (window, minMegapixels, minDecoded) = (self.window, self.minMegapixels, self.minDecodedMegapixels)
        state.withLock { s in
            var seen: [String: TakeCounters] = [:]
            for t in takes {
                let last = s.lastSeen[t.id] ?? TakeCounters(id: t.id, megapixels: 0, gpuMs: 0)
                s.totalMegapixels += max(0, t.megapixels - last.megapixels)
                s.totalGpuMs += max(0, t.gpuMs - last.gpuMs)
                s.totalDecoded += max(0, t.cpuDecodedMegapixels - last.cpuDecodedMegapixels)
                s.totalDecodeSeconds += max(0, t.cpuDecodeSeconds - last.cpuDecodeSeconds)
                seen[t.id] = t
            }
            s.lastSeen = seen
            s.samples.append(Sample(time: time, cpu: cpu, megapixels: s.totalMegapixels, gpuMs: s.totalGpuMs,
                                    decoded: s.totalDecoded, decodeSeconds: s.totalDecodeSeconds))
            while let first = s.samples.first, time - first.time > window { s.samples.removeFirst() }
            guard let a = s.samples.first, let b = s.samples.last else { return }
            let mp = b.megapixels - a.megapixels
            guard mp >= minMegapixels, let calibration = s.calibration else { return }
            let gpu = b.gpuMs - a.gpuMs
            let (decoded, decodeSeconds) = (b.decoded - a.decoded, b.decodeSeconds - a.decodeSeconds)
            if decoded >= minDecoded, decodeSeconds > 0 { s.learnedDecode = (decodeSeconds / decoded, decoded) }
            let cpu = max(0, (b.cpu - a.cpu) - decodeSeconds)
            var source = String(format: "measured over the last %.0f s (%.0f megapixels)", b.time - a.time, mp)
            if let learned = s.learnedDecode {
                source += String(format: "; decoding measured over %.0f megapixels decoded on the CPU", learned.megapixels)
            }
            s.current = CostModel(cpuSecondsPerMegapixel: cpu / mp,
                                  gpuMsPerMegapixel: gpu > 0 ? gpu / mp : calibration.gpuMsPerMegapixel,
                                  decodeCPUSecondsPerMegapixel: s.learnedDecode?.figure ?? calibration.decodeCPUSecondsPerMegapixel,
                                  source: source)
        }
    }
}
