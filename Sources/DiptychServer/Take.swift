import Diptych
import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation
import Synchronization

/// Where a take is in its life.
public enum TakeState: String, Hashable, Sendable, Codable, CaseIterable {
    /// Admitted; sources, GPU and output opening.
    case starting
    case recording
    /// Asked to stop; the one finalize path is running.
    case finishing
    case finished
    /// Ended abnormally (what was recorded is finalized), or was running when the server died.
    case failed

    public var isActive: Bool { self == .starting || self == .recording || self == .finishing }
}

/// What was found in a take's output after the server stopped while it ran.
public struct RecoveredOutput: Hashable, Sendable, Codable {
    public var frames: Int
    public var durationSeconds: Double
    public var decodable: Bool
    public var note: String?
}

/// One take of the server: its record (configuration, state, live figures)
/// and, once `run` starts it, the `RecordingSession` it runs on a thread of
/// its own with a compositor from the server's pool; thread-safe. The
/// recording's reports (`SessionHooks`) change its state, and it tells
/// `onChange` when its state changes. This is the one place the server
/// drives the session API.
final class Take: Sendable {
    let id: String
    let created: Date
    /// The configuration as run (outputs resolved under the output root).
    let configuration: TakeConfiguration
    let load: TakeLoad
    let encoderThreads: Int
    /// Where the server decodes the take's inputs, and what that has cost.
    let decoding: TakeDecoding

    private struct State {
        /// The recording `run` started (nil before, and for a take read back from disk).
        var recording: RecordingSession?
        var state: TakeState
        var layout: Layout
        /// The main output's image overlays and texts as they are now (`PATCH` replaces them).
        var overlays: [ImageOverlay]
        var texts: [TextOverlay]
        var figures = TakeFigures()
        var written = 0
        var latency = FrameLatency()
        var encoder: String?
        var error: String?
        /// How a failure answers the request that started the take (nil for a take read back from disk).
        var failure: RequestError?
        /// Outputs added while the take runs, by index, while they are open.
        var added: [Int: OutputSpec] = [:]
        /// Outputs closed while the take ran (declared or added).
        var removed: Set<Int> = []
        /// Every output added while the take ran, removed ones included (their files hold recordings).
        var everAdded: [OutputSpec] = []
        var summary: TakeSummary?
        var recovered: RecoveredOutput?
        /// Set once the take has ended and its final state has been reported.
        var ended = false
        var recent: [(time: Double, media: Double)] = []
    }
    /// Everything that changes; waiters are woken when the state changes or the take has ended.
    private let m: Condition<State>
    /// Snapshots of the outputs while the take records (`snapshotPNG`).
    private let snapshots = SnapshotRequests()
    /// The compositors the pool gave the recording: the one in use, and
    /// what earlier ones (before a context loss) did.
    private let gpu = GPUBox()
    private final class GPUBox: Sendable { let state = Mutex(GPUState()) }
    private struct GPUState {
        var current: GPUCompositor?
        var origin: CompositorPool.Origin?
        var last = GPUTotals()
        var retired = GPUTotals()
        /// The recording has ended (its compositor is shut down).
        var ended = false
    }

    private struct Hooks {
        var onChange: (@Sendable (Take) -> Void)?
        var onLog: (@Sendable (_ take: String, _ line: String) -> Void)?
        var onEvent: (@Sendable (_ type: String, _ take: String, _ fields: [String: String]) -> Void)?
    }
    private let hooks = Mutex(Hooks())
    /// Told the take whenever its state changes (the state folder saves it).
    var onChange: (@Sendable (Take) -> Void)? {
        get { hooks.withLock { $0.onChange } }
        set { hooks.withLock { $0.onChange = newValue } }
    }
    /// The take's log lines, with its id.
    var onLog: (@Sendable (_ take: String, _ line: String) -> Void)? {
        get { hooks.withLock { $0.onLog } }
        set { hooks.withLock { $0.onLog = newValue } }
    }
    /// What happened to the take (`GET /v1/events`): its type, the take's id, its fields.
    var onEvent: (@Sendable (_ type: String, _ take: String, _ fields: [String: String]) -> Void)? {
        get { hooks.withLock { $0.onEvent } }
        set { hooks.withLock { $0.onEvent = newValue } }
    }

