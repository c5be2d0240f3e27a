import CCUDA
import Synchronization

/// A picture's planes in device memory of its own (`cuMemAllocPitch`), from
/// a `CUDAPicturePool`; back in the pool when the last reference goes.
public final class CUDAPicture: @unchecked Sendable {   // CUDA device pointers, immutable until returned to the pool
    public struct Plane: Sendable {
        public var address: UInt64
        public var pitch: Int
        public var rowBytes: Int
        public var rows: Int
    }
    public let planes: [Plane]
    let key: CUDAPicturePool.Key
    let pool: CUDAPicturePool

    init(planes: [Plane], key: CUDAPicturePool.Key, pool: CUDAPicturePool) { self.planes = planes; self.key = key; self.pool = pool }
    deinit { pool.giveBack(planes, key: key) }
}

/// Device memory for decoded pictures, reused: a decoder's surfaces are few
/// (NVDEC gives each decoder at most 32), so each decoded picture is copied
/// into a picture of this pool at once, device to device, and the surface
/// goes back to the decoder when the copy has completed — as FFmpeg's own
/// NVDEC frames do from FFmpeg 6 on. The take then holds pictures of this
/// pool for as long as it needs (until the fence after the draws that read
/// them), however deep its queues are. Thread-safe.
public final class CUDAPicturePool: @unchecked Sendable {   // CUDA stream handle; the free lists behind a Mutex
    struct Key: Hashable { var planes: [[Int]] }
    public let context: CUDAPrimaryContext
    private let free = Mutex<[Key: [[CUDAPicture.Plane]]]>([:])
    private let stream: CUDAStream
    private var api: CudaFunctions { context.driver.api.pointee }

    public init(context: CUDAPrimaryContext) throws(CUDAError) {
        self.context = context
        try context.push()
        defer { context.pop() }
        // It waits for the legacy default stream, where the decoder finishes its pictures.
        stream = try CUDAStream(context: context)
    }

    deinit {
        guard (try? context.push()) != nil else { return }
        // The copies into the pictures end before their memory is freed (the stream goes after).
        stream.synchronize()
        for planes in free.withLock({ $0.values.flatMap { $0 } }) { for p in planes { _ = api.cuMemFree(p.address) } }
        context.pop()
    }

    /// Copies the planes at `sources` (address, pitch; each `rowBytes`×`rows`)
    /// into a picture of this pool and waits until the copy has completed.
    public func copy(_ sources: [(address: UInt64, pitch: Int, rowBytes: Int, rows: Int)]) throws(CUDAError) -> CUDAPicture {
        let key = Key(planes: sources.map { [$0.rowBytes, $0.rows] })
        try context.push()
        defer { context.pop() }
        let planes = try take(key)
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
            giveBack(planes, key: key)
            throw error
        }
        return CUDAPicture(planes: planes, key: key, pool: self)
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

    /// Free planes of this shape, or new ones (`cuMemAllocPitch`). The context is current.
    private func take(_ key: Key) throws(CUDAError) -> [CUDAPicture.Plane] {
        if let reused = free.withLock({ (f: inout [Key: [[CUDAPicture.Plane]]]) in f[key]?.popLast() }) { return reused }
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
        return planes
    }

    func giveBack(_ planes: [CUDAPicture.Plane], key: Key) {
        free.withLock { $0[key, default: []].append(planes) }
    }
}
