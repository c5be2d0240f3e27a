import Foundation
import DiptychCore
import DiptychMedia

/// What the input stage needs to know of the take.
struct InputSettings {
    var primarySpec: SourceSpec
    var primaryOrientation: Orientation
    var secondaryOrientation: Orientation
    var frameRate: FrameRate
    var primaryTimeout: Double
    var secondaryTimeout: Double
    var switches: [SecondarySwitch]
    /// Both streams' timestamps are on one clock (a host's pushes): the
    /// secondary is rebased on the primary's first frame, not its own.
    var sharedClock: Bool
    /// The priority list of each role (the first entry the configured
    /// source) and the one shown at the start (the first that opened).
    var primarySources: [SourceSpec] = []
    var secondarySources: [SourceSpec] = []
    var primaryShown = 0
    var secondaryShown = 0
    /// How lost sources are reopened and lists fail over and back.
    var recovery = SourceRecovery(window: 0)
    /// Opens a stream of `role` (a hot swap's, a reopen, another of the list),
    /// within its role's timeout; the `OpenCancel` stops an open in progress.
    var open: @Sendable (StreamRole, SourceSpec, OpenCancel) throws(MediaError) -> any TakeInput
}

/// One primary frame and the secondary frame the clock pairs with it.
struct PairedFrame {
    var primary: InputFrame
    var primaryOrientation: Orientation
    var secondary: ClockFrame<InputFrame>?
    var secondaryOrientation: Orientation
}

/// The take's inputs: the primary reader (the clock), the secondary reader
/// and the frame clock that holds its latest frame, hot swaps of either
/// stream, and scheduled secondary switches (docs/ARCHITECTURE.md, "One
/// clock" and "Hot swap"). Everything is rebased onto the take's timeline,
/// which starts at zero with the first primary frame. Used by one thread.
final class InputStage {
    let settings: InputSettings
    private let log: (String) -> Void
    private let warn: (String) -> Void
    private let change: (StreamChange) -> Void
    private let isStopRequested: () -> Bool
    /// Rung by a stop request and by the primary's readers and probes as they
    /// deliver or end: what the stage waits on while its primary is silent or lost.
    /// (Every reader that can become the primary is made with it: the take's
    /// first, a hot swap's, the supervisor's.)
    private let wake: WakeSignal

    private var primary: StreamCursor
    private var pendingPrimary: SourceReader?
    private var pendingPrimarySince = Date()
    private var secondary = SecondaryState()
    private var pendingSecondary: SourceReader?
    /// When the pending secondary is a scheduled switch, opened ahead of time:
    /// the take time at which it replaces the current one.
    private var pendingSecondaryAt: MediaTime?
    private var scheduled: [SecondarySwitch]
    private(set) var clock: FrameClock<InputFrame>
    private(set) var hotSwaps = 0
    /// Each role's list, reopens and failovers (docs/ARCHITECTURE.md, "Source recovery").
    private var primarySources: SourceSupervisor
    private var secondarySources: SourceSupervisor?
    /// Every change of source, for the summary.
    private(set) var sourceSwitches: [SourceSwitchRecord] = []
    /// The first primary frame's own timestamp: the take's zero on the
    /// source's (or host's) timeline.
    private(set) var timelineOrigin: MediaTime?

