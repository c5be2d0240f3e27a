import CGLES
import DiptychCore
import Foundation
import Glibc

/// Memory a readback buffer lives in when it is not GL's own: its owner
/// exports it as a file descriptor, the GL context imports it
/// (GL_EXT_memory_object_fd) and the GPU's readback copies write into it;
/// its owner copies it out to host memory, on any thread, once the frame's
/// fence has signalled (docs/ARCHITECTURE.md, "NV12 read back through CUDA").
protocol ExportedMemory: AnyObject, Sendable {
    /// Bytes of the allocation (at least the size asked for).
    var size: Int { get }
    /// A new descriptor; the import takes it (closed here if the import fails).
    func exportDescriptor() throws(GPUError) -> Int32
    /// Copies `count` bytes from the start into `dst` and waits for them.
    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError)
    /// Copies planes in (from host memory or from the device) and waits for them.
    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError)
    /// Copies planes out to other memory of the same device (an encoder's
    /// CUDA frame) and waits for them: nothing crosses host memory.
    func copyOut(_ planes: [DevicePlaneCopy]) throws(GPUError)
}

extension ExportedMemory {
    func copyOut(_ planes: [DevicePlaneCopy]) throws(GPUError) {
        throw .unsupported("copies to device memory from \(type(of: self))")
    }
}

/// One plane out of exported memory to device memory: `rows` rows of
/// `rowBytes` from byte `offset`, `pitch` apart, to `destination`, `dstPitch` apart.
struct DevicePlaneCopy {
    var offset: Int
    var pitch: Int
    var rowBytes: Int
    var rows: Int
    var destination: UInt64
    var dstPitch: Int
}

/// One plane into exported memory: `rows` rows of `rowBytes`, `pitch` apart
/// at the source, `dstPitch` apart from byte `offset` of the memory.
struct PlaneTransfer {
    enum Source { case host(UnsafeRawPointer), device(UInt64) }
    var source: Source
    var pitch: Int
    var rowBytes: Int
    var rows: Int
    var offset: Int
    var dstPitch: Int
    /// A host source in page-locked memory (copied in as it is, no bounce).
    var pageLocked = false
}

/// Where readback buffers come from when GL does not make them: allocations
/// of exported memory, and (optionally) the host memory delivered frames are
/// copied into (page-locked, so the copy runs at bus speed).
struct ExportedMemorySource: Sendable {
    /// What the path is called (`CUDA`).
    var name: String
    /// The CUDA device whose memory it is (CUDA frames of another device cannot be copied in).
    var device: Int = 0
    var allocate: @Sendable (Int) throws(GPUError) -> any ExportedMemory
    var hostMemory: FrameBufferPool.Allocator?
}

/// A source of exported memory and the GL calls that import it.
struct ImportedMemory {
    var source: ExportedMemorySource
    var procs: MemoryObjectProcs
}

/// The GL entry points of GL_EXT_memory_object and GL_EXT_memory_object_fd.
struct MemoryObjectProcs {
    var create: PFNGLCREATEMEMORYOBJECTSEXTPROC
    var delete: PFNGLDELETEMEMORYOBJECTSEXTPROC
    var importFD: PFNGLIMPORTMEMORYFDEXTPROC
    var bufferStorage: PFNGLBUFFERSTORAGEMEMEXTPROC
    var parameter: PFNGLMEMORYOBJECTPARAMETERIVEXTPROC

    static func load(_ caps: GPUCapabilities) -> MemoryObjectProcs? {
        guard caps.memoryObjectFD,
              let c = loadProc("glCreateMemoryObjectsEXT", as: PFNGLCREATEMEMORYOBJECTSEXTPROC.self),
              let d = loadProc("glDeleteMemoryObjectsEXT", as: PFNGLDELETEMEMORYOBJECTSEXTPROC.self),
              let i = loadProc("glImportMemoryFdEXT", as: PFNGLIMPORTMEMORYFDEXTPROC.self),
              let b = loadProc("glBufferStorageMemEXT", as: PFNGLBUFFERSTORAGEMEMEXTPROC.self),
              let p = loadProc("glMemoryObjectParameterivEXT", as: PFNGLMEMORYOBJECTPARAMETERIVEXTPROC.self) else { return nil }
        return MemoryObjectProcs(create: c, delete: d, importFD: i, bufferStorage: b, parameter: p)
    }
}

/// One GL buffer backed by imported memory: the memory object and the
/// buffer made on it, and the memory they hold. Render thread.
final class ImportedBuffer {
    let memory: any ExportedMemory
    private(set) var object: GLuint = 0
    private(set) var buffer: GLuint = 0

    /// Imports `memory` and makes a buffer of its size on it, bound to `target`.
    init(_ memory: any ExportedMemory, target: GLenum, procs: MemoryObjectProcs) throws(GPUError) {
        self.memory = memory
        _ = glGetError()
        let fd = try memory.exportDescriptor()
        procs.create(1, &object)
        // The allocation is this buffer's alone. Without saying so, NVIDIA's GL
        // may store what it writes compressed: CUDA, reading the raw memory,
        // then finds zeros or older bytes wherever a block compressed (on the
        // H200: flat areas of frames, whole glReadPixels regions).
        var dedicated = GLint(GL_TRUE)
        procs.parameter(object, GLenum(GL_DEDICATED_MEMORY_OBJECT_EXT), &dedicated)
        procs.importFD(object, GLuint64(memory.size), GL.handleTypeOpaqueFD, fd)
        var e = glGetError()
        if e != GL.noError || object == 0 {
            close(fd)   // a failed import leaves the descriptor with us
            if object != 0 { procs.delete(1, &object) }
            throw .gl(label: "importing \(memory.size) bytes of exported memory (glImportMemoryFdEXT)", code: e)
        }
        glGenBuffers(1, &buffer)
        glBindBuffer(target, buffer)
        procs.bufferStorage(target, GLsizeiptr(memory.size), object, 0)
        e = glGetError()
        if e != GL.noError {
            glBindBuffer(target, 0)
            glDeleteBuffers(1, &buffer)
            procs.delete(1, &object)
            throw .gl(label: "a buffer on \(memory.size) bytes of imported memory (glBufferStorageMemEXT)", code: e)
        }
    }

    /// Deletes the buffer and the memory object; nothing in flight uses them.
    func release(_ r: GLReleaser, procs: MemoryObjectProcs) {
        r.delete(.buffer, [buffer])
        procs.delete(1, &object)
        buffer = 0; object = 0
    }
}