    init(id: String, configuration: TakeConfiguration, load: TakeLoad, encoderThreads: Int,
         decoding: TakeDecoding = TakeDecoding(), state: TakeState = .starting, created: Date = Date()) {
        self.id = id; self.configuration = configuration; self.load = load; self.encoderThreads = encoderThreads
        self.decoding = decoding
        self.created = created
        m = Condition(State(state: state, layout: configuration.layout, overlays: configuration.overlays, texts: configuration.texts))
    }

    /// A take read back from the state folder.
    convenience init(record: TakeRecord, configuration: TakeConfiguration, summary: TakeSummary?) {
        self.init(id: record.id, configuration: configuration, load: record.load, encoderThreads: record.encoderThreads,
                  state: record.state, created: record.created)
        m.withLock { s in
            s.layout = record.layout.flatMap { try? LayoutJSON.layout($0) } ?? configuration.layout
            s.error = record.error
            s.summary = summary
            s.recovered = record.recovered
            s.everAdded = (record.addedOutputs ?? []).map { OutputSpec(out: $0) }
            if let summary { s.written = summary.frames } else if let r = record.recovered { s.written = r.frames }
        }
    }

    var state: TakeState { m.withLock { $0.state } }
    var layout: Layout { m.withLock { $0.layout } }
    var summary: TakeSummary? { m.withLock { $0.summary } }
    var error: String? { m.withLock { $0.error } }
    var failure: RequestError? { m.withLock { $0.failure } }
    private var recording: RecordingSession? { m.withLock { $0.recording } }

    // MARK: - Control

