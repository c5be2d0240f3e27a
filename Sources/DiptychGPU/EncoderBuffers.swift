import CGBM
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// libgbm's buffer calls, opened with dlopen like `GBMLibrary` (binaries run where it is absent).
final class GBMBufferLibrary: @unchecked Sendable {   // dlopen handle and C function pointers, immutable
    typealias CreateWithModifiers2 = @convention(c) (OpaquePointer?, UInt32, UInt32, UInt32, UnsafePointer<UInt64>?, UInt32, UInt32) -> OpaquePointer?
    typealias Create = @convention(c) (OpaquePointer?, UInt32, UInt32, UInt32, UInt32) -> OpaquePointer?
    typealias Destroy = @convention(c) (OpaquePointer?) -> Void
    typealias PlaneInt = @convention(c) (OpaquePointer?, Int32) -> Int32
    typealias PlaneUInt = @convention(c) (OpaquePointer?, Int32) -> UInt32
    typealias BoInt = @convention(c) (OpaquePointer?) -> Int32
    typealias BoModifier = @convention(c) (OpaquePointer?) -> UInt64

    /// gbm_bo_create_with_modifiers2 (Mesa 21.3 and later); nil where absent.
    let createWithModifiers: CreateWithModifiers2?
    let create: Create
    let destroy: Destroy
    let planeCount: BoInt
    let fdForPlane: PlaneInt
    let stride: PlaneUInt
    let offset: PlaneUInt
    let modifier: BoModifier

    private init(_ h: UnsafeMutableRawPointer) throws(GPUError) {
        func sym<T>(_ name: String, _: T.Type) throws(GPUError) -> T {
            guard let p = dlsym(h, name) else { throw .deviceUnavailable("libgbm.so.1 lacks \(name)") }
            return unsafeBitCast(p, to: T.self)
        }
        createWithModifiers = dlsym(h, "gbm_bo_create_with_modifiers2").map { unsafeBitCast($0, to: CreateWithModifiers2.self) }
        create = try sym("gbm_bo_create", Create.self)
        destroy = try sym("gbm_bo_destroy", Destroy.self)
        planeCount = try sym("gbm_bo_get_plane_count", BoInt.self)
        fdForPlane = try sym("gbm_bo_get_fd_for_plane", PlaneInt.self)
        stride = try sym("gbm_bo_get_stride_for_plane", PlaneUInt.self)
        offset = try sym("gbm_bo_get_offset", PlaneUInt.self)
        modifier = try sym("gbm_bo_get_modifier", BoModifier.self)
    }

    static let shared: Result<GBMBufferLibrary, GPUError> = {
        guard let h = dlopen("libgbm.so.1", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(.deviceUnavailable("libgbm.so.1 cannot be loaded (\(dlerror().map { String(cString: $0) } ?? "dlopen failed"))"))
        }
        return Result { () throws(GPUError) in try GBMBufferLibrary(h) }
    }()
}

/// How an NV12 encoder buffer is laid out in GBM buffers.
public enum EncoderBufferLayout: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// One `GBM_FORMAT_NV12` buffer: both planes in one object.
    case nv12 = "one NV12 buffer"
    /// One R8 buffer of W × 3H/2, Y rows then UV rows (LINEAR only: one object
    /// for drivers that take NV12 in a single object, where GBM allocates no NV12).
    case stacked = "one R8 buffer of W x 3H/2"
    /// An R8 buffer (Y) and a GR88 buffer (UV): two objects.
    case planes = "R8 and GR88 buffers"

    public var description: String { rawValue }

    /// The layouts worth trying with `modifier`, best first.
    public static func candidates(modifier: UInt64) -> [EncoderBufferLayout] {
        modifier == 0 ? [.nv12, .stacked, .planes] : [.nv12, .planes]
    }
}

/// GBM on a DRM render node, for the encoder's NV12 buffers: its own
/// gbm_device (and fd), apart from the EGL display's, so buffers the encoder
/// still holds outlive a lost and rebuilt GL context. Thread-safe.
/// Teardown: every `EncoderBuffer` (each holds its allocator) is destroyed
/// before the gbm_device, then the fd is closed (`GBMDevice`).
public final class EncoderBufferAllocator: @unchecked Sendable {   // gbm_device handle; libgbm allocates from any thread
    public let renderNode: String
    private let device: GBMDevice
    private let gbm: GBMBufferLibrary

    public init(renderNode: String) throws(GPUError) {
        switch GBMBufferLibrary.shared {
        case .success(let l): gbm = l
        case .failure(let e): throw e
        }
        device = try GBMDevice(path: renderNode)
        self.renderNode = renderNode
    }

    static let r8 = DmaBufFrame.fourcc("R8  "), gr88 = DmaBufFrame.fourcc("GR88")

    /// Rows allocated past the picture: encoders read whole macroblocks and
    /// coding units (1080 rows are coded as 1088), so each plane is padded to
    /// a multiple of 32 rows, as FFmpeg's and the drivers' own surfaces are.
    public static func paddedHeight(_ h: Int) -> Int { (h + 31) & ~31 }