    init(primary: SourceReader, secondary: SourceReader?, settings: InputSettings, clock: FrameClockConfiguration,
         log: @escaping (String) -> Void, warn: @escaping (String) -> Void, change: @escaping (StreamChange) -> Void = { _ in },
         isStopRequested: @escaping () -> Bool, wake: WakeSignal) {
        self.settings = settings
        self.log = log; self.warn = warn; self.change = change; self.isStopRequested = isStopRequested; self.wake = wake
        self.primary = StreamCursor(reader: primary, orientation: Self.orientation(primary.info, settings.primaryOrientation))
        if let s = secondary {
            self.secondary.reader = s
            self.secondary.orientation = Self.orientation(s.info, settings.secondaryOrientation)
        }
        scheduled = settings.switches.sorted { $0.time < $1.time }
        self.clock = FrameClock(configuration: clock)
        let open = settings.open
        func readers(_ role: StreamRole) -> (SourceSpec) -> SourceReader {
            { [wake = role == .primary ? wake : nil] spec in
                SourceReader(opening: spec, duration: nil, capacity: 4, wake: wake, open: { s, _, cancel throws(MediaError) in try open(role, s, cancel) })
            }
        }
        primarySources = SourceSupervisor(role: .primary, candidates: settings.primarySources.isEmpty ? [primary.spec] : settings.primarySources,
                                          shown: settings.primaryShown, recovery: settings.recovery, makeReader: readers(.primary), log: log)
        if let s = secondary {
            secondarySources = SourceSupervisor(role: .secondary, candidates: settings.secondarySources.isEmpty ? [s.spec] : settings.secondarySources,
                                                shown: settings.secondaryShown, recovery: settings.recovery, makeReader: readers(.secondary), log: log)
        }
        self.primary.live = TakeRun.isLive(primary.spec) && !settings.sharedClock
    }

    /// A configured rotation wins over the stream's metadata; mirror is configured only.
    static func orientation(metadata: Orientation, configured: Orientation) -> Orientation {
        Orientation(rotation: configured.rotation != .r0 ? configured.rotation : metadata.rotation,
                    mirrored: configured.mirrored != metadata.mirrored)
    }
    private static func orientation(_ info: SourceInfo?, _ configured: Orientation) -> Orientation {
        orientation(metadata: info?.orientation ?? .identity, configured: configured)
    }

    enum PrimaryEvent {
        case frame(InputFrame)
        case stop(StopReason)
        /// No frame by the hold deadline: a live output should hold its last frame.
        case late
    }

    /// When the primary last delivered (or the take started waiting for it).
    private var lastArrival = Date()

    /// Moves the primary's later frames `d` later on the take's timeline
    /// (after frames were held for it on live outputs): its next frame starts
    /// a new timeline right after the held ones.
    func shiftPrimary(by d: MediaTime) {
        primary.base = primary.base + d
        primary.held = true
    }

    /// What each role shows now (`TakeProgress.sources`).
    var sourceStatus: [SourceStatus] {
        [primarySources, secondarySources].compactMap { s in
            s.map { SourceStatus(role: $0.role.rawValue, source: $0.shownSpec?.description, index: $0.shown,
                                 listed: $0.candidates.count, lost: $0.isLost, switches: $0.switches) }
        }
    }

    /// Records and tells a change of `role`'s source, adopted at take time `at`.
    private func noteSwitch(_ role: StreamRole, at: MediaTime, from: SourceSpec, to: SourceSpec, reason: SourceSwitchReason,
                            down: Double, wasLost: Bool) {
        sourceSwitches.append(SourceSwitchRecord(role: role.rawValue, at: at.seconds, from: from.description, to: to.description,
                                                 reason: reason, downSeconds: down))
        let what: String
        switch reason {
        case .reconnect: what = "\(to) is back after \(String(format: "%.1f", down)) s (reopened)"
        case .failover: what = "failed over from \(from) to \(to) after \(String(format: "%.1f", down)) s without frames"
        case .failback: what = "failed back from \(from) to \(to) (it delivered steadily for \(SourceSupervisor.seconds(settings.recovery.failback)) s)"
        }
        log("\(role.rawValue) \(what), at \(String(format: "%.3f", at.seconds)) s")
        change(.sourceSwitched(role, from: from.description, to: to.description, reason: reason))
        if wasLost { change(.sourceBack(role)) }
    }

    /// The shown primary is lost: when its role recovers it, its reader is
    /// stopped and reopening (or the list) begins; false when the take should end.
    private func losePrimary(_ why: String, ended: Bool) -> Bool {
        guard primarySources.canRecover(ended: ended, hasLength: primary.reader.info?.duration != nil) else { return false }
        let old = primary.reader
        JoinableThread.detached { old.stop() }
        primarySources.lose(why: why, ended: ended)
        let list = primarySources.candidates.count > 1 ? " (and trying the rest of its list)" : ""
        warn("primary \(old.spec) \(why); reopening it\(list) for up to \(SourceSupervisor.seconds(settings.recovery.window)) s: "
             + "live outputs hold its last frame, files pause")
        change(.sourceLost(.primary, reason: why))
        return true
    }

