import Foundation
import Synchronization
import DiptychCore
import DiptychGPU
import DiptychMedia
import DiptychText

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
    /// Called once, on the thread running the take, when it has started
    /// (sources, GPU and output open: `hasStarted` is true from then on).
    public var started: (@Sendable () -> Void)?
    /// Called with the RGBA render target of every `frameCallbackInterval`-th
    /// output frame, read from the very target the encoder consumes.
    public var frameCallback: (@Sendable (_ frame: VideoFrame, _ index: Int) -> Void)?
    public var frameCallbackInterval: Int
    /// Snapshots of the outputs while the take runs (`GET /v1/takes/{id}/snapshot`).
    public var snapshots: SnapshotRequests?
    /// A compositor's last figures, just before the take shuts it down (at
    /// its end, or to rebuild after a lost context): what it did in all.
    public var compositorRetiring: (@Sendable (GPUStats) -> Void)?
    /// Output frame indices at which to simulate a GPU context loss (tests).
    public var simulateContextLossAtFrames: Set<Int>
    /// Seconds between storage and thermal checks.
    public var monitorInterval: Double
    /// When to measure the canvas's cost before the take (docs/ARCHITECTURE.md, "Cost budget and rollback").
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
    /// Called, on the thread that saw it, when the secondary or a live
    /// output goes away or comes back.
    public var streamChange: (@Sendable (StreamChange) -> Void)?
    /// Encoder threads (nil: FFmpeg's choice); a server bounds them by its cores.
    public var encoderThreads: Int?
    /// What file and URL sources may read (`diptych serve` narrows it).
    public var sourcePolicy = SourcePolicy.commandLine
    /// The take's name in a text's `{take}` (a server's take id); nil: the
    /// main output's file or stream name without its extension.
    public var takeName: String?
    /// Tests: the zero-copy path's VA-API devices and GBM/EGL/VA-API calls on a machine without them.
    var zeroCopyOverride: ZeroCopyOverride?
    /// Replaces the decoder settings a stream is opened with (tests: a
    /// stand-in for NVDEC that fails on cue).
    public var decoderSettings: (@Sendable (StreamRole, DecoderSettings) -> DecoderSettings)?

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

    func applies(live: Bool) -> Bool {
        switch self { case .liveSources: live; case .always: true; case .never: false }
    }
}

/// An output added to or removed from a running take; the reply comes from the render loop.
enum OutputChange: Sendable {
    case add(OutputSpec, reply: @Sendable (Result<Int, SessionError>) -> Void)
    case remove(Int, reply: @Sendable (OutputSummary?) -> Void)
}

/// What the host asked of a running take since the last frame.
struct TakeControl {
    var stop: StopReason?
    var switches: [(role: StreamRole, spec: SourceSpec)]
    var layout: LayoutChange?
    var outputs: [OutputChange]
    /// The main output's texts from the next frame on, with the fonts they were checked with.
    var texts: (texts: [TextOverlay], fonts: [String: FontFile])?
    /// The main output's image overlays from the next frame on.
    var overlays: [ImageOverlay]?
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
public final class RecordingSession: Sendable {
    public let configuration: TakeConfiguration
    let hooks: SessionHooks
    /// Where the streams come from and the outputs go (`TakeIO.media`, or an embedding host's).
    let io: TakeIO

    /// Stops sources still opening (a FIFO with no writer, a silent server) when the take is stopped before it starts.
    let openCancel = OpenCancel()
    /// Rung by `stop` (and by the primary's readers): the take's input stage
    /// waits on it while its primary is silent or lost, the pacing of a live take between frames.
    let inputWake = WakeSignal()
    /// What the host asked of the take, and where the take is.
    private struct Control {
        var stopRequest: StopReason?
        var pendingSwitches: [(role: StreamRole, spec: SourceSpec)] = []
        var pendingLayout: LayoutChange?
        var pendingOutputs: [OutputChange] = []
        var pendingTexts: (texts: [TextOverlay], fonts: [String: FontFile])?
        var pendingOverlays: [ImageOverlay]?
        /// The main output's image overlays and texts as last asked for (the
        /// configuration's, then `setOverlays`' and `setTexts`'), so a change
        /// is checked against the other's count.
        var mainOverlays: [ImageOverlay]?, mainTexts: [TextOverlay]?
        /// Callers waiting for the render loop's reply (`addOutput`,
        /// `removeOutput`): each is told when the take ends.
        var replyWaiters: [@Sendable () -> Void] = []
        var summary: TakeSummary?
        var hasStarted = false
        var hasEnded = false
    }
    private let control = Mutex(Control())