    /// An NV12 buffer of `size` (even) laid out as `layout` with `modifier`,
    /// for rendering; its planes exported as dma-buf fds. Its planes hold
    /// `paddedHeight` rows; `frame` describes the picture's.
    public func allocate(size: PixelSize, modifier: UInt64, layout: EncoderBufferLayout) throws(GPUError) -> EncoderBuffer {
        let w = UInt32(size.width), h = UInt32(EncoderBufferAllocator.paddedHeight(size.height))
        var bos: [OpaquePointer] = []
        do throws(GPUError) {
            switch layout {
            case .nv12: bos = [try bo(w, h, DmaBufFrame.nv12, modifier)]
            case .stacked: bos = [try bo(w, h + h / 2, EncoderBufferAllocator.r8, modifier)]
            case .planes: bos = [try bo(w, h, EncoderBufferAllocator.r8, modifier), try bo(w / 2, h / 2, EncoderBufferAllocator.gr88, modifier)]
            }
            return try EncoderBuffer(allocator: self, gbm: gbm, bos: bos, size: size, layout: layout)
        } catch {
            for b in bos { gbm.destroy(b) }
            throw error
        }
    }

    private func bo(_ w: UInt32, _ h: UInt32, _ format: UInt32, _ modifier: UInt64) throws(GPUError) -> OpaquePointer {
        let rendering = UInt32(GBM_BO_USE_RENDERING.rawValue)
        var m = modifier
        let made = gbm.createWithModifiers.flatMap { f in f(device.device, w, h, format, &m, 1, rendering) }
            ?? (modifier == 0 ? gbm.create(device.device, w, h, format, rendering | UInt32(GBM_BO_USE_LINEAR.rawValue)) : nil)
        guard let made else {
            throw .dmaBuf("gbm_bo_create\(gbm.createWithModifiers == nil ? "" : "_with_modifiers2")(\(DmaBufFrame.fourccName(format)) \(w)x\(h), modifier 0x\(String(modifier, radix: 16))) failed: \(String(cString: strerror(errno)))")
        }
        return made
    }
}

/// One NV12 buffer for the encoder: its GBM buffers and the dma-buf fds of
/// its planes (`frame`). Teardown (`deinit`): the fds are closed, then the
/// buffers destroyed, then the allocator (and its gbm_device) may go.
public final class EncoderBuffer: @unchecked Sendable {   // gbm_bo handles and dma-buf fds, immutable until deinit
    public let frame: DmaBufFrame
    public let layout: EncoderBufferLayout
    private let bos: [OpaquePointer]
    private let fds: [Int32]
    private let gbm: GBMBufferLibrary
    private let allocator: EncoderBufferAllocator

    init(allocator: EncoderBufferAllocator, gbm: GBMBufferLibrary, bos: [OpaquePointer], size: PixelSize,
         layout: EncoderBufferLayout) throws(GPUError) {
        var planes: [DmaBufFrame.Plane] = [], fds: [Int32] = []
        func export(_ bo: OpaquePointer, _ plane: Int32) throws(GPUError) -> Int32 {
            let fd = gbm.fdForPlane(bo, plane)
            guard fd >= 0 else {
                for f in fds { close(f) }
                throw .dmaBuf("gbm_bo_get_fd_for_plane(\(plane)) failed: \(String(cString: strerror(errno)))")
            }
            fds.append(fd)
            return fd
        }
        switch layout {
        case .nv12:
            let bo = bos[0]
            guard gbm.planeCount(bo) == 2 else { throw .dmaBuf("GBM gave an NV12 buffer of \(gbm.planeCount(bo)) planes") }
            for p: Int32 in 0...1 {
                planes.append(.init(fd: try export(bo, p), offset: Int(gbm.offset(bo, p)), stride: Int(gbm.stride(bo, p))))
            }
        case .stacked:
            let fd = try export(bos[0], 0), pitch = Int(gbm.stride(bos[0], 0)), base = Int(gbm.offset(bos[0], 0))
            let rows = EncoderBufferAllocator.paddedHeight(size.height)
            planes = [.init(fd: fd, offset: base, stride: pitch), .init(fd: fd, offset: base + pitch * rows, stride: pitch)]
        case .planes:
            for bo in bos { planes.append(.init(fd: try export(bo, 0), offset: Int(gbm.offset(bo, 0)), stride: Int(gbm.stride(bo, 0)))) }
        }
        frame = DmaBufFrame(width: size.width, height: size.height, fourcc: DmaBufFrame.nv12, modifier: gbm.modifier(bos[0]),
                            planes: planes, matrix: .bt709, range: .limited)
        self.layout = layout; self.bos = bos; self.fds = fds; self.gbm = gbm; self.allocator = allocator
    }

    deinit {
        for f in fds { close(f) }
        for b in bos { gbm.destroy(b) }
    }
}
