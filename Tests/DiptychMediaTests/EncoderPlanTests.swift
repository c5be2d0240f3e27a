import Testing
import DiptychCore
import DiptychCUDA
@testable import DiptychMedia

/// Every row of the encoder path choice (docs/ARCHITECTURE.md, "Encoder paths"):
/// what each machine offers, the path taken, and why each better path was not.
@Suite struct EncoderPlanTests {
    static let node = "/dev/dri/renderD128"
    static let intel = VADeviceReport(path: node, vendor: "Intel iHD driver", vaVersion: "1.17", profiles: [
        VAProfileSupport(profile: "VAProfileH264High", entrypoints: ["VAEntrypointVLD", "VAEntrypointEncSliceLP"]),
        VAProfileSupport(profile: "VAProfileHEVCMain", entrypoints: ["VAEntrypointVLD"]),
    ], error: nil)
    static let vaOK = VAAPIReport(directory: "/dev/dri", devices: [intel], problem: nil)
    static let yTiled: UInt64 = 0x0100_0000_0000_0002
    static let gbm = EncoderTargetFacts(platform: "gbm", renderNode: node, renderableModifiers: [yTiled, 0],
                                        trials: [ModifierTrial(modifier: yTiled)])
    static let both = BuiltEncoders(hardware: true, software: true)

    enum Expect: Sendable {
        case plan(EncoderPath, String, String)
        case error(String)
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var requested: EncoderChoice = .auto
        var codec: VideoCodec = .h264
        var built = EncoderPlanTests.both
        var va = EncoderPlanTests.vaOK
        var target: EncoderTargetFacts? = EncoderPlanTests.gbm
        /// Whether the compositor's GPU runs the GPU encoder; nil: not examined (the GPU not open).
        var gpu: GPUEncoderFacts?
        /// NVENC on the compositor's CUDA device; nil: not examined.
        var nvenc: NVENCFacts?
        /// What libx264 would be asked for; nil: not known.
        var baseline: SoftwareBaseline? = SoftwareBaseline(preset: "veryfast")
        /// The path and encoder taken, and the reason as logged; or the error's text.
        var expected: Expect
        var testDescription: String { name }

        init(_ name: String, expected: Expect, _ change: (inout Row) -> Void = { _ in }) {
            self.name = name; self.expected = expected
            change(&self)
        }
    }

    static func target(_ change: (inout EncoderTargetFacts) -> Void) -> EncoderTargetFacts {
        var t = gbm
        change(&t)
        return t
    }

    static let h200 = GPUEncoderFacts.available(renderer: "NVIDIA H200/PCIe/SSE2", software: false)
    static let llvmpipe = GPUEncoderFacts.available(renderer: "llvmpipe (LLVM 15.0.6, 256 bits)", software: true)
    static let noCompute = GPUEncoderFacts.unavailable(reason: "Mali-T760 has no compute shaders (OpenGL ES 3.0; OpenGL ES 3.1 needed)")
    static let noVA = VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri")
    static let deviceGPU = EncoderTargetFacts(platform: "device", renderNode: nil)

