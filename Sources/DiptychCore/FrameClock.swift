/// Identifies one secondary frame pushed into a `FrameClock`: push order,
/// starting at 1. Opaque to callers apart from ordering and equality.
public struct SecondaryFrameID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }
}

/// How the clock chooses the secondary frame for a primary frame.
public enum PairingMode: Hashable, Sendable {
    /// Hold the most recently pushed frame, whatever its timestamp (the
    /// default; docs/ARCHITECTURE.md, "One clock"). Frames replaced before any tick showed them
    /// are dropped.
    case latest
    /// Pair by nearest timestamp (live sources on one timeline): the pending
    /// or held frame whose pts is nearest the primary's pts, if within
    /// `tolerance`. With none in tolerance the clock holds the newest frame
    /// older than the primary (or the frame already held) and reports it as
    /// not synchronized; frames older than the one shown are dropped.
    case nearest(tolerance: MediaTime)
}

/// What to output before the secondary's first frame arrives.
public enum SecondaryStartPolicy: Hashable, Sendable {
    /// Output primary-only frames until the secondary's first frame.
    case primaryOnly
    /// Answer `.wait` (hold the primary frame, output nothing) for up to this
    /// long after the first tick; then output primary-only frames.
    case wait(upTo: MediaTime)
}

/// What to output once the secondary has ended (`secondaryEnded(now:)`) or
/// stalled (no frame for `FrameClockConfiguration.stallTimeout`).
public enum SecondaryEndPolicy: Hashable, Sendable {
    /// Keep compositing the last frame (its age keeps growing).
    case holdLast
    /// Keep the last frame for this long after the end, then output
    /// primary-only frames ("Single-stream fallback": continue with one stream).
    case primaryOnlyAfter(MediaTime)
}

/// Settings of a `FrameClock`.
public struct FrameClockConfiguration: Hashable, Sendable {
    public var mode: PairingMode
    public var beforeFirstFrame: SecondaryStartPolicy
    public var afterEnd: SecondaryEndPolicy
    /// When set, a secondary that has delivered frames but then none for this
    /// long (by `now`) is treated as ended at `lastArrival + stallTimeout`
    /// until it delivers again (reason `.secondaryStalled`). Its last frame
    /// has then been held for the stall timeout already: `afterEnd`'s hold
    /// applies to an explicit end, not again to a stall.
    public var stallTimeout: MediaTime?
    /// `.nearest` keeps at most this many unshown frames; pushing more drops
    /// the oldest. (`.latest` keeps one.)
    public var maximumPending: Int
    /// Keep every payload the clock lets go of (dropped, superseded, released
    /// at the end) for `takeDiscarded()`, so pooled buffers can be recycled
    /// after their GPU fence. Off by default: payloads are simply released.
    public var collectsDiscarded: Bool

    public init(mode: PairingMode = .latest, beforeFirstFrame: SecondaryStartPolicy = .primaryOnly,
                afterEnd: SecondaryEndPolicy = .holdLast, stallTimeout: MediaTime? = nil,
                maximumPending: Int = 8, collectsDiscarded: Bool = false) {
        self.mode = mode; self.beforeFirstFrame = beforeFirstFrame; self.afterEnd = afterEnd
        self.stallTimeout = stallTimeout; self.maximumPending = max(1, maximumPending)
        self.collectsDiscarded = collectsDiscarded
    }
}

/// Why an output frame has only the primary picture.
public enum PrimaryOnlyReason: Hashable, Sendable {
    /// No secondary frame has arrived yet (or the wait for it ran out).
    case secondaryNotStarted
    /// The secondary ended and `primaryOnlyAfter` ran out.
    case secondaryEnded
    /// The secondary stopped delivering for `stallTimeout` and
    /// `primaryOnlyAfter` ran out.
    case secondaryStalled
}

