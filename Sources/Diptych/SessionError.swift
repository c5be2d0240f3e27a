import DiptychCore
import DiptychGPU
import DiptychMedia

/// Why a take could not start, or how it ended badly. The leaf errors stay
/// typed; the exit status, the C API's code and the server's HTTP status are
/// derived from the case (`isBadInput`, `exitCode`), never parsed from text.
public enum SessionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A configuration value is wrong (nothing was opened).
    case configuration(ConfigurationError)
    /// An input could not be opened (nothing was recorded).
    case source(StreamRole, MediaError)
    /// The encoder cannot run with these settings here (nothing was opened).
    case encoder(MediaError)
    /// An output could not be opened (nothing was recorded).
    case output(String, MediaError)
    /// The GPU could not start, or cannot render this canvas.
    case gpu(GPUError)
    /// The machine refused the take before it started (critical thermal state, low storage).
    case refused(StartRefusal)
    /// The take ran and ended abnormally; what was recorded has been finalized.
    case ended(TakeEnding)

    /// Bad usage or bad input, found before anything was recorded (exit status 2, HTTP 400).
    public var isBadInput: Bool {
        switch self {
        // A source that did not answer in time (a FIFO with no writer, a silent server) is not bad input.
        case .source(_, .timedOut): return false
        case .configuration, .source, .encoder: return true
        case .output(let path, let e):
            switch e {
            // A network receiver that is not there (connection refused) is not the caller's mistake.
            case .writeFailed: return !ContainerFormat.isLive(path) || path.lowercased().hasPrefix("pipe:")
            case .encoderUnavailable, .invalidSource: return true
            default: return false
            }
        case .gpu(let e):
            switch e { case .badCanvas, .noSuchDevice, .badSetting: return true; default: return false }
        case .refused, .ended: return false
        }
    }

    /// 2 for bad input, 1 otherwise.
    public var exitCode: Int32 { isBadInput ? 2 : 1 }

    public var description: String {
        switch self {
        case .configuration(let e): return e.description
        case .source(_, let e): return e.description
        case .encoder(let e): return e.description
        case .output(let path, let e):
            if case .writeFailed = e { return "--out \(e)" }
            return path.isEmpty ? e.description : "\(e)"
        case .gpu(.noSuchDevice(let selection, let reason)):
            return ConfigurationError(field: "--gpu", value: selection, reason: reason).description
        case .gpu(let e): return "GPU: \(e)"
        case .refused(let r): return r.description
        case .ended(let e): return e.description
        }
    }
}

/// Why a take did not start.
public enum StartRefusal: Hashable, Sendable, CustomStringConvertible {
    case thermalCritical(source: String)
    case storage(path: String, reason: String)
    /// The canvas is over its measured budget and `--over-budget refuse` was asked for.
    case overBudget(canvas: String, reason: String)

    public var description: String {
        switch self {
        case .thermalCritical(let s): return "not starting: critical thermal state (\(s))"
        case .storage(let p, let r): return "not starting: \(p): \(r)"
        case .overBudget(let c, let r): return "not starting: canvas \(c) is over budget (\(r)); --over-budget refuse"
        }
    }
}

/// How a take that ran ended badly.
public enum TakeEnding: Hashable, Sendable, CustomStringConvertible {
    /// Something other than the user ended it; `kept` says what the output holds.
    case abnormal(StopReason, frames: Int, seconds: Double, output: String, live: Bool)
    /// It ended as asked but not one frame was recorded.
    case nothingRecorded(StopReason, output: String)
    /// The output could not be completed (trailer, flush).
    case finishFailed(output: String, MediaError)
    /// The take finished, but an output failed on the way and was closed.
    case outputLost(OutputSummary)

    public var description: String {
        switch self {
        case .abnormal(let r, let frames, let seconds, let output, let live):
            let kept = live ? "sent to \(output)" : "encoded, \(output) keeps every complete fragment"
            return "\(r); \(frames) frames (\(String(format2: seconds)) s) \(kept)"
        case .nothingRecorded(let r, let output): return "\(r): no frames recorded in \(output)"
        case .finishFailed(let output, let e): return "\(output): \(e)"
        case .outputLost(let o):
            return "output \(o.output) failed (\(o.failure ?? "?")) after \(o.frames) frames; the take went on in its other outputs"
        }
    }
}

extension String {
    /// `seconds` with two decimals, without Foundation's `String(format:)`.
    init(format2 value: Double) {
        let cents = Int((abs(value) * 100).rounded())
        let frac = cents % 100
        self = (value < 0 ? "-" : "") + "\(cents / 100)." + (frac < 10 ? "0" : "") + "\(frac)"
    }
}
