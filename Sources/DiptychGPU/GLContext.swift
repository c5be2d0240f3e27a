import CEGL
import CGLES
import Foundation
import Synchronization

/// Counts users of each initialized EGLDisplay: EGL hands back the same display
/// for the same platform and device, and `eglTerminate` would kill every context
/// on it, so the last user terminates it.
enum DisplayRegistry {
    private static let counts = Mutex<[UInt: Int]>([:])

    static func acquire(_ d: EGLDisplay) -> Bool {
        let key = UInt(bitPattern: d)
        return counts.withLock { counts in
            if counts[key] == nil {
                var major: EGLint = 0, minor: EGLint = 0
                guard eglInitialize(d, &major, &minor) == EGLBoolean(EGL_TRUE) else { return false }
            }
            counts[key, default: 0] += 1
            return true
        }
    }

    static func release(_ d: EGLDisplay) {
        let key = UInt(bitPattern: d)
        counts.withLock { counts in
            guard let n = counts[key] else { return }
            if n <= 1 {
                counts[key] = nil
                eglTerminate(d)
            } else {
                counts[key] = n - 1
            }
        }
    }
}

/// One candidate of the display ladder.
struct DisplayRung {
    var platform: GPUPlatform
    var label: String
    var isSoftware: Bool
    /// Makes the EGLDisplay (not yet initialized), and the GBM device it needs.
    var open: () throws(GPUError) -> (EGLDisplay, GBMDevice?)
}

/// An EGL display with one OpenGL ES 3 context, current on the thread that made it.
///
/// Teardown order (deinit): release current → destroy the pbuffer (if any) →
/// destroy the context → terminate the display (last user) → destroy the
/// gbm_device → close its fd. GL objects must be deleted before this dies.
/// Sendable for its EGL handles: renderers sharing it are made on its render
/// thread, the one thread that makes GL calls in it.
final class GLContext: @unchecked Sendable {   // EGL handles; GL calls on the render thread only (asserted)
    let display: EGLDisplay
    let context: EGLContext
    let surface: EGLSurface?
    let gbm: GBMDevice?
    let info: GPUInfo
    let procs: GLProcs
    /// The context's programs, shared by every compositor in it (deleted with the context).
    let shaders = ShaderCache()
    /// CUDA frames on their way into the textures of every compositor in it
    /// (made at the first CUDA upload). Render thread only.
    var cudaUploads: CUDATextureUploads?
    /// The GPU encoder's programs (made at the first encoder). Render thread only.
    private var h264: H264Programs?
    func h264Programs() throws(GPUError) -> H264Programs {
        if let h264 { return h264 }
        let p = try H264Programs(softwareRenderer: info.isSoftware)
        h264 = p
        return p
    }
    var caps: GPUCapabilities { info.capabilities }

