import CGLES
import DiptychCore

/// A GL sync object that callers on any thread may query and wait for: the
/// render thread that inserted it polls it (`FenceWatch`) and sets the flag
/// they read. Its `GLsync` is touched on that render thread only.
final class WatchedFence: Sendable {
    private let done = Condition(false)
    nonisolated(unsafe) let sync: GLsync   // render thread only (`FenceWatch`)
    /// The watch that polls it (its render thread's).
    let watch: ObjectIdentifier

    init(_ sync: GLsync, watch: FenceWatch) { self.sync = sync; self.watch = ObjectIdentifier(watch) }

    /// Any thread, non-blocking.
    var isDone: Bool { done.withLock { $0 } }
    /// The render thread, once the fence has signalled (or can no longer).
    func markDone() { done.update { $0 = true } }
    /// Off the render thread: blocks until the render thread has seen the fence signal.
    func waitDone() { done.wait(until: { $0 }) }

    /// The handle `FenceOps` passes around, retained once for its holder
    /// (`releaseHandle` lets go of it).
    func retainedHandle() -> OpaquePointer { OpaquePointer(Unmanaged.passRetained(self).toOpaque()) }
    static func from(_ handle: OpaquePointer) -> WatchedFence {
        Unmanaged<WatchedFence>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
    }
    static func releaseHandle(_ handle: OpaquePointer) {
        Unmanaged<WatchedFence>.fromOpaque(UnsafeRawPointer(handle)).release()
    }
}

/// A render thread's fences in insertion order (one context's fences signal
/// in that order), polled between its items and, while any is pending and
/// the thread has nothing to run, every `pollInterval`: nothing the driver
/// does inside a fence's creation or a wait for one holds the thread
/// (docs/ARCHITECTURE.md, "The render thread's waits"). Render thread only.
final class FenceWatch {
    /// How long an idle render thread with fences pending sleeps between polls (seconds).
    static let pollInterval = 0.0001
    private var pending: [WatchedFence] = []
    private var first = 0

    /// Frames wait while this many fences are pending (the render thread
    /// records the next batch while the GPU runs the one before, and no
    /// further ahead: batches stay as large as the GPU's pace makes them).
    static let aheadLimit = 2

    var isEmpty: Bool { first == pending.count }
    /// Fences inserted and not yet seen signalled.
    var inFlight: Int { pending.count - first }

    /// Inserts a fence after every command so far and watches it.
    func insert() -> WatchedFence? {
        RenderThread.assertCurrent()
        guard let s = glFenceSync(GL.syncGPUCommandsComplete, 0) else { return nil }
        let f = WatchedFence(s, watch: self)
        pending.append(f)
        return f
    }

    /// Non-blocking: marks the signalled fences done, oldest first, and deletes their syncs.
    func poll() {
        while first < pending.count {
            let f = pending[first]
            // Anything but a timeout counts: a lost context's fences never signal.
            guard glClientWaitSync(f.sync, 0, 0) != GL.timeoutExpired else { break }
            retire()
        }
        if first > 64 && first * 2 > pending.count {
            pending.removeFirst(first)
            first = 0
        }
    }

    /// Blocks until `fence` (one of this watch's) has signalled, then retires it and every older one.
    func wait(for fence: WatchedFence) {
        RenderThread.assertCurrent()
        while !fence.isDone {
            while glClientWaitSync(fence.sync, GL.syncFlushCommandsBit, 1_000_000_000) == GL.timeoutExpired {}
            poll()
        }
    }

    /// The thread is ending, its contexts gone with their syncs: every fence
    /// left counts as done (its work finished or lost). No GL call.
    func abandonAll() {
        while first < pending.count { retire(deleting: false) }
        pending.removeAll()
        first = 0
    }

    private func retire(deleting: Bool = true) {
        let f = pending[first]
        if deleting { glDeleteSync(f.sync) }
        f.markDone()
        first += 1
    }
}
