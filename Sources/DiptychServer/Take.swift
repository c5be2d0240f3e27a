import Diptych
import DiptychCore
import DiptychMedia
import Foundation

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

/// The server's record of one take: its configuration, state and live
/// figures; thread-safe. It receives the session's events (`TakeEvents`)
/// and tells `onChange` when its state changes.
final class Take: TakeEvents, @unchecked Sendable {
    let id: String
    let created: Date
    /// The configuration as run (outputs resolved under the output root).
    let configuration: TakeConfiguration
    let load: TakeLoad
    let encoderThreads: Int

    /// Guards everything below; broadcast when the state changes.
    private let lock = NSCondition()
    private var session: TakeSession?
    private var _state: TakeState
    private var _layout: Layout
    /// The main output's image overlays and texts as they are now (`PATCH` replaces them).
    private var _overlays: [ImageOverlay]
    private var _texts: [TextOverlay]
    private var figures = TakeFigures()
    private var written = 0
    private var latency = FrameLatency()
    private var encoder: String?
    private var _error: String?
    /// How a failure answers the request that started the take (nil for a take read back from disk).
    private var _failure: RequestError?
    /// Outputs added while the take runs, by index, while they are open.
    private var _added: [Int: OutputSpec] = [:]
    /// Outputs closed while the take ran (declared or added).
    private var _removed: Set<Int> = []
    /// Every output added while the take ran, removed ones included (their files hold recordings).
    private var _everAdded: [OutputSpec] = []
    private var _summary: TakeSummary?
    private var _recovered: RecoveredOutput?
    /// Set once the take has ended and its final state has been reported.
    private var ended = false
    private var recent: [(time: Double, media: Double)] = []
    private var startTime = ProcessInfo.processInfo.systemUptime
    var onChange: (@Sendable (Take) -> Void)?
    /// Where the session's log lines go (the server's log, prefixed with the take's id).
    /// The take's log lines, with its id.
    var onLog: (@Sendable (_ take: String, _ line: String) -> Void)?
    /// What happened to the take (`GET /v1/events`): its type, the take's id, its fields.
    var onEvent: (@Sendable (_ type: String, _ take: String, _ fields: [String: String]) -> Void)?

    init(id: String, configuration: TakeConfiguration, load: TakeLoad, encoderThreads: Int,
         state: TakeState = .starting, created: Date = Date()) {
        self.id = id; self.configuration = configuration; self.load = load; self.encoderThreads = encoderThreads
        self.created = created
        _state = state
        _layout = configuration.layout
        _overlays = configuration.overlays
        _texts = configuration.texts
    }

    /// A take read back from the state folder.
    convenience init(record: TakeRecord, configuration: TakeConfiguration, summary: TakeSummary?) {
        self.init(id: record.id, configuration: configuration, load: record.load, encoderThreads: record.encoderThreads,
                  state: record.state, created: record.created)
        _layout = record.layout.flatMap { try? LayoutJSON.layout($0) } ?? configuration.layout
        _error = record.error
        _summary = summary
        _recovered = record.recovered
        _everAdded = (record.addedOutputs ?? []).map { OutputSpec(out: $0) }
        if let s = summary { written = s.frames } else if let r = record.recovered { written = r.frames }
    }

    var state: TakeState { lock.withLock { _state } }
    var layout: Layout { lock.withLock { _layout } }
    var summary: TakeSummary? { lock.withLock { _summary } }
    var error: String? { lock.withLock { _error } }
    var failure: RequestError? { lock.withLock { _failure } }

    // MARK: - Control

    func run(_ session: TakeSession) {
        lock.withLock { self.session = session; startTime = ProcessInfo.processInfo.systemUptime }
        session.start(name: "diptych.take.\(id)")
    }

