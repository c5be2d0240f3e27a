import Diptych
import DiptychCore
import DiptychGPU
import DiptychOptions
import Foundation
import Synchronization

/// The takes of one server: creation (checks, output confinement,
/// admission by measured cost), lookup, cost sampling and shutdown.
final class TakeRegistry: Sendable {
    struct Settings: Sendable {
        var maxTakes: Int
        var capacity: Capacity
        var serverGPU: String
        var outputRoot: OutputRoot?
        /// What take sources may read (`--input-root`, `--allow-source-net`).
        var sourcePolicy = SourcePolicy.commandLine
        /// Cores encoder threads are shared out from (this machine's, at most the capacity).
        var encoderCores: Int
        /// `--encoder-threads`: every take's, instead of a share of `encoderCores`.
        var encoderThreads: Int?
        /// `--decode-nice`: the nice value of every take's CPU decoders' threads (nil: the process's).
        var decodeNice: Int?
        /// How long `POST` waits for a take to start before answering `starting`.
        var startWait = 15.0
        /// Ended takes kept in memory (`--keep-finished`); older ones leave it
        /// (the state folder keeps them), their recordings still claimed.
        var keepFinished = 1000
        /// Where takes that leave `decoder` at auto are decoded (`--decode-cores`).
        var placement = DecodePlacement.Facts.none
        /// `--refuse-below`: a running take slower than this (× real time) refuses new ones; 0 never.
        var refuseBelow = 0.9
    }

    /// An ended take no longer kept in memory: what its outputs hold, so no later take writes over them.
    struct Retired: Sendable {
        var id: String
        var state: TakeState
        var recordings: [String]
    }

    let settings: Settings
    let meter: CostMeter
    private let pool: CompositorPool
    /// How busy each shared context's render thread has been (`/metrics`).
    var renderThreadLoads: [RenderThreadLoad] { pool.renderThreadLoads }
    private let store: StateStore?
    private let log: @Sendable (String) -> Void
    private let takeLog: @Sendable (_ take: String, _ line: String) -> Void
    /// `GET /v1/events`.
    let events: EventLog
    private struct State {
        var takes: [String: Take] = [:]
        var order: [String] = []
        var draining = false
        var sampledLast: Set<String> = []
        var admitted = 0
        var refusals: [String: Int] = [:]
        /// File outputs being added to running takes (claimed while they open).
        var reserved: Set<String> = []
        /// Encodes of outputs being added (admitted, not yet open).
        var reservedEncodes: [TakeLoad] = []
        /// Ended takes that left memory (`Settings.keepFinished`), oldest first.
        var retired: [Retired] = []
        var retiredIDs: Set<String> = []
        /// Output frames the retired takes wrote (so `/metrics`' total never goes down).
        var retiredFrames = 0
        /// `Idempotency-Key` of a `POST /v1/takes` → the take it made.
        var idempotency: [String: String] = [:]

        var kept: [Take] { order.compactMap { takes[$0] } }

        /// The oldest ended takes beyond `keepFinished` leave memory;
        /// their recordings stay claimed. Run whenever the takes are looked
        /// at, so what a client sees never holds more.
        mutating func retireEnded(keepFinished: Int) {
            let ended = kept.filter { !$0.state.isActive }
            let excess = ended.count - keepFinished
            guard excess > 0 else { return }
            for t in ended.prefix(excess) {
                retired.append(Retired(id: t.id, state: t.state, recordings: OutputClaims.recordings(of: t)))
                retiredFrames += t.snapshot().written
                retiredIDs.insert(t.id)
                takes[t.id] = nil
            }
            order.removeAll { takes[$0] == nil }
            idempotency = idempotency.filter { takes[$0.value] != nil }
        }
    }
    private let state = Mutex(State())

    /// `takeLog`: a take's own lines, with its id (by default `log`'s, prefixed `take ID: `).
    init(settings: Settings, pool: CompositorPool, meter: CostMeter, store: StateStore?, log: @escaping @Sendable (String) -> Void,
         takeLog: (@Sendable (_ take: String, _ line: String) -> Void)? = nil, events: EventLog = EventLog()) {
        self.settings = settings; self.pool = pool; self.meter = meter; self.store = store; self.log = log
        self.events = events
        self.takeLog = takeLog ?? { log("take \($0): \($1)") }
        for t in store?.load() ?? [] { state.withLock { register(t, in: &$0) } }
    }