/// A secondary frame chosen for one output frame.
public struct ClockFrame<Payload> {
    public var id: SecondaryFrameID
    /// The secondary frame's own timestamp.
    public var pts: MediaTime
    public var payload: Payload
    /// `now` when it was pushed.
    public var arrival: MediaTime
    /// `now − arrival` at this tick.
    public var age: MediaTime
    /// Primary pts − secondary pts (meaningful when both share a timeline).
    public var offset: MediaTime
    /// How many output frames have shown it, this one included (1 = first time).
    public var showCount: Int
    /// `.nearest`: within tolerance. `.latest`: always true.
    public var isSynchronized: Bool
}
extension ClockFrame: Sendable where Payload: Sendable {}
extension ClockFrame: Equatable where Payload: Equatable {}

/// The clock's answer for one primary frame.
public enum ClockDecision<Payload> {
    /// Output one frame at `pts` (exactly the primary's) compositing `secondary`.
    case composite(pts: MediaTime, secondary: ClockFrame<Payload>)
    /// Output one frame at `pts` (exactly the primary's) with the primary only.
    case primaryOnly(pts: MediaTime, reason: PrimaryOnlyReason)
    /// Output nothing yet: keep the primary frame and tick again with the
    /// same pts after pushing a secondary frame or once `now` reaches `until`.
    case wait(until: MediaTime)
    /// The primary has ended: the take is over (finalize).
    case endOfTake

    /// The output frame's timestamp, or nil for `.wait` and `.endOfTake`.
    public var outputPTS: MediaTime? {
        switch self {
        case .composite(let p, _), .primaryOnly(let p, _): return p
        case .wait, .endOfTake: return nil
        }
    }
    /// The secondary frame to composite, if any.
    public var secondary: ClockFrame<Payload>? {
        if case .composite(_, let f) = self { return f }
        return nil
    }
}
extension ClockDecision: Sendable where Payload: Sendable {}
extension ClockDecision: Equatable where Payload: Equatable {}

/// What a `FrameClock` has done so far.
public struct FrameClockCounters: Hashable, Sendable {
    /// Output frames (composite + primary-only); one per primary frame.
    public var outputFrames = 0
    public var compositeFrames = 0
    public var primaryOnlyFrames = 0
    /// Ticks answered `.wait` (no output).
    public var waits = 0
    public var secondaryFramesReceived = 0
    /// Distinct secondary frames shown at least once.
    public var secondaryFramesShown = 0
    /// Distinct secondary frames shown more than once.
    public var secondaryFramesRepeated = 0
    /// Extra showings in total (a frame shown 3 times adds 2).
    public var secondaryRepeatShows = 0
    /// Secondary frames let go of before any output frame showed them.
    public var secondaryFramesDropped = 0
    public init() {}
}

/// Decides, for each primary frame, which secondary frame to composite
/// (docs/ARCHITECTURE.md, "One clock": the primary is the clock). Each `tick` for a primary
/// frame yields exactly one output frame with exactly the primary's pts
/// (or `.wait` / `.endOfTake`); the secondary only replaces the frame the
/// clock holds, and its age is tracked.
///
/// `now` is whatever monotonic clock the caller uses, consistently (wall
/// clock for live sources; the media timeline makes file runs deterministic).
/// It drives ages, waits, stall detection and end timeouts.
///
/// Generic over the held payload (a CPU frame, a GPU texture, an id).
/// The clock only holds references; a payload that needs a deferred release
/// (a texture until its fence) handles that itself, or the caller recycles
/// the payloads from `takeDiscarded()`.
///
/// Not synchronized: a value type to be owned and used by one thread or
/// actor (the session's clock thread). It is `Sendable` when `Payload` is.
public struct FrameClock<Payload> {
    struct Entry {
        var id: SecondaryFrameID
        var pts: MediaTime
        var payload: Payload
        var arrival: MediaTime
        var shows = 0
    }

    public private(set) var configuration: FrameClockConfiguration
    public private(set) var counters = FrameClockCounters()
    /// Frames pushed and not shown yet (`.latest`: at most one), oldest first
    /// (`.nearest`: ordered by pts).
    private var pending: [Entry] = []
    /// The frame last shown, held for repeats.
    private var current: Entry?
    private var nextID: UInt64 = 1
    private var firstTick: MediaTime?
    private var lastArrival: MediaTime?
    private var endedAt: MediaTime?
    private var primaryHasEnded = false
    private var discarded: [Payload] = []