    /// Creates and makes current a context on `rung`. Throws with the reason.
    init(rung: DisplayRung) throws(GPUError) {
        let (display, gbm) = try rung.open()
        guard display != diptych_egl_no_display() else { throw .egl(call: "eglGetPlatformDisplayEXT", code: eglGetError()) }
        guard DisplayRegistry.acquire(display) else { throw .egl(call: "eglInitialize", code: eglGetError()) }
        var ok = false
        defer {
            // On failure: terminate the display before the gbm_device goes.
            if !ok { DisplayRegistry.release(display) }
            withExtendedLifetime(gbm) {}
        }

        let eglExt = extensionTokens(eglQueryString(display, EGLc.extensions).map { String(cString: $0) })
        let eglVersion = eglQueryString(display, EGLint(EGL_VERSION)).map { String(cString: $0) } ?? "?"
        guard eglBindAPI(EGLc.openGLESAPI) == EGLBoolean(EGL_TRUE) else { throw .egl(call: "eglBindAPI", code: eglGetError()) }

        let noConfig = eglExt.contains("EGL_KHR_no_config_context") || eglExt.contains("EGL_MESA_configless_context")
        let surfaceless = eglExt.contains("EGL_KHR_surfaceless_context")
        var config: EGLConfig? = diptych_egl_no_config()
        if !noConfig || !surfaceless {
            let attrs: [EGLint] = [EGLint(EGL_SURFACE_TYPE), EGLint(EGL_PBUFFER_BIT),
                                   EGLint(EGL_RENDERABLE_TYPE), EGLint(EGL_OPENGL_ES3_BIT),
                                   EGLint(EGL_RED_SIZE), 8, EGLint(EGL_GREEN_SIZE), 8,
                                   EGLint(EGL_BLUE_SIZE), 8, EGLint(EGL_ALPHA_SIZE), 8, EGLc.none]
            var n: EGLint = 0
            var chosen: EGLConfig?
            guard eglChooseConfig(display, attrs, &chosen, 1, &n) == EGLBoolean(EGL_TRUE), n > 0 else {
                throw .egl(call: "eglChooseConfig(pbuffer, ES3)", code: eglGetError())
            }
            config = chosen
        }

        // Robust (lose context on reset) first, then plain; ES 3.2 → 3.1 → 3.0.
        let robustOffered = eglExt.contains("EGL_EXT_create_context_robustness")
        var context: EGLContext? = nil
        var robust = false
        outer: for tryRobust in robustOffered ? [true, false] : [false] {
            for minor: EGLint in [2, 1, 0] {
                var a: [EGLint] = [EGLint(EGL_CONTEXT_MAJOR_VERSION), 3, EGLint(EGL_CONTEXT_MINOR_VERSION), minor]
                if tryRobust {
                    a += [EGLint(EGL_CONTEXT_OPENGL_ROBUST_ACCESS_EXT), EGLc.trueValue,
                          EGLint(EGL_CONTEXT_OPENGL_RESET_NOTIFICATION_STRATEGY_EXT), EGLint(EGL_LOSE_CONTEXT_ON_RESET_EXT)]
                }
                a.append(EGLc.none)
                if let c = eglCreateContext(display, config, diptych_egl_no_context(), a), c != diptych_egl_no_context() {
                    context = c; robust = tryRobust
                    break outer
                }
            }
        }
        guard let context else { throw .egl(call: "eglCreateContext(OpenGL ES 3)", code: eglGetError()) }
        var surface: EGLSurface? = nil
        if !surfaceless {
            let pa: [EGLint] = [EGLint(EGL_WIDTH), 1, EGLint(EGL_HEIGHT), 1, EGLc.none]
            surface = eglCreatePbufferSurface(display, config, pa)
            if surface == diptych_egl_no_surface() {
                let code = eglGetError()
                eglDestroyContext(display, context)
                throw .egl(call: "eglCreatePbufferSurface", code: code)
            }
        }
        let s = surface ?? diptych_egl_no_surface()
        guard eglMakeCurrent(display, s, s, context) == EGLBoolean(EGL_TRUE) else {
            let code = eglGetError()
            if let surface { eglDestroySurface(display, surface) }
            eglDestroyContext(display, context)
            throw .egl(call: "eglMakeCurrent", code: code)
        }

        func glString(_ e: GLenum) -> String { glGetString(e).map { String(cString: $0) } ?? "" }
        var glExt = Set<String>()
        var count: GLint = 0
        glGetIntegerv(GL.numExtensions, &count)
        for i in 0..<max(count, 0) {
            if let p = glGetStringi(GL.extensions, GLuint(i)) { glExt.insert(String(cString: p)) }
        }
        var caps = GPUCapabilities(egl: eglExt, gl: glExt)
        caps.robustContext = robust
        var major: GLint = 0, minor: GLint = 0
        glGetIntegerv(GLenum(GL_MAJOR_VERSION), &major)
        glGetIntegerv(GLenum(GL_MINOR_VERSION), &minor)
        caps.computeShaders = major > 3 || (major == 3 && minor >= 1)
        let renderer = glString(GL.renderer)
        var maxTexture: GLint = 0
        glGetIntegerv(GL.maxTextureSize, &maxTexture)
        let isSoftware = rung.isSoftware || renderer.contains("llvmpipe") || renderer.contains("softpipe")
        RenderThread.contextMadeCurrent(software: isSoftware)
        self.info = GPUInfo(platform: rung.platform, device: rung.label, isSoftware: isSoftware,
                            vendor: glString(GL.vendor), renderer: renderer, version: glString(GL.version),
                            eglVersion: eglVersion, maxTextureSize: Int(maxTexture), capabilities: caps)
        self.display = display; self.context = context; self.surface = surface; self.gbm = gbm
        self.procs = GLProcs.load(caps)
        ok = true
    }