    /// Shows `reader` as the primary from `first` on: a new timeline right after the last output frame.
    private func adoptPrimary(_ reader: SourceReader, first: InputFrame, lastPTS: MediaTime?, from: Int, reason: SourceSwitchReason,
                              down: Double, wasLost: Bool) -> InputFrame {
        let previous = primarySources.candidates[from]
        if primary.reader !== reader {
            let old = primary.reader
            JoinableThread.detached { old.stop() }
        }
        primary = StreamCursor(reader: reader, orientation: Self.orientation(reader.info, settings.primaryOrientation))
        primary.live = TakeRun.isLive(reader.spec) && !settings.sharedClock
        primary.base = lastPTS.map { $0 + settings.frameRate.frameDuration } ?? .zero
        primary.firstPTS = first.pts
        primary.lastRaw = first.pts
        lastArrival = Date()
        if timelineOrigin == nil { timelineOrigin = first.pts }
        noteSwitch(.primary, at: primary.base, from: previous, to: reader.spec, reason: reason, down: down, wasLost: wasLost)
        return primary.rebased(first)
    }

    // MARK: The primary

    /// The next primary frame on the take's timeline, or why the take ends.
    /// Nil means "nothing yet, ask again" (a primary swap is pending, or a
    /// stop was requested while the primary was silent). `lastPTS` is the
    /// last output frame's time (a swapped-in primary continues after it).
    func nextPrimary(lastPTS: MediaTime?, holdDeadline: UInt64? = nil) -> PrimaryEvent? {
        if let pending = pendingPrimary {
            switch pending.queue.tryPop() {
            case .frame(let f)?:
                let old = primary.reader
                JoinableThread.detached { old.stop() }
                primary = StreamCursor(reader: pending, orientation: Self.orientation(pending.info, settings.primaryOrientation))
                primary.base = (lastPTS ?? .zero) + settings.frameRate.frameDuration
                primary.firstPTS = f.pts
                lastArrival = Date()
                primary.lastRaw = f.pts
                primary.live = TakeRun.isLive(pending.spec) && !settings.sharedClock
                pendingPrimary = nil
                hotSwaps += 1
                primarySources.replace(with: pending.spec)
                log("primary switched to \(pending.spec)")
                return .frame(primary.rebased(f))
            case .failed(let e)?:
                abandon(pending, role: .primary, because: "\(e)")
                pendingPrimary = nil
            case .end?:
                abandon(pending, role: .primary, because: "the stream is empty")
                pendingPrimary = nil
            case nil:
                break
            }
        }
        if let pending = pendingPrimary, Date().timeIntervalSince(pendingPrimarySince) > settings.primaryTimeout {
            abandon(pending, role: .primary, because: "it delivered nothing for \(settings.primaryTimeout) s")
            pendingPrimary = nil
        }
        let swapping = pendingPrimary != nil
        let queue = primary.reader.queue
        var event: ReaderEvent?
        if swapping {
            // At most 20 ms, then back to the render loop, which serves the take's other requests while the swap is pending.
            event = queue.pop(timeout: 0.02)
            // The old primary has ended: wait on the new one instead (woken by
            // its first frame, which the next call takes, or by its end).
            if event == nil && queue.isClosed, let pending = pendingPrimary { pending.queue.waitForElement(timeout: 0.02) }
        } else {
            // Waits on `wake` while the primary is silent: its reader rings it
            // for each frame and at its end, and a stop request rings it too.
            let deadline = lastArrival.addingTimeInterval(settings.primaryTimeout)
            while true {
                // Read before anything waited for is looked at: what changes after rings again.
                let rung = wake.rings
                // The role's list and reopens: a lost primary waits for them; a shown one may fail over or back.
                if primarySources.isActive {
                    switch primarySources.poll() {
                    case .adopt(_, let reader, let first, let from, let reason, let down, let wasLost):
                        return .frame(adoptPrimary(reader, first: first, lastPTS: lastPTS, from: from, reason: reason, down: down, wasLost: wasLost))
                    case .giveUp(let why, let ended):
                        return .stop(ended ? .endOfPrimary : .primaryInterrupted(why))
                    case .none:
                        break
                    }
                }
                if primarySources.isLost {
                    if isStopRequested() { return nil }
                    let now = LiveTiming.now()
                    if let hold = holdDeadline, now >= hold { return .late }
                    // Until a probe's reader delivers or ends or a stop is requested (each rings `wake`), or
                    // the supervisor's next step on the clock (a backoff, the grace, the window), or the hold deadline.
                    let due = [primarySources.nextDue().map { $0 - SourceSupervisor.now() }, holdDeadline.map { Double($0 - now) / 1e9 }]
                    wake.wait(after: rung, timeout: due.compactMap { $0 }.min())
                    continue
                }
                // Returns queued frames even after the reader closed the queue; nil once drained.
                event = queue.tryPop()
                if event != nil || queue.isClosed { break }
                if isStopRequested() { return nil }
                let silentFor = deadline.timeIntervalSinceNow
                if silentFor <= 0 {
                    let why = "delivered nothing for \(settings.primaryTimeout) s"
                    if losePrimary(why, ended: false) { return nil }
                    return .stop(.primaryInterrupted("\(primary.reader.spec) \(why)"))
                }
                let now = LiveTiming.now()
                if let hold = holdDeadline, now >= hold { return .late }
                // Until the primary delivers or ends, a probe delivers or ends, or a stop is requested (each
                // rings `wake`), or the supervisor's next step on the clock, the hold deadline, the primary's timeout.
                let due = [silentFor, primarySources.nextDue().map { $0 - SourceSupervisor.now() }, holdDeadline.map { Double($0 - now) / 1e9 }]
                wake.wait(after: rung, timeout: due.compactMap { $0 }.min())
            }
        }
        switch event {
        case .frame(let f)?:
            lastArrival = Date()
            primarySources.delivered()
            if primary.firstPTS == nil { primary.firstPTS = f.pts }
            if timelineOrigin == nil { timelineOrigin = f.pts }
            // A new timeline after held frames, or where a live source's timestamps restart, jump or wrap.
            if let raw = primary.lastRaw, let last = lastPTS, !swapping {
                let jumped = primary.live && SourceRecovery.isDiscontinuity(previous: raw, next: f.pts, frameDuration: settings.frameRate.frameDuration)
                if jumped || primary.held {
                    if jumped {
                        log(String(format: "primary timestamps jumped from %.3f s to %.3f s (a new timeline); rebased at %.3f s",
                                   raw.seconds, f.pts.seconds, (last + settings.frameRate.frameDuration).seconds))
                    }
                    primary.base = last + settings.frameRate.frameDuration
                    primary.firstPTS = f.pts
                }
            }
            primary.held = false
            primary.lastRaw = f.pts
            return .frame(primary.rebased(f))
        case .end?, nil:
            if swapping { return nil }
            if losePrimary("ended", ended: true) { return nil }
            return .stop(.endOfPrimary)
        case .failed(let e)?:
            if swapping { return nil }
            if losePrimary("failed: \(e)", ended: false) { return nil }
            return .stop(.primaryInterrupted("\(e)"))
        }
    }

