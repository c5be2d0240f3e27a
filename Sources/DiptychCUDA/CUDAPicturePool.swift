import CCUDA
import DiptychCore
import Synchronization

/// A picture's planes in device memory of its own, from a
/// `CUDAPicturePool`; back in the pool when the last reference goes.
public final class CUDAPicture: @unchecked Sendable {   // CUDA device pointers, immutable until returned to the pool
    public struct Plane: Sendable {
        public var address: UInt64
        public var pitch: Int
        public var rowBytes: Int
        public var rows: Int
    }
    let storage: CUDAPicturePool.Storage
    public var planes: [Plane] { storage.planes }
    /// The one allocation every plane lies in, back to back from its byte 0,
    /// where the pool's pictures are shareable (a GL context imports it and
    /// reads the planes where they are); nil for `cuMemAllocPitch` planes.
    public var memory: CUDAExportableMemory? { storage.memory }
    let key: CUDAPicturePool.Key
    let pool: CUDAPicturePool

    init(_ storage: CUDAPicturePool.Storage, key: CUDAPicturePool.Key, pool: CUDAPicturePool) {
        self.storage = storage; self.key = key; self.pool = pool
    }
    deinit { pool.giveBack(storage, key: key) }
}

/// Device memory a GL context can import (GL_EXT_memory_object_fd): where a
/// decoder's picture lies, read there by the compositor.
public protocol ShareableDeviceMemory: AnyObject, Sendable {
    /// The device address of byte 0.
    var address: UInt64 { get }
    /// Bytes of the allocation.
    var size: Int { get }
    /// The CUDA device (ordinal) it is on.
    var device: Int { get }
    /// A new file descriptor for it; whoever imports it owns it.
    func exportDescriptor() throws(CUDAError) -> Int32
}

extension CUDAExportableMemory: ShareableDeviceMemory {
    public var device: Int { context.ordinal }
}

/// Whoever holds a `CUDAFrame` in a picture of a `CUDAPicturePool` (an
/// NVDEC frame): the allocation its planes lie in, where the pool's pictures
/// are shareable, so a GL context that imports it reads the planes in place,
/// keeping the holder until its reads have completed.
public protocol CUDAPictureHolder: CUDAFrameHolder {
    var sharedMemory: (any ShareableDeviceMemory)? { get }
}

/// Device memory for decoded pictures, reused: a decoder's surfaces are few
/// (NVDEC gives each decoder at most 32), so each decoded picture is copied
/// into a picture of this pool at once, device to device, and the surface
/// goes back to the decoder when the copy has completed — as FFmpeg's own
/// NVDEC frames do from FFmpeg 6 on. The take then holds pictures of this
/// pool for as long as it needs (until the fence after the draws that read
/// them), however deep its queues are. Shareable, each picture is one
/// allocation a GL context can import (`CUDAExportableMemory`, where the
/// driver has the calls), so the compositor reads the decoded planes where
/// this copy put them instead of copying them again (docs/ARCHITECTURE.md,
/// "Pictures read in place"). Thread-safe.
public final class CUDAPicturePool: @unchecked Sendable {   // CUDA stream handle; the free lists behind a Mutex
    struct Key: Hashable { var planes: [[Int]] }
    /// A picture's planes, and the allocation they lie in where it is one exportable block.
    struct Storage { var planes: [CUDAPicture.Plane]; var memory: CUDAExportableMemory? }
    public let context: CUDAPrimaryContext
    /// Whether pictures are made as exportable allocations (where the driver has the calls).
    public let shareable: Bool
    private let free = Mutex<[Key: [Storage]]>([:])
    private let stream: CUDAStream
    private var api: CudaFunctions { context.driver.api.pointee }
    /// Bytes between a shareable picture's rows (and where each plane starts) are a multiple of this.
    static let rowAlignment = 128

    public init(context: CUDAPrimaryContext, shareable: Bool = false) throws(CUDAError) {
        self.context = context
        self.shareable = shareable && (try? CUDAExportableMemory.calls.get()) != nil
        try context.push()
        defer { context.pop() }
        // It waits for the legacy default stream, where the decoder finishes its pictures.
        stream = try CUDAStream(context: context)
    }

