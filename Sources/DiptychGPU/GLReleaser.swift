import CEGL
import DiptychCore
import CGLES
import DiptychCUDA
import Foundation

/// The kinds of GL/EGL object the renderer deletes (for the test deleter hook).
enum GLResourceKind: String, Hashable, Sendable { case texture, buffer, framebuffer, image }

/// Fakes for tests, never decisions (those are the plan's: tests pass a
/// `GPUPlan` or a `GPURequest`): fences that signal on command, a deleter that
/// sees every deletion, CUDA–GL interop calls, and memory standing in for
/// CUDA's exported allocations.
struct GPUTestHooks: Sendable {
    var fenceOps: FenceOps?
    var onDelete: (@Sendable (GLResourceKind, [UInt32]) -> Void)?
    /// The CUDA–GL interop calls for a CUDA device (nil: the driver's). Their
    /// presence stands for CUDA on the context's device (`CUDAFacts.probe`).
    var cudaCalls: (@Sendable (Int) throws(GPUError) -> any CUDAGLCalls)?
    /// Memory imported where the plan says CUDA-imported (nil: CUDA's).
    var exportedMemory: ExportedMemorySource?
    init(fenceOps: FenceOps? = nil, onDelete: (@Sendable (GLResourceKind, [UInt32]) -> Void)? = nil,
         cudaCalls: (@Sendable (Int) throws(GPUError) -> any CUDAGLCalls)? = nil, exportedMemory: ExportedMemorySource? = nil) {
        self.fenceOps = fenceOps; self.onDelete = onDelete; self.cudaCalls = cudaCalls; self.exportedMemory = exportedMemory
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