    // NVENC as machines offer it: an L4 (an engine, both codecs), an H200
    // (the driver's library, no engine), and what else can be missing.
    static let l4Label = "NVIDIA L4 (CUDA device 0)"
    static let l4 = NVENCFacts.available(device: l4Label, cudaDevice: 0, driverAPI: "12.1", limits: [
        NVENCCodecLimits(codec: .h264, maxWidth: 4096, maxHeight: 4096, maxBFrames: 4, tenBit: false),
        NVENCCodecLimits(codec: .hevc, maxWidth: 8192, maxHeight: 8192, maxBFrames: 5, tenBit: true)])
    static let l4H264Only = NVENCFacts.available(device: l4Label, cudaDevice: 1, driverAPI: "12.1", limits: [
        NVENCCodecLimits(codec: .h264, maxWidth: 4096, maxHeight: 4096, maxBFrames: 4, tenBit: false)])
    static let h200Label = "NVIDIA H200 (CUDA device 0)"
    static let h200NVENC = NVENCFacts.unavailable(NVENCAbsence.session(status: 2, gpu: h200Label, codec: .h264)!)
    static let h200Absent = "no NVENC engine on this GPU (NVIDIA H200 (CUDA device 0): its encode session does not open: unsupported device (2))"
    static let noEncodeLibrary = NVENCFacts.unavailable(.noEncodeLibrary("no NVENC library (libnvidia-encode.so.1): Cannot load libnvidia-encode.so.1"))
    static let tooOld = NVENCFacts.unavailable(.driverTooOld("it takes NVENC API 11.0, FFmpeg's encoders need 11.1"))
    static let busy = NVENCFacts.unavailable(NVENCAbsence.session(status: 10, gpu: "NVIDIA GeForce RTX 3060 (CUDA device 0)", codec: .h264)!)
    static let noCUDA = NVENCFacts.unavailable(.noCUDA("the GL context runs on a software renderer (llvmpipe (LLVM 15.0.6, 256 bits))"))
    static let nvencNotBuilt = NVENCFacts.unavailable(.notBuilt(encoder: "h264_nvenc"))
    static let l4Detail = "NVENC on NVIDIA L4 (CUDA device 0), API 12.1; h264 up to 4096x4096, 4 B-frames"
    static let veryfastRefusal = "auto takes it in place of libx264 ultrafast only, as good at the same bit rate there and not against slower presets "
        + "(bench/results/gpu-h264-quality.md), and the preset is veryfast; --encoder gpu asks for it"

    static let upload = "VA-API from uploaded frames, VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP); zero copy not possible: "

