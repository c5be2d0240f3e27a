import Foundation
import Synchronization
import DiptychCore
import DiptychGPU
import DiptychMedia

/// The real zero-copy device of one output (docs/ARCHITECTURE.md, "Encoder
/// paths"): NV12 buffers from GBM (`EncoderBufferAllocator`, its own
/// gbm_device on the GPU's render node), imported as encoder targets of the
/// output in the take's current compositor (a rebuilt one after a lost
/// context), handed to the output's encoder stage, whose VA-API encoder
/// imports each as a surface (`MediaWriter.write(_:pts:release:)`).
/// Thread-safe: `free` may come from the encoder's thread.
final class GBMVATargets: ZeroCopyDevice, Sendable {
    let allocator: EncoderBufferAllocator
    let layout: EncoderBufferLayout
    /// The compositor and the output's render target now; nil once the output is gone.
    private let current: @Sendable () -> (GPUCompositor, OutputID)?
    /// The encoder settings of the trial encode (`checkEncoder`).
    private let settings: VideoEncoderSettings
    private struct State {
        var buffers: [Int: (buffer: EncoderBuffer, target: (gpu: GPUCompositor, id: EncoderTargetID)?)] = [:]
        var next = 0
        var encoder: EncoderStage?
    }
    private let state = Mutex(State())

    init(allocator: EncoderBufferAllocator, layout: EncoderBufferLayout, settings: VideoEncoderSettings,
         current: @escaping @Sendable () -> (GPUCompositor, OutputID)?) {
        self.allocator = allocator; self.layout = layout; self.settings = settings; self.current = current
    }

    /// Where `encode` hands frames (nil during the setup's trial).
    var encoder: EncoderStage? {
        get { state.withLock { $0.encoder } }
        set { state.withLock { $0.encoder = newValue } }
    }

    func allocate(size: PixelSize, modifier: UInt64) throws(GPUError) -> EncoderTargetBuffer {
        let b = try allocator.allocate(size: size, modifier: modifier, layout: layout)
        let id = state.withLock { s in
            defer { s.next += 1 }
            s.buffers[s.next] = (b, nil)
            return s.next
        }
        return EncoderTargetBuffer(id: id, frame: b.frame)
    }

    func importTarget(_ buffer: EncoderTargetBuffer) throws(GPUError) {
        guard let (gpu, output) = current() else { throw .shutDown }
        let id = try gpu.addEncoderTarget(buffer.frame, output: output)
        let old = state.withLock { s in
            defer { s.buffers[buffer.id]?.target = (gpu, id) }
            return s.buffers[buffer.id]?.target
        }
        if let old, old.gpu === gpu { gpu.removeEncoderTarget(old.id) }
    }

    func checkEncoder(_ buffer: EncoderTargetBuffer) throws(MediaError) {
        try EncoderProbe.checkZeroCopy(buffer.frame, settings: settings)
    }

    private func target(_ buffer: EncoderTargetBuffer) throws(GPUError) -> (gpu: GPUCompositor, id: EncoderTargetID) {
        guard let t = state.withLock({ $0.buffers[buffer.id]?.target }) else { throw .badFrame("encoder buffer \(buffer.id) is not imported") }
        return t
    }

    func render(into buffer: EncoderTargetBuffer) throws(GPUError) -> UInt64 {
        let t = try target(buffer)
        return try t.gpu.renderEncoderTarget(t.id)
    }

    func fenceSignalled(_ fence: UInt64, wait: Bool) throws(GPUError) -> Bool {
        guard let (gpu, _) = current() else { throw .shutDown }
        return try gpu.encoderTargetDone(fence, wait: wait)
    }

    func encode(_ buffer: EncoderTargetBuffer, pts: MediaTime, release: EncoderRelease) {
        guard let encoder else { release(); return }
        encoder.push(.dmaBuf(buffer.frame, pts: pts, release: release))
    }

    /// The GPU's target (in whichever compositor made it; a shut-down one has
    /// none left), then the GBM buffer: its fds closed, its buffer objects destroyed.
    func free(_ buffer: EncoderTargetBuffer) {
        let entry = state.withLock { $0.buffers.removeValue(forKey: buffer.id) }
        if let t = entry?.target { t.gpu.removeEncoderTarget(t.id) }
        withExtendedLifetime(entry) {}
    }
}

/// The setup's trial of the zero-copy path, through the seam: for each
/// modifier EGL renders NV12 planes with (LINEAR last) and each buffer layout,
/// one buffer is allocated, imported and encoded once; the first that gets
/// through is the take's. Every refusal is kept for the log.
enum ZeroCopyTrial {
    struct Outcome {
        var trials: [ModifierTrial]
        var chosen: (modifier: UInt64, layout: EncoderBufferLayout)?
    }

    static func run(modifiers: [UInt64], size: PixelSize,
                    device: (EncoderBufferLayout) throws(GPUError) -> any ZeroCopyDevice) -> Outcome {
        var trials: [ModifierTrial] = []
        for modifier in EncoderPlanner.trialOrder(modifiers) {
            for layout in EncoderBufferLayout.candidates(modifier: modifier) {
                var trial = ModifierTrial(modifier: modifier, layout: layout.rawValue)
                do throws(GPUError) {
                    let d = try device(layout)
                    let b: EncoderTargetBuffer
                    do throws(GPUError) { b = try d.allocate(size: size, modifier: modifier) } catch {
                        trial.failedAt = .gbm; trial.reason = "\(error)"; trials.append(trial); continue
                    }
                    defer { d.free(b) }
                    do throws(GPUError) { try d.importTarget(b) } catch {
                        trial.failedAt = .egl; trial.reason = "\(error)"; trials.append(trial); continue
                    }
                    do throws(MediaError) { try d.checkEncoder(b) } catch {
                        trial.failedAt = .vaapi; trial.reason = "\(error)"; trials.append(trial); continue
                    }
                } catch {
                    trial.failedAt = .gbm; trial.reason = "\(error)"; trials.append(trial); continue
                }
                trials.append(trial)
                return Outcome(trials: trials, chosen: (modifier, layout))
            }
        }
        return Outcome(trials: trials, chosen: nil)
    }
}