    public init(configuration: FrameClockConfiguration = FrameClockConfiguration()) {
        self.configuration = configuration
    }

    /// True once any secondary frame has been pushed.
    public var hasReceivedSecondary: Bool { counters.secondaryFramesReceived > 0 }
    /// The id of the frame currently held for repeats, if any.
    public var heldFrameID: SecondaryFrameID? { current?.id }
    /// Number of frames pushed but not shown yet.
    public var pendingCount: Int { pending.count }

    /// Hands the clock a new secondary frame. In `.latest` mode it replaces
    /// an unshown pending frame (which counts as dropped). Pushing after
    /// `secondaryEnded` resumes the secondary.
    @discardableResult
    public mutating func pushSecondary(_ payload: Payload, pts: MediaTime, now: MediaTime) -> SecondaryFrameID {
        let id = SecondaryFrameID(rawValue: nextID)
        nextID += 1
        counters.secondaryFramesReceived += 1
        lastArrival = now
        endedAt = nil
        let entry = Entry(id: id, pts: pts, payload: payload, arrival: now)
        switch configuration.mode {
        case .latest:
            for old in pending { drop(old) }
            pending = [entry]
        case .nearest:
            let index = pending.firstIndex { $0.pts > pts } ?? pending.endIndex
            pending.insert(entry, at: index)
            while pending.count > configuration.maximumPending { drop(pending.removeFirst()) }
        }
        return id
    }

    /// The secondary stream ended (EOF, disconnect) at `now`. What follows
    /// depends on `afterEnd`. Frames already pushed can still be shown.
    public mutating func secondaryEnded(now: MediaTime) {
        if endedAt == nil { endedAt = now }
    }

    /// Hot swap (docs/ARCHITECTURE.md, "Hot swap"): at `now` a new secondary stream replaces
    /// the old one. Unshown frames of the old stream are dropped; the frame
    /// on screen is held until the new stream's first frame, so output never
    /// stalls. `stallTimeout` counts from `now`, so a new stream that never
    /// delivers still falls back to the primary alone.
    public mutating func replaceSecondary(now: MediaTime) {
        for old in pending { drop(old) }
        pending = []
        endedAt = nil
        if hasReceivedSecondary { lastArrival = now }
    }

    /// The primary stream has ended: every later tick answers `.endOfTake`
    /// and all held payloads are released.
    public mutating func primaryEnded() {
        primaryHasEnded = true
        for old in pending { drop(old) }
        pending = []
        if let c = current { release(c.payload); current = nil }
    }

    /// Payloads let go of since the last call (only with `collectsDiscarded`).
    public mutating func takeDiscarded() -> [Payload] {
        defer { discarded = [] }
        return discarded
    }

    /// Decides what to output for the primary frame with timestamp
    /// `primaryPTS`. Call once per primary frame, with increasing pts (after
    /// `.wait`, call again with the same pts).
    public mutating func tick(primaryPTS: MediaTime, now: MediaTime) -> ClockDecision<Payload> {
        if primaryHasEnded { return .endOfTake }
        if firstTick == nil { firstTick = now }

        var synchronized = true
        switch configuration.mode {
        case .latest:
            if let next = pending.last {
                pending.removeAll()
                supersede(with: next)
            }
        case .nearest(let tolerance):
            synchronized = pickNearest(primaryPTS: primaryPTS, tolerance: tolerance)
        }

        // End or stall of the secondary.
        if let (endTime, reason) = effectiveEnd(now: now), case .primaryOnlyAfter(let timeout) = configuration.afterEnd,
           now - endTime >= (reason == .secondaryStalled ? .zero : timeout) {
            if let c = current { release(c.payload); current = nil }
            return outputPrimaryOnly(primaryPTS, reason)
        }

        guard var shown = current else {
            if !hasReceivedSecondary, case .wait(let upTo) = configuration.beforeFirstFrame, let start = firstTick {
                let deadline = start + upTo
                if now < deadline {
                    counters.waits += 1
                    return .wait(until: deadline)
                }
            }
            return outputPrimaryOnly(primaryPTS, .secondaryNotStarted)
        }
        shown.shows += 1
        if shown.shows == 1 { counters.secondaryFramesShown += 1 }
        if shown.shows == 2 { counters.secondaryFramesRepeated += 1 }
        if shown.shows >= 2 { counters.secondaryRepeatShows += 1 }
        current = shown
        counters.outputFrames += 1
        counters.compositeFrames += 1
        return .composite(pts: primaryPTS, secondary: ClockFrame(
            id: shown.id, pts: shown.pts, payload: shown.payload, arrival: shown.arrival,
            age: now - shown.arrival, offset: primaryPTS - shown.pts, showCount: shown.shows,
            isSynchronized: synchronized))
    }

