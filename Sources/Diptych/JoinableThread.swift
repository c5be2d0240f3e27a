import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A thread that can be joined: `join()` returns once the thread has fully
/// ended, its thread-local data freed too. A session's threads are joined
/// before the session says it is finished, so a host process (or the CLI)
/// that exits right after never races their teardown with its exit handlers.
final class JoinableThread: @unchecked Sendable {
    private var handle = pthread_t()
    private let lock = NSLock()
    private var settled = false

    /// Starts `body` on a new thread of `stackSize` bytes.
    init(stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setstacksize(&attr, stackSize)
        let box = Unmanaged.passRetained(Body(body))
        let rc = pthread_create(&handle, &attr, { arg in
            Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attr)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Waits until the thread has ended. Idempotent; from the thread itself it detaches instead.
    func join() {
        guard settle() else { return }
        if pthread_equal(handle, pthread_self()) != 0 { pthread_detach(handle); return }
        pthread_join(handle, nil)
    }

    /// Lets the thread end on its own (one stuck in a read that never returns).
    func detach() {
        guard settle() else { return }
        pthread_detach(handle)
    }

    private func settle() -> Bool {
        lock.lock(); defer { lock.unlock() }
        if settled { return false }
        settled = true
        return true
    }
}