    /// Lock held.
    private func register(_ t: Take, in s: inout State) {
        s.takes[t.id] = t
        s.order.append(t.id)
        if let store { t.onChange = { store.save($0) } }
        t.onLog = takeLog
        t.onEvent = { [events] type, take, fields in events.post(type, take: take, fields) }
        s.retireEnded(keepFinished: settings.keepFinished)
    }

    /// The running take furthest behind real time, if one is under `below` (`--refuse-below`).
    private static func slowest(_ active: [Take], below: Double) -> Lagging? {
        active.compactMap { t in t.recentRealtimeFactor.flatMap { $0 < below ? Lagging(id: t.id, realtimeFactor: $0) : nil } }
            .min { $0.realtimeFactor < $1.realtimeFactor }
    }

    func take(_ id: String) throws(RequestError) -> Take {
        let keep = settings.keepFinished
        let (t, gone) = state.withLock { s in s.retireEnded(keepFinished: keep); return (s.takes[id], s.retiredIDs.contains(id)) }
        if let t { return t }
        if gone {
            throw .notFound("take '\(id)': ended and no longer kept in memory (--keep-finished \(settings.keepFinished)); the state folder keeps its record")
        }
        throw .notFound("take '\(id)': no such take")
    }

    /// One page of the takes, oldest first: those in `state` (all without
    /// it), after the take `after`, at most `limit`; and the id to page on
    /// from, when more follow.
    func page(state: TakeState?, limit: Int, after: String?) throws(RequestError) -> (takes: [Take], next: String?) {
        let keep = settings.keepFinished
        var list = self.state.withLock { s in s.retireEnded(keepFinished: keep); return s.kept }
        if let after {
            guard let i = list.firstIndex(where: { $0.id == after }) else {
                throw .badRequest("after '\(after)': no such take (or no longer kept in memory)")
            }
            list = Array(list[(i + 1)...])
        }
        if let state { list = list.filter { $0.state == state } }
        let page = Array(list.prefix(limit))
        return (page, list.count > limit ? page.last?.id : nil)
    }

    var all: [Take] {
        let keep = settings.keepFinished
        return state.withLock { s in s.retireEnded(keepFinished: keep); return s.kept }
    }
    /// The decode cores the running takes placed on the CPU are charged under `model` (`/healthz`).
    func placedDecodeCores(_ model: CostModel) -> Double {
        state.withLock { s in model.decodeCores(of: s.takes.values.filter { $0.state.isActive }.map(\.load)) }
    }

    /// Whether the server is finalizing its takes to stop.
    var isDraining: Bool { state.withLock { $0.draining } }

    /// Why the server is not ready for a take now (`GET /readyz`), or nil:
    /// calibrating or its calibration failed, draining, or a take of the
    /// calibration's size would be refused (the limit, a lagging take, the capacity).
    var unreadiness: String? {
        let model = meter.model
        let (meter, settings) = (self.meter, self.settings)
        return state.withLock { s in
            Admission.unready(calibrated: model != nil, calibrationFailure: meter.failure, draining: s.draining) {
                guard let model else { return nil }
                let active = s.takes.values.filter { $0.state.isActive }
                let lagging = Self.slowest(active, below: settings.refuseBelow)
                let probe = TakeLoad(width: Calibration.canvas.width, height: Calibration.canvas.height, fps: 30)
                if case .failure(let r) = Admission.decide(new: probe, running: active.map(\.admissionLoad) + s.reservedEncodes,
                                                           lagging: lagging, active: active.count, maxTakes: settings.maxTakes,
                                                           model: model, capacity: settings.capacity) { return r }
                return nil
            }
        }
    }
    /// The takes kept and the counts, read together (what `/metrics` shows).
    var snapshot: (takes: [Take], admitted: Int, refusals: [String: Int], retiredFrames: Int) {
        let keep = settings.keepFinished
        return state.withLock { s in s.retireEnded(keepFinished: keep); return (s.kept, s.admitted, s.refusals, s.retiredFrames) }
    }

