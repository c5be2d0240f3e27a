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
    /// Opens a hot swap's stream.
    var open: @Sendable (SourceSpec, Double?) throws(MediaError) -> any TakeInput
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
    /// The first primary frame's own timestamp: the take's zero on the
    /// source's (or host's) timeline.
    private(set) var timelineOrigin: MediaTime?

    init(primary: SourceReader, secondary: SourceReader?, settings: InputSettings, clock: FrameClockConfiguration,
         log: @escaping (String) -> Void, warn: @escaping (String) -> Void, change: @escaping (StreamChange) -> Void = { _ in },
         isStopRequested: @escaping () -> Bool) {
        self.settings = settings
        self.log = log; self.warn = warn; self.change = change; self.isStopRequested = isStopRequested
        self.primary = StreamCursor(reader: primary, orientation: Self.orientation(primary.info, settings.primaryOrientation))
        if let s = secondary {
            self.secondary.reader = s
            self.secondary.orientation = Self.orientation(s.info, settings.secondaryOrientation)
        }
        scheduled = settings.switches.sorted { $0.time < $1.time }
        self.clock = FrameClock(configuration: clock)
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
    /// (after frames were held for it on live outputs).
    func shiftPrimary(by d: MediaTime) { primary.base = primary.base + d }

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
                DispatchQueue.global().async { old.stop() }
                primary = StreamCursor(reader: pending, orientation: Self.orientation(pending.info, settings.primaryOrientation))
                primary.base = (lastPTS ?? .zero) + settings.frameRate.frameDuration
                primary.firstPTS = f.pts
                lastArrival = Date()
                pendingPrimary = nil
                hotSwaps += 1
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
            event = queue.pop(timeout: 0.02)
            // The old primary has ended: wait on the new one instead (woken by
            // its first frame, which the next call takes, or by its end).
            if event == nil && queue.isClosed, let pending = pendingPrimary { pending.queue.waitForElement(timeout: 0.02) }
        } else {
            // Waits in slices, so a stop request is seen while the primary is silent.
            let deadline = lastArrival.addingTimeInterval(settings.primaryTimeout)
            while true {
                // Returns queued frames even after the reader closed the queue; nil once drained.
                var slice = 0.1
                if let hold = holdDeadline {
                    let now = LiveTiming.now()
                    slice = hold > now ? min(slice, Double(hold - now) / 1e9) : 0
                }
                event = slice > 0 ? queue.pop(timeout: slice) : queue.tryPop()
                if event != nil || queue.isClosed { break }
                if isStopRequested() { return nil }
                if Date() >= deadline {
                    return .stop(.primaryInterrupted("\(settings.primarySpec) delivered nothing for \(settings.primaryTimeout) s"))
                }
                if let hold = holdDeadline, LiveTiming.now() >= hold { return .late }
            }
        }
        switch event {
        case .frame(let f)?:
            lastArrival = Date()
            if primary.firstPTS == nil { primary.firstPTS = f.pts }
            if timelineOrigin == nil { timelineOrigin = f.pts }
            return .frame(primary.rebased(f))
        case .end?, nil:
            return swapping ? nil : .stop(.endOfPrimary)
        case .failed(let e)?:
            return swapping ? nil : .stop(.primaryInterrupted("\(e)"))
        }
    }

    var primaryOrientation: Orientation { primary.orientation }
    /// Whether a secondary stream is being read (or switched to).
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
            pendingSecondary = SourceReader(opening: s.source, duration: nil, open: settings.open)
            pendingSecondaryAt = MediaTime(seconds: s.time)
            log("secondary switches to \(s.source) at \(s.time) s")
        }
    }

    /// Starts replacing `role`'s stream with `spec` (`none` removes the secondary at once).
    func beginSwitch(_ role: StreamRole, to spec: SourceSpec, at now: MediaTime) {
        switch role {
        case .primary:
            if let p = pendingPrimary { DispatchQueue.global().async { p.stop() } }
            pendingPrimary = SourceReader(opening: spec, duration: nil, open: settings.open)
            pendingPrimarySince = Date()
            log("switching primary to \(spec)")
        case .secondary:
            if let p = pendingSecondary { DispatchQueue.global().async { p.stop() } }
            pendingSecondary = nil
            pendingSecondaryAt = nil
            if spec == .none {
                if let r = secondary.reader { DispatchQueue.global().async { r.stop() } }
                secondary = SecondaryState()
                clock.secondaryEnded(now: now)
                hotSwaps += 1
                log("secondary removed")
                return
            }
            pendingSecondary = SourceReader(opening: spec, duration: nil, open: settings.open)
            log("switching secondary to \(spec)")
        }
    }

    /// A pending switch whose stream failed before its first frame: the current stream stays.
    private func abandon(_ reader: SourceReader, role: StreamRole, because why: String) {
        warn("\(role) switch to \(reader.spec) failed: \(why); keeping the current stream")
        DispatchQueue.global().async { reader.stop() }
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
                if let old = secondary.reader { DispatchQueue.global().async { old.stop() } }
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
        guard let reader = secondary.reader else { return }
        while true {
            if secondary.next == nil && !secondary.ended {
                let event = secondary.stalled ? reader.queue.tryPop() : reader.queue.pop(timeout: settings.secondaryTimeout)
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
                    if secondary.stalled { secondary.stalled = false; log("secondary stream resumed"); change(.sourceBack(.secondary)) }
                case .end?:
                    endSecondary(at: t, because: "ended")
                case .failed(let e)?:
                    endSecondary(at: t, because: "interrupted: \(e)")
                    if !secondary.stalled { change(.sourceLost(.secondary, reason: "interrupted: \(e)")) }   // else told at the stall
                case nil:
                    if reader.queue.isClosed {
                        endSecondary(at: t, because: "ended")
                    } else if !secondary.stalled {
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

    private func endSecondary(at t: MediaTime, because why: String) {
        secondary.ended = true
        clock.secondaryEnded(now: t)
        log("secondary stream \(why) at \(String(format: "%.3f", t.seconds)) s; holding its last frame for \(settings.secondaryTimeout) s, then primary only")
    }

    /// Stops every reader (finalize).
    func stop() {
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

    /// A live source's timestamps that jump back, or ahead by more than this,
    /// started a new timeline (a sender that restarted): its frames are
    /// rebased to the take's time from there, not dropped as old or held as future.
    static let discontinuity = MediaTime(seconds: 5)
}
