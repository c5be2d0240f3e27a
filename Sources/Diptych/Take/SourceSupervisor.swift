import Foundation
import DiptychCore
import DiptychMedia

/// One role's sources (docs/ARCHITECTURE.md, "Source recovery"): its
/// priority list, which of them is shown, and the readers ("probes") that
/// reopen a lost source with backoff, stand by below a silent one, or wait
/// for a higher one to deliver steadily. It decides; the input stage adopts
/// what it decides at a frame boundary (the hot-swap path). Every probe
/// opens through the take's opener, so the source policy checks each reopen
/// as it checked the first. Used by the input stage's thread only.
final class SourceSupervisor {
    let role: StreamRole
    private(set) var candidates: [SourceSpec]
    let recovery: SourceRecovery
    /// Makes a reader that opens a source on its own thread.
    private let makeReader: (SourceSpec) -> SourceReader
    private let log: (String) -> Void

    /// The index of the source shown now; nil while the role has lost it.
    private(set) var shown: Int?
    /// The source lost last (what a reopen is measured against).
    private var lostIndex = 0
    /// When the shown source last delivered (or was adopted), monotonic seconds.
    private var lastFrame: Double
    /// When the role lost its source; nil while one is shown.
    private(set) var lostAt: Double?
    private var lostReason = ""
    private var lostByEnd = false
    /// The role gave up (the window passed): nothing is tried any more.
    private(set) var gaveUp = false
    private var probes: [Int: Probe] = [:]
    private(set) var switches = 0
    /// When `poll` last ran.
    private var polledAt = -Double.infinity

    /// A reader trying one source of the list, and what it has delivered.
    private struct Probe {
        var reader: SourceReader?
        var nextAttempt: Double
        var failures = 0
        /// Since when it has delivered without a gap longer than `SourceRecovery.steadyGap`.
        var steadySince: Double?
        var lastFrame: Double?
        /// Its newest frame (older ones are let go as they come).
        var latest: InputFrame?
    }

    /// What the role should do now.
    enum Verdict {
        case none
        /// Show `reader` from `first` on (`from`: the source shown or lost before).
        case adopt(index: Int, reader: SourceReader, first: InputFrame, from: Int, reason: SourceSwitchReason, down: Double, wasLost: Bool)
        /// The window passed with nothing delivered: `ended` when the loss was the stream's end.
        case giveUp(why: String, ended: Bool)
    }

    init(role: StreamRole, candidates: [SourceSpec], shown: Int, recovery: SourceRecovery,
         makeReader: @escaping (SourceSpec) -> SourceReader, log: @escaping (String) -> Void) {
        self.role = role; self.candidates = candidates; self.shown = shown; self.recovery = recovery
        self.makeReader = makeReader; self.log = log
        lastFrame = Self.now()
    }

    static func now() -> Double { ProcessInfo.processInfo.systemUptime }

    var isLost: Bool { lostAt != nil }
    var shownSpec: SourceSpec? { shown.map { candidates[$0] } }
    /// Whether anything is being tried (a poll may switch): a list, or a loss.
    var isActive: Bool { !gaveUp && (candidates.count > 1 || isLost) }

    /// Whether losing the shown source is recovered (reopened, or replaced
    /// from the list): a window is set, and the source is a network stream
    /// or a camera, or the role has a list. A stream of known length that ended has ended.
    func canRecover(ended: Bool, hasLength: Bool) -> Bool {
        guard recovery.window > 0, !gaveUp, let i = shown else { return false }
        if ended && hasLength { return false }
        return candidates.count > 1 || SourceRecovery.isReopened(candidates[i])
    }

    /// The shown source delivered a frame.
    func delivered() { lastFrame = Self.now() }

    /// The shown source is lost (its reader is stopped by the caller).
    func lose(why: String, ended: Bool) {
        guard let i = shown else { return }
        lostIndex = i
        shown = nil
        lostAt = Self.now()
        lostReason = why
        lostByEnd = ended
    }

    /// A hot swap replaced the role's source: the list is that source alone from now on.
    func replace(with spec: SourceSpec) {
        stopProbes()
        candidates = [spec]
        shown = 0
        lostAt = nil
        gaveUp = false
        lastFrame = Self.now()
    }