    public convenience init(configuration: TakeConfiguration, hooks: SessionHooks = SessionHooks()) {
        self.init(configuration: configuration, hooks: hooks, io: .media)
    }

    init(configuration: TakeConfiguration, hooks: SessionHooks, io: TakeIO) {
        self.configuration = configuration
        self.hooks = hooks
        self.io = io
    }

    /// Asks the running take to stop after the current frame and finalize.
    public func stop(_ reason: StopReason = .requested("stop requested")) {
        control.withLock { if $0.stopRequest == nil { $0.stopRequest = reason } }
        inputWake.ring()
        if !hasStarted { openCancel.cancel() }
    }

    /// Replaces a stream mid-take without stalling output: the old stream's
    /// frame stays on screen until the new one delivers its first frame. The new
    /// stream may have another size, rate or rotation.
    public func switchSource(_ role: StreamRole, to spec: SourceSpec) {
        control.withLock { $0.pendingSwitches.append((role, spec)) }
    }

    /// Changes the layout; it applies atomically, to all draws, on the next
    /// frame. With a transition (nil: the take's `--transition`, if any) the
    /// frames from there are interpolated from the picture as it is
    /// (docs/ARCHITECTURE.md, "Layout transitions").
    public func setLayout(_ layout: Layout, transition: LayoutTransition? = nil) {
        control.withLock { $0.pendingLayout = LayoutChange(layout: layout, transition: transition) }
    }

    /// Replaces the main output's texts (docs/record.md, "Text") from the
    /// next frame on: the frame boundary after this call shows the new
    /// texts, the one before it the old. Their fonts are read and each text
    /// set once here, on the caller's thread, so bad input throws
    /// `.configuration` naming it and the take never sees it.
    public func setTexts(_ texts: [TextOverlay]) throws(SessionError) {
        var fonts: [String: FontFile] = [:]
        do {
            let images = (control.withLock { $0.mainOverlays } ?? configuration.overlays).count
            try TextOverlay.check(texts, images: images, field: "texts")
            try TakeTexts.loadFonts(texts.enumerated().map { ("texts[\($0.offset)]", $0.element) }, policy: hooks.sourcePolicy, into: &fonts)
        } catch { throw .configuration(error) }
        control.withLock { $0.pendingTexts = (texts, fonts); $0.mainTexts = texts }
    }

    /// Replaces the main output's image overlays from the next frame on
    /// (docs/record.md, "Overlays"), as `setTexts` does its texts. Each image
    /// must be one the take read when it started (an overlay of any of its
    /// outputs): `.configuration` naming it otherwise.
    public func setOverlays(_ overlays: [ImageOverlay]) throws(SessionError) {
        let read = Set((configuration.overlays + configuration.extraOutputs.flatMap(\.overlays)).map(\.image))
        do throws(ConfigurationError) {
            try ImageOverlay.check(overlays, field: "overlays")
            if let (i, o) = overlays.enumerated().first(where: { !read.contains($0.element.image) }) {
                throw ConfigurationError(field: "overlays[\(i)].image", value: o.image,
                                         reason: "a running take shows only images it read when it started (an overlay of one of its outputs)")
            }
            let texts = control.withLock { $0.mainTexts } ?? configuration.texts
            try TextOverlay.check(texts, images: overlays.count, field: "overlays")
        } catch { throw .configuration(error) }
        control.withLock { $0.pendingOverlays = overlays; $0.mainOverlays = overlays }
    }