    // MARK: - Creating a take

    /// Checks the body, admits the take and starts it; returns once it is
    /// recording (or after `startWait` while it is still starting).
    /// With `idempotencyKey`, a key already used returns the take it made
    /// (`existing` true) instead of making another.
    func create(_ body: Data, idempotencyKey: String? = nil) throws(RequestError) -> (take: Take, existing: Bool) {
        if let key = idempotencyKey {
            guard !key.isEmpty, key.count <= 255, key.unicodeScalars.allSatisfy({ $0.value > 32 && $0.value < 127 }) else {
                throw .badRequest("Idempotency-Key '\(key.prefix(64))': expected 1 to 255 printable characters without spaces")
            }
            if let t = state.withLock({ s in s.idempotency[key].flatMap { s.takes[$0] } }) { return (t, true) }
        }
        if state.withLock({ $0.draining }) { throw .unavailable("the server is shutting down") }
        var config = try TakeRequests.configuration(body)
        if config.gpu != "auto" && config.gpu != settings.serverGPU {
            throw .badRequest("gpu '\(config.gpu)': takes share the server's GPU (diptych serve --gpu \(settings.serverGPU))")
        }
        config.gpu = settings.serverGPU
        config.output = try resolve(config.output ?? "", field: "out")
        if let p = config.preview { config.preview = try resolve(p, field: "preview") }
        for i in config.extraOutputs.indices {
            config.extraOutputs[i].out = try resolve(config.extraOutputs[i].out, field: "alsoOut[\(i)].out")
        }

        // Sources: relative paths from the input root, each checked against the policy before anything opens.
        config.primary = sourceSpec(config.primary)
        config.secondary = sourceSpec(config.secondary)
        config.slate = config.slate.map { sourcePath($0) }
        for i in config.secondarySwitches.indices { config.secondarySwitches[i].source = sourceSpec(config.secondarySwitches[i].source) }
        let policy = settings.sourcePolicy
        if let slate = config.slate { _ = try MediaProbe.checked(.url(slate), field: "slate", policy: policy) }
        // Overlay images are inputs too: from the input root, each checked against the policy.
        for i in config.overlays.indices {
            config.overlays[i].image = sourcePath(config.overlays[i].image)
            _ = try MediaProbe.checked(.url(config.overlays[i].image), field: "overlays[\(i)].image", policy: policy)
        }
        for i in config.extraOutputs.indices {
            for j in config.extraOutputs[i].overlays.indices {
                config.extraOutputs[i].overlays[j].image = sourcePath(config.extraOutputs[i].overlays[j].image)
                _ = try MediaProbe.checked(.url(config.extraOutputs[i].overlays[j].image), field: "alsoOut[\(i)].overlays[\(j)].image", policy: policy)
            }
        }
        // Texts' fonts likewise from the input root, each checked against the policy and read once here.
        for i in config.texts.indices { config.texts[i].font = config.texts[i].font.map(sourcePath) }
        for i in config.extraOutputs.indices {
            for j in config.extraOutputs[i].texts.indices { config.extraOutputs[i].texts[j].font = config.extraOutputs[i].texts[j].font.map(sourcePath) }
        }
        do throws(ConfigurationError) { try TextOverlayCheck.check(config, policy: policy) } catch { throw .badRequest(error.description) }
        for (i, s) in config.secondarySwitches.enumerated() {
            try MediaProbe.checkAllowed(s.source, field: "secondarySwitches[\(i)].source", policy: policy)
        }
        let secondaryInfo = try MediaProbe.checked(config.secondary, field: "secondary", policy: policy)
        if let secondaryInfo { try MediaProbe.checkSize(secondaryInfo, field: "secondary") }
        // The take's load at real time: its canvas at the primary's rate.
        let info = try MediaProbe.checked(config.primary, field: "primary", policy: policy)
        if let info { try MediaProbe.checkSize(info, field: "primary") }
        let upright = info.map { $0.size.rotated(config.primaryOrientation.rotation) }
        let canvas = config.resolvedCanvas(primaryUprightSize: upright)
        let load = TakeLoad(config, canvas: canvas, fps: info?.frameRate.fps ?? 30)
        let decode = DecodePlacement.inputMegapixelsPerSecond(config, primary: info, secondary: secondaryInfo)

        let model = try meter.waitForModel().get()
        let (take, existing) = try admit(config: config, load: load, decode: decode, model: model, idempotencyKey: idempotencyKey)
        if existing { return (take, true) }
        store?.saveConfiguration(take)
        store?.save(take)
        takeLog(take.id, "\(load), \(config.primary) + \(config.secondary) → \(config.output ?? "")")
        events.post("created", take: take.id, ["out": config.output ?? ""])
        take.run(pool: pool, sourcePolicy: policy)
        take.waitUntilStarted(timeout: settings.startWait)
        if take.state == .failed && take.summary == nil {
            // Nothing was recorded: the request failed, and no take exists.
            state.withLock { s in
                s.takes[take.id] = nil
                s.order.removeAll { $0 == take.id }
                s.idempotency = s.idempotency.filter { $0.value != take.id }
            }
            store?.remove(take.id)
            throw take.failure ?? .failed(take.error ?? "the take failed to start")
        }
        return (take, false)
    }