    /// Runs the probes and says whether the role should show another source now.
    func poll() -> Verdict {
        guard !gaveUp else { return .none }
        let now = Self.now()
        polledAt = now
        let silent = now - lastFrame
        var wanted = Set<Int>()
        if let i = shown {
            wanted.formUnion(0..<i)                                   // waiting to fail back
            if silent >= recovery.grace { wanted.formUnion((i + 1)..<candidates.count) }   // standing by
        } else {
            // Lost: reopen it (a network stream or a camera) and try the others.
            for j in candidates.indices where j != lostIndex || SourceRecovery.isReopened(candidates[j]) { wanted.insert(j) }
        }
        for j in probes.keys where !wanted.contains(j) { stopProbe(j) }
        for j in wanted.sorted() { step(j, now: now) }

        if let i = shown {
            if silent >= recovery.grace, let j = delivering(now: now, where: { $0 > i }) {
                return adopt(j, from: i, reason: .failover, down: silent)
            }
            if let j = (0..<i).first(where: { probes[$0]?.steadySince.map { now - $0 >= recovery.failback } ?? false }),
               delivering(now: now, where: { $0 == j }) != nil {
                return adopt(j, from: i, reason: .failback, down: 0)
            }
            return .none
        }
        guard let lostAt else { return .none }
        let down = now - lastFrame
        // The lost source back at once; another of the list after the grace.
        if let j = delivering(now: now, where: { $0 == lostIndex || down >= recovery.grace }) {
            return adopt(j, from: lostIndex, reason: SourceRecovery.reason(from: lostIndex, to: j), down: down)
        }
        if now - lostAt >= recovery.window {
            gaveUp = true
            stopProbes()
            let what = candidates.count > 1 ? "no source of its list" : "\(candidates[lostIndex])"
            return .giveUp(why: "\(candidates[lostIndex]) \(lostReason); \(what) delivered again within \(Self.seconds(recovery.window)) s",
                           ended: lostByEnd)
        }
        return .none
    }

    /// The earliest time (on `now()`'s clock) after the last `poll` at which
    /// a poll may act though no probe's reader delivered or ended: a probe's
    /// next attempt, the grace's end, the window's, a failback's steady time.
    /// Nil when there is none. (What the readers deliver rings the
    /// `WakeSignal` they were made with.)
    func nextDue() -> Double? {
        guard !gaveUp else { return nil }
        var due = probes.values.compactMap { $0.reader == nil ? $0.nextAttempt : nil }
        if candidates.count > 1 { due.append(lastFrame + recovery.grace) }   // standing by, or another of the list
        if let lostAt { due.append(lostAt + recovery.window) }
        if let i = shown { due += (0..<i).compactMap { probes[$0]?.steadySince.map { $0 + recovery.failback } } }
        return due.filter { $0 > polledAt }.min()
    }

    /// The highest source (lowest index) matching `accept` whose probe has a recent frame.
    private func delivering(now: Double, where accept: (Int) -> Bool) -> Int? {
        probes.keys.sorted().first { j in
            guard accept(j), let p = probes[j], p.latest != nil, let last = p.lastFrame else { return false }
            return now - last <= SourceRecovery.steadyGap
        }
    }

    private func adopt(_ j: Int, from: Int, reason: SourceSwitchReason, down: Double) -> Verdict {
        guard let p = probes.removeValue(forKey: j), let reader = p.reader, let first = p.latest else { return .none }
        let wasLost = isLost
        shown = j
        lostAt = nil
        lastFrame = Self.now()
        switches += 1
        return .adopt(index: j, reader: reader, first: first, from: from, reason: reason, down: down, wasLost: wasLost)
    }

    /// One probe's turn: start an attempt when its backoff has passed, or take what its reader delivered.
    private func step(_ j: Int, now: Double) {
        var p = probes[j] ?? Probe(nextAttempt: now + SourceRecovery.firstBackoff)
        defer { probes[j] = p }
        guard let reader = p.reader else {
            if now >= p.nextAttempt { p.reader = makeReader(candidates[j]) }
            return
        }
        var failure: String?
        while let event = reader.queue.tryPop() {
            switch event {
            case .frame(let f):
                if let last = p.lastFrame, now - last > SourceRecovery.steadyGap { p.steadySince = nil }
                if p.steadySince == nil { p.steadySince = now }
                p.lastFrame = now
                p.latest = f
                p.failures = 0
            case .end: failure = "ended"
            case .failed(let e): failure = "\(e)"
            }
            if failure != nil { break }
        }
        if failure == nil, reader.queue.isClosed { failure = "ended" }
        if let why = failure {
            // Said while the role is lost, and the first time for the others.
            if isLost || p.failures == 0 {
                let wait = SourceRecovery.backoff(afterFailures: p.failures + 1)
                log("\(role.rawValue) source \(candidates[j]): \(why); trying again in \(Self.seconds(wait)) s")
            }
            JoinableThread.detached { reader.stop() }
            p.reader = nil
            p.latest = nil
            p.steadySince = nil
            p.lastFrame = nil
            p.failures += 1
            p.nextAttempt = now + SourceRecovery.backoff(afterFailures: p.failures)
        } else if let last = p.lastFrame, now - last > SourceRecovery.steadyGap {
            p.steadySince = nil
        }
    }

    private func stopProbe(_ j: Int) {
        guard let p = probes.removeValue(forKey: j), let r = p.reader else { return }
        JoinableThread.detached { r.stop() }
    }

    /// Stops every probe (the take ends, the role gave up or was replaced).
    func stopProbes() {
        for j in Array(probes.keys) { stopProbe(j) }
    }

    static func seconds(_ s: Double) -> String {
        s == s.rounded() ? String(Int(s)) : String(format: "%.1f", s)
    }
}