    /// What `role`'s audio is read from now, and its shift onto the take's
    /// timeline (the one its video frames get); nil while the role has no
    /// audio to give: no source, lost or held, not yet delivering, or a
    /// source without an audio stream (docs/ARCHITECTURE.md, "Take audio").
    func audioFeed(_ role: StreamRole) -> AudioFeed? {
        switch role {
        case .primary:
            guard !primarySources.isLost, !primary.held, let first = primary.firstPTS,
                  let track = primary.reader.audioTrack else { return nil }
            return AudioFeed(track: track, offset: primary.base - first)
        case .secondary:
            guard let reader = secondary.reader, !secondary.ended, let first = secondary.firstPTS,
                  let track = reader.audioTrack else { return nil }
            return AudioFeed(track: track, offset: secondary.base - first)
        }
    }

    var primaryOrientation: Orientation { primary.orientation }
    /// Whether the primary shown now is a live source (not a file or pattern).
    var primaryIsLive: Bool { TakeRun.isLive(primary.reader.spec) }
    /// Whether a secondary stream is being read (or switched to, or reopened).
    var hasSecondary: Bool { secondary.reader != nil || pendingSecondary != nil }

    // MARK: Pairing

    /// The secondary frame shown with the primary frame at `t` (the clock's
    /// decision), after starting any switch scheduled by then.
    func pair(_ frame: InputFrame) -> PairedFrame {
        let t = frame.pts
        startScheduledSwitches(at: t)
        pumpSecondary(until: t)
        let decision = clock.tick(primaryPTS: t, now: t)
        return PairedFrame(primary: frame, primaryOrientation: primary.orientation,
                           secondary: decision.secondary, secondaryOrientation: secondary.orientation)
    }