    // MARK: - Internals

    private mutating func outputPrimaryOnly(_ pts: MediaTime, _ reason: PrimaryOnlyReason) -> ClockDecision<Payload> {
        counters.outputFrames += 1
        counters.primaryOnlyFrames += 1
        return .primaryOnly(pts: pts, reason: reason)
    }

    /// When the secondary counts as ended (explicitly, or by stalling), and why.
    private func effectiveEnd(now: MediaTime) -> (MediaTime, PrimaryOnlyReason)? {
        if let e = endedAt { return (e, .secondaryEnded) }
        if let stall = configuration.stallTimeout, let last = lastArrival, now - last >= stall {
            return (last + stall, .secondaryStalled)
        }
        return nil
    }

    /// Makes `next` the held frame; the previous one is released.
    private mutating func supersede(with next: Entry) {
        if let old = current { release(old.payload) }
        current = next
    }

    private mutating func drop(_ entry: Entry) {
        counters.secondaryFramesDropped += 1
        release(entry.payload)
    }

    private mutating func release(_ payload: Payload) {
        if configuration.collectsDiscarded { discarded.append(payload) }
    }

    /// `.nearest`: chooses the held frame for `primaryPTS`; returns whether
    /// it is within tolerance.
    private mutating func pickNearest(primaryPTS p: MediaTime, tolerance: MediaTime) -> Bool {
        func distance(_ t: MediaTime) -> MediaTime { t < p ? p - t : t - p }
        // Best pending frame within tolerance (ties → the earlier pts).
        var best: Int?
        for (i, e) in pending.enumerated() where distance(e.pts) <= tolerance {
            if let b = best, !(distance(e.pts) < distance(pending[b].pts)) { continue }
            best = i
        }
        if let cur = current, distance(cur.pts) <= tolerance,
           best == nil || !(distance(pending[best!].pts) < distance(cur.pts)) {
            // The held frame is at least as near: keep it; older pending frames can never win later.
            dropPending(where: { $0.pts < cur.pts })
            return true
        }
        if let b = best {
            let chosen = pending[b]
            for e in pending[..<b] { drop(e) }
            pending.removeFirst(b + 1)
            supersede(with: chosen)
            return true
        }
        // Nothing in tolerance. Frames too old for this (and every later)
        // primary frame: the newest of them becomes the held frame.
        if let lastOld = pending.lastIndex(where: { $0.pts < p }) {
            let chosen = pending[lastOld]
            if current == nil || current!.pts < chosen.pts {
                for e in pending[..<lastOld] { drop(e) }
                pending.removeFirst(lastOld + 1)
                supersede(with: chosen)
            } else {
                for e in pending[...lastOld] { drop(e) }
                pending.removeFirst(lastOld + 1)
            }
        }
        return false
    }

    private mutating func dropPending(where predicate: (Entry) -> Bool) {
        var kept: [Entry] = []
        for e in pending { if predicate(e) { drop(e) } else { kept.append(e) } }
        pending = kept
    }
}

extension FrameClock: Sendable where Payload: Sendable {}
extension FrameClock.Entry: Sendable where Payload: Sendable {}
