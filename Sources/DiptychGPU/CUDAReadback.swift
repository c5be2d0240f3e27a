import DiptychCore
import CGLES
import DiptychCUDA
import Foundation

/// NV12 readbacks into CUDA memory: the readback buffers are CUDA
/// allocations imported into the GL context, so the GPU's readback copy stays
/// in device memory (no bus transfer on GL's queue), and the caller's thread
/// copies each frame out with CUDA's copy engines into page-locked frame
/// memory once its fence has signalled (docs/ARCHITECTURE.md, "NV12 read back
/// through CUDA"). No cuGraphics map or unmap is involved.
final class CUDAReadbackMemory: ExportedMemory, @unchecked Sendable {
    let memory: CUDAExportableMemory
    /// Copies out (readbacks) and in (uploads), each on a pool of streams of
    /// their own, several threads' copies at once.
    let copiersOut: CUDACopyPool, copiersIn: CUDACopyPool
    /// Page-locked memory that host planes are gathered into before they go
    /// in (`BouncedUpload`), made at the first copy in (staging slots only).
    private let pinned: FrameBufferPool.Allocator?
    private let lock = NSLock()
    private var bounce: UnsafeMutableRawPointer?
    private var bounceFailed = false
    var size: Int { memory.size }

    init(_ memory: CUDAExportableMemory, copiersOut: CUDACopyPool, copiersIn: CUDACopyPool, pinned: FrameBufferPool.Allocator?) {
        self.memory = memory; self.copiersOut = copiersOut; self.copiersIn = copiersIn; self.pinned = pinned
    }

    deinit { if let bounce { pinned?.free(bounce) } }

    /// The slot's page-locked bounce buffer (nil where none could be made:
    /// host planes then go from where they are).
    private func bounceBuffer() -> UnsafeMutableRawPointer? {
        lock.lock(); defer { lock.unlock() }
        if bounce == nil && !bounceFailed, let pinned {
            bounce = pinned.allocate(memory.size)
            bounceFailed = bounce == nil
        }
        return bounce
    }

    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) {
        var planes = planes
        if BouncedUpload.wanted(planes), let b = bounceBuffer(),
           let one = BouncedUpload.gather(planes, into: b, capacity: memory.size, copy: { CUDAPinnedMemory.copy($0, from: $1, count: $2) }) {
            planes = [one]
        }
        let base = memory.address
        do throws(CUDAError) {
            try copiersIn.take().copy(planes.map { p in
                let s: CUDACopyOut.Plane.Source
                switch p.source {
                case .host(let h): s = .host(h)
                case .device(let a): s = .device(a)
                }
                return CUDACopyOut.Plane(source: s, pitch: p.pitch, rowBytes: p.rowBytes, rows: p.rows,
                                         destination: base + UInt64(p.offset), dstPitch: p.dstPitch)
            })
        } catch { throw .cudaInterop("uploading \(planes.count) planes: \(error)") }
    }

    func exportDescriptor() throws(GPUError) -> Int32 {
        do throws(CUDAError) { return try memory.exportDescriptor() } catch { throw .cudaInterop("readback memory: \(error)") }
    }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) {
        do throws(CUDAError) {
            try copiersOut.take().copy(from: memory.address, count: count, to: dst)
        } catch {
            throw .cudaInterop("reading back \(count) bytes: \(error)")
        }
    }
}

extension ExportedMemorySource {
    /// Render thread, at a renderer's start: the test hooks' source; else
    /// CUDA's where the context can import memory and the driver can make it
    /// (else nil, logged: GL's own buffers). `asked` names the setting.
    static func choose(_ releaser: GLReleaser, log: (String) -> Void, asked: String?) -> ImportedMemory? {
        let caps = releaser.context.caps
        if let s = releaser.hooks.exportedMemory {
            return MemoryObjectProcs.load(caps).map { ImportedMemory(source: s, procs: $0) }
        }
        func no(_ why: String) -> ImportedMemory? {
            if let asked { log("diptych-gpu: \(asked): \(why); transfers through GL") }
            return nil
        }
        guard let procs = MemoryObjectProcs.load(caps) else { return no("this GL context lacks GL_EXT_memory_object_fd") }
        var why = ""
        guard let s = cuda(why: &why) else { return no(why) }
        // What GL wrote reaches CUDA's copy once the frame's fence has signalled (the copy waits for it).
        let m = ImportedMemory(source: s, procs: procs)
        do throws(GPUError) { try roundTrip(m, releaser: releaser) } catch { return no("\(error)") }
        return m
    }

