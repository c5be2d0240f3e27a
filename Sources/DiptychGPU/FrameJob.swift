import CGLES
import DiptychCore

/// One output frame's GL work in three phases, so the render thread runs a
/// batch of frames (several compositors sharing the context) phase by phase:
/// every frame's uploads, then every frame's compute dispatch, one memory
/// barrier for all of them, then every frame's readback copy, and one fence
/// after the last copy for all of them (`SharedFence`). The
/// GPU then sees a run of transfers, a run of dispatches and a run of copies
/// instead of alternating between them once per frame.
final class FrameJob: @unchecked Sendable {   // the blocking hop: its caller waits on `done` while the render thread runs it and sets `error`
    /// Turns the pending uploads into textures, CUDA frames queued only;
    /// true when it queued CUDA frames.
    let prepare: () throws(GPUError) -> Bool
    /// Copies every CUDA frame the batch queued (one map and one unmap for
    /// all of them: the batch shares one context).
    let flushCUDA: () throws(GPUError) -> Void
    /// Uploads and the path decision; false when the frame is already complete.
    let begin: () throws(GPUError) -> Bool
    /// The compute dispatch (no barrier: the batch issues one).
    let dispatch: () throws(GPUError) -> Void
    /// The readback copy and the submission's fence.
    let finish: () throws(GPUError) -> Void
    /// Set by the render thread before `done`; read by the caller after `waitUntilDone()`.
    fileprivate(set) var error: GPUError?
    /// Whether the frame is complete or has failed (set once, by the render thread).
    private let done = Condition(false)

    init(prepare: @escaping () throws(GPUError) -> Bool = { false }, flushCUDA: @escaping () throws(GPUError) -> Void = {},
         begin: @escaping () throws(GPUError) -> Bool, dispatch: @escaping () throws(GPUError) -> Void,
         finish: @escaping () throws(GPUError) -> Void) {
        self.prepare = prepare; self.flushCUDA = flushCUDA
        self.begin = begin; self.dispatch = dispatch; self.finish = finish
    }

    /// Render thread: the batch, phase by phase; each job's waiter is released
    /// once its frame is complete or has failed. First every job's uploads,
    /// with one copy of all the batch's CUDA frames.
    static func run(_ batch: [FrameJob]) {
        var dispatched: [FrameJob] = []
        var open: [FrameJob] = []
        var ready: [FrameJob] = []
        var withCUDA: [FrameJob] = []
        var t = PassTimer.now()
        func mark(_ phase: RenderPhase) { RenderThread.add(phase, since: t); t = PassTimer.now() }
        RenderThread.batchStarts()
        for j in batch {
            do throws(GPUError) {
                if try j.prepare() { withCUDA.append(j) } else { ready.append(j) }
            } catch { j.fail(error) }
        }
        mark(.prepare)
        if let first = withCUDA.first {
            do throws(GPUError) {
                try first.flushCUDA()
                ready += withCUDA
            } catch {
                for j in withCUDA { j.fail(error) }
            }
            mark(.cudaCopy)
        }
        for j in batch where ready.contains(where: { $0 === j }) {
            do throws(GPUError) { if try j.begin() { open.append(j) } else { j.release() } } catch { j.fail(error) }
        }
        mark(.begin)
        if !open.isEmpty { RenderThread.batchDispatchesStart() }
        for j in open {
            do throws(GPUError) { try j.dispatch(); dispatched.append(j) } catch { j.fail(error) }
        }
        mark(.dispatch)
        if !dispatched.isEmpty { glMemoryBarrier(GL.computeOutputBarriers) }
        mark(.barrier)
        // One fence for every readback of the batch, inserted after the last
        // (SharedFence); nobody is released before it exists.
        RenderThread.sharingOneFence {
            for j in dispatched {
                do throws(GPUError) { try j.finish() } catch { j.error = error }
            }
        }
        for j in dispatched { j.release() }
        mark(.finish)
    }

    private func fail(_ e: GPUError) {
        error = e
        release()
    }

    /// Render thread: the frame is complete or has failed; its caller goes on.
    private func release() {
        done.update { $0 = true }
    }

    /// The caller: waits until the render thread has released the frame, or
    /// `timeout` seconds (nil: no limit) pass; whether it was released.
    @discardableResult
    func waitUntilDone(timeout: Double? = nil) -> Bool {
        done.wait(until: { $0 }, timeout: timeout)
    }
}
