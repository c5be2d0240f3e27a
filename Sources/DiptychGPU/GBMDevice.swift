import CGBM
#if canImport(Glibc)
import Glibc
#endif

/// libgbm, opened with dlopen so binaries run where it is absent (NVIDIA servers).
final class GBMLibrary: @unchecked Sendable {   // dlopen handle and C function pointers, immutable
    typealias CreateDevice = @convention(c) (Int32) -> OpaquePointer?
    typealias DestroyDevice = @convention(c) (OpaquePointer?) -> Void
    let createDevice: CreateDevice
    let destroyDevice: DestroyDevice

    private init(createDevice: @escaping CreateDevice, destroyDevice: @escaping DestroyDevice) {
        self.createDevice = createDevice; self.destroyDevice = destroyDevice
    }

    /// Loaded once per process (the handle is never closed). The failure says why.
    static let shared: Result<GBMLibrary, GPUError> = {
        guard let h = dlopen("libgbm.so.1", RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            return .failure(.deviceUnavailable("libgbm.so.1 cannot be loaded (\(why))"))
        }
        guard let c = dlsym(h, "gbm_create_device"), let d = dlsym(h, "gbm_device_destroy") else {
            return .failure(.deviceUnavailable("libgbm.so.1 lacks gbm_create_device"))
        }
        return .success(GBMLibrary(createDevice: unsafeBitCast(c, to: CreateDevice.self),
                                   destroyDevice: unsafeBitCast(d, to: DestroyDevice.self)))
    }()
}

/// DRM render nodes present on this machine, sorted (`/dev/dri/renderD128`, ...).
func drmRenderNodes() -> [String] {
    guard let dir = opendir("/dev/dri") else { return [] }
    defer { closedir(dir) }
    var nodes: [String] = []
    while let e = readdir(dir) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
            String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
        }
        if name.hasPrefix("renderD") { nodes.append("/dev/dri/" + name) }
    }
    return nodes.sorted()
}

/// An open render node and the gbm_device on it.
/// Teardown order: the EGLDisplay made from it is terminated first, then the
/// gbm_device is destroyed, then the fd is closed.
final class GBMDevice {
    let path: String
    let fd: Int32
    let device: OpaquePointer
    private let library: GBMLibrary

    init(path: String) throws(GPUError) {
        let library: GBMLibrary
        switch GBMLibrary.shared {
        case .success(let l): library = l
        case .failure(let e): throw e
        }
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw .deviceUnavailable("open \(path): \(String(cString: strerror(errno)))") }
        guard let dev = library.createDevice(fd) else {
            close(fd)
            throw .deviceUnavailable("gbm_create_device(\(path)) failed")
        }
        self.path = path; self.fd = fd; self.device = dev; self.library = library
    }

    deinit {
        library.destroyDevice(device)
        close(fd)
    }
}
