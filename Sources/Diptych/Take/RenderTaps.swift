import DiptychCore
import DiptychGPU
import DiptychMedia
import Synchronization

/// `--preview FILE`: a PNG of the main output's render target, at the first
/// frame at or after `at` seconds, or of the last frame of a take that ends
/// sooner. It is read from the target the encoder's frames come from.
final class PreviewTap: RenderTap, Sendable {
    let path: String
    let at: Double
    private struct State {
        var seconds: Double?
        var warning: String?
        var written = false
    }
    private let state = Mutex(State())
    /// The take time of the frame written, if one was.
    var seconds: Double? { state.withLock { $0.seconds } }
    var warning: String? { state.withLock { $0.warning } }
    private var written: Bool { state.withLock { $0.written } }

    init(path: String, at: Double) { self.path = path; self.at = at }

    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int) {
        guard key == 0, !written, pts.seconds >= at else { return }
        write { () throws(GPUError) in try gpu.previewRGBA(output: target) }
        if written { state.withLock { $0.seconds = pts.seconds } }
    }

    /// At finalize: the last frame, when no frame reached `at`.
    func writeIfPending(gpu stage: GPUStage, at t: MediaTime) {
        guard !written else { return }
        write { () throws(GPUError) in try stage.previewRGBA(output: 0) }
        if written { state.withLock { $0.seconds = t.seconds } }
    }

    private func write(_ read: () throws(GPUError) -> VideoFrame?) {
        state.withLock { $0.written = true }
        do {
            guard let frame = try read() else { state.withLock { $0.written = false }; return }
            try PNGWriter.write(frame, to: path)
        } catch {
            // Tried once: a preview that cannot be written is a warning, not a retry per frame.
            let warning = "preview \(path): \(error)"
            state.withLock { $0.seconds = nil; $0.warning = warning }
        }
    }
}

/// `SessionHooks.frameCallback`: the main output's render target as RGBA,
/// every `interval`-th frame.
final class FrameCallbackTap: RenderTap, Sendable {
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
