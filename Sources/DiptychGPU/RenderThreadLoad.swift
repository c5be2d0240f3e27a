/// How busy a render thread has been: wall time running work (GL calls and
/// what waits inside them), its CPU time, and the items (calls, frames) it ran.
public struct RenderThreadLoad: Hashable, Sendable, Codable {
    public var busySeconds = 0.0
    public var cpuSeconds = 0.0
    public var items = 0
    public var wakeups = 0
    /// Frame batches timed on the GPU (timer queries), the GPU's time
    /// running them, and its time idle between one's end and the next's
    /// start (`BatchClock`).
    public var gpuBatches = 0
    public var gpuBatchSeconds = 0.0
    public var gpuIdleSeconds = 0.0
    /// Of `gpuBatchSeconds`, the uploads and copies before a batch's first
    /// dispatch, and the GPU encoder's passes (batches that end with GPU-encoded pictures).
    public var gpuUploadSeconds = 0.0
    public var gpuEncoderSeconds = 0.0
    /// The pictures those passes of the GPU encoder encoded.
    public var gpuEncodedPictures = 0
    /// Of the batches with GPU-encoded pictures, those with IDR pictures (each runs one intra pass, a walk or a wavefront, for all its IDRs).
    public var gpuEncoderIDRBatches = 0
    /// Of `gpuEncoderSeconds`, each pass's share (`encoderPasses`; a pass's
    /// time from the end of the one before, the interpolation's with the search's).
    public var gpuEncoderPassSeconds: [String: Double] = [:]
    /// The GPU encoder's passes as the timed batches split them: each but the
    /// interpolation (with the search, no barrier between) and the probe
    /// rounds' guesses (with their probes).
    public static let encoderPasses = H264Programs.Pass.allCases.filter { $0 != .interpolate && $0 != .probeGuess }.map { "\($0)" }
    /// Busy time by `RenderPhase` name (a phase's parts are also counted on their own).
    public var phaseSeconds: [String: Double] = [:]
    /// The `other calls` phase by where each call was made (a compositor's
    /// method that hopped to the render thread).
    public var calls: [String: Calls] = [:]
    public init() {}

    /// Calls from one place: how many, and the render thread's time running them.
    public struct Calls: Hashable, Sendable, Codable {
        public var count = 0
        public var seconds = 0.0
        static func + (a: Calls, b: Calls) -> Calls { Calls(count: a.count + b.count, seconds: a.seconds + b.seconds) }
        static prefix func - (a: Calls) -> Calls { Calls(count: -a.count, seconds: -a.seconds) }
    }

    public static func - (a: RenderThreadLoad, b: RenderThreadLoad) -> RenderThreadLoad {
        var n = b
        n.busySeconds.negate(); n.cpuSeconds.negate(); n.items.negate(); n.wakeups.negate()
        n.gpuBatches.negate(); n.gpuBatchSeconds.negate(); n.gpuIdleSeconds.negate(); n.gpuUploadSeconds.negate(); n.gpuEncoderSeconds.negate()
        n.gpuEncodedPictures.negate(); n.gpuEncoderIDRBatches.negate()
        n.gpuEncoderPassSeconds = n.gpuEncoderPassSeconds.mapValues { -$0 }
        n.phaseSeconds = n.phaseSeconds.mapValues { -$0 }
        n.calls = n.calls.mapValues { -$0 }
        return a + n
    }

    /// The sum of two threads' loads (busy and CPU time add up past 1 s a second).
    public static func + (a: RenderThreadLoad, b: RenderThreadLoad) -> RenderThreadLoad {
        var d = RenderThreadLoad()
        d.busySeconds = a.busySeconds + b.busySeconds; d.cpuSeconds = a.cpuSeconds + b.cpuSeconds
        d.items = a.items + b.items; d.wakeups = a.wakeups + b.wakeups
        d.gpuBatches = a.gpuBatches + b.gpuBatches
        d.gpuBatchSeconds = a.gpuBatchSeconds + b.gpuBatchSeconds; d.gpuIdleSeconds = a.gpuIdleSeconds + b.gpuIdleSeconds
        d.gpuUploadSeconds = a.gpuUploadSeconds + b.gpuUploadSeconds; d.gpuEncoderSeconds = a.gpuEncoderSeconds + b.gpuEncoderSeconds
        d.gpuEncodedPictures = a.gpuEncodedPictures + b.gpuEncodedPictures
        d.gpuEncoderIDRBatches = a.gpuEncoderIDRBatches + b.gpuEncoderIDRBatches
        d.gpuEncoderPassSeconds = a.gpuEncoderPassSeconds.merging(b.gpuEncoderPassSeconds, uniquingKeysWith: +)
        d.phaseSeconds = a.phaseSeconds.merging(b.phaseSeconds, uniquingKeysWith: +)
        d.calls = a.calls.merging(b.calls, uniquingKeysWith: +)
        return d
    }
}

/// What a render thread spends its time on: a frame batch's phases
/// (`FrameJob`), the flushes, and other calls; `poll`, `fence` and `checks`
/// are parts of `begin` and `finish`, and so are the GPU encoder's:
/// `encoderWait` (waiting for an output's oldest picture to free a result
/// slot), `encoderHeaders` (its slices' headers written into its buffers)
/// and `encoderRecord` (recording the batch's passes, the headers included).
public enum RenderPhase: Int, CaseIterable, Sendable {
    case prepare, cudaCopy, begin, dispatch, barrier, finish, flush, work, poll, fence, checks, encoderWait, encoderHeaders, encoderRecord
    public var name: String {
        switch self {
        case .prepare: "prepare"
        case .cudaCopy: "cuda copy"
        case .begin: "begin"
        case .dispatch: "dispatch"
        case .barrier: "barrier"
        case .finish: "finish"
        case .flush: "flush"
        case .work: "other calls"
        case .poll: "poll"
        case .fence: "fence"
        case .checks: "checks"
        case .encoderWait: "encoder wait"
        case .encoderHeaders: "encoder headers"
        case .encoderRecord: "encoder record"
        }
    }
}
