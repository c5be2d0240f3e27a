import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// What a session may be given besides its configuration: monitors, callbacks
/// and fault injection. Every member has a default that suits the CLI.
public struct SessionHooks: Sendable {
    /// Thermal readings; nil reads sysfs (or the configuration's forced state).
    public var thermal: (any ThermalMonitor)?
    /// Free-space readings for the output's folder.
    public var storage: any StorageMonitor
    /// One-line log messages (warnings, the GPU and encoder chosen).
    public var log: @Sendable (String) -> Void
    /// Called about every half second from the render loop.
    public var progress: (@Sendable (TakeProgress) -> Void)?
    /// Called with the RGBA render target of every `frameCallbackInterval`-th
    /// output frame, read from the very target the encoder consumes.
    public var frameCallback: (@Sendable (_ frame: VideoFrame, _ index: Int) -> Void)?
    public var frameCallbackInterval: Int
    /// Output frame indices at which to simulate a GPU context loss (tests).
    public var simulateContextLossAtFrames: Set<Int>
    /// Seconds between storage and thermal checks.
    public var monitorInterval: Double
    /// When to measure the canvas's cost before the take (DESIGN rule 4).
    public var costTrial: CostTrialMode
    /// Replaces the real measurement in the cost trial: per-frame seconds
    /// for a canvas (tests).
    public var costMeasurement: (@Sendable (PixelSize) -> [Double])?
    /// Makes the take's compositor (and again after a context loss), e.g. one
    /// sharing a context with other takes' (`GPUCompositor(sharingContextOf:)`).
    /// nil: a compositor of its own on the configured GPU.
    public var makeCompositor: (@Sendable (GPUSelection) throws(GPUError) -> GPUCompositor)?
    /// Called when the render loop takes a primary frame and when its output
    /// frame has been written, with the frame's timestamp (frame latency).
    public var frameEvent: (@Sendable (_ event: FrameEvent, _ pts: MediaTime) -> Void)?
    /// Encoder threads (nil: FFmpeg's choice); a server bounds them by its cores.
    public var encoderThreads: Int?

    public init(thermal: (any ThermalMonitor)? = nil,
                storage: any StorageMonitor = FileSystemStorageMonitor(),
                log: @escaping @Sendable (String) -> Void = { _ in },
                progress: (@Sendable (TakeProgress) -> Void)? = nil,
                frameCallback: (@Sendable (VideoFrame, Int) -> Void)? = nil,
                frameCallbackInterval: Int = 1,
                simulateContextLossAtFrames: Set<Int> = [],
                monitorInterval: Double = 1.0,
                costTrial: CostTrialMode = .liveSources,
                costMeasurement: (@Sendable (PixelSize) -> [Double])? = nil) {
        self.thermal = thermal; self.storage = storage; self.log = log; self.progress = progress
        self.frameCallback = frameCallback; self.frameCallbackInterval = max(1, frameCallbackInterval)
        self.simulateContextLossAtFrames = simulateContextLossAtFrames; self.monitorInterval = monitorInterval
        self.costTrial = costTrial; self.costMeasurement = costMeasurement
    }
}

/// When a take measures whether its canvas can be sustained before it starts.
public enum CostTrialMode: Sendable {
    /// Only when a source is live (stdin, a network stream, a device), where
    /// falling behind loses frames; files can be processed at any speed.
    case liveSources
    case always
    case never
}

/// One take: two streams in, one composited, encoded, crash-safe output.
///
/// The primary stream is the clock: each primary frame yields exactly one
/// output frame carrying the primary's timestamp (rebased to start at zero).
/// The secondary's latest frame is held and shown until a newer one is due.
/// The composite is rendered once per frame into the output's one render
/// target; the encoder and the preview both read that target.
///
/// Every way a take ends — end of primary, `--duration`, a stop request or
/// signal, a source interruption, a critical thermal state, low or full
/// storage, an output error, an unrecoverable GPU — goes through `finalize`,
/// the one path that drains the GPU, flushes the encoder and writes the trailer.
///
/// `run()` blocks the calling thread for the whole take. `stop`, `switchSource`
/// and `setLayout` may be called from any thread while it runs.
public final class RecordingSession: @unchecked Sendable {
    public let configuration: TakeConfiguration
    let hooks: SessionHooks
    /// Set by `EmbeddedSession` before `run()`: push sources and host outputs.
    var embedding: EmbeddingBridge?

    private let control = NSLock()
    private var stopRequest: StopReason?
    private var pendingSwitches: [(role: StreamRole, spec: SourceSpec)] = []
    private var pendingLayout: Layout?

    public init(configuration: TakeConfiguration, hooks: SessionHooks = SessionHooks()) {
        self.configuration = configuration
        self.hooks = hooks
    }

    /// Asks the running take to stop after the current frame and finalize.
    public func stop(_ reason: StopReason = .requested("stop requested")) {
        control.lock(); if stopRequest == nil { stopRequest = reason }; control.unlock()
    }

    /// Replaces a stream mid-take without stalling output: the old stream's
    /// frame stays on screen until the new one delivers its first frame. The new
    /// stream may have another size, rate or rotation.
    public func switchSource(_ role: StreamRole, to spec: SourceSpec) {
        control.lock(); pendingSwitches.append((role, spec)); control.unlock()
    }

    /// Changes the layout; it applies atomically, to all draws, on the next frame.
    public func setLayout(_ layout: Layout) {
        control.lock(); pendingLayout = layout; control.unlock()
    }

    private func takeControl() -> (StopReason?, [(role: StreamRole, spec: SourceSpec)], Layout?) {
        control.lock(); defer { control.unlock() }
        let r = (stopRequest, pendingSwitches, pendingLayout)
        pendingSwitches = []; pendingLayout = nil
        return r
    }

    /// Runs the take to its end. Throws `.badInput` (nothing recorded) for bad
    /// sources or configuration, `.runtime` when the take could not start or
    /// ended abnormally — in which case what was recorded has been finalized and
    /// `TakeRun.summary` describes it.
    public func run() throws(SessionError) -> TakeSummary {
        let take = try TakeRun(session: self)
        control.lock(); _hasStarted = true; control.unlock()
        defer { control.lock(); _summary = take.summary; control.unlock() }
        return try take.run()
    }

    private var _summary: TakeSummary?
    private var _hasStarted = false
    /// Whether the take has started (sources, GPU and output open). Before
    /// that, nothing has been recorded and a stop has nothing to finalize.
    public var hasStarted: Bool { control.lock(); defer { control.unlock() }; return _hasStarted }
    /// Whether `stop` has been called.
    var isStopRequested: Bool { control.lock(); defer { control.unlock() }; return stopRequest != nil }
    /// The summary of the last take that started, also when it ended abnormally.
    public var summary: TakeSummary? { control.lock(); defer { control.unlock() }; return _summary }

    func pollControl() -> (StopReason?, [(role: StreamRole, spec: SourceSpec)], Layout?) { takeControl() }
}
