import CCUDA

/// A CUDA driver call that failed: which call, and the driver's code and name.
public struct CUDAError: Error, Hashable, Sendable, CustomStringConvertible {
    public var call: String
    public var code: Int
    public var name: String
    public init(call: String, code: Int, name: String) { self.call = call; self.code = code; self.name = name }
    public var description: String { "\(call) failed: \(name) (\(code))" }
}

/// Why the CUDA driver cannot be used in this process (one line: no driver,
/// a driver without a symbol Diptych needs, `cuInit` refused, no device).
public struct CUDAUnavailable: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The CUDA driver API (`libcuda.so.1`), opened at run time the way FFmpeg's
/// ffnvcodec loader does (its header, `dynlink_loader.h`, does the loading),
/// so Diptych runs where there is no NVIDIA driver. Loaded and initialized
/// once per process (`shared`). The calls are thread-safe as the driver's are;
/// each one that needs a context runs between `CUDAPrimaryContext.push()` and `pop()`.
public final class CUDADriver: @unchecked Sendable {   // the driver's function table, immutable; its calls are thread-safe
    let api: UnsafeMutablePointer<CudaFunctions>

    private init(_ api: UnsafeMutablePointer<CudaFunctions>) { self.api = api }

    /// The driver, or why there is none. The first use loads and initializes it.
    public static var shared: Result<CUDADriver, CUDAUnavailable> { loaded }

    /// The driver, where it sees CUDA device `ordinal`; else what is missing.
    static func seeing(ordinal: Int) -> Result<CUDADriver, CUDAUnavailable> {
        shared.flatMap { driver in
            let count = driver.deviceCount
            guard ordinal < count else {
                return .failure(CUDAUnavailable(count == 0 ? "the NVIDIA driver sees no CUDA device" : "no CUDA device \(ordinal) (the driver sees \(count))"))
            }
            return .success(driver)
        }
    }
    private static let loaded: Result<CUDADriver, CUDAUnavailable> = load()

    private static func load() -> Result<CUDADriver, CUDAUnavailable> {
        var functions: UnsafeMutablePointer<CudaFunctions>?
        var why = [CChar](repeating: 0, count: 256)
        guard diptych_cuda_load(&functions, &why) == 0, let f = functions else {
            return .failure(CUDAUnavailable("no NVIDIA CUDA driver: \(text(why))"))
        }
        let driver = CUDADriver(f)
        let r = f.pointee.cuInit(0)
        guard r == CUDA_SUCCESS else { return .failure(CUDAUnavailable("the NVIDIA driver did not initialize: cuInit: \(driver.errorName(r))")) }
        return .success(driver)
    }

    /// The driver's name for `result` (`CUDA_ERROR_OUT_OF_MEMORY`).
    func errorName(_ result: CUresult) -> String {
        var s: UnsafePointer<CChar>?
        guard api.pointee.cuGetErrorName(result, &s) == CUDA_SUCCESS, let s else { return "CUDA error \(result.rawValue)" }
        return String(cString: s)
    }

    /// Throws a `CUDAError` naming `call` unless `result` is `CUDA_SUCCESS`.
    func check(_ result: CUresult, _ call: @autoclosure () -> String) throws(CUDAError) {
        guard result != CUDA_SUCCESS else { return }
        throw CUDAError(call: call(), code: Int(result.rawValue), name: errorName(result))
    }

    /// CUDA devices the driver sees.
    public var deviceCount: Int {
        var n: Int32 = 0
        return api.pointee.cuDeviceGetCount(&n) == CUDA_SUCCESS ? Int(n) : 0
    }

    /// The name of device `ordinal` (`NVIDIA H200`).
    public func deviceName(_ ordinal: Int) -> String {
        var dev: CUdevice = 0
        var buf = [CChar](repeating: 0, count: 128)
        guard api.pointee.cuDeviceGet(&dev, Int32(ordinal)) == CUDA_SUCCESS,
              api.pointee.cuDeviceGetName(&buf, Int32(buf.count), dev) == CUDA_SUCCESS else { return "CUDA device \(ordinal)" }
        return text(buf)
    }

    /// The ordinals of the CUDA devices behind the GL context current on this
    /// thread (`cuGLGetDevices`); empty when the context is not NVIDIA's.
    public func devicesOfCurrentGLContext() throws(CUDAError) -> [Int] {
        var count: UInt32 = 0
        var devices = [CUdevice](repeating: -1, count: 8)
        try check(api.pointee.cuGLGetDevices(&count, &devices, UInt32(devices.count), CU_GL_DEVICE_LIST_ALL), "cuGLGetDevices")
        return devices.prefix(Int(count)).map { ordinal(of: $0) }
    }

    /// The ordinal of a `CUdevice` handle (they are the same number in every
    /// driver so far; looked up to be sure).
    private func ordinal(of device: CUdevice) -> Int {
        for i in 0..<deviceCount {
            var d: CUdevice = -1
            if api.pointee.cuDeviceGet(&d, Int32(i)) == CUDA_SUCCESS, d == device { return i }
        }
        return Int(device)
    }

    /// Retains device `ordinal`'s primary context: the one FFmpeg's CUDA
    /// device uses when opened with `primary_ctx`, so the decoder's memory
    /// and the interop share one context. A context not yet active gets the
    /// flags FFmpeg asks for (`CU_CTX_SCHED_BLOCKING_SYNC`: waiting threads
    /// sleep), or FFmpeg refuses a primary context already active with others.
    public func primaryContext(ordinal: Int) throws(CUDAError) -> CUDAPrimaryContext {
        var dev: CUdevice = 0
        try check(api.pointee.cuDeviceGet(&dev, Int32(ordinal)), "cuDeviceGet(\(ordinal))")
        var flags: UInt32 = 0, active: Int32 = 0
        let blocking = UInt32(CU_CTX_SCHED_BLOCKING_SYNC)
        if api.pointee.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS, active == 0, flags != blocking {
            try check(api.pointee.cuDevicePrimaryCtxSetFlags(dev, blocking), "cuDevicePrimaryCtxSetFlags(\(ordinal))")
        }
        var ctx: CUcontext?
        try check(api.pointee.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain(\(ordinal))")
        return CUDAPrimaryContext(driver: self, device: dev, ordinal: ordinal, raw: ctx!)
    }
}

/// One device's primary context, retained while this object lives.
public final class CUDAPrimaryContext: @unchecked Sendable {   // CUcontext handle, retained for this object's life
    public let driver: CUDADriver
    public let ordinal: Int
    let device: CUdevice
    let raw: CUcontext

    init(driver: CUDADriver, device: CUdevice, ordinal: Int, raw: CUcontext) {
        self.driver = driver; self.device = device; self.ordinal = ordinal; self.raw = raw
    }

    deinit { _ = driver.api.pointee.cuDevicePrimaryCtxRelease(device) }

    /// Makes the context current on this thread (`cuCtxPushCurrent`); `pop()` undoes it.
    public func push() throws(CUDAError) {
        try driver.check(driver.api.pointee.cuCtxPushCurrent(raw), "cuCtxPushCurrent")
    }

    public func pop() {
        var old: CUcontext?
        _ = driver.api.pointee.cuCtxPopCurrent(&old)
    }
}

/// A NUL-terminated buffer filled by C as a string.
func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
