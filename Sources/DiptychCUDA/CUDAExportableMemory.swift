import Synchronization
import CCUDA
import Glibc

/// Device memory that a GL context imports as a buffer object
/// (GL_EXT_memory_object_fd) and that CUDA's copy engines read with no
/// cuGraphics map or unmap: made with the virtual memory management calls
/// (`cuMemCreate` with a POSIX file descriptor handle, reserved, mapped and
/// made accessible on its device), one descriptor exported per import.
/// Freed (unmapped and released) when it goes; GL's imports keep the physical
/// memory until they are deleted too (docs/ARCHITECTURE.md, "NV12 read back
/// through CUDA").
public final class CUDAExportableMemory: @unchecked Sendable {   // CUDA VMM handles and fd, immutable until deinit
    public let context: CUDAPrimaryContext
    private var block = diptych_cuda_vmm_block()
    /// The bytes allocated (`bytes` rounded up to the device's granularity).
    public var size: Int { Int(block.size) }

    /// Whether this driver has the calls (looked up once).
    public static let calls: Result<Void, CUDAUnavailable> = {
        var why = [CChar](repeating: 0, count: 256)
        return diptych_cuda_vmm(&why) == nil ? .failure(CUDAUnavailable("CUDA's virtual memory calls: \(text(why))")) : .success(())
    }()

    /// At least `bytes` on the context's device.
    public init(context: CUDAPrimaryContext, bytes: Int) throws(CUDAError) {
        if case .failure(let e) = Self.calls { throw CUDAError(call: "cuMemCreate", code: -1, name: e.reason) }
        self.context = context
        try context.push()
        defer { context.pop() }
        var why = [CChar](repeating: 0, count: 256)
        let r = diptych_cuda_vmm_alloc(Int32(context.ordinal), bytes, &block, &why)
        guard r == 0 else {
            throw CUDAError(call: text(why), code: Int(r), name: r > 0 ? context.driver.errorName(CUresult(UInt32(r))) : "unavailable")
        }
    }

    /// The device address of byte 0.
    public var address: UInt64 { block.address }

    /// A new file descriptor for this memory; whoever imports it owns it (close it if the import fails).
    public func exportDescriptor() throws(CUDAError) -> Int32 {
        let fd = diptych_cuda_vmm_export(&block)
        guard fd >= 0 else { throw CUDAError(call: "cuMemExportToShareableHandle", code: -1, name: "no descriptor") }
        return fd
    }

    deinit {
        guard block.handle != 0, (try? context.push()) != nil else { return }
        diptych_cuda_vmm_free(&block)
        context.pop()
    }
}

/// Copies between device memory and host memory (or within the device) on
/// CUDA's copy engines, from any thread: a stream of its own (not ordered
/// after other streams' work) and an event whose waiters sleep, one copy at a
/// time.
public final class CUDACopyOut: Sendable {
    public let context: CUDAPrimaryContext
    /// The stream and the event, one copy at a time.
    private let queue: Mutex<Queue>
    private struct Queue: @unchecked Sendable {   // CUDA stream and event handles, used only under the Mutex
        var stream: CUstream?
        var event: CUevent?
    }

