import CEGL
import DiptychCore
import CGLES
import DiptychCUDA
import Foundation

/// The kinds of GL/EGL object the renderer deletes (for the test deleter hook).
enum GLResourceKind: String, Hashable, Sendable { case texture, buffer, framebuffer, image }

/// Injection points for tests: fences that signal on command, a deleter that
/// sees every deletion, and the fallbacks of contexts without
/// GL_EXT_buffer_storage or EGL_KHR_fence_sync.
struct GPUTestHooks {
    var fenceOps: FenceOps?
    var onDelete: ((GLResourceKind, [UInt32]) -> Void)?
    /// False: staging in host memory and readbacks mapped on the render thread,
    /// as on a context without GL_EXT_buffer_storage.
    var persistentMapping = true
    /// False: GL sync objects (render thread only), as without EGL_KHR_fence_sync
    /// (`DIPTYCH_GPU_FENCES=gl` chooses them too, for comparison).
    var eglFences = GPURequest.settings.fences == .egl
    /// The CUDA–GL interop calls for a CUDA device (nil: the driver's).
    var cudaCalls: ((Int) throws(GPUError) -> any CUDAGLCalls)?
    /// Readback buffers (`importedReadback`) and staging slots (`importedStaging`)
    /// in this memory (nil: `DIPTYCH_GPU_READBACK`, `DIPTYCH_CUDA_UPLOADS`).
    var exportedMemory: ExportedMemorySource?
    var importedReadback = true
    var importedStaging = false
    /// NV12 pictures read in place by the compute pass, `in-place` or
    /// `device` (copied into device buffers first) (nil: `DIPTYCH_GPU_PICTURES`).
    var pictures: GPURequest.Pictures?
    init(fenceOps: FenceOps? = nil, onDelete: ((GLResourceKind, [UInt32]) -> Void)? = nil,
         persistentMapping: Bool = true, eglFences: Bool = GPURequest.settings.fences == .egl, cudaCalls: ((Int) throws(GPUError) -> any CUDAGLCalls)? = nil,
         exportedMemory: ExportedMemorySource? = nil) {
        self.fenceOps = fenceOps; self.onDelete = onDelete
        self.persistentMapping = persistentMapping; self.eglFences = eglFences; self.cudaCalls = cudaCalls
        self.exportedMemory = exportedMemory
    }
}

/// The one place GL objects die: now, or once the fence of their last use has
/// signalled (`FenceTimeline.retire`). Each resource type releases itself
/// through it. Render thread only.
struct GLReleaser {
    let timeline: FenceTimeline
    let hooks: GPUTestHooks
    let context: GLContext

    func delete(_ kind: GLResourceKind, _ ids: [GLuint]) {
        let ids = ids.filter { $0 != 0 }
        guard !ids.isEmpty else { return }
        hooks.onDelete?(kind, ids)
        switch kind {
        case .texture: glDeleteTextures(GLsizei(ids.count), ids)
        case .buffer: glDeleteBuffers(GLsizei(ids.count), ids)
        case .framebuffer: glDeleteFramebuffers(GLsizei(ids.count), ids)
        case .image: break
        }
    }

    /// Deletes `ids` once work up to `lastUse` has completed.
    func retire(lastUse: UInt64, _ kind: GLResourceKind, _ ids: [GLuint]) {
        timeline.retire(lastUse: lastUse) { delete(kind, ids) }
    }

    /// Destroys an EGLImage (after the textures made from it).
    func destroy(image: EGLImageKHR) {
        hooks.onDelete?(.image, [])
        _ = context.procs.destroyImage?(context.display, image)
    }
}
