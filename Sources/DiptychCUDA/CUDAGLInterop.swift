import CCUDA

/// A GL texture registered with CUDA (`CUgraphicsResource`).
public struct CUDAGraphicsResource: Hashable, @unchecked Sendable {   // CUgraphicsResource handle
    let raw: OpaquePointer
    public init(opaque: OpaquePointer) { raw = opaque }
    public var opaque: OpaquePointer { raw }
}

/// The CUDA array behind a mapped resource (`CUarray`), valid until it is unmapped.
public struct CUDAMappedArray: Hashable, @unchecked Sendable {   // CUarray handle
    let raw: OpaquePointer
    public init(opaque: OpaquePointer) { raw = opaque }
    public var opaque: OpaquePointer { raw }
}

/// One 2D copy from device memory into a mapped texture's array.
public struct CUDAPlaneCopy: Hashable, Sendable {
    public var source: UInt64
    public var sourcePitch: Int
    public var destination: CUDAMappedArray
    public var widthBytes: Int
    public var rows: Int
    public init(source: UInt64, sourcePitch: Int, destination: CUDAMappedArray, widthBytes: Int, rows: Int) {
        self.source = source; self.sourcePitch = sourcePitch; self.destination = destination
        self.widthBytes = widthBytes; self.rows = rows
    }
}

/// The CUDA calls of CUDA–GL interop, on one device's primary context and one
/// stream. `CUDAGLInterop` makes them on the driver; tests put failures in
/// their place. Calls come from the thread whose GL context is current
/// (between `begin()` and `end()`, which make the CUDA context current too).
public protocol CUDAGLCalls: AnyObject {
    /// The CUDA device (ordinal) the calls run on.
    var ordinal: Int { get }
    func begin() throws(CUDAError)
    func end()
    /// `cuGraphicsGLRegisterImage(texture, GL_TEXTURE_2D, WRITE_DISCARD)`.
    func register(texture: UInt32) throws(CUDAError) -> CUDAGraphicsResource
    /// `cuGraphicsUnregisterResource` (before the texture is deleted).
    func unregister(_ resource: CUDAGraphicsResource)
    /// `cuGraphicsMapResources` of all of them, in one call.
    func map(_ resources: [CUDAGraphicsResource]) throws(CUDAError)
    /// `cuGraphicsSubResourceGetMappedArray(resource, 0, 0)` of a mapped resource.
    func array(of resource: CUDAGraphicsResource) throws(CUDAError) -> CUDAMappedArray
    /// `cuMemcpy2DAsync` device → array on the stream.
    func copy(_ copy: CUDAPlaneCopy) throws(CUDAError)
    /// `cuGraphicsUnmapResources` of all of them: GL work issued afterwards
    /// waits for the copies.
    func unmap(_ resources: [CUDAGraphicsResource]) throws(CUDAError)
    /// `cuStreamSynchronize`: every copy issued has completed (after a failure,
    /// before the frames they read may go).
    func synchronize()
}

/// CUDA–GL interop on the driver: device `ordinal`'s primary context and a
/// stream of its own that waits for the legacy default stream (where
/// FFmpeg's decoder writes its frames), so a copy never reads a frame the
/// decoder is still writing.
public final class CUDAGLInterop: CUDAGLCalls {
    public let context: CUDAPrimaryContext
    private let stream: CUDAStream
    public var ordinal: Int { context.ordinal }
    private var driver: CUDADriver { context.driver }
    private var api: CudaFunctions { context.driver.api.pointee }

    public init(context: CUDAPrimaryContext) throws(CUDAError) {
        self.context = context
        try context.push()
        defer { context.pop() }
        stream = try CUDAStream(context: context)
    }

    public func begin() throws(CUDAError) { try context.push() }
    public func end() { context.pop() }

    public func register(texture: UInt32) throws(CUDAError) -> CUDAGraphicsResource {
        var r: CUgraphicsResource?
        try driver.check(api.cuGraphicsGLRegisterImage(&r, texture, 0x0DE1 /* GL_TEXTURE_2D */,
                                                       UInt32(CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD.rawValue)),
                         "cuGraphicsGLRegisterImage(texture \(texture))")
        return CUDAGraphicsResource(opaque: r!)
    }

    public func unregister(_ resource: CUDAGraphicsResource) {
        _ = api.cuGraphicsUnregisterResource(resource.raw)
    }

    public func map(_ resources: [CUDAGraphicsResource]) throws(CUDAError) {
        var raw: [CUgraphicsResource?] = resources.map { $0.raw }
        try driver.check(api.cuGraphicsMapResources(UInt32(raw.count), &raw, stream.handle), "cuGraphicsMapResources(\(raw.count))")
    }

    public func array(of resource: CUDAGraphicsResource) throws(CUDAError) -> CUDAMappedArray {
        var a: CUarray?
        try driver.check(api.cuGraphicsSubResourceGetMappedArray(&a, resource.raw, 0, 0), "cuGraphicsSubResourceGetMappedArray")
        return CUDAMappedArray(opaque: a!)
    }

    public func copy(_ c: CUDAPlaneCopy) throws(CUDAError) {
        var p = CUDA_MEMCPY2D()
        p.srcMemoryType = CU_MEMORYTYPE_DEVICE
        p.srcDevice = c.source
        p.srcPitch = c.sourcePitch
        p.dstMemoryType = CU_MEMORYTYPE_ARRAY
        p.dstArray = c.destination.raw
        p.WidthInBytes = c.widthBytes
        p.Height = c.rows
        try driver.check(api.cuMemcpy2DAsync(&p, stream.handle), "cuMemcpy2DAsync(\(c.widthBytes)x\(c.rows))")
    }

    public func synchronize() { stream.synchronize() }

    public func unmap(_ resources: [CUDAGraphicsResource]) throws(CUDAError) {
        var raw: [CUgraphicsResource?] = resources.map { $0.raw }
        try driver.check(api.cuGraphicsUnmapResources(UInt32(raw.count), &raw, stream.handle), "cuGraphicsUnmapResources(\(raw.count))")
    }
}
