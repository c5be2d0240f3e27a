import CGLES
import DiptychCore

extension GPURenderer {
    /// Render thread, first thing in every hop that draws or samples stream
    /// textures: checks, then turns the pending uploads into textures. CUDA
    /// frames (and, with CUDA host uploads, staged NV12 frames) are queued in
    /// the context's `CUDATextureUploads` and, unless `flushCUDA` is false (a
    /// batch of frames flushes once for all of them, `FrameJob`), copied at
    /// once. Returns whether CUDA frames were queued.
    ///
    /// A hop that fails takes back what it queued (a copy left queued would
    /// run at some later flush, after the fence that was to cover it) and lets
    /// go of the staging slots it did not commit.
    @discardableResult
    func beginHop(flushCUDA: Bool = true) throws(GPUError) -> Bool {
        RenderThread.assertCurrent()
        try checkUsable()
        guard !pendingUploads.isEmpty else { return false }
        let pending = pendingUploads
        pendingUploads.removeAll()
        var queuedCUDA = false
        do throws(GPUError) {
            for role in StreamRole.allCases {
                switch pending[role] {
                case .staged(let st)? where plan.pictures == .inPlace && TexturePool.canReadInPlace(st, staging: staging):
                    directFrames?.forget(role)
                    textures.commitInPlace(st, from: staging)
                case .staged(let st)?:
                    directFrames?.forget(role)
                    textures.commit(st, from: staging, timer: timer)
                case .pooled(let u)?:
                    directFrames?.forget(role)
                    try textures.commitInPlace(u, imports: pictureImports!)
                case .keep(let f)?:
                    directFrames?.keep(f, role: role)
                case .cuda(let u)?:
                    try stage(u, role: role)
                    queuedCUDA = true
                case nil: break
                }
            }
            try checkGL("upload")
        } catch {
            context.cudaUploads?.drop(owner: self)
            for case .staged(let st) in pending.values where staging.slots[st.slot].staged { staging.abandon(st.slot) }
            throw error
        }
        if queuedCUDA && flushCUDA { try flushCUDAUploads() }
        return queuedCUDA
    }
}