    /// Whether EGL reports the context lost (`EGL_CONTEXT_LOST` from eglMakeCurrent).
    func eglReportsLost() -> Bool {
        let s = surface ?? diptych_egl_no_surface()
        if eglMakeCurrent(display, s, s, context) != EGLBoolean(EGL_TRUE) {
            return eglGetError() == EGLc.contextLost
        }
        return false
    }

    deinit {
        shaders.deleteAll()
        h264?.release()
        eglMakeCurrent(display, diptych_egl_no_surface(), diptych_egl_no_surface(), diptych_egl_no_context())
        if let surface { eglDestroySurface(display, surface) }
        eglDestroyContext(display, context)
        DisplayRegistry.release(display)
        // `gbm` (gbm_device, then its fd) is released after this, by ARC.
    }
}

/// The display ladder: GBM render nodes → EGL devices (hardware first, Mesa's
/// software device last) → Mesa surfaceless, narrowed by the selection.
enum DisplayLadder {
    /// The rungs to try for `selection`, and outcomes for rungs ruled out before trying.
    static func rungs(for selection: GPUSelection) -> (rungs: [DisplayRung], skipped: [RungOutcome]) {
        let client = EGLClientProcs.load()
        var rungs: [DisplayRung] = []
        var skipped: [RungOutcome] = []
        let want = { (p: GPUPlatform) in selection.platform == nil || selection.platform == p }

        // 1. GBM on DRM render nodes.
        if want(.gbm) {
            var nodes: [String] = []
            switch selection.device {
            case .auto: nodes = drmRenderNodes()
            case .renderNode(let p): nodes = [p]
            case .index(let n):
                if selection.platform == .gbm { let all = drmRenderNodes(); if n < all.count { nodes = [all[n]] } }
            case .software: break
            }
            if case .software = selection.device {
                if selection.platform == .gbm { skipped.append(RungOutcome(platform: .gbm, device: "software", failure: "GBM needs a hardware render node")) }
            } else if nodes.isEmpty {
                skipped.append(RungOutcome(platform: .gbm, device: "/dev/dri", failure: "no DRM render node (/dev/dri/renderD* absent)"))
            } else if !client.extensions.contains("EGL_MESA_platform_gbm") && !client.extensions.contains("EGL_KHR_platform_gbm") {
                skipped.append(RungOutcome(platform: .gbm, device: nodes.joined(separator: ","), failure: "EGL_KHR_platform_gbm not offered"))
            } else if client.getPlatformDisplay == nil {
                skipped.append(RungOutcome(platform: .gbm, device: nodes.joined(separator: ","), failure: "EGL_EXT_platform_base not offered"))
            } else {
                for node in nodes {
                    rungs.append(DisplayRung(platform: .gbm, label: node, isSoftware: false, open: { () throws(GPUError) in
                        let dev = try GBMDevice(path: node)
                        let d = client.getPlatformDisplay!(EGLc.platformGBMKHR, UnsafeMutableRawPointer(dev.device), nil)
                        return (d ?? diptych_egl_no_display(), dev)
                    }))
                }
            }
        }

        // 2. EGL devices.
        if want(.device) {
            if !client.extensions.contains("EGL_EXT_platform_device") {
                skipped.append(RungOutcome(platform: .device, device: "-", failure: "EGL_EXT_platform_device not offered"))
            } else if let query = client.queryDevices, let getPD = client.getPlatformDisplay {
                var n: EGLint = 0
                _ = query(0, nil, &n)
                var devs = [EGLDeviceEXT?](repeating: nil, count: Int(max(n, 0)))
                if n > 0 { _ = query(n, &devs, &n) }
                struct Dev { var index: Int; var dev: EGLDeviceEXT?; var software: Bool; var node: String? }
                var all: [Dev] = []
                for (i, d) in devs.prefix(Int(n)).enumerated() {
                    let ext = extensionTokens(client.queryDeviceString?(d, EGLc.extensions).map { String(cString: $0) })
                    let node = ext.contains("EGL_EXT_device_drm_render_node")
                        ? client.queryDeviceString?(d, EGLc.drmRenderNodeFileEXT).map { String(cString: $0) } : nil
                    all.append(Dev(index: i, dev: d, software: ext.contains("EGL_MESA_device_software"), node: node))
                }
                all.sort { (!$0.software && $1.software) || ($0.software == $1.software && $0.index < $1.index) }
                let chosen: [Dev]
                switch selection.device {
                case .auto: chosen = all
                case .software: chosen = all.filter(\.software)
                case .index(let k): chosen = all.filter { $0.index == k }
                case .renderNode(let p): chosen = all.filter { $0.node == p }
                }
                if chosen.isEmpty {
                    skipped.append(RungOutcome(platform: .device, device: "EGL device \(selection.device)",
                                               failure: all.isEmpty ? "eglQueryDevicesEXT lists no device" : "no EGL device matches (\(all.count) listed)"))
                }
                for d in chosen {
                    let label = "EGL device \(d.index)" + (d.software ? " (software)" : "") + (d.node.map { " \($0)" } ?? "")
                    let dev = d.dev
                    rungs.append(DisplayRung(platform: .device, label: label, isSoftware: d.software, open: { () throws(GPUError) in
                        (getPD(EGLc.platformDeviceEXT, dev, nil) ?? diptych_egl_no_display(), nil)
                    }))
                }
            } else {
                skipped.append(RungOutcome(platform: .device, device: "-", failure: "EGL_EXT_device_enumeration not offered"))
            }
        }

        // 3. Mesa surfaceless (picks its own device; software when there is no render node).
        if want(.surfaceless) {
            let applies: Bool
            switch selection.device {
            case .auto, .software: applies = true
            case .index, .renderNode: applies = selection.platform == .surfaceless
            }
            if !applies {
                // The device was named explicitly; surfaceless cannot choose one.
            } else if !client.extensions.contains("EGL_MESA_platform_surfaceless") {
                skipped.append(RungOutcome(platform: .surfaceless, device: "default", failure: "EGL_MESA_platform_surfaceless not offered"))
            } else if let getPD = client.getPlatformDisplay {
                rungs.append(DisplayRung(platform: .surfaceless, label: "default", isSoftware: false, open: { () throws(GPUError) in
                    (getPD(EGLc.platformSurfacelessMESA, diptych_egl_default_display(), nil) ?? diptych_egl_no_display(), nil)
                }))
            }
        }
        return (rungs, skipped)
    }