    /// Scheduled switches are opened ahead of time, so the new stream takes
    /// over exactly at its time; removing the secondary (`S=none`) happens at S.
    private func startScheduledSwitches(at t: MediaTime) {
        while let s = scheduled.first, s.source == .none, s.time <= t.seconds {
            scheduled.removeFirst()
            beginSwitch(.secondary, to: .none, at: t)
        }
        if pendingSecondary == nil, let s = scheduled.first, s.source != .none {
            scheduled.removeFirst()
            pendingSecondary = SourceReader(opening: s.source, duration: nil, open: opener(.secondary))
            pendingSecondaryAt = MediaTime(seconds: s.time)
            log("secondary switches to \(s.source) at \(s.time) s")
        }
    }

    /// Starts replacing `role`'s stream with `spec` (`none` removes the secondary at once).
    func beginSwitch(_ role: StreamRole, to spec: SourceSpec, at now: MediaTime) {
        switch role {
        case .primary:
            if let p = pendingPrimary { JoinableThread.detached { p.stop() } }
            pendingPrimary = SourceReader(opening: spec, duration: nil, wake: wake, open: opener(.primary))
            pendingPrimarySince = Date()
            log("switching primary to \(spec)")
        case .secondary:
            if let p = pendingSecondary { JoinableThread.detached { p.stop() } }
            pendingSecondary = nil
            pendingSecondaryAt = nil
            if spec == .none {
                if let r = secondary.reader { JoinableThread.detached { r.stop() } }
                secondarySources?.stopProbes()
                secondarySources = nil
                secondary = SecondaryState()
                clock.secondaryEnded(now: now)
                hotSwaps += 1
                log("secondary removed")
                return
            }
            pendingSecondary = SourceReader(opening: spec, duration: nil, open: opener(.secondary))
            log("switching secondary to \(spec)")
        }
    }

    /// The take's opener for `role`, as a reader calls it.
    private func opener(_ role: StreamRole) -> @Sendable (SourceSpec, Double?, OpenCancel) throws(MediaError) -> any TakeInput {
        let open = settings.open
        return { spec, _, cancel throws(MediaError) in try open(role, spec, cancel) }
    }

    /// A pending switch whose stream failed before its first frame: the current stream stays.
    private func abandon(_ reader: SourceReader, role: StreamRole, because why: String) {
        warn("\(role) switch to \(reader.spec) failed: \(why); keeping the current stream")
        JoinableThread.detached { reader.stop() }
    }