    /// Adds an output fed from the same stream textures, with its own layout
    /// (nil: the take's) and render target, from the next frame on. Blocks
    /// until the take has opened it; returns its index for `removeOutput`.
    /// Throws `.output` when it cannot be opened, `.ended` once the take is over.
    public func addOutput(_ spec: OutputSpec) throws(SessionError) -> Int {
        if let e = spec.layout?.validationError() { throw .configuration(e) }
        do { try ImageOverlay.check(spec.overlays, field: "overlays") } catch { throw .configuration(error) }
        do { try TextOverlay.check(spec.texts, images: spec.overlays.count, field: "texts") } catch { throw .configuration(error) }
        let box = ReplyBox<Result<Int, SessionError>>()
        guard enqueue(.add(spec, reply: { box.put($0) }), box) else { throw .ended(.nothingRecorded(.requested("take over"), output: spec.out)) }
        guard let r = box.take() else { throw .ended(.nothingRecorded(.requested("take over"), output: spec.out)) }
        return try r.get()
    }

    /// Removes an output added with `addOutput` (or `--also-out`): its
    /// encoder is flushed and its file completed. Returns what it received;
    /// nil for an unknown index or the main output (0).
    public func removeOutput(_ index: Int) -> OutputSummary? {
        let box = ReplyBox<OutputSummary?>()
        guard enqueue(.remove(index, reply: { box.put($0) }), box) else { return nil }
        return box.take() ?? nil
    }

    /// Queues `change` for the render loop while the take runs; `box` is
    /// closed when the take ends, so its waiter never outlives the take.
    private func enqueue<T>(_ change: OutputChange, _ box: ReplyBox<T>) -> Bool {
        control.withLock { c in
            guard c.hasStarted, !c.hasEnded else { return false }
            c.pendingOutputs.append(change)
            c.replyWaiters.append { box.close() }
            return true
        }
    }

    func takeControl() -> TakeControl {
        control.withLock { c in
            defer { c.pendingSwitches = []; c.pendingLayout = nil; c.pendingOutputs = []; c.pendingTexts = nil; c.pendingOverlays = nil }
            return TakeControl(stop: c.stopRequest, switches: c.pendingSwitches, layout: c.pendingLayout, outputs: c.pendingOutputs,
                               texts: c.pendingTexts, overlays: c.pendingOverlays)
        }
    }

    /// Runs the take to its end. Throws, with the typed reason: bad input
    /// (`isBadInput`, nothing recorded), a refusal to start, or `.ended` when
    /// the take ended abnormally — in which case what was recorded has been
    /// finalized and `summary` describes it.
    public func run() throws(SessionError) -> TakeSummary {
        // Whoever waits for a snapshot is told when the take is over (or never started).
        defer { hooks.snapshots?.close() }
        let baseline = StageClock.times()
        let take = TakeRun(session: self, prepared: try TakeSetup.prepare(self))
        take.stageBaseline = baseline
        control.withLock { $0.hasStarted = true }
        hooks.started?()
        defer {
            let summary = take.summary
            let (orphans, waiters) = control.withLock { c in
                c.summary = summary
                c.hasEnded = true
                defer { c.pendingOutputs = []; c.replyWaiters = [] }
                return (c.pendingOutputs, c.replyWaiters)
            }
            for o in orphans {
                switch o {
                case .add(let spec, let reply): reply(.failure(.ended(.nothingRecorded(.requested("take over"), output: spec.out))))
                case .remove(_, let reply): reply(nil)
                }
            }
            // A change the render loop took and never answered (the take ended first) answers nil.
            for close in waiters { close() }
        }
        return try take.run()
    }

    /// Whether the take has started (sources, GPU and output open). Before
    /// that, nothing has been recorded and a stop has nothing to finalize.
    public var hasStarted: Bool { control.withLock { $0.hasStarted } }
    /// Whether `stop` has been called.
    var isStopRequested: Bool { control.withLock { $0.stopRequest != nil } }
    /// The summary of the last take that started, also when it ended abnormally.
    public var summary: TakeSummary? { control.withLock { $0.summary } }
}

/// One reply from the render loop to a waiting caller, or none when the
/// take ends first (`close`).
final class ReplyBox<T: Sendable>: Sendable {
    private let state = Condition<(value: T?, closed: Bool)>((nil, false))
    func put(_ v: T) { state.update { $0.value = v } }
    /// The take has ended: a waiter without a reply gets nil.
    func close() { state.update { $0.closed = true } }
    /// Waits for the reply; nil when the take ended without one.
    func take() -> T? {
        state.wait(until: { $0.value != nil || $0.closed }) { s, _ in s.value }
    }
}
