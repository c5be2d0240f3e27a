/// The extensions that matter to Diptych, each detected once by exact token match.
public struct GPUCapabilities: Hashable, Sendable, Codable {
    public var dmaBufImport = false            // EGL_EXT_image_dma_buf_import
    public var dmaBufImportModifiers = false   // EGL_EXT_image_dma_buf_import_modifiers
    public var dmaBufExport = false            // EGL_MESA_image_dma_buf_export
    public var eglFenceSync = false            // EGL_KHR_fence_sync
    public var nativeFenceSync = false         // EGL_ANDROID_native_fence_sync
    public var eglImageBase = false            // EGL_KHR_image_base
    public var glTextureImage = false          // EGL_KHR_gl_texture_2D_image
    public var createContextRobustness = false // EGL_EXT_create_context_robustness
    public var noConfigContext = false         // EGL_KHR_no_config_context
    public var surfacelessContext = false      // EGL_KHR_surfaceless_context
    public var timerQuery = false              // GL_EXT_disjoint_timer_query
    public var glRobustness = false            // GL_KHR_robustness or GL_EXT_robustness
    public var eglImageTexture = false         // GL_OES_EGL_image
    public var eglImageExternal = false        // GL_OES_EGL_image_external_essl3
    public var bufferStorage = false           // GL_EXT_buffer_storage (persistently mapped staging)
    public var textureNorm16 = false           // GL_EXT_texture_norm16 (P010 planes from NVDEC)
    public var memoryObjectFD = false          // GL_EXT_memory_object + GL_EXT_memory_object_fd (readback into CUDA memory)
    public var semaphoreFD = false             // GL_EXT_semaphore + GL_EXT_semaphore_fd (handing that memory over to CUDA)
    /// OpenGL ES 3.1 or later: compute shaders and shader storage buffers.
    public var computeShaders = false
    /// The context was created with lose-context-on-reset robustness.
    public var robustContext = false
    public init() {}

    /// Each flag with the extension it stands for, in a fixed order (for `diptych probe`).
    public var summary: [(name: String, present: Bool)] {
        [("EGL_EXT_image_dma_buf_import", dmaBufImport),
         ("EGL_EXT_image_dma_buf_import_modifiers", dmaBufImportModifiers),
         ("EGL_MESA_image_dma_buf_export", dmaBufExport),
         ("EGL_KHR_fence_sync", eglFenceSync),
         ("EGL_ANDROID_native_fence_sync", nativeFenceSync),
         ("EGL_KHR_image_base", eglImageBase),
         ("EGL_KHR_gl_texture_2D_image", glTextureImage),
         ("EGL_EXT_create_context_robustness", createContextRobustness),
         ("EGL_KHR_no_config_context", noConfigContext),
         ("EGL_KHR_surfaceless_context", surfacelessContext),
         ("GL_EXT_disjoint_timer_query", timerQuery),
         ("GL_KHR_robustness/GL_EXT_robustness", glRobustness),
         ("GL_OES_EGL_image", eglImageTexture),
         ("GL_OES_EGL_image_external_essl3", eglImageExternal),
         ("GL_EXT_buffer_storage", bufferStorage),
         ("GL_EXT_texture_norm16", textureNorm16),
         ("GL_EXT_memory_object_fd", memoryObjectFD),
         ("GL_EXT_semaphore_fd", semaphoreFD),
         ("compute shaders (OpenGL ES 3.1)", computeShaders),
         ("robust context (lose context on reset)", robustContext)]
    }

    /// Sets the flags from the EGL display and GL extension strings (exact tokens).
    init(egl: Set<String>, gl: Set<String>) {
        dmaBufImport = egl.contains("EGL_EXT_image_dma_buf_import")
        dmaBufImportModifiers = egl.contains("EGL_EXT_image_dma_buf_import_modifiers")
        dmaBufExport = egl.contains("EGL_MESA_image_dma_buf_export")
        eglFenceSync = egl.contains("EGL_KHR_fence_sync")
        nativeFenceSync = egl.contains("EGL_ANDROID_native_fence_sync")
        eglImageBase = egl.contains("EGL_KHR_image_base")
        glTextureImage = egl.contains("EGL_KHR_gl_texture_2D_image")
        createContextRobustness = egl.contains("EGL_EXT_create_context_robustness")
        noConfigContext = egl.contains("EGL_KHR_no_config_context") || egl.contains("EGL_MESA_configless_context")
        surfacelessContext = egl.contains("EGL_KHR_surfaceless_context")
        timerQuery = gl.contains("GL_EXT_disjoint_timer_query")
        glRobustness = gl.contains("GL_KHR_robustness") || gl.contains("GL_EXT_robustness")
        eglImageTexture = gl.contains("GL_OES_EGL_image")
        eglImageExternal = gl.contains("GL_OES_EGL_image_external_essl3")
        textureNorm16 = gl.contains("GL_EXT_texture_norm16")
        bufferStorage = gl.contains("GL_EXT_buffer_storage")
        memoryObjectFD = gl.contains("GL_EXT_memory_object") && gl.contains("GL_EXT_memory_object_fd")
        semaphoreFD = gl.contains("GL_EXT_semaphore") && gl.contains("GL_EXT_semaphore_fd")
    }
}

/// What `diptych probe` prints about the GPU in use.
public struct GPUInfo: Hashable, Sendable, Codable, CustomStringConvertible {
    public var platform: GPUPlatform
    /// The device taken: a render node, `EGL device N`, or `default`.
    public var device: String
    public var isSoftware: Bool
    public var vendor: String
    public var renderer: String
    public var version: String
    public var eglVersion: String
    /// GL_MAX_TEXTURE_SIZE: the largest input frame or canvas side.
    public var maxTextureSize: Int
    public var capabilities: GPUCapabilities

    public var description: String {
        "\(platform) \(device): \(renderer) (\(vendor), \(version), EGL \(eglVersion))"
    }
}

/// Splits an extension string into exact tokens.
func extensionTokens(_ s: String?) -> Set<String> {
    guard let s else { return [] }
    return Set(s.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init))
}