    /// Blocks until the take is recording or has ended, or `timeout` passes.
    func waitUntilStarted(timeout: Double) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        lock.lock(); defer { lock.unlock() }
        while _state == .starting && lock.wait(until: deadline) {}
    }

    /// Asks an active take to finalize; false when it is not active.
    @discardableResult
    func stop(_ why: String) -> Bool {
        lock.lock()
        guard _state.isActive, let s = session else { lock.unlock(); return false }
        if _state == .recording || _state == .starting { _state = .finishing; lock.broadcast() }
        lock.unlock()
        s.stop(why)
        changed()
        return true
    }

    /// Blocks until the take has ended.
    func waitUntilEnded() {
        lock.lock(); defer { lock.unlock() }
        while session != nil && !ended { lock.wait() }
    }

    func setLayout(_ layout: Layout, transition: LayoutTransition? = nil) {
        let s: TakeSession? = lock.withLock { _layout = layout; return session }
        s?.setLayout(layout, transition: transition)
        changed()
        onEvent?("layout-changed", id, ["kind": layout.kind.rawValue])
    }

    /// Replaces the main output's texts from the next frame on; bad input
    /// (a font that cannot be read or is outside the input root) is a 400.
    func setTexts(_ texts: [TextOverlay]) throws(RequestError) {
        guard let s = lock.withLock({ session }) else { return }
        do { try s.setTexts(texts) } catch {
            guard case .configuration(let e) = error else { throw .badRequest("texts: \(error)") }
            throw .badRequest(TakeRequests.describe(e))
        }
        lock.withLock { _texts = texts }
        changed()
    }

    /// Replaces the main output's image overlays from the next frame on;
    /// an image the take did not read when it started is a 400.
    func setOverlays(_ overlays: [ImageOverlay]) throws(RequestError) {
        guard let s = lock.withLock({ session }) else { return }
        do { try s.setOverlays(overlays) } catch {
            guard case .configuration(let e) = error else { throw .badRequest("overlays: \(error)") }
            throw .badRequest(TakeRequests.describe(e))
        }
        lock.withLock { _overlays = overlays }
        changed()
    }

    func switchSource(_ role: StreamRole, to spec: SourceSpec) {
        lock.withLock { session }?.switchSource(role, to: spec)
        onEvent?("source-switched", id, ["role": role.rawValue, "source": "\(spec)"])
    }

    /// The outputs added while the take ran, open now or removed since.
    var addedOutputs: [OutputSpec] { lock.withLock { _everAdded } }

    /// What the take asks of the machine now: its load with the outputs added and still open.
    var admissionLoad: TakeLoad {
        var l = load
        l.outputs += lock.withLock { _added.sorted { $0.key < $1.key }.map { load.output(for: $0.value) } }
        return l
    }

    /// Adds an output to the running take: 400 when it cannot be opened, 409 once the take is over.
    func addOutput(_ spec: OutputSpec) throws(RequestError) -> Int {
        guard let s = lock.withLock({ session }) else { throw .conflict("take '\(id)': is not running") }
        do {
            let index = try s.addOutput(spec)
            lock.withLock { _added[index] = spec; _everAdded.append(spec) }
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
        guard let summary = lock.withLock({ session })?.removeOutput(index) else { return nil }
        lock.withLock { _added[index] = nil; _removed.insert(index) }
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
        let (s, state, added, removed) = lock.withLock { (session, _state, _added, _removed) }
        guard let s, state == .recording else { throw .conflict("take '\(id)': is \(state.rawValue); only a recording take has a picture") }
        let declared = index >= 0 && index <= configuration.extraOutputs.count
        guard (declared || added[index] != nil) && !removed.contains(index) else { throw .notFound("take '\(id)': has no output \(index)") }
        switch s.snapshot(output: index, timeout: timeout) {
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
        lock.withLock {
            _state = .failed
            _error = "the server stopped while the take was \(previous.rawValue); the output keeps what was written"
            _recovered = recovered
            written = recovered.frames
        }
    }

    private func changed() { onChange?(self) }

    // MARK: - TakeEvents

    func takeLogged(_ line: String) {
        onLog?(id, line)
        if line.hasPrefix("encoder: ") {
            // "encoder: libx264 (why); audio: …" → "libx264"
            let name = line.dropFirst("encoder: ".count).split(separator: ";").first?
                .split(separator: " (").first.map { String($0) }
            lock.withLock { encoder = name }
        }
    }

    func takeProgressed(_ f: TakeFigures) {
        lock.withLock {
            figures = f
            recent.append((f.wallSeconds, f.mediaSeconds))
            while let first = recent.first, f.wallSeconds - first.time > 4 { recent.removeFirst() }
        }
    }

    func takeStarted() {
        let changedState: Bool = lock.withLock {
            guard _state == .starting else { return false }
            _state = .recording
            lock.broadcast()
            return true
        }
        if changedState {
            changed()
            onEvent?("started", id, [:])
        }
    }

    /// A source or a live output went away or came back: an event
    /// (`source-lost`, `source-back`, `source-changed`, `output-lost`, `output-back`).
    func takeStreamChanged(_ change: StreamChange) {
        switch change {
        case .sourceLost(let role, let reason): onEvent?("source-lost", id, ["role": role.rawValue, "reason": reason])
        case .sourceBack(let role): onEvent?("source-back", id, ["role": role.rawValue])
        case .sourceSwitched(let role, let from, let to, let reason):
            onEvent?("source-changed", id, ["role": role.rawValue, "from": from, "to": to, "reason": reason.rawValue])
        case .outputLost(let index, let out, let reason): onEvent?("output-lost", id, ["index": "\(index)", "out": out, "reason": reason])
        case .outputBack(let index, let out, let seconds):
            onEvent?("output-back", id, ["index": "\(index)", "out": out, "seconds": String(format: "%.1f", seconds)])
        }
    }

    func takePrimaryTaken(_ pts: MediaTime) {
        let now = ProcessInfo.processInfo.systemUptime
        lock.withLock { latency.primaryTaken(pts, at: now) }
    }

    func takeWritten(_ pts: MediaTime) {
        let now = ProcessInfo.processInfo.systemUptime
        lock.withLock { latency.written(pts, at: now); written += 1 }
    }

    func takeEnded(_ e: SessionOutcome) {
        lock.withLock {
            _summary = e.summary
            _error = e.failure?.description
            _failure = e.failure
            _state = e.failure == nil ? .finished : .failed
            if let s = e.summary { written = s.frames }
        }
        // The final state is saved (and told) before anyone waiting for the end is woken.
        changed()
        if let f = e.failure { onEvent?("failed", id, ["error": f.description]) }
        else { onEvent?("finished", id, ["frames": "\(e.summary?.frames ?? 0)"]) }
        lock.withLock { ended = true; lock.broadcast() }
    }

    // MARK: - Figures

    /// The realtime factor over the last few seconds, once the take has run for two.
    var recentRealtimeFactor: Double? {
        lock.withLock {
            guard _state == .recording, let a = recent.first, let b = recent.last, b.time - a.time >= 2 else { return nil }
            return (b.media - a.media) / (b.time - a.time)
        }
    }

    /// Cumulative counters for the cost meter.
    var counters: CostMeter.TakeCounters {
        let gpu = lock.withLock { session }?.gpuTotals ?? GPUTotals()
        let frames = lock.withLock { written }
        // Every encoded output renders and encodes its canvas at its rate: the same count as `TakeLoad.megapixelsPerSecond`.
        return CostMeter.TakeCounters(id: id, megapixels: Double(frames) * load.megapixelsPerFrame,
                                      gpuMs: gpu.milliseconds)
    }

    var gpuTotals: GPUTotals { lock.withLock { session }?.gpuTotals ?? GPUTotals() }

    /// A snapshot for the JSON view and the metrics: the configuration as
    /// run, with the main output's overlays and texts as they are now.
    func snapshot() -> TakeSnapshot {
        lock.withLock {
            var configuration = configuration
            configuration.overlays = _overlays
            configuration.texts = _texts
            return TakeSnapshot(id: id, state: _state, created: created, configuration: configuration, layout: _layout,
                         load: load, encoderThreads: encoderThreads, figures: figures, written: written, latency: latency,
                         encoder: _summary?.encoder ?? encoder, error: _error, summary: _summary, recovered: _recovered,
                         added: _added.sorted { $0.key < $1.key }, everAdded: _everAdded)
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
