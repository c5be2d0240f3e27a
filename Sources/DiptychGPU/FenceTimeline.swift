import CEGL
import CGLES

/// How fences are made and queried. GL sync objects belong to the context's
/// thread; EGL fence syncs (EGL_KHR_fence_sync) may be queried, waited for and
/// destroyed on any thread, so callers wait for their own frames without a
/// hop to the render thread. Tests replace both to hold fences unsignalled.
struct FenceOps: Sendable {
    /// Inserts a fence after all commands so far. The render thread flushes
    /// once its queue of work is done (`RenderThread.requestFlush`).
    var insert: @Sendable () -> OpaquePointer?
    /// Non-blocking: has the fence signalled?
    var isSignalled: @Sendable (OpaquePointer) -> Bool
    /// Blocks until the fence signals (or the context is lost).
    var wait: @Sendable (OpaquePointer) -> Void
    var delete: @Sendable (OpaquePointer) -> Void
    /// The fences may be queried, waited for and deleted on any thread.
    var anyThread = false
    /// Which fences these are: submissions share a batch's fence
    /// (`SharedFence`) only with others of the same kind.
    var kind = "gl"

    static var gl: FenceOps { FenceOps(
        insert: {
            RenderThread.requestFlush()
            guard let f = glFenceSync(GL.syncGPUCommandsComplete, 0) else { glFinish(); return nil }
            return f
        },
        isSignalled: { f in
            let r = glClientWaitSync(f, 0, 0)
            return r == GL.alreadySignaled || r == GL.conditionSatisfied || r == GL.waitFailed
        },
        wait: { f in
            while true {
                let r = glClientWaitSync(f, GL.syncFlushCommandsBit, 1_000_000_000)
                if r != GL.timeoutExpired { return }
            }
        },
        delete: { f in glDeleteSync(f) }) }

    /// GL sync objects the render thread polls between its items
    /// (`FenceWatch`), queried and waited for on any thread through the flag
    /// it sets: creating one never waits in the driver (an EGL fence's
    /// creation did, for most of the batch it closed), and callers wait
    /// without a hop. Inserted on a render thread only.
    static var watched: FenceOps { FenceOps(
        insert: {
            RenderThread.requestFlush()
            guard let f = RenderThread.currentWatch.insert() else { glFinish(); return nil }
            return f.retainedHandle()
        },
        isSignalled: { h in
            let f = WatchedFence.from(h)
            if !f.isDone, let w = RenderThread.watchOf(f) { w.poll() }
            return f.isDone
        },
        wait: { h in
            let f = WatchedFence.from(h)
            if let w = RenderThread.watchOf(f) { w.wait(for: f) } else { f.waitDone() }
        },
        delete: { h in WatchedFence.releaseHandle(h) },
        anyThread: true,
        kind: "watched") }

    /// EGL fence syncs on `display`, inserted into the context current on the render thread.
    static func egl(display: EGLDisplay, procs: GLProcs) -> FenceOps? {
        guard let create = procs.createSync, let destroy = procs.destroySync, let clientWait = procs.clientWaitSync else { return nil }
        let d = UInt(bitPattern: display)   // EGL displays may be used on any thread
        return FenceOps(
            insert: {
                RenderThread.requestFlush()
                guard let s = create(UnsafeMutableRawPointer(bitPattern: d), EGLenum(EGL_SYNC_FENCE_KHR), nil), s != diptych_egl_no_sync() else {
                    glFinish()   // no fence: the work is complete once this returns (a missing fence counts as signalled)
                    return nil
                }
                return OpaquePointer(s)
            },
            isSignalled: { f in
                let r = clientWait(UnsafeMutableRawPointer(bitPattern: d), UnsafeMutableRawPointer(f), 0, 0)
                return r != EGLint(EGL_TIMEOUT_EXPIRED_KHR)   // satisfied, or failed (never wait on a broken fence)
            },
            wait: { f in
                while clientWait(UnsafeMutableRawPointer(bitPattern: d), UnsafeMutableRawPointer(f), 0, 1_000_000_000) == EGLint(EGL_TIMEOUT_EXPIRED_KHR) {}
            },
            delete: { f in _ = destroy(UnsafeMutableRawPointer(bitPattern: d), UnsafeMutableRawPointer(f)) },
            anyThread: true,
            kind: "egl \(UInt(bitPattern: UnsafeMutableRawPointer(bitPattern: d)))")
    }
}