    /// Feeds the clock every secondary frame due at `t`. Files are paced by
    /// timestamp, so the take is deterministic; a source that delivers
    /// nothing for `secondaryTimeout` wall seconds counts as stalled and is no
    /// longer waited for (the clock then falls back to the primary alone
    /// after the same time on the take's timeline).
    private func pumpSecondary(until t: MediaTime) {
        if let pending = pendingSecondary, pendingSecondaryAt.map({ t >= $0 }) ?? true {
            // A scheduled switch is waited for (as file sources are), once, up to the timeout.
            let event = pendingSecondaryAt != nil ? pending.queue.pop(timeout: settings.secondaryTimeout) : pending.queue.tryPop()
            let switchTime = pendingSecondaryAt ?? t
            pendingSecondaryAt = nil
            switch event {
            case .frame(let f)?:
                if let old = secondary.reader { JoinableThread.detached { old.stop() } }
                var s = SecondaryState()
                s.reader = pending
                s.orientation = Self.orientation(pending.info, settings.secondaryOrientation)
                s.base = switchTime
                s.firstPTS = f.pts
                var first = f
                first.pts = switchTime
                s.next = first
                secondary = s
                pendingSecondary = nil
                clock.replaceSecondary(now: t)
                hotSwaps += 1
                if let sup = secondarySources { sup.replace(with: pending.spec) } else {
                    secondarySources = SourceSupervisor(role: .secondary, candidates: [pending.spec], shown: 0, recovery: settings.recovery,
                                                        makeReader: { [opener = opener(.secondary)] spec in
                                                            SourceReader(opening: spec, duration: nil, open: opener) }, log: log)
                }
                log("secondary switched to \(pending.spec) at \(String(format: "%.3f", t.seconds)) s")
            case .failed(let e)?:
                abandon(pending, role: .secondary, because: "\(e)")
                pendingSecondary = nil
            case .end?:
                abandon(pending, role: .secondary, because: "the stream is empty")
                pendingSecondary = nil
            case nil:
                break
            }
        }
        if let sup = secondarySources, sup.isActive {
            switch sup.poll() {
            case .adopt(_, let reader, let first, let from, let reason, let down, let wasLost):
                adoptSecondary(reader, first: first, at: t, from: from, reason: reason, down: down, wasLost: wasLost)
            case .giveUp(let why, _):
                warn("secondary \(why); primary only from \(String(format: "%.3f", t.seconds)) s")
            case .none:
                break
            }
        }
        guard let reader = secondary.reader else { return }
        // A live secondary is waited for a frame time at most (the take never stops for it);
        // its stall is measured on the wall clock since its last frame.
        let live = TakeRun.isLive(reader.spec) && !settings.sharedClock
        while true {
            if secondary.next == nil && !secondary.ended {
                let wait = secondary.stalled ? 0 : live ? min(settings.secondaryTimeout, settings.frameRate.frameDuration.seconds) : settings.secondaryTimeout
                let event = wait > 0 ? reader.queue.pop(timeout: wait) : reader.queue.tryPop()
                switch event {
                case .frame(var f)?:
                    if let last = secondary.lastRaw, !settings.sharedClock, TakeRun.isLive(reader.spec),
                       f.pts < last || f.pts - last > SecondaryState.discontinuity {
                        log(String(format: "secondary timestamps jumped from %.3f s to %.3f s (a new timeline); rebased at %.3f s",
                                   last.seconds, f.pts.seconds, t.seconds))
                        secondary.base = t
                        secondary.firstPTS = f.pts
                    }
                    secondary.lastRaw = f.pts
                    // Streams on one clock are both rebased on the primary's first frame.
                    let first = secondary.firstPTS ?? (settings.sharedClock ? primary.firstPTS : nil) ?? f.pts
                    secondary.firstPTS = first
                    f.pts = secondary.base + (f.pts - first)
                    secondary.next = f
                    secondary.lastArrival = Date()
                    secondarySources?.delivered()
                    if secondary.stalled { secondary.stalled = false; log("secondary stream resumed"); change(.sourceBack(.secondary)) }
                case .end?:
                    if !loseSecondary(at: t, because: "ended", ended: true) { endSecondary(at: t, because: "ended") }
                case .failed(let e)?:
                    if !loseSecondary(at: t, because: "interrupted: \(e)", ended: false) {
                        endSecondary(at: t, because: "interrupted: \(e)")
                        if !secondary.stalled { change(.sourceLost(.secondary, reason: "interrupted: \(e)")) }   // else told at the stall
                    }
                case nil:
                    if reader.queue.isClosed {
                        if !loseSecondary(at: t, because: "ended", ended: true) { endSecondary(at: t, because: "ended") }
                    } else if !secondary.stalled && (!live || Date().timeIntervalSince(secondary.lastArrival) >= settings.secondaryTimeout) {
                        secondary.stalled = true
                        warn("secondary stream delivered nothing for \(settings.secondaryTimeout) s at \(String(format: "%.3f", t.seconds)) s; holding its last frame")
                        change(.sourceLost(.secondary, reason: "delivered nothing for \(settings.secondaryTimeout) s"))
                    }
                }
            }
            guard let next = secondary.next, next.pts <= t else { return }
            clock.pushSecondary(next, pts: next.pts, now: next.pts)
            secondary.next = nil
        }
    }

