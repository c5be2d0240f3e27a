import Diptych
import DiptychCore
import DiptychGPU
import Foundation
import Synchronization

// The one file that drives the session API (`RecordingSession`,
// `SessionHooks`): the rest of the server sees takes through `TakeSession`
// and `TakeEvents`, so a change of that API is rewired here.

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
        let message = TakeSession.message(error)
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
}

/// What a running take reports, on the take's own threads.
protocol TakeEvents: AnyObject, Sendable {
    func takeLogged(_ line: String)
    func takeProgressed(_ figures: TakeFigures)
    func takeStarted()
    func takeStreamChanged(_ change: StreamChange)
    func takePrimaryTaken(_ pts: MediaTime)
    func takeWritten(_ pts: MediaTime)
    func takeEnded(_ ending: SessionOutcome)
}

/// One take run by the server: a `RecordingSession` on its own thread with
/// a compositor from the server's pool.
final class TakeSession: Sendable {
    private let session: RecordingSession
    private let snapshots = SnapshotRequests()
    private let gpu = GPUBox()
    private weak let events: (any TakeEvents)?

    /// The compositor the take is using, and what earlier ones (before a
    /// context loss) did.
    private final class GPUBox: Sendable { let state = Mutex(GPUState()) }
    private struct GPUState {
        var current: GPUCompositor?
        var origin: CompositorPool.Origin?
        var last = GPUTotals()
        var retired = GPUTotals()
        /// The take has ended (its compositor is shut down).
        var ended = false
    }

    /// `simulateContextLossAtFrames`: output frames at which the take's GPU
    /// context is reported lost (tests of the rebuild through the pool).
    init(configuration: TakeConfiguration, pool: CompositorPool, encoderThreads: Int, sourcePolicy: SourcePolicy = .commandLine,
         events: any TakeEvents, simulateContextLossAtFrames: Set<Int> = [], name: String? = nil) {
        let box = gpu
        self.events = events
        var hooks = SessionHooks(log: { [weak events] in events?.takeLogged($0) })
        hooks.progress = { [weak events] p in
            events?.takeProgressed(TakeFigures(frames: p.frames, mediaSeconds: p.mediaSeconds, wallSeconds: p.wallSeconds,
                                               secondaryRepeated: p.secondaryRepeated, secondaryDropped: p.secondaryDropped,
                                               segments: p.segments, sources: p.sources, sourceSwitches: p.sourceSwitches))
        }
        // The start (sources, GPU and output open) is reported as it happens.
        hooks.started = { [weak events] in events?.takeStarted() }
        hooks.streamChange = { [weak events] in events?.takeStreamChanged($0) }
        hooks.frameEvent = { [weak events] event, pts in
            switch event {
            case .primaryTaken: events?.takePrimaryTaken(pts)
            case .written: events?.takeWritten(pts)
            }
        }
        let gpuEncoder = configuration.encoder == .gpu
        hooks.makeCompositor = { _ throws(GPUError) in
            // The server's GPU is fixed (`diptych serve --gpu`); the take's selection is not used.
            // A second call is a rebuild after a context loss of the compositor's generation.
            let lost = box.state.withLock { $0.origin }
            let (c, origin) = try pool.make(replacing: lost, gpuEncoder: gpuEncoder)
            box.state.withLock { b in
                b.retired = b.retired + b.last
                b.last = GPUTotals()
                b.current = c
                b.origin = origin
            }
            return c
        }
        hooks.encoderThreads = encoderThreads
        hooks.sourcePolicy = sourcePolicy
        hooks.takeName = name
        hooks.simulateContextLossAtFrames = simulateContextLossAtFrames
        hooks.snapshots = snapshots
        // A compositor's last figures stay the take's once it is shut down.
        hooks.compositorRetiring = { stats in box.state.withLock { $0.last = GPUTotals(stats) } }
        session = RecordingSession(configuration: configuration, hooks: hooks)
    }

    /// Runs the take on a thread of its own; `takeEnded` follows its end.
    func start(name: String) {
        let session = self.session
        let events = self.events
        let box = gpu
        JoinableThread.detached(name: name, stackSize: nil) {
            var ending = SessionOutcome()
            do throws(SessionError) {
                ending.summary = try session.run()
            } catch {
                ending.summary = session.summary
                ending.failure = SessionOutcome.answer(error)
                // The client is told only that a network source could not be opened; the log says why.
                if case .source(let role, .unreachable(let name, let detail)) = error {
                    events?.takeLogged("\(role.rawValue) \(name) could not be opened: \(detail)")
                }
            }
            box.state.withLock { $0.ended = true }
            events?.takeEnded(ending)
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

    /// Asks the take to finalize after the current frame.
    func stop(_ why: String) { session.stop(.requested(why)) }

    /// The layout from the next primary frame on, atomically.
    func setLayout(_ layout: Layout, transition: LayoutTransition? = nil) { session.setLayout(layout, transition: transition) }

    /// The main output's texts from the next frame on; throws `.configuration` for bad input.
    func setTexts(_ texts: [TextOverlay]) throws(SessionError) { try session.setTexts(texts) }

    /// The main output's image overlays from the next frame on; throws `.configuration` for bad input.
    func setOverlays(_ overlays: [ImageOverlay]) throws(SessionError) { try session.setOverlays(overlays) }

    /// Hot swap: the old stream stays on screen until the new one delivers.
    func switchSource(_ role: StreamRole, to spec: SourceSpec) { session.switchSource(role, to: spec) }

    /// Adds an output with its own layout, fed from the same stream textures; returns its index.
    func addOutput(_ spec: OutputSpec) throws(SessionError) -> Int { try session.addOutput(spec) }

    /// Removes an added output (its file is completed); nil for an unknown index.
    func removeOutput(_ index: Int) -> OutputSummary? { session.removeOutput(index) }

    /// Output `index`'s next drawn frame as RGBA, waiting at most `timeout` seconds.
    func snapshot(output index: Int, timeout: Double) -> Result<VideoFrame, SnapshotFailure> {
        snapshots.next(output: index, timeout: timeout)
    }

    var hasStarted: Bool { session.hasStarted }

    /// GPU time of the take's passes so far (over every compositor it had).
    var gpuTotals: GPUTotals {
        let c = gpu.state.withLock { $0.ended ? nil : $0.current }
        let now = c.map { GPUTotals($0.stats) } ?? GPUTotals()
        return gpu.state.withLock { g in
            // A compositor already shut down reports nothing: keep what it last said.
            if now.frames >= g.last.frames { g.last = now }
            return g.retired + g.last
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
