import CEGL
import CGLES

/// Loads one entry point with `eglGetProcAddress`; nil when absent.
func loadProc<T>(_ name: String, as type: T.Type) -> T? {
    guard let p = eglGetProcAddress(name) else { return nil }
    return unsafeBitCast(p, to: T.self)
}

/// Client (display-less) EGL extension entry points.
struct EGLClientProcs {
    var queryDevices: PFNEGLQUERYDEVICESEXTPROC?
    var queryDeviceString: PFNEGLQUERYDEVICESTRINGEXTPROC?
    var getPlatformDisplay: PFNEGLGETPLATFORMDISPLAYEXTPROC?
    var extensions: Set<String>

    static func load() -> EGLClientProcs {
        DriverEnvironment.apply()   // before the first EGL call loads the driver
        let ext = extensionTokens(eglQueryString(diptych_egl_no_display(), EGLc.extensions).map { String(cString: $0) })
        return EGLClientProcs(
            queryDevices: ext.contains("EGL_EXT_device_enumeration") || ext.contains("EGL_EXT_device_base")
                ? loadProc("eglQueryDevicesEXT", as: PFNEGLQUERYDEVICESEXTPROC.self) : nil,
            queryDeviceString: ext.contains("EGL_EXT_device_query") || ext.contains("EGL_EXT_device_base")
                ? loadProc("eglQueryDeviceStringEXT", as: PFNEGLQUERYDEVICESTRINGEXTPROC.self) : nil,
            getPlatformDisplay: ext.contains("EGL_EXT_platform_base")
                ? loadProc("eglGetPlatformDisplayEXT", as: PFNEGLGETPLATFORMDISPLAYEXTPROC.self) : nil,
            extensions: ext)
    }
}

/// Display and GL extension entry points, loaded once per context.
struct GLProcs {
    var createImage: PFNEGLCREATEIMAGEKHRPROC?
    var destroyImage: PFNEGLDESTROYIMAGEKHRPROC?
    var exportDmaBufQuery: PFNEGLEXPORTDMABUFIMAGEQUERYMESAPROC?
    var exportDmaBuf: PFNEGLEXPORTDMABUFIMAGEMESAPROC?
    var imageTargetTexture2D: PFNGLEGLIMAGETARGETTEXTURE2DOESPROC?
    var getQueryObjectui64v: PFNGLGETQUERYOBJECTUI64VEXTPROC?
    var queryCounter: PFNGLQUERYCOUNTEREXTPROC?
    var getGraphicsResetStatus: PFNGLGETGRAPHICSRESETSTATUSKHRPROC?
    var bufferStorage: PFNGLBUFFERSTORAGEEXTPROC?
    var createSync: PFNEGLCREATESYNCKHRPROC?
    var destroySync: PFNEGLDESTROYSYNCKHRPROC?
    var clientWaitSync: PFNEGLCLIENTWAITSYNCKHRPROC?

    static func load(_ caps: GPUCapabilities) -> GLProcs {
        var p = GLProcs()
        if caps.eglImageBase {
            p.createImage = loadProc("eglCreateImageKHR", as: PFNEGLCREATEIMAGEKHRPROC.self)
            p.destroyImage = loadProc("eglDestroyImageKHR", as: PFNEGLDESTROYIMAGEKHRPROC.self)
        }
        if caps.dmaBufExport {
            p.exportDmaBufQuery = loadProc("eglExportDMABUFImageQueryMESA", as: PFNEGLEXPORTDMABUFIMAGEQUERYMESAPROC.self)
            p.exportDmaBuf = loadProc("eglExportDMABUFImageMESA", as: PFNEGLEXPORTDMABUFIMAGEMESAPROC.self)
        }
        if caps.eglImageTexture {
            p.imageTargetTexture2D = loadProc("glEGLImageTargetTexture2DOES", as: PFNGLEGLIMAGETARGETTEXTURE2DOESPROC.self)
        }
        if caps.timerQuery {
            p.getQueryObjectui64v = loadProc("glGetQueryObjectui64vEXT", as: PFNGLGETQUERYOBJECTUI64VEXTPROC.self)
            p.queryCounter = loadProc("glQueryCounterEXT", as: PFNGLQUERYCOUNTEREXTPROC.self)
        }
        if caps.glRobustness {
            p.getGraphicsResetStatus = loadProc("glGetGraphicsResetStatusKHR", as: PFNGLGETGRAPHICSRESETSTATUSKHRPROC.self)
                ?? loadProc("glGetGraphicsResetStatusEXT", as: PFNGLGETGRAPHICSRESETSTATUSKHRPROC.self)
                ?? loadProc("glGetGraphicsResetStatus", as: PFNGLGETGRAPHICSRESETSTATUSKHRPROC.self)
        }
        if caps.bufferStorage {
            p.bufferStorage = loadProc("glBufferStorageEXT", as: PFNGLBUFFERSTORAGEEXTPROC.self)
        }
        if caps.eglFenceSync {
            p.createSync = loadProc("eglCreateSyncKHR", as: PFNEGLCREATESYNCKHRPROC.self)
            p.destroySync = loadProc("eglDestroySyncKHR", as: PFNEGLDESTROYSYNCKHRPROC.self)
            p.clientWaitSync = loadProc("eglClientWaitSyncKHR", as: PFNEGLCLIENTWAITSYNCKHRPROC.self)
        }
        return p
    }
}
