import DiptychCore
import CGLES
import DiptychCUDA
import Foundation
import Synchronization

/// NV12 readbacks into CUDA memory: the readback buffers are CUDA
/// allocations imported into the GL context, so the GPU's readback copy stays
/// in device memory (no bus transfer on GL's queue), and the caller's thread
/// copies each frame out with CUDA's copy engines into page-locked frame
/// memory once its fence has signalled (docs/ARCHITECTURE.md, "NV12 read back
/// through CUDA"). No cuGraphics map or unmap is involved.
final class CUDAReadbackMemory: ExportedMemory, Sendable {
    let memory: CUDAExportableMemory
    /// Copies out (readbacks) and in (uploads), each on a pool of streams of
    /// their own, several threads' copies at once.
    let copiersOut: CUDACopyPool, copiersIn: CUDACopyPool
    /// Page-locked memory that host planes are gathered into before they go
    /// in (`BouncedUpload`), made at the first copy in (staging slots only).
    private let pinned: FrameBufferPool.Allocator?
    /// The bounce buffer's address, made at the first copy in that wants it
    /// (nil with `failed` where none could be made).
    private let bounce = Mutex<(address: UInt?, failed: Bool)>((nil, false))
    /// Host planes gathered into the bounce buffer with streaming stores (`GPUTuning.streamingCopy`).
    private let streamingCopy: Bool
    var size: Int { memory.size }

    init(_ memory: CUDAExportableMemory, copiersOut: CUDACopyPool, copiersIn: CUDACopyPool, pinned: FrameBufferPool.Allocator?,
         streamingCopy: Bool) {
        self.memory = memory; self.copiersOut = copiersOut; self.copiersIn = copiersIn; self.pinned = pinned
        self.streamingCopy = streamingCopy
    }

    deinit { if let a = bounce.withLock({ $0.address }) { pinned?.free(UnsafeMutableRawPointer(bitPattern: a)!) } }

    /// The slot's page-locked bounce buffer (nil where none could be made:
    /// host planes then go from where they are).
    private func bounceBuffer() -> UnsafeMutableRawPointer? {
        let address = bounce.withLock { b in
            if b.address == nil && !b.failed, let pinned {
                b.address = pinned.allocate(memory.size).map { UInt(bitPattern: $0) }
                b.failed = b.address == nil
            }
            return b.address
        }
        return address.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
    }

    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) {
        var planes = planes
        if BouncedUpload.wanted(planes), let b = bounceBuffer(),
           let one = BouncedUpload.gather(planes, into: b, capacity: memory.size, copy: { [streamingCopy] in
               CUDAPinnedMemory.copy($0, from: $1, count: $2, streaming: streamingCopy)
           }) {
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

    func copyOut(_ planes: [DevicePlaneCopy]) throws(GPUError) {
        let base = memory.address
        do throws(CUDAError) {
            try copiersOut.take().copy(planes.map { p in
                CUDACopyOut.Plane(source: .device(base + UInt64(p.offset)), pitch: p.pitch, rowBytes: p.rowBytes, rows: p.rows,
                                  destination: p.destination, dstPitch: p.dstPitch)
            })
        } catch { throw .cudaInterop("copying \(planes.count) planes to device memory: \(error)") }
    }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) {
        do throws(CUDAError) {
            try copiersOut.take().copy(from: memory.address, count: count, to: dst)
        } catch {
            throw .cudaInterop("reading back \(count) bytes: \(error)")
        }
    }
}

extension GPUContextFacts {
    /// What `context` offers (render thread).
    init(_ context: GLContext) {
        self.init()
        glVersion = context.info.version
        isSoftware = context.info.isSoftware
        computeShaders = context.caps.computeShaders
        bufferStorage = context.procs.bufferStorage != nil
        eglFences = context.procs.createSync != nil && context.procs.destroySync != nil && context.procs.clientWaitSync != nil
        memoryObjects = MemoryObjectProcs.load(context.caps) != nil
        textureNorm16 = context.caps.textureNorm16
    }
}

