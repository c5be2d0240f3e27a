import DiptychCore
import Foundation

/// What a server's periodic thread sleeps on between rounds: `sleep`
/// waits out its interval, or returns at once when `stop` is called, and
/// says whether to go on. So stopping never waits for a sleep to run out,
/// and the thread ends with the server instead of outliving it.
final class StopSignal: Sendable {
    private let stopped = Condition(false)

    /// Waits up to `seconds`; false once `stop` was called (before or during the wait).
    func sleep(_ seconds: TimeInterval) -> Bool {
        !stopped.wait(until: { $0 }, timeout: seconds)
    }

    var isStopped: Bool { stopped.withLock { $0 } }

    /// Ends every wait now and every later one at once.
    func stop() { stopped.update { $0 = true } }
}
