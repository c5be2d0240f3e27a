import CVA
#if canImport(Glibc)
import Glibc
#endif

/// libva and libva-drm, opened with dlopen so binaries run where they are
/// absent (NVIDIA servers, the self-contained server build whose FFmpeg has
/// no VA-API). Only the calls `EncoderProbe` and `VASurfaceImport` make are
/// looked up. libavutil links the same libva, so these calls also work on the
/// display of FFmpeg's VA-API device.
final class VALibrary: @unchecked Sendable {   // dlopen handle and C function pointers, immutable
    typealias GetDisplayDRM = @convention(c) (Int32) -> VADisplay?
    typealias SetCallback = @convention(c) (VADisplay?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?
    typealias Initialize = @convention(c) (VADisplay?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> VAStatus
    typealias Terminate = @convention(c) (VADisplay?) -> VAStatus
    typealias ErrorString = @convention(c) (VAStatus) -> UnsafePointer<CChar>?
    typealias VendorString = @convention(c) (VADisplay?) -> UnsafePointer<CChar>?
    typealias MaxCount = @convention(c) (VADisplay?) -> Int32
    typealias QueryProfiles = @convention(c) (VADisplay?, UnsafeMutablePointer<VAProfile>?, UnsafeMutablePointer<Int32>?) -> VAStatus
    typealias QueryEntrypoints = @convention(c) (VADisplay?, VAProfile, UnsafeMutablePointer<VAEntrypoint>?,
                                                 UnsafeMutablePointer<Int32>?) -> VAStatus
    typealias ProfileString = @convention(c) (VAProfile) -> UnsafePointer<CChar>?
    typealias EntrypointString = @convention(c) (VAEntrypoint) -> UnsafePointer<CChar>?
    typealias CreateSurfaces = @convention(c) (VADisplay?, UInt32, UInt32, UInt32, UnsafeMutablePointer<VASurfaceID>?, UInt32,
                                               UnsafeMutablePointer<VASurfaceAttrib>?, UInt32) -> VAStatus
    typealias DestroySurfaces = @convention(c) (VADisplay?, UnsafeMutablePointer<VASurfaceID>?, Int32) -> VAStatus
    typealias GetConfigAttributes = @convention(c) (VADisplay?, VAProfile, VAEntrypoint, UnsafeMutablePointer<VAConfigAttrib>?, Int32) -> VAStatus
    typealias CreateConfig = @convention(c) (VADisplay?, VAProfile, VAEntrypoint, UnsafeMutablePointer<VAConfigAttrib>?, Int32,
                                             UnsafeMutablePointer<VAConfigID>?) -> VAStatus
    typealias DestroyConfig = @convention(c) (VADisplay?, VAConfigID) -> VAStatus
    typealias QuerySurfaceAttributes = @convention(c) (VADisplay?, VAConfigID, UnsafeMutablePointer<VASurfaceAttrib>?,
                                                       UnsafeMutablePointer<UInt32>?) -> VAStatus

    let getDisplayDRM: GetDisplayDRM
    let setInfoCallback: SetCallback
    let setErrorCallback: SetCallback
    let initialize: Initialize
    let terminate: Terminate
    let errorString: ErrorString
    let vendorString: VendorString
    let maxNumProfiles: MaxCount
    let maxNumEntrypoints: MaxCount
    let queryConfigProfiles: QueryProfiles
    let queryConfigEntrypoints: QueryEntrypoints
    let profileString: ProfileString
    let entrypointString: EntrypointString
    let createSurfaces: CreateSurfaces
    let destroySurfaces: DestroySurfaces
    let getConfigAttributes: GetConfigAttributes
    let createConfig: CreateConfig
    let destroyConfig: DestroyConfig
    let querySurfaceAttributes: QuerySurfaceAttributes

    private init(va: UnsafeMutableRawPointer, drm: UnsafeMutableRawPointer) throws(VALoadError) {
        func sym<T>(_ h: UnsafeMutableRawPointer, _ name: String, _: T.Type) throws(VALoadError) -> T {
            guard let p = dlsym(h, name) else { throw VALoadError(reason: "libva lacks \(name)") }
            return unsafeBitCast(p, to: T.self)
        }
        getDisplayDRM = try sym(drm, "vaGetDisplayDRM", GetDisplayDRM.self)
        setInfoCallback = try sym(va, "vaSetInfoCallback", SetCallback.self)
        setErrorCallback = try sym(va, "vaSetErrorCallback", SetCallback.self)
        initialize = try sym(va, "vaInitialize", Initialize.self)
        terminate = try sym(va, "vaTerminate", Terminate.self)
        errorString = try sym(va, "vaErrorStr", ErrorString.self)
        vendorString = try sym(va, "vaQueryVendorString", VendorString.self)
        maxNumProfiles = try sym(va, "vaMaxNumProfiles", MaxCount.self)
        maxNumEntrypoints = try sym(va, "vaMaxNumEntrypoints", MaxCount.self)
        queryConfigProfiles = try sym(va, "vaQueryConfigProfiles", QueryProfiles.self)
        queryConfigEntrypoints = try sym(va, "vaQueryConfigEntrypoints", QueryEntrypoints.self)
        profileString = try sym(va, "vaProfileStr", ProfileString.self)
        entrypointString = try sym(va, "vaEntrypointStr", EntrypointString.self)
        createSurfaces = try sym(va, "vaCreateSurfaces", CreateSurfaces.self)
        destroySurfaces = try sym(va, "vaDestroySurfaces", DestroySurfaces.self)
        getConfigAttributes = try sym(va, "vaGetConfigAttributes", GetConfigAttributes.self)
        createConfig = try sym(va, "vaCreateConfig", CreateConfig.self)
        destroyConfig = try sym(va, "vaDestroyConfig", DestroyConfig.self)
        querySurfaceAttributes = try sym(va, "vaQuerySurfaceAttributes", QuerySurfaceAttributes.self)
    }

    /// Loaded once per process (the handles are never closed); the failure says why.
    static let shared: Result<VALibrary, VALoadError> = {
        func open(_ name: String) -> Result<UnsafeMutableRawPointer, VALoadError> {
            if let h = dlopen(name, RTLD_NOW | RTLD_LOCAL) { return .success(h) }
            return .failure(VALoadError(reason: "\(name) cannot be loaded (\(dlerror().map { String(cString: $0) } ?? "dlopen failed"))"))
        }
        return open("libva.so.2").flatMap { va in
            open("libva-drm.so.2").flatMap { drm in Result { () throws(VALoadError) in try VALibrary(va: va, drm: drm) } }
        }
    }()
}

extension VALibrary {
    /// `vaErrorStr` of `status`.
    func message(_ status: VAStatus) -> String {
        errorString(status).map { String(cString: $0) } ?? "VA status \(status)"
    }
}

/// Why libva could not be used: `libva.so.2 cannot be loaded (...)`.
struct VALoadError: Error, Hashable, Sendable {
    var reason: String
}