/// Submission serials and the FIFO of (fence, completion) that decides when a
/// resource may be deleted or reused.
///
/// Every submission gets a serial and a fence. A resource records the serial of
/// its last use (`pendingSerial` while the commands are still being recorded);
/// `retire(lastUse:_:)` runs its release once that serial's fence has signalled.
/// Fences of one context complete in order, so only the oldest is polled.
///
/// Used under its renderer's lock: on the render thread, and, where the
/// fences allow it (`canWaitOffThread`), on a caller's thread through
/// `isCompleteOffThread`/`waitOffThread`, which never run releases (GL calls).
final class FenceTimeline {
    private(set) var submitted: UInt64 = 0
    private(set) var completed: UInt64 = 0
    private var fences: [(serial: UInt64, fence: Fence?)] = []
    /// A submission's own fence, or the one its render-thread batch shares (`SharedFence`).
    private enum Fence {
        case own(OpaquePointer)
        case shared(SharedFence)
    }
    private var completions: [(serial: UInt64, run: () -> Void)] = []
    var ops: FenceOps
    /// Set when the context is lost: fences are no longer waited for.
    var abandoned = false

    init(ops: FenceOps = .gl) { self.ops = ops }

    /// The serial the next `submit()` will fence: the "last use" of anything used now.
    var pendingSerial: UInt64 { submitted + 1 }
    var inFlight: Int { fences.count }
    var pendingCompletions: Int { completions.count }
    var canWaitOffThread: Bool { ops.anyThread }

    /// Fences everything recorded so far; returns its serial.
    @discardableResult
    func submit() -> UInt64 {
        submitted += 1
        let fence: Fence?
        if abandoned { fence = nil } else if let shared = RenderThread.batchFence(ops) { fence = .shared(shared) } else {
            fence = ops.insert().map(Fence.own)
        }
        fences.append((submitted, fence))
        return submitted
    }

    func isComplete(_ serial: UInt64) -> Bool {
        if serial > completed { poll() }
        return serial <= completed
    }

    /// Retires every signalled fence (oldest first) and runs due completions. Never blocks.
    func poll() {
        advance()
        runDue()
    }

    /// Blocks until `serial` has completed, fencing it first if it was not yet submitted.
    func wait(for serial: UInt64) {
        fence(upTo: serial)
        waitFences(upTo: serial)
        runDue()
    }

    /// Fences the work recorded so far where `serial` is not fenced yet (no wait).
    func fence(upTo serial: UInt64) {
        if serial > submitted { submit() }
    }

    /// Off the render thread: whether `serial` has completed (retires signalled fences, runs nothing).
    func isCompleteOffThread(_ serial: UInt64) -> Bool {
        precondition(ops.anyThread)
        if serial > completed { advance() }
        return serial <= completed
    }

    /// Off the render thread: waits for a submitted `serial` (runs nothing).
    /// False when it was not submitted yet (only the render thread can fence it).
    func waitOffThread(for serial: UInt64) -> Bool {
        precondition(ops.anyThread)
        guard serial <= submitted else { return false }
        waitFences(upTo: serial)
        return true
    }

    /// Runs `release` once work up to `lastUse` has completed (now, if it has).
    func retire(lastUse: UInt64, _ release: @escaping () -> Void) {
        if lastUse <= completed { release(); return }
        let i = completions.firstIndex { $0.serial > lastUse } ?? completions.count
        completions.insert((lastUse, release), at: i)
    }

    /// Waits for everything in flight and runs every completion (teardown).
    func drain() {
        if let last = completions.last, last.serial > submitted { submit() }
        wait(for: submitted)
        let rest = completions
        completions.removeAll()
        for c in rest { c.run() }
    }

    private func advance() {
        while let first = fences.first {
            if let f = first.fence, !abandoned {
                guard isSignalled(f) else { break }
            }
            retireFirstFence()
        }
    }

    /// Waits for the first fence at or after `serial` (fences of one context
    /// signal in order, so every older one has signalled too) and retires them.
    private func waitFences(upTo serial: UInt64) {
        guard completed < serial, let i = fences.firstIndex(where: { $0.serial >= serial }) else { return }
        switch fences[i].fence {
        case .own(let f)? where !abandoned: ops.wait(f)
        case .shared(let f)? where !abandoned: f.wait()
        default: break
        }
        for _ in 0...i { retireFirstFence() }
    }

    private func retireFirstFence() {
        let first = fences.removeFirst()
        switch first.fence {
        case .own(let f)?: ops.delete(f)
        case .shared(let f)?: f.release()
        case nil: break
        }
        completed = first.serial
    }

    private func isSignalled(_ f: Fence) -> Bool {
        switch f {
        case .own(let f): ops.isSignalled(f)
        case .shared(let f): f.isSignalled
        }
    }

    /// Runs the releases whose serial has completed (render thread).
    func runDue() {
        var n = 0
        while n < completions.count && completions[n].serial <= completed { n += 1 }
        guard n > 0 else { return }
        let due = completions.prefix(n)
        completions.removeFirst(n)
        for c in due { c.run() }
    }
}