    /// The secondary is lost and its role recovers it: its last frame is
    /// held, then hidden, while it is reopened (or its list tried); false
    /// when it is not recovered (it ends as before).
    private func loseSecondary(at t: MediaTime, because why: String, ended: Bool) -> Bool {
        guard let sup = secondarySources, let reader = secondary.reader,
              sup.canRecover(ended: ended, hasLength: reader.info?.duration != nil) else { return false }
        secondary.ended = true
        clock.secondaryEnded(now: t)
        JoinableThread.detached { reader.stop() }
        sup.lose(why: why, ended: ended)
        let list = sup.candidates.count > 1 ? " (and trying the rest of its list)" : ""
        warn("secondary \(reader.spec) \(why) at \(String(format: "%.3f", t.seconds)) s; holding its last frame for "
             + "\(SourceSupervisor.seconds(settings.secondaryTimeout)) s, then primary only, while reopening it\(list) for up to "
             + "\(SourceSupervisor.seconds(settings.recovery.window)) s")
        if !secondary.stalled { change(.sourceLost(.secondary, reason: why)) }   // else told at the stall
        return true
    }

    /// Shows `reader` as the secondary from `first` on, at take time `t` (the hot-swap path).
    private func adoptSecondary(_ reader: SourceReader, first: InputFrame, at t: MediaTime, from: Int, reason: SourceSwitchReason,
                                down: Double, wasLost: Bool) {
        guard let sup = secondarySources else { return }
        if let old = secondary.reader, old !== reader { JoinableThread.detached { old.stop() } }
        var s = SecondaryState()
        s.reader = reader
        s.orientation = Self.orientation(reader.info, settings.secondaryOrientation)
        s.base = t
        s.firstPTS = first.pts
        s.lastRaw = first.pts
        var f = first
        f.pts = t
        s.next = f
        secondary = s
        clock.replaceSecondary(now: t)
        noteSwitch(.secondary, at: t, from: sup.candidates[from], to: reader.spec, reason: reason, down: down, wasLost: wasLost)
    }

    private func endSecondary(at t: MediaTime, because why: String) {
        secondary.ended = true
        clock.secondaryEnded(now: t)
        log("secondary stream \(why) at \(String(format: "%.3f", t.seconds)) s; holding its last frame for \(settings.secondaryTimeout) s, then primary only")
    }

    /// Stops every reader (finalize).
    func stop() {
        primarySources.stopProbes()
        secondarySources?.stopProbes()
        primary.reader.stop()
        secondary.reader?.stop()
        pendingSecondary?.stop()
        pendingPrimary?.stop()
        clock.primaryEnded()
    }
}

/// A stream's reader and where its timestamps land on the take's timeline.
struct StreamCursor {
    var reader: SourceReader
    var orientation: Orientation
    var firstPTS: MediaTime?
    var base = MediaTime.zero
    /// The last frame's own timestamp (before rebasing), to find a timeline that restarted.
    var lastRaw: MediaTime?
    /// A live source whose timestamps may restart (a network stream, a pipe).
    var live = false
    /// Frames were held on live outputs since its last frame.
    var held = false

    func rebased(_ f: InputFrame) -> InputFrame {
        var f = f
        f.pts = base + (f.pts - (firstPTS ?? f.pts))
        return f
    }
}

/// The secondary stream's reader and the decoded frame not yet due.
struct SecondaryState {
    var reader: SourceReader?
    var orientation = Orientation.identity
    /// The next decoded frame, already rebased to the take's timeline.
    var next: InputFrame?
    var firstPTS: MediaTime?
    var base = MediaTime.zero
    /// The last frame's own timestamp (before rebasing), to find a timeline that restarted.
    var lastRaw: MediaTime?
    var ended = false
    var stalled = false
    /// When it last delivered (or was opened).
    var lastArrival = Date()

    /// A live source's timestamps that jump back, or ahead by more than this,
    /// started a new timeline (a sender that restarted): its frames are
    /// rebased to the take's time from there, not dropped as old or held as future.
    static let discontinuity = MediaTime(seconds: 5)
}
