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
    /// Copies `count` bytes from the start into `dst` and waits for them;
    /// with `handOver`, the copy first waits for GL to have signalled it.
    func copyOut(count: Int, to dst: UnsafeMutableRawPointer, after handOver: (any HandOverSemaphore)?) throws(GPUError)
    /// Copies planes in (from host memory or from the device) and waits for them.
    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError)
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

/// The other API's side of a semaphore GL signals once it has written a
/// buffer of exported memory (GL_EXT_external_objects: without it, what GL
/// wrote is not promised to be visible outside GL, whatever fence has signalled).
protocol HandOverSemaphore: AnyObject, Sendable {}

/// A new shared semaphore: a descriptor for GL's import (the import takes
/// it) and the other API's side, waited on by copies out.
struct SemaphoreExport {
    var glDescriptor: Int32
    var waiter: any HandOverSemaphore
}

/// Where readback buffers come from when GL does not make them: allocations
/// of exported memory, and (optionally) the host memory delivered frames are
/// copied into (page-locked, so the copy runs at bus speed).
struct ExportedMemorySource {
    /// What the path is called (`CUDA`).
    var name: String
    /// The CUDA device whose memory it is (CUDA frames of another device cannot be copied in).
    var device: Int = 0
    var allocate: (Int) throws(GPUError) -> any ExportedMemory
    var hostMemory: FrameBufferPool.Allocator?
    /// One semaphore per readback buffer, signalled by GL after each frame
    /// written into it (CUDA's source); nil: memory GL writes is visible to the
    /// copy once the fence has signalled (the tests' mapped files).
    var makeSemaphore: (() throws(GPUError) -> SemaphoreExport)? = nil
}

/// A source of exported memory and the GL calls that import it (and its
/// semaphores, where the source hands memory over with them).
struct ImportedMemory {
    var source: ExportedMemorySource
    var procs: MemoryObjectProcs
    var semaphoreProcs: SemaphoreProcs? = nil
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

/// The GL entry points of GL_EXT_semaphore and GL_EXT_semaphore_fd.
struct SemaphoreProcs {
    var generate: PFNGLGENSEMAPHORESEXTPROC
    var delete: PFNGLDELETESEMAPHORESEXTPROC
    var importFD: PFNGLIMPORTSEMAPHOREFDEXTPROC
    var signal: PFNGLSIGNALSEMAPHOREEXTPROC

    static func load(_ caps: GPUCapabilities) -> SemaphoreProcs? {
        guard caps.semaphoreFD,
              let g = loadProc("glGenSemaphoresEXT", as: PFNGLGENSEMAPHORESEXTPROC.self),
              let d = loadProc("glDeleteSemaphoresEXT", as: PFNGLDELETESEMAPHORESEXTPROC.self),
              let i = loadProc("glImportSemaphoreFdEXT", as: PFNGLIMPORTSEMAPHOREFDEXTPROC.self),
              let s = loadProc("glSignalSemaphoreEXT", as: PFNGLSIGNALSEMAPHOREEXTPROC.self) else { return nil }
        return SemaphoreProcs(generate: g, delete: d, importFD: i, signal: s)
    }
}

/// GL's import of a shared semaphore, and the other API's side of it. GL
/// signals it after writing a buffer, naming that buffer; the next copy out of
/// the buffer waits for it; each signal is followed by exactly one wait
/// (`pending`). Render thread, but for `takeWait` (under the compositor's lock).
final class HandOver {
    private(set) var semaphore: GLuint = 0
    let waiter: any HandOverSemaphore
    /// Signalled and not yet waited for.
    private(set) var pending = false
    /// Signalled, and its wait lost (a failed copy, frames dropped): it cannot
    /// be signalled again; the buffer gets a new one.
    private(set) var spent = false

    init(_ made: SemaphoreExport, procs: SemaphoreProcs) throws(GPUError) {
        waiter = made.waiter
        _ = glGetError()
        procs.generate(1, &semaphore)
        procs.importFD(semaphore, GL.handleTypeOpaqueFD, made.glDescriptor)
        let e = glGetError()
        guard e == GL.noError, semaphore != 0 else {
            if semaphore != 0 { procs.delete(1, &semaphore) } else { close(made.glDescriptor) }
            throw .gl(label: "importing a semaphore (glImportSemaphoreFdEXT)", code: e)
        }
    }

    /// After the GL work that writes `buffer`: hands it over.
    func signal(buffer: GLuint, procs: SemaphoreProcs) {
        precondition(!pending && !spent, "a semaphore signalled twice without a wait")
        var b = buffer
        procs.signal(semaphore, 1, &b, 0, nil, nil)
        pending = true
    }

    /// The side the next copy out waits on (nil: nothing to wait for). A
    /// second call before another signal gets nil: the wait is taken once.
    func takeWait() -> (any HandOverSemaphore)? {
        guard pending else { return nil }
        pending = false
        return waiter
    }

    /// A signal whose wait will never come (frames dropped): the semaphore is used up.
    func abandon() { if pending { pending = false; spent = true } }

    /// The copy that took the wait failed: whether its wait ran is unknown.
    func spoil() { pending = false; spent = true }

    func release(procs: SemaphoreProcs) {
        if semaphore != 0 { procs.delete(1, &semaphore) }
        semaphore = 0
    }
}