    /// The decode placement, the admission decision and the registration,
    /// under one hold of the lock. `decode`: `DecodePlacement.inputMegapixelsPerSecond`.
    private func admit(config: TakeConfiguration, load: TakeLoad, decode: Double?, model: CostModel,
                       idempotencyKey: String?) throws(RequestError) -> (Take, Bool) {
        var load = load
        let placement = settings.placement
        return try state.withLock { (s) throws(RequestError) -> (Take, Bool) in
            // A request with the same key that got here first made the take.
            if let key = idempotencyKey, let t = s.idempotency[key].flatMap({ s.takes[$0] }) { return (t, true) }
            if s.draining { throw .unavailable("the server is shutting down") }
            let active = s.takes.values.filter { $0.state.isActive }
            let running = active.map(\.admissionLoad) + s.reservedEncodes
            let splitting = OutputClaims.splitFields(config)
            for (field, path) in OutputClaims.files(config) {
                if let e = OutputClaims.conflict(field, path, takes: Array(s.takes.values), retired: s.retired, reserved: s.reserved,
                                                 split: splitting.contains(field)) { throw e }
            }
            // Decoded on the CPU while the takes placed there fit the budget (docs/ARCHITECTURE.md, "Where a server decodes").
            var placed: DecodePlacement.Decision?
            if let decode {
                let gpu = DecodePlacement.encodesOnGPU(codec: config.codec, encoder: config.encoder, preset: config.preset, facts: placement)
                placed = DecodePlacement.decide(choice: config.decoder, encodesOnGPU: gpu,
                                                decodeCores: model.decodeCPUSecondsPerMegapixel * decode,
                                                placed: model.decodeCores(of: running), facts: placement)
                // The configuration keeps `auto` (as asked); the take's streams are opened on the CPU (`Take.run`).
                if placed?.cpu == true { load.cpuDecodeMegapixelsPerSecond = decode }
            }
            let lagging = Self.slowest(active, below: settings.refuseBelow)
            let decision = Admission.decide(new: load, running: running, lagging: lagging, active: active.count,
                                            maxTakes: settings.maxTakes, model: model, capacity: settings.capacity)
            switch decision {
            case .failure(let refusal):
                s.refusals[refusal.kind, default: 0] += 1
                log("refused a take (\(load)): \(refusal)")
                throw refusal.requestError
            case .success:
                s.admitted += 1
            }
            var id: String
            repeat { id = String(format: "%08x", UInt32.random(in: 0...UInt32.max)) } while s.takes[id] != nil
            let threads = settings.encoderThreads ?? Admission.encoderThreads(cores: settings.encoderCores, active: active.count)
            let decoding = TakeDecoding(admitted: placed, inputMegapixelsPerSecond: decode ?? 0,
                                        threads: Admission.decoderThreads(cores: settings.encoderCores, active: active.count),
                                        nice: settings.decodeNice)
            let t = Take(id: id, configuration: config, load: load, encoderThreads: threads, decoding: decoding)
            register(t, in: &s)
            if let placed { takeLog(id, "decoding: \(placed)") }
            if let key = idempotencyKey { s.idempotency[key] = id }
            return (t, false)
        }
    }
    /// Adds `spec` to the running `take`, unless another output of any take
    /// writes that file (409) or one more encode of its canvas does not fit
    /// the capacity (503, as a new take would be refused); returns the output's index.
    func addOutput(_ spec: OutputSpec, to take: Take) throws(RequestError) -> Int {
        var spec = spec
        // Overlay images from the input root, as the take's were (the take shows only those it read at the start).
        for i in spec.overlays.indices { spec.overlays[i].image = sourcePath(spec.overlays[i].image) }
        for i in spec.texts.indices { spec.texts[i].font = spec.texts[i].font.map(sourcePath) }
        let model = try meter.waitForModel().get()
        let file = OutputClaims.isFile(spec.out)
        let added = take.load.output(for: spec)
        let encode = TakeLoad(width: added.width, height: added.height, fps: added.fps)
        let (capacity, takeLog) = (settings.capacity, self.takeLog)
        let refusal: RequestError? = state.withLock { s in
            if file, let e = OutputClaims.conflict("out", spec.out, takes: Array(s.takes.values), retired: s.retired, reserved: s.reserved,
                                                   split: spec.splits) { return e }
            let active = s.takes.values.filter { $0.state.isActive }
            let lagging = Self.slowest(active, below: settings.refuseBelow)
            let decision = Admission.decide(new: encode, running: active.map(\.admissionLoad) + s.reservedEncodes, lagging: lagging,
                                            active: 0, maxTakes: Int.max, model: model, capacity: capacity)
            if case .failure(let e) = decision {
                s.refusals[e.kind, default: 0] += 1
                takeLog(take.id, "refused an output (\(encode)): \(e)")
                return .unavailable("out '\(spec.out)': \(e)")
            }
            if file { s.reserved.insert(spec.out) }
            s.reservedEncodes.append(encode)
            return nil
        }
        if let refusal { throw refusal }
        defer {
            state.withLock { s in
                if file { _ = s.reserved.remove(spec.out) }
                if let i = s.reservedEncodes.firstIndex(of: encode) { s.reservedEncodes.remove(at: i) }
            }
        }
        return try take.addOutput(spec)
    }

