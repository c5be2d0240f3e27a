import DiptychCore

/// Wakes a thread that waits for any of several things at once, each with
/// its own lock (docs/ARCHITECTURE.md, "Threads"): whatever changes one of
/// them rings it. The waiter reads `rings` before it looks at them and then
/// waits for a ring after that, so a change made while it looked still wakes it.
final class WakeSignal: Sendable {
    private let count = Condition<UInt64>(0)

    init() {}

    /// The rings so far.
    var rings: UInt64 { count.withLock { $0 } }

    /// Something the waiter waits for changed: wakes it.
    func ring() {
        count.update { $0 &+= 1 }
    }

    /// Waits until a ring after `seen` (a value of `rings`) or until `timeout`
    /// seconds (nil: no limit) pass; whether it was rung.
    @discardableResult
    func wait(after seen: UInt64, timeout: Double?) -> Bool {
        count.wait(until: { $0 != seen }, timeout: timeout)
    }
}
