import Foundation

/// What a server's periodic thread sleeps on between rounds: `sleep`
/// waits out its interval, or returns at once when `stop` is called, and
/// says whether to go on. So stopping never waits for a sleep to run out,
/// and the thread ends with the server instead of outliving it.
final class StopSignal: @unchecked Sendable {   // `stopped` is behind `condition`
    private let condition = NSCondition()
    private var stopped = false

    /// Waits up to `seconds`; false once `stop` was called (before or during the wait).
    func sleep(_ seconds: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if !stopped { _ = condition.wait(until: Date(timeIntervalSinceNow: seconds)) }
        return !stopped
    }

    var isStopped: Bool { condition.withLock { stopped } }

    /// Ends every wait now and every later one at once.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
