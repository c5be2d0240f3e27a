import DiptychCore
import Foundation
import DiptychCUDA

/// A CUDA frame waiting for the next hop, and what keeps its memory.
struct CUDAUpload {
    var frame: CUDAFrame
    var holder: any CUDAFrameHolder
}

/// CUDA frames into the stream textures (CUDA–GL interop): the frame becomes
/// the role's pending upload on the caller's thread (no hop); the next hop
/// takes a free texture set for it, queues its planes in the context's
/// `CUDATextureUploads` and copies them on the GPU, batched with every
/// other CUDA frame of that hop. The holder stays until the fence after the
/// hop's draws (docs/ARCHITECTURE.md, "Lifetimes end at fence completion").
extension GPURenderer {
    /// Caller side: checks `frame` and makes it the role's pending upload.
    func setPending(_ frame: CUDAFrame, holder: any CUDAFrameHolder, role: StreamRole) throws(GPUError) {
        guard frame.width > 0, frame.height > 0, frame.width % 2 == 0, frame.height % 2 == 0 else {
            throw .badFrame("CUDA frame \(frame.width)x\(frame.height): width and height must be positive and even")
        }
        guard frame.width <= maxTextureSize, frame.height <= maxTextureSize else {
            throw .badFrame("CUDA frame \(frame.width)x\(frame.height) exceeds this GPU's largest texture (\(maxTextureSize))")
        }
        guard frame.planes.count == 2, frame.planes.enumerated().allSatisfy({ $1.pitch >= frame.rowBytes(plane: $0) }) else {
            throw .badFrame("CUDA frame: expected a luma and a chroma plane, each pitch at least its row")
        }
        if frame.format == .p010 && !caps.textureNorm16 {
            throw .cudaInterop("10-bit frames need GL_EXT_texture_norm16, which this GL context lacks")
        }
        setPending(role, .cuda(CUDAUpload(frame: frame, holder: holder)))
    }

    /// Render thread: the context's CUDA uploads, made for the device of the
    /// first CUDA frame (the test hooks' calls, or the driver's).
    private func cudaUploads(device: Int) throws(GPUError) -> CUDATextureUploads {
        if let u = context.cudaUploads { return u }
        let u: CUDATextureUploads
        if let make = releaser.hooks.cudaCalls { u = CUDATextureUploads(calls: try make(device)) } else {
            u = try CUDATextureUploads.driver(ordinal: device)
        }
        context.cudaUploads = u
        return u
    }

    /// Render thread: the role's next texture set gets `upload`'s planes at
    /// the next flush and becomes current.
    func stage(_ upload: CUDAUpload, role: StreamRole) throws(GPUError) {
        RenderThread.assertCurrent()
        let uploads = try cudaUploads(device: upload.frame.device)
        let serial = try queueCopy(upload.frame, role: role, uploads: uploads)
        let holder = upload.holder
        timeline.retire(lastUse: serial) { withExtendedLifetime(holder) {} }
    }

    /// Render thread: `f`'s planes go into the role's next texture set at the
    /// next flush, and the set becomes current. Returns
    /// the serial of the submission the copies precede. Throws (changing
    /// nothing) where the set cannot be registered with CUDA.
    private func queueCopy(_ f: CUDAFrame, role: StreamRole, uploads: CUDATextureUploads) throws(GPUError) -> UInt64 {
        let sixteen = f.format == .p010
        let set = textures.set(for: role, format: .nv12, width: f.width, height: f.height, sixteenBit: sixteen)
        try uploads.enqueue(f, into: set, owner: self)
        let serial = timeline.pendingSerial
        set.lastUse = serial
        set.matrix = f.matrix
        set.range = f.range
        directFrames?.forget(role)
        textures.makeCurrent(set, role: role)
        timer.stats.cudaFrames += 1
        return serial
    }

    /// Render thread: copies every CUDA frame queued in this context.
    func flushCUDAUploads() throws(GPUError) {
        RenderThread.assertCurrent()
        guard let u = context.cudaUploads, !u.isEmpty else { return }
        let t0 = PassTimer.now()
        defer { timer.stats.cudaCPUMs += Double(PassTimer.now() - t0) / 1e6 }
        timer.stats.cudaMaps += 1
        try u.flush()
    }
}