    public init(context: CUDAPrimaryContext) throws(CUDAError) {
        self.context = context
        let api = context.driver.api.pointee
        queue = Mutex(Queue())
        try context.push()
        defer { context.pop() }
        try queue.withLock { q throws(CUDAError) in
            try context.driver.check(api.cuStreamCreate(&q.stream, UInt32(CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
            try context.driver.check(api.cuEventCreate(&q.event, UInt32(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
        }
    }

    /// Copies `count` bytes at `address` into `dst` (page-locked memory: at bus
    /// speed; ordinary memory goes through the driver's bounce buffers) and waits.
    public func copy(from address: UInt64, count: Int, to dst: UnsafeMutableRawPointer) throws(CUDAError) {
        try queueAndWait { driver, api, stream throws(CUDAError) in
            try driver.check(api.cuMemcpyDtoHAsync(dst, CUdeviceptr(address), count, stream), "cuMemcpyDtoHAsync(\(count))")
        }
    }

    /// One copy at a time: the context current, `copies` puts copies on the
    /// stream, then this waits for them (sleeping on the event).
    private func queueAndWait(_ copies: (CUDADriver, CudaFunctions, CUstream?) throws(CUDAError) -> Void) throws(CUDAError) {
        let driver = context.driver, api = driver.api.pointee
        try queue.withLock { q throws(CUDAError) in
            try context.push()
            defer { context.pop() }
            try copies(driver, api, q.stream)
            try driver.check(api.cuEventRecord(q.event, q.stream), "cuEventRecord")
            try driver.check(api.cuEventSynchronize(q.event), "cuEventSynchronize")
        }
    }

    /// A plane to copy into device memory.
    public struct Plane {
        public enum Source { case host(UnsafeRawPointer), device(UInt64) }
        public var source: Source
        public var pitch: Int, rowBytes: Int, rows: Int
        public var destination: UInt64
        public var dstPitch: Int
        public init(source: Source, pitch: Int, rowBytes: Int, rows: Int, destination: UInt64, dstPitch: Int) {
            self.source = source; self.pitch = pitch; self.rowBytes = rowBytes; self.rows = rows
            self.destination = destination; self.dstPitch = dstPitch
        }
    }

    /// Copies `planes` into device memory and waits (from host memory: staged
    /// by the driver unless page-locked; from the device: on the device).
    public func copy(_ planes: [Plane]) throws(CUDAError) {
        try queueAndWait { driver, api, stream throws(CUDAError) in
            for p in planes {
                if p.rows == 1, case .host(let h) = p.source {
                    // One run of bytes (a plane set gathered in page-locked memory): a plain copy.
                    try driver.check(api.cuMemcpyHtoDAsync(CUdeviceptr(p.destination), h, p.rowBytes, stream),
                                     "cuMemcpyHtoDAsync(\(p.rowBytes))")
                    continue
                }
                var c = CUDA_MEMCPY2D()
                switch p.source {
                case .host(let h): c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = h
                case .device(let a): c.srcMemoryType = CU_MEMORYTYPE_DEVICE; c.srcDevice = CUdeviceptr(a)
                }
                c.srcPitch = p.pitch
                c.dstMemoryType = CU_MEMORYTYPE_DEVICE
                c.dstDevice = CUdeviceptr(p.destination)
                c.dstPitch = p.dstPitch
                c.WidthInBytes = p.rowBytes
                c.Height = p.rows
                try driver.check(api.cuMemcpy2DAsync(&c, stream), "cuMemcpy2DAsync(\(p.rowBytes)x\(p.rows) in)")
            }
        }
    }

    deinit {
        guard (try? context.push()) != nil else { return }
        let api = context.driver.api.pointee
        queue.withLock { q in
            if let s = q.stream { _ = api.cuStreamSynchronize(s); _ = api.cuStreamDestroy(s) }
            if let e = q.event { _ = api.cuEventDestroy(e) }
        }
        context.pop()
    }
}

/// Several copiers on one context, taken in turn: copies from several
/// threads go onto the copy engines back to back instead of one waiting for
/// another's copy to finish.
public final class CUDACopyPool: Sendable {
    public let copiers: [CUDACopyOut]
    private let next = Mutex(0)

    public init(context: CUDAPrimaryContext, count: Int) throws(CUDAError) {
        var made: [CUDACopyOut] = []
        for _ in 0..<max(1, count) { made.append(try CUDACopyOut(context: context)) }
        copiers = made
    }

    /// The copier whose turn it is.
    public func take() -> CUDACopyOut {
        next.withLock { n in
            defer { n = (n + 1) % copiers.count }
            return copiers[n]
        }
    }
}
