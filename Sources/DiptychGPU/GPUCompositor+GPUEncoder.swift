import Synchronization
import DiptychCore
import Foundation

/// Outputs encoded on the GPU (docs/ARCHITECTURE.md, "The GPU encoder"): the
/// compute pass writes the frame's NV12 into the output's buffer, the
/// encoder's passes read it there in the same submission, and only the
/// bitstream comes back. Render such an output with `readback: false` and
/// take its pictures with `nextEncoded`.
extension GPUCompositor {
    /// Encodes every frame rendered into `output` without readback from now
    /// on, at `rate` (for the level and the stream's timing).
    public func attachEncoder(output: OutputID, settings: GPUH264Settings, rate: FrameRate) throws(GPUError) -> GPUEncodedStream {
        try withRenderer { r throws(GPUError) -> GPUEncodedStream in
            guard r.hasComputePass else { throw r.noComputePass }
            let out = try r.output(output)
            if let old = out.encoder { try old.collect(wait: true); r.encoders.remove(old); old.release(); out.encoder = nil }
            let format = H264StreamFormat(width: out.canvas.width, height: out.canvas.height, rate: rate, matrix: out.matrix, range: out.range)
            let encoder = try OutputEncoder(output: output, format: format, settings: settings, programs: try r.context.h264Programs(),
                                             bufferStorage: r.context.procs.bufferStorage, reconstructions: r.encoderReconstruction)
            out.encoder = encoder
            r.encoders.add(encoder)
            return encoder.stream
        }
    }

    /// Compiles the GPU encoder's programs in this compositor's context now,
    /// where they are not yet, and returns the seconds it took. Cold,
    /// NVIDIA's compiler takes about 15 s for them (measured on the H200; its
    /// disk cache makes later starts take a fraction of a second), which the
    /// first encoder of a context otherwise spends on the render thread,
    /// holding every other frame of that context.
    public func prepareGPUEncoder() throws(GPUError) -> Double {
        try withRenderer { r throws(GPUError) -> Double in
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try r.context.h264Programs()
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
    }

    /// The next encoded picture of any output, in each output's order; nil
    /// when none is ready (with `wait`, when none is outstanding either).
    /// Pictures the render thread collected as it recorded later frames come
    /// without a hop to it.
    public func nextEncoded(wait: Bool) throws(GPUError) -> GPUEncodedPicture? {
        calls.lock(); defer { calls.unlock() }
        // Where the results are mapped and the fences can be waited for here, no hop to the render thread.
        enum Found: Sendable { case picture(GPUEncodedPicture), none, hop }
        let found = try callerSide { r throws(GPUError) -> Found in
            let encoders = r.encoders.all
            for e in encoders { if let p = e.take() { return .picture(p) } }
            var hop = false
            for e in encoders {
                if e.collectsOffThread(r.timeline) {
                    try e.collectOffThread(r.timeline, wait: wait)
                    if let p = e.take() { return .picture(p) }
                } else {
                    hop = true
                }
            }
            return hop ? .hop : .none
        }
        switch found {
        case .picture(let p): return p
        case .none: return nil
        case .hop: break
        }
        return try withRenderer { r throws(GPUError) -> GPUEncodedPicture? in
            for e in r.encoders.all where !e.collectsOffThread(r.timeline) {
                try e.collect(wait: wait)
                if let p = e.take() { return p }
            }
            return nil
        }
    }

    /// Before a frame of `output` is rendered: while its encoder has every
    /// result slot in flight, its oldest picture is waited for and kept
    /// (here where it can be, else on the render thread), so the render
    /// thread never waits for the GPU on a caller's behalf. `calls` is held.
    func makeRoomForEncodedPicture(output: OutputID) throws(GPUError) {
        guard let e = try callerSide({ r in r.encoders.all.first(where: { $0.output == output }) }) else { return }
        while true {
            enum Step: Sendable { case done, collected, hop }
            let step = try callerSide { r throws(GPUError) -> Step in
                guard e.inFlight >= OutputEncoder.depth - 1 else { return .done }
                guard e.collectsOffThread(r.timeline) else { return .hop }
                let before = e.inFlight
                try e.collectOffThread(r.timeline, wait: true)
                return e.inFlight >= before ? .done : .collected
            }
            switch step {
            case .done: return
            case .collected: continue
            case .hop:
                let before = e.inFlight
                try withRenderer { _ throws(GPUError) in try e.collect(wait: true) }
                if e.inFlight >= before { return }
            }
        }
    }

    /// The next picture `output` encodes is an IDR, with its parameter sets (a reconnected live output starts with one).
    public func requestKeyframe(output: OutputID) throws(GPUError) {
        try withRenderer { r throws(GPUError) in try r.output(output).encoder?.askKeyframe() }
    }

}

/// The GPU encoders of a renderer's outputs, readable from callers' threads.
final class OutputEncoders: Sendable {
    private let list = Mutex<[OutputEncoder]>([])
    var all: [OutputEncoder] { list.withLock { $0 } }
    func add(_ e: OutputEncoder) { list.withLock { $0.append(e) } }
    func remove(_ e: OutputEncoder) { list.withLock { $0.removeAll { $0 === e } } }
}

extension GPURenderer {
    /// Why the GPU encoder cannot read this compositor's frames: it has no compute pass.
    var noComputePass: GPUError {
        .unsupported(caps.computeShaders
            ? "the compute pass for the GPU encoder (this compositor draws with the \(plan.pass) pass)"
            : "OpenGL ES 3.1 compute shaders for the GPU encoder (\(info.renderer), \(info.version))")
    }
}