    static let rows: [Row] = [
        Row("zero copy", expected: .plan(.vaapiZeroCopy, "h264_vaapi",
            "VA-API from the render target (zero copy), VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP), modifier 0x0100000000000002")),
        Row("zero copy, forced vaapi", expected: .plan(.vaapiZeroCopy, "h264_vaapi",
            "VA-API from the render target (zero copy), VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP), modifier 0x0100000000000002")) { $0.requested = .vaapi },
        Row("zero copy with the first accepted modifier", expected: .plan(.vaapiZeroCopy, "h264_vaapi",
            "VA-API from the render target (zero copy), VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP), modifier LINEAR")) {
            $0.target = target { $0.trials = [ModifierTrial(modifier: yTiled, failedAt: .vaapi, reason: "vaCreateSurfaces: invalid parameter"), ModifierTrial(modifier: 0)] }
        },
        Row("software requested", expected: .plan(.software, "libx264", "software encoder requested")) { $0.requested = .x264 },
        Row("software requested, not built", expected: .error("encoder libx264 unavailable: FFmpeg lacks the libx264 encoder")) {
            $0.requested = .x264; $0.built = BuiltEncoders(hardware: true, software: false)
        },
        Row("FFmpeg without VA-API", expected: .plan(.software, "libx264", "VA-API unavailable: FFmpeg lacks the h264_vaapi encoder")) {
            $0.built = BuiltEncoders(hardware: false, software: true)
        },
        Row("no /dev/dri", expected: .plan(.software, "libx264", "VA-API unavailable: no /dev/dri")) {
            $0.va = VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri"); $0.target = target { $0.platform = "surfaceless"; $0.renderNode = nil }
        },
        Row("no render node", expected: .plan(.software, "libx264", "VA-API unavailable: no DRM render node (renderD*) in /dev/dri")) {
            $0.va = VAAPIReport(directory: "/dev/dri", devices: [], problem: "no DRM render node (renderD*) in /dev/dri")
        },
        Row("no VA driver", expected: .plan(.software, "libx264", "VA-API unavailable: /dev/dri/renderD128: no VA driver (vaInitialize failed: unknown libva error)")) {
            $0.va = VAAPIReport(directory: "/dev/dri", devices: [VADeviceReport(path: node, vendor: nil, vaVersion: nil, profiles: [],
                error: "no VA driver (vaInitialize failed: unknown libva error)")], problem: nil)
        },
        Row("no encode entrypoint for the codec", expected: .plan(.software, "libx265",
            "VA-API unavailable: /dev/dri/renderD128: no encode entrypoint for HEVC (Intel iHD driver)")) { $0.codec = .hevc },
        Row("no encode entrypoint, forced vaapi", expected: .error(
            "encoder hevc_vaapi unavailable: /dev/dri/renderD128: no encode entrypoint for HEVC (Intel iHD driver)")) { $0.codec = .hevc; $0.requested = .vaapi },
        Row("no VA-API and no software encoder", expected: .error(
            "encoder h264_vaapi or libx264 unavailable: h264_vaapi: no /dev/dri; libx264: FFmpeg lacks the libx264 encoder")) {
            $0.va = VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri"); $0.built = BuiltEncoders(hardware: true, software: false)
        },
        Row("GPU not open yet", expected: .plan(.vaapiUpload, "h264_vaapi", upload + "the GPU is not open yet")) { $0.target = nil },
        Row("GPU on the EGL device platform", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no render node: the GPU runs on the EGL device platform (zero copy needs GBM on a DRM render node)")) {
            $0.target = target { $0.platform = "device"; $0.renderNode = nil }
        },
        Row("GPU on another render node", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no encode entrypoint for H.264 on the GPU's render node /dev/dri/renderD129 (the VA-API encoder is on /dev/dri/renderD128)")) {
            $0.target = target { $0.renderNode = "/dev/dri/renderD129" }
        },
        Row("no NV12 import: extension missing", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no NV12 import: the GPU lacks EGL_EXT_image_dma_buf_import_modifiers")) {
            $0.target = target { $0.missing = ["EGL_EXT_image_dma_buf_import_modifiers"] }
        },
        Row("no NV12 import: no renderable modifier", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no NV12 import: EGL imports R8 and GR88 dma-buf planes as render targets with no modifier")) {
            $0.target = target { $0.renderableModifiers = []; $0.trials = [] }
        },
        Row("modifier refused", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "modifier refused: 0x0100000000000002 refused by VA-API (vaCreateSurfaces: invalid surface); LINEAR refused by GBM (gbm_bo_create_with_modifiers2 failed)")) {
            $0.target = target { $0.trials = [ModifierTrial(modifier: yTiled, failedAt: .vaapi, reason: "vaCreateSurfaces: invalid surface"),
                                              ModifierTrial(modifier: 0, failedAt: .gbm, reason: "gbm_bo_create_with_modifiers2 failed")] }
        },
        Row("modifier refused by EGL, forced vaapi uploads", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "modifier refused: LINEAR refused by EGL (framebuffer incomplete)")) {
            $0.requested = .vaapi
            $0.target = target { $0.renderableModifiers = [0]; $0.trials = [ModifierTrial(modifier: 0, failedAt: .egl, reason: "framebuffer incomplete")] }
        },
        Row("output takes host frames", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "output x.mp4 takes frames in host memory (libx264)")) {
            $0.target = target { $0.sinkRefusal = "output x.mp4 takes frames in host memory (libx264)" }
        },
        // The GPU's own H.264 encoder.
        Row("gpu requested, hardware GPU", expected: .plan(.gpu, "gpu-h264", "GPU encoder requested, GLES compute on NVIDIA H200/PCIe/SSE2")) {
            $0.requested = .gpu; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU
        },
        Row("gpu requested over VA-API zero copy", expected: .plan(.gpu, "gpu-h264", "GPU encoder requested, GLES compute on NVIDIA H200/PCIe/SSE2")) {
            $0.requested = .gpu; $0.gpu = h200
        },
        Row("gpu requested on a software renderer", expected: .plan(.gpu, "gpu-h264",
            "GPU encoder requested, GLES compute on llvmpipe (LLVM 15.0.6, 256 bits) (software renderer)")) {
            $0.requested = .gpu; $0.gpu = llvmpipe; $0.va = noVA
        },
        Row("gpu requested, FFmpeg without libx264", expected: .plan(.gpu, "gpu-h264", "GPU encoder requested, GLES compute on NVIDIA H200/PCIe/SSE2")) {
            $0.requested = .gpu; $0.gpu = h200; $0.built = BuiltEncoders(hardware: false, software: false)
        },
        Row("gpu requested, no compute", expected: .error(
            "encoder gpu unavailable: Mali-T760 has no compute shaders (OpenGL ES 3.0; OpenGL ES 3.1 needed)")) {
            $0.requested = .gpu; $0.gpu = noCompute
        },
        Row("gpu requested, GPU not open", expected: .error("encoder gpu unavailable: the GPU is not open yet")) { $0.requested = .gpu },
        Row("gpu requested for HEVC", expected: .error("encoder gpu unavailable: it encodes H.264 only, not HEVC")) {
            $0.requested = .gpu; $0.gpu = h200; $0.codec = .hevc
        },
        Row("auto: VA-API zero copy before the GPU encoder", expected: .plan(.vaapiZeroCopy, "h264_vaapi",
            "VA-API from the render target (zero copy), VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP), modifier 0x0100000000000002")) {
            $0.gpu = h200
        },
        Row("auto: VA-API uploads before the GPU encoder", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no render node: the GPU runs on the EGL device platform (zero copy needs GBM on a DRM render node)")) {
            $0.gpu = h200; $0.target = deviceGPU
        },
        Row("auto: hardware GPU without VA-API keeps libx264 at veryfast (the GPU encoder is not as good)", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: " + veryfastRefusal)) {
            $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU
        },
        Row("auto: hardware GPU without VA-API takes the GPU encoder in place of ultrafast", expected: .plan(.gpu, "gpu-h264",
            "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2, as good as libx264 ultrafast at the same bit rate; VA-API unavailable: no /dev/dri")) {
            $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast")
        },
        Row("auto: ultrafast with B-frames asked for keeps libx264", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: it codes no B-frames, and up to 2 are asked for; --encoder gpu asks for it")) {
            $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast", maxBFrames: 2)
        },
        Row("auto: ultrafast with B-frames off takes the GPU encoder", expected: .plan(.gpu, "gpu-h264",
            "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2, as good as libx264 ultrafast at the same bit rate; VA-API unavailable: no /dev/dri")) {
            $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast", maxBFrames: 0)
        },
        Row("auto: ultrafast, VA-API uploads still before the GPU encoder", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no render node: the GPU runs on the EGL device platform (zero copy needs GBM on a DRM render node)")) {
            $0.gpu = h200; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast")
        },
        Row("auto: ultrafast on a software renderer keeps libx264", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: llvmpipe (LLVM 15.0.6, 256 bits) is a software renderer (--encoder gpu runs it there)")) {
            $0.gpu = llvmpipe; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast")
        },
        Row("auto: where libx264's settings are not known, libx264", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: " + EncoderPlanner.autoRefusal)) {
            $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = nil
        },
        Row("auto: hardware GPU, FFmpeg without VA-API or libx264: the GPU encoder, the only one", expected: .plan(.gpu, "gpu-h264",
            "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2; VA-API unavailable: FFmpeg lacks the h264_vaapi encoder")) {
            $0.gpu = h200; $0.built = BuiltEncoders(hardware: false, software: false)
        },
        Row("auto: software renderer keeps libx264", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: llvmpipe (LLVM 15.0.6, 256 bits) is a software renderer (--encoder gpu runs it there)")) {
            $0.gpu = llvmpipe; $0.va = noVA; $0.target = target { $0.platform = "surfaceless"; $0.renderNode = nil }
        },
        Row("auto: GPU without compute", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; GPU encoder not taken: Mali-T760 has no compute shaders (OpenGL ES 3.0; OpenGL ES 3.1 needed)")) {
            $0.gpu = noCompute; $0.va = noVA
        },
        Row("auto: HEVC on a hardware GPU without VA-API", expected: .plan(.software, "libx265",
            "VA-API unavailable: /dev/dri/renderD128: no encode entrypoint for HEVC (Intel iHD driver); GPU encoder not taken: it encodes H.264 only, not HEVC")) {
            $0.gpu = h200; $0.codec = .hevc
        },
        Row("x264 requested on a hardware GPU", expected: .plan(.software, "libx264", "software encoder requested")) {
            $0.requested = .x264; $0.gpu = h200; $0.va = noVA
        },
        Row("vaapi requested on a hardware GPU without VA-API", expected: .error("encoder h264_vaapi unavailable: no /dev/dri")) {
            $0.requested = .vaapi; $0.gpu = h200; $0.va = noVA
        },
        // NVENC, asked for: taken, or refused naming what is missing.
        Row("nvenc requested on an L4", expected: .plan(.nvenc, "h264_nvenc", "NVENC requested, " + l4Detail)) {
            $0.requested = .nvenc; $0.nvenc = l4; $0.va = noVA; $0.target = deviceGPU
        },
        Row("nvenc requested over VA-API zero copy", expected: .plan(.nvenc, "h264_nvenc", "NVENC requested, " + l4Detail)) {
            $0.requested = .nvenc; $0.nvenc = l4
        },
        Row("nvenc requested for HEVC", expected: .plan(.nvenc, "hevc_nvenc",
            "NVENC requested, NVENC on NVIDIA L4 (CUDA device 0), API 12.1; hevc up to 8192x8192, 5 B-frames, 10-bit")) {
            $0.requested = .nvenc; $0.nvenc = l4; $0.codec = .hevc
        },
        Row("nvenc requested on an H200: no engine", expected: .error("encoder h264_nvenc unavailable: " + h200Absent)) {
            $0.requested = .nvenc; $0.nvenc = h200NVENC; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU
        },
        Row("nvenc requested without libnvidia-encode", expected: .error(
            "encoder h264_nvenc unavailable: no libnvidia-encode (the driver's NVENC library): no NVENC library (libnvidia-encode.so.1): Cannot load libnvidia-encode.so.1")) {
            $0.requested = .nvenc; $0.nvenc = noEncodeLibrary
        },
        Row("nvenc requested, driver too old", expected: .error(
            "encoder h264_nvenc unavailable: NVIDIA driver too old for FFmpeg's NVENC encoders: it takes NVENC API 11.0, FFmpeg's encoders need 11.1")) {
            $0.requested = .nvenc; $0.nvenc = tooOld
        },
        Row("nvenc requested, session limit", expected: .error(
            "encoder h264_nvenc unavailable: NVENC session limit reached on NVIDIA GeForce RTX 3060 (CUDA device 0) (out of memory (10)): too many encode sessions are open")) {
            $0.requested = .nvenc; $0.nvenc = busy
        },
        Row("nvenc requested, FFmpeg without it", expected: .error("encoder h264_nvenc unavailable: FFmpeg lacks the h264_nvenc encoder")) {
            $0.requested = .nvenc; $0.nvenc = nvencNotBuilt
        },
        Row("nvenc requested on a software renderer", expected: .error(
            "encoder h264_nvenc unavailable: no CUDA device for NVENC: the GL context runs on a software renderer (llvmpipe (LLVM 15.0.6, 256 bits))")) {
            $0.requested = .nvenc; $0.nvenc = noCUDA; $0.gpu = llvmpipe; $0.va = noVA
        },
        Row("nvenc requested, GPU not open", expected: .error("encoder h264_nvenc unavailable: the GPU is not open yet")) { $0.requested = .nvenc },
        Row("nvenc requested for HEVC on an engine without it", expected: .error(
            "encoder hevc_nvenc unavailable: NVENC on NVIDIA L4 (CUDA device 0) does not encode HEVC (the engine lists h264)")) {
            $0.requested = .nvenc; $0.nvenc = l4H264Only; $0.codec = .hevc
        },
        // NVENC in auto's order: after VA-API zero copy, before VA-API uploads, the GPU encoder and libx264.
        Row("auto: VA-API zero copy before NVENC", expected: .plan(.vaapiZeroCopy, "h264_vaapi",
            "VA-API from the render target (zero copy), VA-API on /dev/dri/renderD128 (Intel iHD driver; VAProfileH264High VAEntrypointEncSliceLP), modifier 0x0100000000000002")) {
            $0.nvenc = l4; $0.gpu = h200
        },
        Row("auto: NVENC before VA-API uploads", expected: .plan(.nvenc, "h264_nvenc", "NVENC, " + l4Detail
            + "; VA-API zero copy not possible: no render node: the GPU runs on the EGL device platform (zero copy needs GBM on a DRM render node)")) {
            $0.nvenc = l4; $0.target = deviceGPU
        },
        Row("auto: NVENC without VA-API", expected: .plan(.nvenc, "h264_nvenc", "NVENC, " + l4Detail + "; VA-API zero copy not possible: no /dev/dri")) {
            $0.nvenc = l4; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU
        },
        Row("auto: NVENC for HEVC", expected: .plan(.nvenc, "hevc_nvenc",
            "NVENC, NVENC on NVIDIA L4 (CUDA device 0), API 12.1; hevc up to 8192x8192, 5 B-frames, 10-bit; VA-API zero copy not possible: /dev/dri/renderD128: no encode entrypoint for HEVC (Intel iHD driver)")) {
            $0.nvenc = l4; $0.codec = .hevc
        },
        Row("auto: H200, no engine: libx264, saying why at each step", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; NVENC not taken: " + h200Absent + "; GPU encoder not taken: " + veryfastRefusal)) {
            $0.nvenc = h200NVENC; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU
        },
        Row("auto: H200, no engine, ultrafast: the GPU encoder, saying why NVENC was not taken", expected: .plan(.gpu, "gpu-h264",
            "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2, as good as libx264 ultrafast at the same bit rate; VA-API unavailable: no /dev/dri; NVENC not taken: " + h200Absent)) {
            $0.nvenc = h200NVENC; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast")
        },
        Row("auto: NVENC before the GPU encoder at ultrafast", expected: .plan(.nvenc, "h264_nvenc",
            "NVENC, " + l4Detail + "; VA-API zero copy not possible: no /dev/dri")) {
            $0.nvenc = l4; $0.gpu = h200; $0.va = noVA; $0.target = deviceGPU; $0.baseline = SoftwareBaseline(preset: "ultrafast")
        },
        Row("auto: llvmpipe: libx264, saying why at each step", expected: .plan(.software, "libx264",
            "VA-API unavailable: no /dev/dri; NVENC not taken: no CUDA device for NVENC: the GL context runs on a software renderer (llvmpipe (LLVM 15.0.6, 256 bits)); GPU encoder not taken: llvmpipe (LLVM 15.0.6, 256 bits) is a software renderer (--encoder gpu runs it there)")) {
            $0.nvenc = noCUDA; $0.gpu = llvmpipe; $0.va = noVA; $0.target = target { $0.platform = "surfaceless"; $0.renderNode = nil }
        },
        Row("auto: VA-API uploads where NVENC is absent", expected: .plan(.vaapiUpload, "h264_vaapi",
            upload + "no render node: the GPU runs on the EGL device platform (zero copy needs GBM on a DRM render node); NVENC not taken: NVIDIA driver too old for FFmpeg's NVENC encoders: it takes NVENC API 11.0, FFmpeg's encoders need 11.1")) {
            $0.nvenc = tooOld; $0.target = deviceGPU
        },
        Row("auto: the GPU encoder, the only one, where NVENC is busy", expected: .plan(.gpu, "gpu-h264",
            "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2; VA-API unavailable: FFmpeg lacks the h264_vaapi encoder; NVENC not taken: NVENC session limit reached on NVIDIA GeForce RTX 3060 (CUDA device 0) (out of memory (10)): too many encode sessions are open")) {
            $0.gpu = h200; $0.nvenc = busy; $0.built = BuiltEncoders(hardware: false, software: false)
        },
        Row("x264 requested where NVENC is", expected: .plan(.software, "libx264", "software encoder requested")) {
            $0.requested = .x264; $0.nvenc = l4
        },
        Row("vaapi requested where only NVENC is", expected: .error("encoder h264_vaapi unavailable: no /dev/dri")) {
            $0.requested = .vaapi; $0.nvenc = l4; $0.va = noVA
        },
        Row("gpu requested where NVENC is", expected: .plan(.gpu, "gpu-h264", "GPU encoder requested, GLES compute on NVIDIA H200/PCIe/SSE2")) {
            $0.requested = .gpu; $0.gpu = h200; $0.nvenc = l4
        },
    ]

    @Test(arguments: rows)
    func table(_ row: Row) {
        do {
            let p = try EncoderPlanner.plan(codec: row.codec, requested: row.requested, built: row.built, vaapi: row.va, target: row.target,
                                            gpu: row.gpu, nvenc: row.nvenc, baseline: row.baseline)
            guard case .plan(let path, let encoder, let reason) = row.expected else {
                Issue.record("\(row.name): expected an error, got \(p)"); return
            }
            #expect(p.path == path)
            #expect(p.encoder == encoder)
            #expect(p.reason == reason)
            #expect(p.description == "\(encoder) (\(reason))")
            // Each better path is listed with its reason.
            let better = EncoderPath.allCases.prefix { $0 != path }
            #expect(p.requested || p.passedOver.map(\.path) == Array(better))
            #expect((p.path == .vaapiZeroCopy) == (p.modifier != nil))
            #expect((p.path == .vaapiZeroCopy || p.path == .vaapiUpload) == (p.devicePath == EncoderPlanTests.node))
            #expect((p.path == .nvenc) == (p.cudaDevice != nil))
        } catch {
            guard case .error(let text) = row.expected else { Issue.record("\(row.name): \(error)"); return }
            #expect(error.description == text)
            #expect(SessionErrorShape.isEncoderUnavailable(error))
        }
    }

    /// The GPU's own render node is preferred when several VA devices encode.
    @Test func prefersTheGPUsNode() throws {
        var other = EncoderPlanTests.intel
        other.path = "/dev/dri/renderD129"
        let va = VAAPIReport(directory: "/dev/dri", devices: [EncoderPlanTests.intel, other], problem: nil)
        var t = EncoderPlanTests.gbm
        t.renderNode = "/dev/dri/renderD129"
        let p = try EncoderPlanner.plan(codec: .h264, requested: .auto, built: EncoderPlanTests.both, vaapi: va, target: t)
        #expect(p.path == .vaapiZeroCopy && p.devicePath == "/dev/dri/renderD129")
        let noGPU = try EncoderPlanner.plan(codec: .h264, requested: .auto, built: EncoderPlanTests.both, vaapi: va, target: nil)
        #expect(noGPU.devicePath == EncoderPlanTests.node)
    }

    @Test func trialOrderPutsLinearLast() {
        #expect(EncoderPlanner.trialOrder([0, 7, 2, 7, 0]) == [7, 2, 0])
        #expect(EncoderPlanner.trialOrder([]) == [])
        #expect(ModifierTrial.name(0) == "LINEAR")
        #expect(ModifierTrial.name(0x0100_0000_0000_0002) == "0x0100000000000002")
    }

    /// On this machine (no VA-API), the take's plan says why both VA-API paths were passed over.
    @Test func thisMachine() throws {
        let p = try EncoderProbe.plan(codec: .h264, choice: .auto, driDirectory: "/nonexistent-dri", target: nil)
        #expect(p.path == .software && p.reason == "VA-API unavailable: no /nonexistent-dri")
        #expect(p.passedOver.map(\.reason) == ["no /nonexistent-dri", "the GPU is not open yet", "no /nonexistent-dri", "the GPU is not open yet"])
        #expect(p.passedOver.map(\.path) == [.vaapiZeroCopy, .nvenc, .vaapiUpload, .gpu])
    }
}

enum SessionErrorShape {
    static func isEncoderUnavailable(_ e: MediaError) -> Bool {
        if case .encoderUnavailable = e { return true }
        return false
    }
}
