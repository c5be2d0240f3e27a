import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The project's one way to start a thread (docs/ARCHITECTURE.md,
/// "Threads"), a pthread that can be joined: `join()` returns once the
/// thread has fully ended, its thread-local data freed too. A session's
/// threads are joined before the session says it is finished, so a host
/// process (or the CLI) that exits right after never races their teardown
/// with its exit handlers. A thread nobody joins is started `detached`.
package final class JoinableThread: Sendable {
    private let handle: pthread_t
    private let settled = Mutex(false)

    /// Starts `body` on a new thread named `name` (at most 15 bytes are
    /// kept; nil: the starting thread's name) of `stackSize` bytes (nil:
    /// the system's default, as a Foundation `Thread`'s).
    package init(name: String? = nil, stackSize: Int? = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        if let stackSize { pthread_attr_setstacksize(&attr, stackSize) }
        let box = Unmanaged.passRetained(Body(name: name, body))
        var handle = pthread_t()
        let rc = pthread_create(&handle, &attr, { arg in
            let body = Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue()
            if let name = body.name { StageClock.setName(name) }
            body.run()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attr)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        self.handle = handle
    }

    /// Starts `body` on a thread that nobody joins (it ends on its own).
    package static func detached(name: String? = nil, stackSize: Int? = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        JoinableThread(name: name, stackSize: stackSize, body).detach()
    }

    private final class Body {
        let name: String?
        let run: @Sendable () -> Void
        init(name: String?, _ run: @escaping @Sendable () -> Void) { self.name = name; self.run = run }
    }

    /// Whether the calling thread is this one.
    package var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }

    /// Waits until the thread has ended. Idempotent; from the thread itself it detaches instead.
    package func join() {
        guard settle() else { return }
        if isCurrent { pthread_detach(handle); return }
        pthread_join(handle, nil)
    }

    /// Lets the thread end on its own (one stuck in a read that never returns).
    package func detach() {
        guard settle() else { return }
        pthread_detach(handle)
    }

    private func settle() -> Bool {
        settled.withLock { settled in
            defer { settled = true }
            return !settled
        }
    }
}
