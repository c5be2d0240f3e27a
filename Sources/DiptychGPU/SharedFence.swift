import Foundation

/// One fence for every compute frame of a render-thread batch (`FrameJob`):
/// the frames of several compositors sharing a context are recorded back to
/// back, so one fence inserted after the batch's last command covers all of
/// them. Creating a fence is the costliest call of a frame on some drivers
/// (an EGL fence sync took 0.1 ms of the H200's render thread, more than the
/// frame's other calls together), so the batch pays it once.
///
/// Each compositor's `FenceTimeline` holds a reference; the fence is deleted
/// when the last lets go. It is created (`seal`) after the batch's last
/// command and before any compositor of the batch is released to wait on it
/// (docs/ARCHITECTURE.md, "Lifetimes end at fence completion"). Thread-safe:
/// timelines on callers' threads query it where the fences allow it.
final class SharedFence: @unchecked Sendable {   // EGL/GL fence handle, behind `lock`
    private let lock = NSLock()
    let ops: FenceOps
    private var handle: OpaquePointer?
    private var sealed = false
    private var signalled = false
    private var refs = 0

    init(ops: FenceOps) { self.ops = ops }

    /// Another timeline's submission is covered by this fence.
    func retain() { lock.lock(); refs += 1; lock.unlock() }

    /// Whether the fence has been inserted (later submissions need another).
    var isSealed: Bool { lock.lock(); defer { lock.unlock() }; return sealed }

    /// Render thread, after the batch's last command: inserts the fence (a
    /// missing fence means the work already completed, as `FenceOps.insert`
    /// says). Once only; a fence nobody holds is deleted at once.
    func seal() {
        lock.lock()
        guard !sealed else { lock.unlock(); return }
        sealed = true
        let h = ops.insert()
        let unused = refs == 0
        handle = unused ? nil : h
        signalled = unused || h == nil
        lock.unlock()
        if unused, let h { ops.delete(h) }
    }

    /// Non-blocking. An unsealed fence (the batch is still being recorded) has not signalled.
    var isSignalled: Bool {
        lock.lock()
        guard !signalled else { lock.unlock(); return true }
        let h = sealed ? handle : nil
        lock.unlock()
        guard let h else { return false }
        guard ops.isSignalled(h) else { return false }
        lock.lock(); signalled = true; lock.unlock()
        return true
    }

    /// Blocks until the fence signals. Callers see a batch's serials only
    /// once it is sealed; on the render thread, a wait inside the batch seals
    /// it first (the submissions after that get a fence of their own).
    func wait() {
        if !isSealed {
            precondition(RenderThread.onRenderThread, "waited off the render thread on a batch fence before the batch ended")
            seal()
        }
        lock.lock()
        let h = signalled ? nil : handle
        lock.unlock()
        guard let h else { return }
        ops.wait(h)
        lock.lock(); signalled = true; lock.unlock()
    }

    /// A timeline is done with the fence; the last one deletes it.
    func release() {
        lock.lock()
        refs -= 1
        let h = refs == 0 && sealed ? handle : nil
        if h != nil { handle = nil }
        lock.unlock()
        if let h { ops.delete(h) }
    }
}