    deinit {
        guard (try? context.push()) != nil else { return }
        // The copies into the pictures end before their memory is freed (the stream goes after).
        stream.synchronize()
        // Exportable blocks are freed as their `CUDAExportableMemory` goes; the rest here.
        for s in free.withLock({ $0.values.flatMap { $0 } }) where s.memory == nil { for p in s.planes { _ = api.cuMemFree(p.address) } }
        context.pop()
    }

    /// Copies the planes at `sources` (address, pitch; each `rowBytes`×`rows`)
    /// into a picture of this pool and waits until the copy has completed.
    public func copy(_ sources: [(address: UInt64, pitch: Int, rowBytes: Int, rows: Int)]) throws(CUDAError) -> CUDAPicture {
        let key = Key(planes: sources.map { [$0.rowBytes, $0.rows] })
        try context.push()
        defer { context.pop() }
        let storage = try take(key), planes = storage.planes
        do throws(CUDAError) {
            for (s, d) in zip(sources, planes) {
                var p = CUDA_MEMCPY2D()
                p.srcMemoryType = CU_MEMORYTYPE_DEVICE
                p.srcDevice = s.address
                p.srcPitch = s.pitch
                p.dstMemoryType = CU_MEMORYTYPE_DEVICE
                p.dstDevice = d.address
                p.dstPitch = d.pitch
                p.WidthInBytes = s.rowBytes
                p.Height = s.rows
                try context.driver.check(api.cuMemcpy2DAsync(&p, stream.handle), "cuMemcpy2DAsync(device to device, \(s.rowBytes)x\(s.rows))")
            }
            try context.driver.check(stream.synchronize(), "cuStreamSynchronize")
        } catch {
            stream.synchronize()
            giveBack(storage, key: key)
            throw error
        }
        return CUDAPicture(storage, key: key, pool: self)
    }

    /// Copies `picture`'s planes into host memory at `destinations` (address, pitch). Blocks.
    public func download(_ picture: CUDAPicture, to destinations: [(UnsafeMutableRawPointer, Int)]) throws(CUDAError) {
        try context.push()
        defer { context.pop() }
        for (s, d) in zip(picture.planes, destinations) {
            var p = CUDA_MEMCPY2D()
            p.srcMemoryType = CU_MEMORYTYPE_DEVICE
            p.srcDevice = s.address
            p.srcPitch = s.pitch
            p.dstMemoryType = CU_MEMORYTYPE_HOST
            p.dstHost = d.0
            p.dstPitch = d.1
            p.WidthInBytes = s.rowBytes
            p.Height = s.rows
            try context.driver.check(api.cuMemcpy2D(&p), "cuMemcpy2D(device to host)")
        }
    }

    /// Free planes of this shape, or new ones: one exportable block where
    /// the pool is shareable, else `cuMemAllocPitch`. The context is current.
    private func take(_ key: Key) throws(CUDAError) -> Storage {
        if let reused = free.withLock({ (f: inout [Key: [Storage]]) in f[key]?.popLast() }) { return reused }
        if shareable {
            let a = Self.rowAlignment
            var planes: [CUDAPicture.Plane] = [], offset = 0
            for shape in key.planes {
                let pitch = (shape[0] + a - 1) / a * a
                planes.append(CUDAPicture.Plane(address: UInt64(offset), pitch: pitch, rowBytes: shape[0], rows: shape[1]))
                offset += pitch * shape[1]
            }
            let memory = try CUDAExportableMemory(context: context, bytes: offset)
            for i in planes.indices { planes[i].address += memory.address }
            return Storage(planes: planes, memory: memory)
        }
        var planes: [CUDAPicture.Plane] = []
        for shape in key.planes {
            var address: CUdeviceptr = 0
            var pitch = 0
            let r = api.cuMemAllocPitch(&address, &pitch, shape[0], shape[1], 16)
            guard r == CUDA_SUCCESS else {
                for p in planes { _ = api.cuMemFree(p.address) }
                try context.driver.check(r, "cuMemAllocPitch(\(shape[0])x\(shape[1]))")
                break
            }
            planes.append(CUDAPicture.Plane(address: address, pitch: pitch, rowBytes: shape[0], rows: shape[1]))
        }
        return Storage(planes: planes, memory: nil)
    }

    func giveBack(_ storage: Storage, key: Key) {
        free.withLock { $0[key, default: []].append(storage) }
    }
}