    /// `POST /v1/takes/{id}/outputs`: `{"out": URL, "format"?: ..., "layout"?: {...}}`, its path confined as a take's `out`.
    func outputSpec(_ body: Data) throws(RequestError) -> OutputSpec {
        let json: JSONValue
        do { json = try JSONValue(parsing: body, source: "request body") } catch { throw .badRequest(error.description) }
        var spec: OutputSpec
        do { spec = try OptionParser.decodeOutput(json, field: "output") } catch { throw .badRequest(error.description) }
        if let l = spec.layout, let e = l.validationError() { throw .badRequest(e.description) }
        guard spec.container != nil else {
            throw .badRequest("out '\(spec.out)': cannot tell the container from the name; use .mp4, .mkv, .ts, .m3u8, rtmp:// or srt://")
        }
        spec.out = try resolve(spec.out, field: "out")
        if let id = FileIdentity(spec.out), let why = id.unwritableReason {
            throw .badRequest("out '\(spec.out)': \(why)")
        }
        return spec
    }

    /// A source as the take opens it: a relative file path taken from the input root.
    func sourceSpec(_ spec: SourceSpec) -> SourceSpec {
        guard case .url(let u) = spec else { return spec }
        return .url(sourcePath(u))
    }

    /// `overlays` with each image from under the input root (a PATCH's).
    func resolvingImages(_ overlays: [ImageOverlay]) -> [ImageOverlay] {
        overlays.map { var o = $0; o.image = sourcePath(o.image); return o }
    }

    /// `texts` with each named font from under the input root (a PATCH's).
    func resolvingFonts(_ texts: [TextOverlay]) -> [TextOverlay] {
        texts.map { var t = $0; t.font = t.font.map(sourcePath); return t }
    }

    private func sourcePath(_ value: String) -> String {
        guard let root = settings.sourcePolicy.inputRoot, SourcePolicy.ffmpegProtocol(of: value) == "file",
              !value.hasPrefix("/"), !value.lowercased().hasPrefix("file:") else { return value }
        return root + "/" + value
    }

