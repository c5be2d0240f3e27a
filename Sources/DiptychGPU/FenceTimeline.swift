import CGLES

/// How fences are made and queried. The real one uses GL sync objects; tests
/// replace it to hold fences unsignalled and count what gets deleted.
struct FenceOps {
    /// Inserts a fence after all commands so far (and flushes).
    var insert: () -> OpaquePointer?
    /// Non-blocking: has the fence signalled?
    var isSignalled: (OpaquePointer) -> Bool
    /// Blocks until the fence signals (or the context is lost).
    var wait: (OpaquePointer) -> Void
    var delete: (OpaquePointer) -> Void

    static var gl: FenceOps { FenceOps(
        insert: {
            let f = glFenceSync(GL.syncGPUCommandsComplete, 0)
            glFlush()
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
}

/// Submission serials and the FIFO of (fence, completion) that decides when a
/// resource may be deleted or reused.
///
/// Every submission gets a serial and a fence. A resource records the serial of
/// its last use (`pendingSerial` while the commands are still being recorded);
/// `retire(lastUse:_:)` runs its release once that serial's fence has signalled.
/// Fences of one context complete in order, so only the oldest is polled.
/// Lives on the render thread.
final class FenceTimeline {
    private(set) var submitted: UInt64 = 0
    private(set) var completed: UInt64 = 0
    private var fences: [(serial: UInt64, fence: OpaquePointer?)] = []
    private var completions: [(serial: UInt64, run: () -> Void)] = []
    var ops: FenceOps
    /// Set when the context is lost: fences are no longer waited for.
    var abandoned = false

    init(ops: FenceOps = .gl) { self.ops = ops }

    /// The serial the next `submit()` will fence: the "last use" of anything used now.
    var pendingSerial: UInt64 { submitted + 1 }
    var inFlight: Int { fences.count }
    var pendingCompletions: Int { completions.count }

    /// Fences everything recorded so far; returns its serial.
    @discardableResult
    func submit() -> UInt64 {
        submitted += 1
        fences.append((submitted, abandoned ? nil : ops.insert()))
        return submitted
    }

    func isComplete(_ serial: UInt64) -> Bool {
        if serial > completed { poll() }
        return serial <= completed
    }

    /// Retires every signalled fence (oldest first) and runs due completions. Never blocks.
    func poll() {
        while let first = fences.first {
            if let f = first.fence, !abandoned {
                guard ops.isSignalled(f) else { break }
            }
            retireFirstFence()
        }
        runDue()
    }

    /// Blocks until `serial` has completed, fencing it first if it was not yet submitted.
    func wait(for serial: UInt64) {
        if serial > submitted { submit() }
        while completed < serial, let first = fences.first {
            if let f = first.fence, !abandoned { ops.wait(f) }
            retireFirstFence()
        }
        runDue()
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

    private func retireFirstFence() {
        let first = fences.removeFirst()
        if let f = first.fence { ops.delete(f) }
        completed = first.serial
    }

    private func runDue() {
        var n = 0
        while n < completions.count && completions[n].serial <= completed { n += 1 }
        guard n > 0 else { return }
        let due = completions.prefix(n)
        completions.removeFirst(n)
        for c in due { c.run() }
    }
}
