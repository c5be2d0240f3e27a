import Synchronization

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
final class SharedFence: Sendable {
    let ops: FenceOps
    private struct State {
        var handle: OpaquePointer?
        var sealed = false
        var signalled = false
        var refs = 0
    }
    private let state = Mutex(State())

    init(ops: FenceOps) { self.ops = ops }

    /// Another timeline's submission is covered by this fence.
    func retain() { state.withLock { $0.refs += 1 } }

    /// Whether the fence has been inserted (later submissions need another).
    var isSealed: Bool { state.withLock { $0.sealed } }

    /// Render thread, after the batch's last command: inserts the fence (a
    /// missing fence means the work already completed, as `FenceOps.insert`
    /// says). Once only; a fence nobody holds is deleted at once.
    func seal() {
        let unusedFence: OpaquePointer? = state.withLock { s in
            guard !s.sealed else { return nil }
            s.sealed = true
            let h = ops.insert()
            let unused = s.refs == 0
            s.handle = unused ? nil : h
            s.signalled = unused || h == nil
            return unused ? h : nil
        }
        if let h = unusedFence { ops.delete(h) }
    }

    /// Non-blocking. An unsealed fence (the batch is still being recorded) has not signalled.
    var isSignalled: Bool {
        let (done, fence): (Bool, OpaquePointer?) = state.withLock { s in
            s.signalled ? (true, nil) : (false, s.sealed ? s.handle : nil)
        }
        guard !done else { return true }
        guard let h = fence else { return false }
        guard ops.isSignalled(h) else { return false }
        state.withLock { $0.signalled = true }
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
        let fence = state.withLock { $0.signalled ? nil : $0.handle }
        guard let h = fence else { return }
        ops.wait(h)
        state.withLock { $0.signalled = true }
    }

    /// A timeline is done with the fence; the last one deletes it.
    func release() {
        let fence: OpaquePointer? = state.withLock { s in
            s.refs -= 1
            let h = s.refs == 0 && s.sealed ? s.handle : nil
            if h != nil { s.handle = nil }
            return h
        }
        if let h = fence { ops.delete(h) }
    }
}
