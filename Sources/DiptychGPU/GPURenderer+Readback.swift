import CGLES
import DiptychCore

/// Getting frames back: NV12 readbacks in submission order (waited for and
/// copied out on the caller's thread where the fences and buffers allow it,
/// else on the render thread), and the RGBA preview.
extension GPURenderer {
    /// Whether callers can wait for and copy out their frames without a hop.
    var deliversOffThread: Bool { timeline.canWaitOffThread && readbacks.deliversOffThread }

    /// The oldest pending readback once complete (nil if it is not and `wait`
    /// is false; nil if none is pending), and the copies that fill its frame
    /// (run them before the next call). `offThread`: on the caller's thread
    /// (only when `deliversOffThread`); else on the render thread.
    func takeCompleted(wait: Bool, offThread: Bool) throws(GPUError) -> (NV12Readback, [CopyJob])? {
        guard let first = readbacks.pending.first else { return nil }
        if offThread {
            precondition(deliversOffThread)
            guard wait || timeline.isCompleteOffThread(first.serial) else { return nil }
            guard timeline.waitOffThread(for: first.serial) else { return nil }
        } else {
            guard wait || timeline.isComplete(first.serial) else { return nil }
            timeline.wait(for: first.serial)
        }
        let (r, frame, jobs, device) = try readbacks.deliver()
        if !offThread { try checkGL("readback \(r.output)") }
        timer.stats.framesDelivered += 1
        if r.direct != nil { directFrames?.delivered(frame, output: r.output) }
        return (NV12Readback(output: r.output, frame: frame, device: device), jobs)
    }

    /// Render thread: the oldest readback, delivered here (copies run here).
    func deliverOldestHere() throws(GPUError) -> NV12Readback? {
        guard let (r, jobs) = try takeCompleted(wait: true, offThread: false) else { return nil }
        StageClock.measure(.convert) { for j in jobs { j.run() } }
        return r
    }

    func previewRGBA(output id: OutputID) throws(GPUError) -> VideoFrame {
        RenderThread.assertCurrent()
        try beginHop()
        let out = try output(id)
        try refreshRGBA(out)
        let frame = VideoFrame.allocate(width: out.canvas.width, height: out.canvas.height, format: .rgba, pts: out.lastPTS)
        glBindFramebuffer(GL.readFramebuffer, out.target.fbo)
        glBindBuffer(GL.pixelPackBuffer, 0)
        glPixelStorei(GL.packAlignment, 4)
        glReadPixels(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height), GL.rgba, GL.unsignedByte,
                     frame.planes[0].storage.mutableBase)
        glBindFramebuffer(GL.readFramebuffer, 0)
        try checkGL("preview \(id)")
        try checkReset()
        return frame
    }
}
