import DiptychCore
import DiptychGPU
import DiptychMedia

/// `--preview FILE`: a PNG of the main output's render target, at the first
/// frame at or after `at` seconds, or of the last frame of a take that ends
/// sooner. It is read from the target the encoder's frames come from.
final class PreviewTap: RenderTap, @unchecked Sendable {
    let path: String
    let at: Double
    private(set) var seconds: Double?
    private(set) var warning: String?
    private var written = false

    init(path: String, at: Double) { self.path = path; self.at = at }

    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int) {
        guard key == 0, !written, pts.seconds >= at else { return }
        write { () throws(GPUError) in try gpu.previewRGBA(output: target) }
        if written { seconds = pts.seconds }
    }

    /// At finalize: the last frame, when no frame reached `at`.
    func writeIfPending(gpu stage: GPUStage, at t: MediaTime) {
        guard !written else { return }
        write { () throws(GPUError) in try stage.previewRGBA(output: 0) }
        if written { seconds = t.seconds }
    }

    private func write(_ read: () throws(GPUError) -> VideoFrame?) {
        written = true
        do {
            guard let frame = try read() else { written = false; return }
            try PNGWriter.write(frame, to: path)
        } catch {
            // Tried once: a preview that cannot be written is a warning, not a retry per frame.
            seconds = nil
            warning = "preview \(path): \(error)"
        }
    }
}

/// `SessionHooks.frameCallback`: the main output's render target as RGBA,
/// every `interval`-th frame.
final class FrameCallbackTap: RenderTap, @unchecked Sendable {
    let callback: @Sendable (VideoFrame, Int) -> Void
    let interval: Int
    init(callback: @escaping @Sendable (VideoFrame, Int) -> Void, interval: Int) {
        self.callback = callback; self.interval = max(1, interval)
    }
    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int) {
        guard key == 0, index % interval == 0, let rgba = try? gpu.previewRGBA(output: target) else { return }
        callback(rgba, index)
    }
}