    /// Walks the ladder and returns the first working context (current on this thread).
    static func open(_ selection: GPUSelection, log: (String) -> Void) throws(GPUError) -> GLContext {
        if let missing = missingDevice(selection) { throw missing }
        let (rungs, skipped) = rungs(for: selection)
        var outcomes = skipped
        for rung in rungs {
            do {
                let ctx = try GLContext(rung: rung)
                if selection.device == .software && !ctx.info.isSoftware {
                    outcomes.append(RungOutcome(platform: rung.platform, device: rung.label,
                                                failure: "not a software renderer (\(ctx.info.renderer))"))
                    continue
                }
                log("diptych-gpu: platform \(ctx.info.platform), device \(ctx.info.device), GL_RENDERER \(ctx.info.renderer) (\(ctx.info.version))")
                return ctx
            } catch {
                outcomes.append(RungOutcome(platform: rung.platform, device: rung.label, failure: error.description))
            }
        }
        let e = GPUError.noDisplay(attempts: ladderOrder(outcomes))
        log("diptych-gpu: \(e)")
        throw e
    }

    /// Tries every rung for `selection` and reports each outcome (for `diptych probe`).
    /// Each working context is released again. Call from a thread with no current context.
    static func probe(_ selection: GPUSelection) -> [RungOutcome] {
        let (rungs, skipped) = rungs(for: selection)
        var outcomes = skipped
        for rung in rungs {
            do {
                let ctx = try GLContext(rung: rung)
                outcomes.append(RungOutcome(platform: rung.platform, device: rung.label, failure: nil, renderer: ctx.info.renderer))
            } catch {
                outcomes.append(RungOutcome(platform: rung.platform, device: rung.label, failure: error.description))
            }
        }
        return ladderOrder(outcomes)
    }

    /// Outcomes in ladder order (stable within a platform).
    static func ladderOrder(_ o: [RungOutcome]) -> [RungOutcome] {
        o.enumerated().sorted { ($0.element.platform.rank, $0.offset) < ($1.element.platform.rank, $1.offset) }.map(\.element)
    }
}