    /// A take's output or preview path: under the output root when one is
    /// set, else made absolute from the server's folder.
    private func resolve(_ value: String, field: String) throws(RequestError) -> String {
        if let root = settings.outputRoot { return try root.confine(value, field: field).get() }
        // The server's standard output is its log: no take writes there.
        if value.lowercased().hasPrefix("pipe:") {
            throw .badRequest("\(field) '\(value)': a server take cannot write to a pipe; use a file or an rtmp://, srt:// or udp:// URL")
        }
        if value.contains("://") || OutputRoot.scheme(of: value) != nil { return value }
        // Absolute or relative, one spelling per file: `/d/./x.mp4` and `/d/x.mp4` are the same output.
        return URL(fileURLWithPath: value).standardizedFileURL.path
    }

    // MARK: - Running

    /// One cost sample (called every second): the process CPU time and the
    /// counters of the takes running now or at the last sample.
    func sampleCosts() {
        let (current, ids): ([Take], Set<String>) = state.withLock { s in
            let active = s.takes.values.filter { $0.state.isActive || s.sampledLast.contains($0.id) }
            return (active, Set(s.takes.values.filter { $0.state.isActive }.map(\.id)))
        }
        meter.sample(time: ProcessInfo.processInfo.systemUptime, cpu: ProcessCPU.seconds(), takes: current.map(\.counters))
        let keep = settings.keepFinished
        state.withLock { s in s.sampledLast = ids; s.retireEnded(keepFinished: keep) }
        moveDecodingWhereCoresHaveRoom()
    }

    /// Once the placed takes have measured what decoding costs, moves
    /// running takes left to NVDEC to the CPU while the decode budget holds
    /// them at that figure (`DecodePlacement.moves`; docs/ARCHITECTURE.md,
    /// "Where a server decodes"). Under the lock, as admission places.
    func moveDecodingWhereCoresHaveRoom() {
        let facts = settings.placement
        // The model's decode figure is the measured one once there is one.
        guard facts.budget > 0, meter.learnedDecodeFigure != nil, let model = meter.model else { return }
        let moved: [(take: Take, decision: DecodePlacement.Decision)] = state.withLock { s in
            let active = s.takes.values.filter { $0.state.isActive }
            let candidates = active.filter(\.decodingMovable).sorted { $0.created < $1.created }
            guard !candidates.isEmpty else { return [] }
            let cores = candidates.map { (take: $0, cores: model.decodeCPUSecondsPerMegapixel * $0.decoding.inputMegapixelsPerSecond) }
            return DecodePlacement.moves(cores, placed: model.decodeCores(of: active.map(\.admissionLoad)), facts: facts)
                .filter { $0.take.decoding.moveToCPU($0.decision) }
        }
        for (t, decision) in moved {
            takeLog(t.id, "decoding: \(decision)")
            t.changed()
        }
    }

    /// Stops accepting takes, asks every active one to finalize and waits for all.
    func shutdown(reason: String) {
        let active: [Take] = state.withLock { s in
            s.draining = true
            return s.kept.filter { $0.state.isActive }
        }
        if !active.isEmpty { log("finalizing \(active.count) takes (\(reason))") }
        for t in active { t.stop(reason) }
        for t in active { t.waitUntilEnded() }
        // Every event stream ends once the takes' last events are posted.
        events.close()
        pool.shutdown()
    }
}

extension TakeLoad {
    /// A take's load at real time: its canvas at the primary's rate, and
    /// each `alsoOut` at its own size and rate.
    init(_ config: TakeConfiguration, canvas: PixelSize, fps: Double) {
        self.init(width: canvas.width, height: canvas.height, fps: fps, outputs: [])
        outputs = config.extraOutputs.map { output(for: $0) }
    }

    /// Output `spec`'s load in this take: its `size` (else the take's canvas) at the take's rate over its `rateDivisor`.
    func output(for spec: OutputSpec) -> OutputLoad {
        output(width: spec.encoding.size?.width, height: spec.encoding.size?.height, rateDivisor: spec.encoding.divisor)
    }
}