extension CUDAFacts {
    /// Render thread, at a renderer's start: where CUDA stands against the
    /// context's GPU and, with `tryImport`, whether bytes GL writes into
    /// imported CUDA memory come back (the memory's source, where they do).
    /// A test's fakes (`GPUTestHooks`: CUDA calls, exported memory) stand for
    /// CUDA on the context's device; fake memory is taken as working.
    static func probe(_ context: GLContext, hooks: GPUTestHooks, copiers: Int, streamingCopy: Bool,
                      tryImport: Bool) -> (CUDAFacts, ImportedMemory?) {
        let device: Device = hooks.cudaCalls != nil || hooks.exportedMemory != nil
            ? .sameAsGL(hooks.exportedMemory?.device ?? 0) : cudaDevice(context)
        guard tryImport, case .sameAsGL(let ordinal) = device, let procs = MemoryObjectProcs.load(context.caps) else {
            return (CUDAFacts(device: device), nil)
        }
        if let fake = hooks.exportedMemory { return (CUDAFacts(device: device, roundTrip: .works), ImportedMemory(source: fake, procs: procs)) }
        let source: ExportedMemorySource
        switch ExportedMemorySource.cuda(device: ordinal, copiers: copiers, streamingCopy: streamingCopy) {
        case .success(let s): source = s
        case .failure(let why): return (CUDAFacts(device: device, roundTrip: .fails(why.message)), nil)
        }
        // What GL wrote reaches CUDA's copy once the frame's fence has signalled (the copy waits for it).
        let m = ImportedMemory(source: source, procs: procs)
        do throws(GPUError) {
            try ExportedMemorySource.roundTrip(m, releaser: GLReleaser(timeline: FenceTimeline(), hooks: hooks, context: context))
        } catch { return (CUDAFacts(device: device, roundTrip: .fails("\(error)")), nil) }
        return (CUDAFacts(device: device, roundTrip: .works), m)
    }

    /// The CUDA device that runs the GL context current on this thread (the
    /// only one where the driver cannot say and sees one); or why none.
    private static func cudaDevice(_ context: GLContext) -> Device {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): return .absent(e.reason)
        }
        if context.info.isSoftware { return .other("the GL context runs on a software renderer (\(context.info.renderer))") }
        guard context.info.vendor.lowercased().contains("nvidia") else {
            return .other("the GL context runs on \(context.info.renderer) (\(context.info.vendor)), not on an NVIDIA GPU")
        }
        guard let device = (try? driver.devicesOfCurrentGLContext())?.first ?? (driver.deviceCount == 1 ? 0 : nil) else {
            return .other("no CUDA device runs this GL context (\(context.info.renderer))")
        }
        return .sameAsGL(device)
    }
}

/// Why CUDA's exported memory could not be made.
struct CUDAMemoryUnavailable: Error { var message: String }

extension ExportedMemorySource {
    /// A small round trip before the path is taken: bytes GL copies into an
    /// import come back through the source's copy out.
    static func roundTrip(_ m: ImportedMemory, releaser: GLReleaser) throws(GPUError) {
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

    /// CUDA's, on CUDA device `device` (the one that runs the GL context),
    /// with `copiers` streams each way; or why the driver cannot make it.
    static func cuda(device: Int, copiers: Int, streamingCopy: Bool) -> Result<ExportedMemorySource, CUDAMemoryUnavailable> {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): return .failure(CUDAMemoryUnavailable(message: e.reason))
        }
        if case .failure(let e) = CUDAExportableMemory.calls { return .failure(CUDAMemoryUnavailable(message: e.reason)) }
        let context: CUDAPrimaryContext, copiersOut: CUDACopyPool, copiersIn: CUDACopyPool
        do throws(CUDAError) {
            context = try driver.primaryContext(ordinal: device)
            copiersOut = try CUDACopyPool(context: context, count: copiers)
            copiersIn = try CUDACopyPool(context: context, count: copiers)
            _ = try CUDAExportableMemory(context: context, bytes: 1)   // the calls work here
        } catch { return .failure(CUDAMemoryUnavailable(message: "\(error)")) }
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
        return .success(ExportedMemorySource(name: "CUDA", device: device, allocate: { bytes throws(GPUError) in
            do throws(CUDAError) {
                return CUDAReadbackMemory(try CUDAExportableMemory(context: context, bytes: bytes), copiersOut: copiersOut,
                                          copiersIn: copiersIn, pinned: host, streamingCopy: streamingCopy)
            } catch { throw .cudaInterop("readback memory of \(bytes) bytes: \(error)") }
        }, hostMemory: host))
    }
}
