import Diptych
import DiptychCore
import DiptychGPU

// What a server's take is told by the recording it runs (`Take.run`), in
// the server's terms: its figures, how it ended, its GPU work.

/// Live figures of a take from the session's progress reports.
struct TakeFigures: Hashable, Sendable {
    var frames = 0
    var mediaSeconds = 0.0
    var wallSeconds = 0.0
    var secondaryRepeated = 0
    var secondaryDropped = 0
    /// A split main output's files so far.
    var segments: [WrittenSegment] = []
    /// What each role shows, and the sources' switches so far.
    var sources: [SourceStatus] = []
    var sourceSwitches: [SourceSwitchRecord] = []
    var fps: Double { wallSeconds > 0 ? Double(frames) / wallSeconds : 0 }
    var realtimeFactor: Double { wallSeconds > 0 ? mediaSeconds / wallSeconds : 0 }
}

/// How a session run by the server ended: its summary, and for a failure
/// the answer a request that started it gets (`SessionOutcome.answer`).
struct SessionOutcome: Sendable {
    /// The session's summary when the take started (also after an abnormal end).
    var summary: TakeSummary?
    /// Why the take failed, typed to its HTTP status (nil for a normal end).
    var failure: RequestError?

    /// What a client that asked for the take is told of `error`, decided by
    /// the case, never by the text: bad input 400, a live receiver that is
    /// not there 502, a source that did not answer in time 504, the machine
    /// refusing to start (thermal state, storage, budget) 503, a GPU that
    /// cannot do what the take asks 400, anything else 500.
    static func answer(_ error: SessionError) -> RequestError {
        let message = Self.message(error)
        if error.isBadInput { return .badRequest(message) }
        switch error {
        // A live receiver that refused, or accepted and never answered.
        case .output(let path, .writeFailed), .output(let path, .timedOut):
            return ContainerFormat.isLive(path) ? .badGateway(message) : .failed(message)
        case .source(_, .timedOut): return .gatewayTimeout(message)
        // The take asks for what this server's GPU cannot do (the GPU encoder without compute shaders).
        case .gpu(.unsupported): return .badRequest(message)
        case .refused: return .unavailable(message)
        default: return .failed(message)
        }
    }

    /// What a client is told of `error`: fields named as in the request's
    /// JSON (`bitrate`, not `--bitrate`), an input's failure after its role.
    static func message(_ error: SessionError) -> String {
        switch error {
        case .configuration(let e): return TakeRequests.describe(e)
        case .source(let role, let e):
            let text = e.description
            return text.hasPrefix(role.rawValue) ? text : "\(role.rawValue): \(text)"
        default: return error.description
        }
    }
}

/// A take's GPU work: frames rendered and milliseconds of upload, composite
/// and NV12 passes (GPU timer queries where they cover every pass, else the
/// render thread's time).
struct GPUTotals: Hashable, Sendable {
    var frames = 0
    var milliseconds = 0.0
    init() {}
    init(_ s: GPUStats) {
        frames = s.framesRendered
        func ms(_ p: GPUPassStats) -> Double { max(p.cpuTotalMs, (p.gpuMeanMs ?? 0) * Double(p.count)) }
        milliseconds = ms(s.upload) + ms(s.composite) + ms(s.nv12)
    }
    static func + (a: GPUTotals, b: GPUTotals) -> GPUTotals {
        var r = GPUTotals(); r.frames = a.frames + b.frames; r.milliseconds = a.milliseconds + b.milliseconds; return r
    }
    var msPerFrame: Double? { frames > 0 ? milliseconds / Double(frames) : nil }
}