    /// Starts the take's recording on a thread of its own, with a compositor
    /// from `pool` (the server's GPU: the configuration's selection is not
    /// used), and another from it after a context loss. The take follows
    /// the recording's reports and ends `finished` or `failed`.
    /// `simulateContextLossAtFrames`: output frames at which the take's GPU
    /// context is reported lost (tests of the rebuild through the pool).
    func run(pool: CompositorPool, sourcePolicy: SourcePolicy = .commandLine, simulateContextLossAtFrames: Set<Int> = []) {
        var hooks = SessionHooks(log: { [weak self] in self?.takeLogged($0) })
        hooks.progress = { [weak self] p in
            self?.takeProgressed(TakeFigures(frames: p.frames, mediaSeconds: p.mediaSeconds, wallSeconds: p.wallSeconds,
                                             secondaryRepeated: p.secondaryRepeated, secondaryDropped: p.secondaryDropped,
                                             segments: p.segments, sources: p.sources, sourceSwitches: p.sourceSwitches))
        }
        // The start (sources, GPU and output open) is reported as it happens.
        hooks.started = { [weak self] in self?.takeStarted() }
        hooks.streamChange = { [weak self] in self?.takeStreamChanged($0) }
        hooks.frameEvent = { [weak self] event, pts in
            switch event {
            case .primaryTaken: self?.takePrimaryTaken(pts)
            case .written: self?.takeWritten(pts)
            }
        }
        let box = gpu
        let gpuEncoder = configuration.encoder == .gpu
        hooks.makeCompositor = { _ throws(GPUError) in
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
        // A compositor's last figures stay the take's once it is shut down.
        hooks.compositorRetiring = { stats in box.state.withLock { $0.last = GPUTotals(stats) } }
        hooks.encoderThreads = encoderThreads
        hooks.sourcePolicy = sourcePolicy
        hooks.takeName = id
        let decoding = self.decoding
        hooks.decoderSettings = { [weak self] _, settings in
            let take = self
            return decoding.settings(settings, written: { take?.m.withLock { $0.written } ?? 0 })
        }
        hooks.simulateContextLossAtFrames = simulateContextLossAtFrames
        hooks.snapshots = snapshots
        let recording = RecordingSession(configuration: configuration, hooks: hooks)
        m.withLock { $0.recording = recording }
        JoinableThread.detached(name: "diptych.take.\(id)", stackSize: nil) {
            var ending = SessionOutcome()
            do throws(SessionError) {
                ending.summary = try recording.run()
            } catch {
                ending.summary = recording.summary
                ending.failure = SessionOutcome.answer(error)
                // The client is told only that a network source could not be opened; the log says why.
                if case .source(let role, .unreachable(let name, let detail)) = error {
                    self.takeLogged("\(role.rawValue) \(name) could not be opened: \(detail)")
                }
            }
            box.state.withLock { $0.ended = true }
            self.takeEnded(ending)
        }
    }

    /// Blocks until the take is recording or has ended, or `timeout` passes.
    func waitUntilStarted(timeout: Double) {
        m.wait(until: { $0.state != .starting }, timeout: timeout)
    }

    /// Asks an active take to finalize; false when it is not active.
    @discardableResult
    func stop(_ why: String) -> Bool {
        let recording = m.update { s -> RecordingSession? in
            guard s.state.isActive, let recording = s.recording else { return nil }
            if s.state == .recording || s.state == .starting { s.state = .finishing }
            return recording
        }
        guard let recording else { return false }
        recording.stop(.requested(why))
        changed()
        return true
    }

    /// Blocks until the take has ended.
    func waitUntilEnded() {
        m.wait(until: { $0.recording == nil || $0.ended })
    }

    func setLayout(_ layout: Layout, transition: LayoutTransition? = nil) {
        let s: RecordingSession? = m.withLock { $0.layout = layout; return $0.recording }
        s?.setLayout(layout, transition: transition)
        changed()
        onEvent?("layout-changed", id, ["kind": layout.kind.rawValue])
    }

    /// Replaces the main output's texts from the next frame on; bad input
    /// (a font that cannot be read or is outside the input root) is a 400.
    func setTexts(_ texts: [TextOverlay]) throws(RequestError) {
        guard let s = recording else { return }
        do { try s.setTexts(texts) } catch {
            guard case .configuration(let e) = error else { throw .badRequest("texts: \(error)") }
            throw .badRequest(TakeRequests.describe(e))
        }
        m.withLock { $0.texts = texts }
        changed()
    }

    /// Replaces the main output's image overlays from the next frame on;
    /// an image the take did not read when it started is a 400.
    func setOverlays(_ overlays: [ImageOverlay]) throws(RequestError) {
        guard let s = recording else { return }
        do { try s.setOverlays(overlays) } catch {
            guard case .configuration(let e) = error else { throw .badRequest("overlays: \(error)") }
            throw .badRequest(TakeRequests.describe(e))
        }
        m.withLock { $0.overlays = overlays }
        changed()
    }

    func switchSource(_ role: StreamRole, to spec: SourceSpec) {
        recording?.switchSource(role, to: spec)
        onEvent?("source-switched", id, ["role": role.rawValue, "source": "\(spec)"])
    }

    /// The outputs added while the take ran, open now or removed since.
    var addedOutputs: [OutputSpec] { m.withLock { $0.everAdded } }

    /// What the take asks of the machine now: its load with the outputs
    /// added and still open, and its decoding where the server moved it to the CPU.
    var admissionLoad: TakeLoad {
        var l = load
        let added = m.withLock { $0.added.sorted { $0.key < $1.key }.map(\.value) }
        l.outputs += added.map { load.output(for: $0) }
        l.cpuDecodeMegapixelsPerSecond = decoding.cpuMegapixelsPerSecond
        return l
    }

    /// Whether the server may move the take's decoding to the CPU now: it
    /// records, and its decoding is movable (`TakeDecoding.movable`).
    var decodingMovable: Bool { state == .recording && decoding.movable }

    /// Adds an output to the running take: 400 when it cannot be opened, 409 once the take is over.
    func addOutput(_ spec: OutputSpec) throws(RequestError) -> Int {
        guard let s = recording else { throw .conflict("take '\(id)': is not running") }
        do {
            let index = try s.addOutput(spec)
            m.withLock { $0.added[index] = spec; $0.everAdded.append(spec) }
            changed()
            onEvent?("output-added", id, ["index": "\(index)", "out": spec.out])
            return index
        } catch {
            if error.isBadInput { throw .badRequest("out '\(spec.out)': \(error)") }
            if case .ended = error { throw .conflict("take '\(id)': has ended") }
            // A receiver that refused, or accepted and never answered.
            if case .output(_, .writeFailed) = error { throw .badGateway("out '\(spec.out)': \(error)") }
            if case .output(_, .timedOut) = error { throw .badGateway("out '\(spec.out)': \(error)") }
            throw .failed("\(error)")
        }
    }

    /// Removes an added output and returns what it received; nil for an unknown index or the main output.
    func removeOutput(_ index: Int) -> OutputSummary? {
        guard let summary = recording?.removeOutput(index) else { return nil }
        m.withLock { $0.added[index] = nil; $0.removed.insert(index) }
        changed()
        onEvent?("output-removed", id, ["index": "\(index)", "frames": "\(summary.frames)"])
        return summary
    }

    /// Output `index`'s current picture as PNG, from its render target: 409
    /// unless the take is recording, 404 for an output it does not have
    /// open (0 is the main output, then the outputs in the order they were
    /// declared, `alsoOut`, and added), 504 when no frame of it is drawn
    /// within `timeout` seconds.
    func snapshotPNG(output index: Int, timeout: Double) throws(RequestError) -> Data {
        let (recording, state, added, removed) = m.withLock { ($0.recording, $0.state, $0.added, $0.removed) }
        guard recording != nil, state == .recording else { throw .conflict("take '\(id)': is \(state.rawValue); only a recording take has a picture") }
        let declared = index >= 0 && index <= configuration.extraOutputs.count
        guard (declared || added[index] != nil) && !removed.contains(index) else { throw .notFound("take '\(id)': has no output \(index)") }
        switch snapshots.next(output: index, timeout: timeout) {
        case .success(let frame):
            do { return try PNGWriter.encode(frame) } catch { throw .failed("take '\(id)' output \(index): \(error)") }
        case .failure(.timedOut(let seconds)):
            throw .gatewayTimeout("take '\(id)' output \(index): no frame drawn within \(seconds) s")
        case .failure(.ended):
            throw .conflict("take '\(id)': ended before a frame of output \(index) was drawn")
        case .failure(let e):
            throw .failed("take '\(id)' output \(index): \(e)")
        }
    }

    /// Marks a take that was running when the server stopped as failed, with what its file holds.
    func markCrashed(_ recovered: RecoveredOutput, previous: TakeState) {
        m.withLock { s in
            s.state = .failed
            s.error = "the server stopped while the take was \(previous.rawValue); the output keeps what was written"
            s.recovered = recovered
            s.written = recovered.frames
        }
    }

    func changed() { onChange?(self) }

    // MARK: - The recording's reports (on its threads)

    private func takeLogged(_ line: String) {
        onLog?(id, line)
        if line.hasPrefix("encoder: ") {
            // "encoder: libx264 (why); audio: …" → "libx264"
            let name = line.dropFirst("encoder: ".count).split(separator: ";").first?
                .split(separator: " (").first.map { String($0) }
            m.withLock { $0.encoder = name }
        }
    }

    private func takeProgressed(_ f: TakeFigures) {
        m.withLock { s in
            s.figures = f
            s.recent.append((f.wallSeconds, f.mediaSeconds))
            while let first = s.recent.first, f.wallSeconds - first.time > 4 { s.recent.removeFirst() }
        }
    }

    private func takeStarted() {
        let changedState: Bool = m.update { s in
            guard s.state == .starting else { return false }
            s.state = .recording
            return true
        }
        if changedState {
            changed()
            onEvent?("started", id, [:])
        }
    }

    /// A source or a live output went away or came back: an event
    /// (`source-lost`, `source-back`, `source-changed`, `output-lost`, `output-back`, `encoder-fallback`).
    private func takeStreamChanged(_ change: StreamChange) {
        switch change {
        case .sourceLost(let role, let reason): onEvent?("source-lost", id, ["role": role.rawValue, "reason": reason])
        case .sourceBack(let role): onEvent?("source-back", id, ["role": role.rawValue])
        case .sourceSwitched(let role, let from, let to, let reason):
            onEvent?("source-changed", id, ["role": role.rawValue, "from": from, "to": to, "reason": reason.rawValue])
        case .outputLost(let index, let out, let reason): onEvent?("output-lost", id, ["index": "\(index)", "out": out, "reason": reason])
        case .outputBack(let index, let out, let seconds):
            onEvent?("output-back", id, ["index": "\(index)", "out": out, "seconds": String(format: "%.1f", seconds)])
        case .encoderFellBack(let index, let out, let f):
            onEvent?("encoder-fallback", id, ["index": "\(index)", "out": out, "from": f.from, "to": f.to, "at": String(format: "%.3f", f.at),
                                              "reason": f.reason, "continuedIn": f.continuedIn ?? ""])
        }
    }

    private func takePrimaryTaken(_ pts: MediaTime) {
        let now = ProcessInfo.processInfo.systemUptime
        m.withLock { $0.latency.primaryTaken(pts, at: now) }
    }

    private func takeWritten(_ pts: MediaTime) {
        let now = ProcessInfo.processInfo.systemUptime
        m.withLock { $0.latency.written(pts, at: now); $0.written += 1 }
    }

    private func takeEnded(_ e: SessionOutcome) {
        m.withLock { s in
            s.summary = e.summary
            s.error = e.failure?.description
            s.failure = e.failure
            s.state = e.failure == nil ? .finished : .failed
            if let summary = e.summary { s.written = summary.frames }
        }
        // The final state is saved (and told) before anyone waiting for the end is woken.
        changed()
        if let f = e.failure { onEvent?("failed", id, ["error": f.description]) }
        else { onEvent?("finished", id, ["frames": "\(e.summary?.frames ?? 0)"]) }
        m.update { $0.ended = true }
    }

    // MARK: - Figures

    /// The realtime factor over the last few seconds, once the take has run for two.
    var recentRealtimeFactor: Double? {
        m.withLock { s in
            guard s.state == .recording, let a = s.recent.first, let b = s.recent.last, b.time - a.time >= 2 else { return nil }
            return (b.media - a.media) / (b.time - a.time)
        }
    }

    /// Cumulative counters for the cost meter.
    var counters: CostMeter.TakeCounters {
        let gpu = gpuTotals
        let frames = m.withLock { $0.written }
        // Decoding is counted where the server placed it on the CPU, or since it moved there.
        let decoded = decoding.counted(written: frames)
        // Every encoded output renders and encodes its canvas at its rate: the same count as `TakeLoad.megapixelsPerSecond`.
        return CostMeter.TakeCounters(id: id, megapixels: Double(frames) * load.megapixelsPerFrame,
                                      gpuMs: gpu.milliseconds,
                                      cpuDecodedMegapixels: load.fps > 0 ? Double(decoded.frames) * decoding.inputMegapixelsPerSecond / load.fps : 0,
                                      cpuDecodeSeconds: decoded.seconds)
    }

    /// GPU time of the take's passes so far (over every compositor it had).
    var gpuTotals: GPUTotals {
        let c = gpu.state.withLock { $0.ended ? nil : $0.current }
        // Without a hop: views and cost samples read it while the take runs (`lastPolledStats`).
        let now = c.map { GPUTotals($0.lastPolledStats) } ?? GPUTotals()
        return gpu.state.withLock { g in
            // A compositor already shut down reports nothing: keep what it last said.
            if now.frames >= g.last.frames { g.last = now }
            return g.retired + g.last
        }
    }

    /// A snapshot for the JSON view and the metrics: the configuration as
    /// run, with the main output's overlays and texts as they are now.
    func snapshot() -> TakeSnapshot {
        var configuration = configuration
        let (id, created, load, encoderThreads, placement) = (self.id, self.created, self.load, self.encoderThreads, decoding.current)
        return m.withLock { s in
            configuration.overlays = s.overlays
            configuration.texts = s.texts
            return TakeSnapshot(id: id, state: s.state, created: created, configuration: configuration, layout: s.layout,
                                load: load, encoderThreads: encoderThreads, decodePlacement: placement, figures: s.figures, written: s.written, latency: s.latency,
                                encoder: s.summary?.encoder ?? s.encoder, error: s.error, summary: s.summary, recovered: s.recovered,
                                added: s.added.sorted { $0.key < $1.key }, everAdded: s.everAdded)
        }
    }
}

/// A consistent copy of a take's record.
struct TakeSnapshot: Sendable {
    var id: String
    var state: TakeState
    var created: Date
    var configuration: TakeConfiguration
    var layout: Layout
    var load: TakeLoad
    var encoderThreads: Int
    var decodePlacement: DecodePlacement.Decision?
    var figures: TakeFigures
    var written: Int
    var latency: FrameLatency
    var encoder: String?
    var error: String?
    var summary: TakeSummary?
    var recovered: RecoveredOutput?
    /// Outputs added while the take runs and still open, by index.
    var added: [(key: Int, value: OutputSpec)] = []
    /// Every output added while the take ran, open now or removed since.
    var everAdded: [OutputSpec] = []
}
