#if canImport(Glibc)
import Glibc
#endif

/// The project's one primitive for waiting on shared state: a value of
/// `State` behind a mutex, with a condition variable whose waits end when
/// the state changes or a deadline on the monotonic clock passes.
/// (`Mutex`, from Synchronization, guards state nobody waits for; this, state
/// somebody does. docs/ARCHITECTURE.md, "Threads".)
///
/// - `withLock` reads or changes the state and wakes nobody;
/// - `update` changes it, then wakes every waiter;
/// - `wait(until:timeout:_:)` waits until a condition on the state holds
///   (checked under the lock, again after every `update`) or the timeout
///   passes, then runs its body under the lock.
///
/// The state is only touched inside these calls, as a `Mutex`'s is, with the
/// same `sending` rules for what goes in and comes out.
package final class Condition<State: ~Copyable>: @unchecked Sendable {   // pthread mutex and condition variable; `state` only under the mutex
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var state: State

    package init(_ initial: consuming sending State) {
        state = initial
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the state under the lock; wakes nobody.
    package func withLock<R: ~Copyable, E: Error>(_ body: (inout sending State) throws(E) -> sending R) throws(E) -> sending R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Runs `body` with the state under the lock, then wakes every waiter
    /// (each checks its condition again).
    package func update<R: ~Copyable, E: Error>(_ body: (inout sending State) throws(E) -> sending R) throws(E) -> sending R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(cond)
            pthread_mutex_unlock(mutex)
        }
        return try body(&state)
    }

    /// Waits, the lock released meanwhile, until `ready` holds or `timeout`
    /// seconds (nil: no limit) have passed, then runs `body` under the lock
    /// with the state and whether `ready` held. `ready` runs under the lock,
    /// once at the start and again after each wake-up.
    /// With `waking`, every waiter is woken after `body` (as `update` does).
    package func wait<R: ~Copyable, E: Error>(until ready: (inout sending State) -> Bool, timeout: Double? = nil, waking: Bool = false,
                                               _ body: (inout sending State, _ ready: Bool) throws(E) -> sending R) throws(E) -> sending R {
        let deadline = timeout.map(Self.deadline(after:))
        pthread_mutex_lock(mutex)
        defer {
            if waking { pthread_cond_broadcast(cond) }
            pthread_mutex_unlock(mutex)
        }
        var met = ready(&state)
        while !met {
            if var deadline {
                if pthread_cond_timedwait(cond, mutex, &deadline) == ETIMEDOUT {
                    met = ready(&state)
                    break
                }
            } else {
                pthread_cond_wait(cond, mutex)
            }
            met = ready(&state)
        }
        return try body(&state, met)
    }

    /// Waits until `ready` holds or `timeout` passes; whether it held.
    @discardableResult
    package func wait(until ready: (inout sending State) -> Bool, timeout: Double? = nil) -> Bool {
        wait(until: ready, timeout: timeout) { _, met in met }
    }

    /// The monotonic clock's time `seconds` from now (negative: now).
    private static func deadline(after seconds: Double) -> timespec {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let ns = Int64(ts.tv_nsec) + Int64((min(max(0, seconds), 1e9) * 1e9).rounded())
        ts.tv_sec += Int(ns / 1_000_000_000)
        ts.tv_nsec = Int(ns % 1_000_000_000)
        return ts
    }
}
