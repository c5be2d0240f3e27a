import Foundation
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// Time for takes with live outputs (docs/ARCHITECTURE.md, "Live outputs"):
/// pacing at the primary's real-time rate, and the cadence a live stream
/// keeps while the primary is interrupted. All against the monotonic clock,
/// with absolute deadlines, so nothing drifts however long the take.
final class LiveTiming {
    let frameDuration: MediaTime
    /// Frames leave no earlier than their time on the take's timeline.
    private(set) var paced: Bool
    /// A live output exists: an interrupted primary is covered with held frames.
    private(set) var keepsCadence: Bool
    /// Monotonic nanoseconds at which the take's time 0 was (or is) due.
    private var origin: UInt64?
    /// Frames held on live outputs while the primary was interrupted, in all.
    private(set) var held = 0
    /// Wall time of the last frame sent, real or held.
    private var lastSent: UInt64?
    /// Whether the last frame sent was a held one.
    private(set) var holding = false

    init(frameRate: FrameRate, paced: Bool, keepsCadence: Bool) {
        self.frameDuration = frameRate.frameDuration
        self.paced = paced
        self.keepsCadence = keepsCadence
    }

    /// A live output was added while the take runs: from now on the take is
    /// paced when `pace` (the sources are not live; the next frame is due at
    /// once) and keeps cadence when `cadence` (the primary is live).
    func liveOutputAdded(pace: Bool, cadence: Bool) {
        keepsCadence = keepsCadence || cadence
        if pace && !paced { paced = true; origin = nil }
    }

    /// Paces from now on, or stops pacing (a live primary's list showing a
    /// file or pattern is paced; the live source back is not). The next
    /// frame is due at once.
    func pace(_ on: Bool) {
        guard on != paced else { return }
        paced = on
        origin = nil
    }

    /// Held time so far: file outputs write the take's time minus this, so
    /// they pause without a gap while live outputs keep their cadence.
    var pause: MediaTime { MediaTime(value: frameDuration.value * Int64(held), timescale: frameDuration.timescale) }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    private func nanoseconds(_ t: MediaTime) -> UInt64 { UInt64(max(0, t.seconds) * 1e9) }

    /// Paced: waits until `pts` is due, the first frame setting the origin;
    /// a stop request rings `wake`, which ends the wait at once. Returns
    /// false when stopped.
    func waitUntilDue(_ pts: MediaTime, stopRequested: () -> Bool, wake: WakeSignal) -> Bool {
        guard paced else { return true }
        if origin == nil { origin = Self.now() - nanoseconds(pts) }
        let due = origin! + nanoseconds(pts)
        while true {
            // Read before the stop is looked at: a stop asked for after that rings again.
            let rung = wake.rings
            let now = Self.now()
            if now >= due { return true }
            if stopRequested() { return false }
            // Other rings (the primary's reader) only start another turn.
            wake.wait(after: rung, timeout: Double(due - now) / 1e9)
        }
    }

    /// The monotonic time by which the next primary frame must arrive before
    /// a held frame is sent instead (nil: nothing is held). The first held
    /// frame waits two frame times, the next ones one each.
    var holdDeadline: UInt64? {
        guard keepsCadence, let lastSent else { return nil }
        return lastSent + nanoseconds(frameDuration) * (holding ? 1 : 2)
    }

    /// A frame went out: a real one, or one held for an interrupted primary
    /// (held frames keep to a grid of frame times from the last real one).
    func sent(held isHeld: Bool) {
        if isHeld {
            lastSent = holdDeadline ?? Self.now()
            held += 1
        } else {
            lastSent = Self.now()
        }
        holding = isHeld
    }
}