    /// Uploads staged in imported CUDA memory asked for by name (`DIPTYCH_CUDA_UPLOADS=import`).
    static var stagingRequested: Bool { GPURequest.settings.uploads == .import }
    /// Whether uploads are staged in imported memory under `uploads`
    /// (`import`: asked for; `off`: GL's buffers; `auto`: wherever the
    /// readback is imported, `importReadback`).
    static func importsStaging(_ uploads: GPURequest.Uploads, importReadback: Bool) -> Bool {
        uploads == .import || (uploads == .auto && importReadback)
    }
    /// Whether NV12 pictures are read in place under `pictures`: asked for
    /// by name, or by default where staging is imported.
    static func readsPicturesInPlace(_ pictures: GPURequest.Pictures, stagingImported: Bool) -> Bool {
        pictures == .inPlace || pictures == .device || (stagingImported && pictures == .auto)
    }
    /// CUDA streams each way (`DIPTYCH_CUDA_COPIERS`, default 16). Every
    /// caller's copy holds its stream until the copy has completed, so with
    /// fewer streams than callers the copy engines idle while callers wake.
    static var copierCount: Int { GPURequest.settings.copiers }

    /// A small round trip before the path is taken: bytes GL copies into an
    /// import come back through the source's copy out.
    private static func roundTrip(_ m: ImportedMemory, releaser: GLReleaser) throws(GPUError) {
        let n = 65536
        let memory = try m.source.allocate(n)
        let trial = try ImportedBuffer(memory, target: GL.copyWriteBuffer, procs: m.procs)
        defer { trial.release(releaser, procs: m.procs) }
        // Bytes that vary, then flat ones (what a GPU compresses, if it does).
        let pattern = (0..<n).map { $0 < n / 2 ? UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) : 0x5a }
        var source: GLuint = 0
        glGenBuffers(1, &source)
        glBindBuffer(GL.copyReadBuffer, source)
        pattern.withUnsafeBytes { glBufferData(GL.copyReadBuffer, GLsizeiptr(n), $0.baseAddress, GLenum(GL_STATIC_DRAW)) }
        glCopyBufferSubData(GL.copyReadBuffer, GL.copyWriteBuffer, 0, 0, GLsizeiptr(n))
        glBindBuffer(GL.copyReadBuffer, 0)
        glBindBuffer(GL.copyWriteBuffer, 0)
        glFinish()
        glDeleteBuffers(1, &source)
        let e = glGetError()
        guard e == GL.noError else { throw .gl(label: "a copy into imported memory", code: e) }
        let back = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 64)
        defer { back.deallocate() }
        try memory.copyOut(count: n, to: back)
        guard memcmp(back, pattern, n) == 0 else { throw .cudaInterop("bytes GL wrote into imported memory did not come back") }
    }

    /// CUDA's, on the device that runs the GL context current on this thread
    /// (render thread); nil where there is no such device or the driver lacks
    /// the calls (the caller logs `why`).
    static func cuda(why: inout String) -> ExportedMemorySource? {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): why = e.reason; return nil
        }
        if case .failure(let e) = CUDAExportableMemory.calls { why = e.reason; return nil }
        guard let device = (try? driver.devicesOfCurrentGLContext())?.first ?? (driver.deviceCount == 1 ? 0 : nil) else {
            why = "no CUDA device runs this GL context"; return nil
        }
        let context: CUDAPrimaryContext, copiersOut: CUDACopyPool, copiersIn: CUDACopyPool
        do throws(CUDAError) {
            context = try driver.primaryContext(ordinal: device)
            copiersOut = try CUDACopyPool(context: context, count: copierCount)
            copiersIn = try CUDACopyPool(context: context, count: copierCount)
            _ = try CUDAExportableMemory(context: context, bytes: 1)   // the calls work here
        } catch { why = "\(error)"; return nil }
        let host = FrameBufferPool.Allocator(
            allocate: { bytes in
                guard (try? context.push()) != nil else { return nil }
                defer { context.pop() }
                return try? CUDAPinnedMemory.allocate(bytes: bytes)
            },
            free: { p in
                let current = (try? context.push()) != nil
                CUDAPinnedMemory.free(p)
                if current { context.pop() }
            })
        return ExportedMemorySource(name: "CUDA", device: device, allocate: { bytes throws(GPUError) in
            do throws(CUDAError) {
                return CUDAReadbackMemory(try CUDAExportableMemory(context: context, bytes: bytes), copiersOut: copiersOut,
                                          copiersIn: copiersIn, pinned: host)
            } catch { throw .cudaInterop("readback memory of \(bytes) bytes: \(error)") }
        }, hostMemory: host)
    }
}
