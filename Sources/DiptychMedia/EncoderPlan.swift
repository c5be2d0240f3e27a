import DiptychCore

/// How a take's frames reach the encoder, best first (docs/ARCHITECTURE.md,
/// "Encoder paths").
public enum EncoderPath: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// Each output's NV12 frame is converted on the GPU straight into a
    /// dma-buf the VA-API encoder reads: nothing crosses host memory.
    case vaapiZeroCopy = "vaapi-zero-copy"
    /// NVIDIA's encoder engine (FFmpeg's h264_nvenc/hevc_nvenc) on the
    /// compositor's CUDA device, fed CUDA frames.
    case nvenc
    /// NV12 read back from the GPU into host memory, then uploaded into VA surfaces.
    case vaapiUpload = "vaapi-upload"
    /// The compositor's GPU encodes H.264 itself (GLES 3.1 compute passes) and
    /// only the bitstream is read back; the writers take its access units.
    case gpu
    /// NV12 read back from the GPU and encoded by libx264/libx265.
    case software

    public var description: String {
        switch self {
        case .vaapiZeroCopy: "VA-API from the render target (zero copy)"
        case .nvenc: "NVENC"
        case .vaapiUpload: "VA-API from uploaded frames"
        case .gpu: "the GPU's H.264 encoder"
        case .software: "software"
        }
    }
}

/// Whether the compositor's GPU can run the GPU H.264 encoder
/// (`--encoder gpu`): a GLES 3.1 context with compute shaders.
public enum GPUEncoderFacts: Hashable, Sendable {
    /// The context runs compute shaders. `software`: a software renderer
    /// (llvmpipe), whose encoder is taken only when asked for.
    case available(renderer: String, software: Bool)
    /// Why it cannot run (no compute shaders, ...).
    case unavailable(reason: String)

    /// The encoder's name in plans and summaries.
    public static let encoderName = "gpu-h264"
}

/// What libx264 would be asked for, against which `auto` weighs the GPU
/// encoder: `auto` takes it in place of libx264 only where it is at least as
/// good at the same bit rate, which is against `ultrafast` (−1.6 % to −64 %
/// BD-rate on four clips) and not against `veryfast`, the default (+24 % to
/// +92 %; bench/results/gpu-h264-quality.md), and never where B-frames are
/// asked for (it codes none).
public struct SoftwareBaseline: Hashable, Sendable {
    public var preset: String
    public var maxBFrames: Int?

    public init(preset: String, maxBFrames: Int? = nil) { self.preset = preset; self.maxBFrames = maxBFrames }
    public init(_ settings: VideoEncoderSettings) { self.init(preset: settings.preset, maxBFrames: settings.maxBFrames) }

    /// The libx264 presets the GPU encoder is measured at least as good as, at the same bit rate.
    public static let matchedPresets: Set<String> = ["ultrafast"]

    /// Why `auto` keeps libx264 against this baseline; nil where it takes the GPU encoder.
    public var gpuEncoderRefusal: String? {
        guard Self.matchedPresets.contains(preset) else {
            return "auto takes it in place of libx264 ultrafast only, as good at the same bit rate there and not against slower presets "
                + "(bench/results/gpu-h264-quality.md), and the preset is \(preset); --encoder gpu asks for it"
        }
        if let b = maxBFrames, b > 0 { return "it codes no B-frames, and up to \(b) are asked for; --encoder gpu asks for it" }
        return nil
    }
}

/// One DRM format modifier tried for the zero-copy target, and where it failed.
public struct ModifierTrial: Hashable, Sendable, CustomStringConvertible {
    public enum Stage: String, Hashable, Sendable {
        /// `gbm_bo_create_with_modifiers2` could not allocate the NV12 buffer.
        case gbm = "GBM"
        /// EGL could not import its planes as render targets.
        case egl = "EGL"
        /// The VA driver refused the buffer as an NV12 surface (`vaCreateSurfaces`).
        case vaapi = "VA-API"
    }
    public var modifier: UInt64
    /// How the buffer was laid out (`R8 and GR88 buffers`, ...), when it matters.
    public var layout: String?
    /// Where it failed; nil when the buffer was allocated, imported and accepted.
    public var failedAt: Stage?
    public var reason: String

    public init(modifier: UInt64, layout: String? = nil, failedAt: Stage? = nil, reason: String = "") {
        self.modifier = modifier; self.layout = layout; self.failedAt = failedAt; self.reason = reason
    }

    public var accepted: Bool { failedAt == nil }
    public var description: String {
        let m = ModifierTrial.name(modifier) + (layout.map { " as \($0)" } ?? "")
        guard let failedAt else { return "\(m) accepted" }
        return "\(m) refused by \(failedAt.rawValue)" + (reason.isEmpty ? "" : " (\(reason))")
    }

    /// `LINEAR`, or the modifier in hex (`0x0100000000000002`).
    public static func name(_ m: UInt64) -> String {
        if m == 0 { return "LINEAR" }
        let hex = String(m, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 16 - hex.count)) + hex
    }
}

/// The GPU's side of the zero-copy path, as a take found it.
public struct EncoderTargetFacts: Hashable, Sendable {
    /// The EGL platform the compositor runs on (`gbm`, `device`, `surfaceless`).
    public var platform: String
    /// The DRM render node of a GBM display; nil on other platforms.
    public var renderNode: String?
    /// Extensions the target needs that the context lacks.
    public var missing: [String]
    /// Modifiers with which EGL imports R8 and GR88 dma-buf planes as render
    /// targets (not external-only), in EGL's order.
    public var renderableModifiers: [UInt64]
    /// The modifiers tried, in order, up to the first accepted one.
    public var trials: [ModifierTrial]
    /// Why the output's frames cannot go to its encoder in place (it takes
    /// frames in host memory, its buffers cannot be made); nil when they can.
    public var sinkRefusal: String?

    public init(platform: String, renderNode: String?, missing: [String] = [], renderableModifiers: [UInt64] = [],
                trials: [ModifierTrial] = [], sinkRefusal: String? = nil) {
        self.platform = platform; self.renderNode = renderNode; self.missing = missing
        self.renderableModifiers = renderableModifiers; self.trials = trials; self.sinkRefusal = sinkRefusal
    }
}

/// Which of the codec's encoders this FFmpeg build has.
public struct BuiltEncoders: Hashable, Sendable {
    public var hardware: Bool
    public var software: Bool
    public init(hardware: Bool, software: Bool) { self.hardware = hardware; self.software = software }
}

/// A better path not taken, and why.
public struct PassedOverPath: Hashable, Sendable {
    public var path: EncoderPath
    public var reason: String
}

/// The encoder a take runs, on which path, and why each better path was not possible.
public struct EncoderPlan: Hashable, Sendable, CustomStringConvertible {
    public var path: EncoderPath
    /// FFmpeg encoder name (`h264_vaapi`, `libx264`, ...).
    public var encoder: String
    /// The render node of the VA-API device.
    public var devicePath: String?
    /// Zero copy: the modifier of the target buffers.
    public var modifier: UInt64?
    /// NVENC: the CUDA device it encodes on (the compositor's).
    public var cudaDevice: Int?
    /// What runs: `VA-API on /dev/dri/renderD128 (...)`, `software`.
    public var detail: String
    public var passedOver: [PassedOverPath]
    /// The path was asked for (`--encoder x264` or `gpu`).
    public var requested: Bool
    /// Auto only: whether the GPU encoder's facts were known (the GPU open);
    /// a software plan says why it was not taken only then.
    var gpuExamined = false
    /// Auto only: whether NVENC's facts were known; a later path's reason
    /// says why NVENC was not taken only then.
    var nvencExamined = false

    /// `; NVENC not taken: …` where NVENC was examined and passed over.
    private var nvencNotTaken: String {
        guard nvencExamined, let n = passedOver.first(where: { $0.path == .nvenc }) else { return "" }
        return "; NVENC not taken: \(n.reason)"
    }

    /// Why this encoder and path: the take's log and summary.
    public var reason: String {
        switch path {
        case .vaapiZeroCopy:
            return "\(path), \(detail)" + (modifier.map { ", modifier \(ModifierTrial.name($0))" } ?? "")
        case .nvenc:
            if requested { return "NVENC requested, \(detail)" }
            return "\(path), \(detail); VA-API zero copy not possible: \(passedOver.first?.reason ?? "?")"
        case .vaapiUpload:
            return "\(path), \(detail); zero copy not possible: \(passedOver.first?.reason ?? "?")" + nvencNotTaken
        case .gpu:
            if requested { return "GPU encoder requested, \(detail)" }
            return "\(path), \(detail); VA-API unavailable: \(passedOver.first?.reason ?? "?")" + nvencNotTaken
        case .software:
            if requested { return "software encoder requested" }
            // Frames are uploaded whenever VA-API can run at all, so both VA paths failed for one reason.
            let va = "VA-API unavailable: \(passedOver.first(where: { $0.path == .vaapiUpload })?.reason ?? "?")" + nvencNotTaken
            guard gpuExamined, let gpu = passedOver.first(where: { $0.path == .gpu }) else { return va }
            return "\(va); GPU encoder not taken: \(gpu.reason)"
        }
    }

    public var description: String { "\(encoder) (\(reason))" }
}

/// The choice of encoder path: a pure function of what the machine offers
/// (docs/ARCHITECTURE.md, "Encoder paths"). `auto` takes, in order, VA-API
/// from the render target, NVENC, VA-API from uploaded frames, the GPU's own
/// H.264 encoder (on a hardware GPU only), software; `vaapi` takes the first
/// VA-API path possible and fails with the reason where none is; `nvenc`
/// takes NVENC or fails with what is missing; `gpu` takes the GPU encoder
/// (H.264 only, also on a software renderer) or fails with the reason;
/// `x264` takes software.
public enum EncoderPlanner {
    /// Picks the path. `target` is nil before the GPU is open (zero copy is
    /// then not possible, and VA-API and software are decided as usual);
    /// `gpu` likewise (the GPU encoder is then not possible; nothing says so
    /// in a software plan's reason); `nvenc` likewise (NVENC on the
    /// compositor's CUDA device, examined once the GPU is open).
    public static func plan(codec: VideoCodec, requested: EncoderChoice, built: BuiltEncoders, vaapi: VAAPIReport,
                            target: EncoderTargetFacts?, gpu: GPUEncoderFacts? = nil,
                            nvenc: NVENCFacts? = nil, baseline: SoftwareBaseline? = nil) throws(MediaError) -> EncoderPlan {
        let names = EncoderProbe.encoderNames(codec: codec)
        var software = EncoderPlan(path: .software, encoder: names.software, devicePath: nil, modifier: nil,
                                   detail: "software", passedOver: [], requested: requested == .x264)
        if requested == .x264 {
            guard built.software else { throw .encoderUnavailable(encoder: names.software, reason: "FFmpeg lacks the \(names.software) encoder") }
            return software
        }
        let nvencEncoder = nvencEncoder(codec: codec, facts: nvenc)
        if requested == .nvenc {
            switch nvencEncoder {
            case .success(let n):
                return EncoderPlan(path: .nvenc, encoder: NVENCFacts.encoderName(codec), devicePath: nil, modifier: nil,
                                   cudaDevice: n.device, detail: n.detail, passedOver: [], requested: true)
            case .failure(let why):
                throw .encoderUnavailable(encoder: NVENCFacts.encoderName(codec), reason: why.reason)
            }
        }
        let nvencPassed = nvencEncoder.failureReason.map { [PassedOverPath(path: .nvenc, reason: $0)] } ?? []
        let gpuEncoder = gpuEncoder(codec: codec, facts: gpu, requested: requested == .gpu, softwareBuilt: built.software, baseline: baseline)
        if requested == .gpu {
            switch gpuEncoder {
            case .success(let detail):
                return EncoderPlan(path: .gpu, encoder: GPUEncoderFacts.encoderName, devicePath: nil, modifier: nil,
                                   detail: detail, passedOver: [], requested: true)
            case .failure(let why):
                throw .encoderUnavailable(encoder: "gpu", reason: why.reason)
            }
        }
        let device: (path: String, detail: String)
        switch vaDevice(codec: codec, built: built, report: vaapi, preferring: target?.renderNode) {
        case .failure(let why):
            if requested == .vaapi { throw .encoderUnavailable(encoder: names.hardware, reason: why.reason) }
            // Better paths passed over, in the order they are tried.
            let vaPassed = [PassedOverPath(path: .vaapiZeroCopy, reason: why.reason)] + nvencPassed
                + [PassedOverPath(path: .vaapiUpload, reason: why.reason)]
            if case .success(let n) = nvencEncoder {
                return EncoderPlan(path: .nvenc, encoder: NVENCFacts.encoderName(codec), devicePath: nil, modifier: nil,
                                   cudaDevice: n.device, detail: n.detail, passedOver: [vaPassed[0]], requested: false)
            }
            switch gpuEncoder {
            case .success(let detail):
                var plan = EncoderPlan(path: .gpu, encoder: GPUEncoderFacts.encoderName, devicePath: nil, modifier: nil,
                                       detail: detail, passedOver: vaPassed, requested: false)
                plan.nvencExamined = nvenc != nil
                return plan
            case .failure(let gpuWhy):
                guard built.software else {
                    throw .encoderUnavailable(encoder: "\(names.hardware) or \(names.software)",
                                              reason: "\(names.hardware): \(why.reason); \(names.software): FFmpeg lacks the \(names.software) encoder")
                }
                software.passedOver = vaPassed + [PassedOverPath(path: .gpu, reason: gpuWhy.reason)]
                software.gpuExamined = gpu != nil
                software.nvencExamined = nvenc != nil
                return software
            }
        case .success(let d): device = d
        }
        var plan = EncoderPlan(path: .vaapiUpload, encoder: names.hardware, devicePath: device.path, modifier: nil,
                               detail: device.detail, passedOver: [], requested: false)
        switch zeroCopy(codec: codec, target: target, vaNode: device.path, report: vaapi) {
        case .success(let modifier):
            plan.path = .vaapiZeroCopy
            plan.modifier = modifier
        case .failure(let why):
            plan.passedOver = [PassedOverPath(path: .vaapiZeroCopy, reason: why.reason)]
            // NVENC reads the composite where the GPU wrote it: before frames uploaded into VA surfaces.
            if requested == .auto, case .success(let n) = nvencEncoder {
                return EncoderPlan(path: .nvenc, encoder: NVENCFacts.encoderName(codec), devicePath: nil, modifier: nil,
                                   cudaDevice: n.device, detail: n.detail, passedOver: plan.passedOver, requested: false)
            }
            plan.passedOver += nvencPassed
            plan.nvencExamined = nvenc != nil && requested == .auto
        }
        return plan
    }

    /// NVENC for `codec` on the compositor's CUDA device (`NVENC on NVIDIA L4
    /// (CUDA device 0), H.264 up to 4096x4096`), or what is missing.
    static func nvencEncoder(codec: VideoCodec, facts: NVENCFacts?) -> Result<(device: Int, detail: String), Refusal> {
        switch facts {
        case nil:
            return .failure(Refusal(reason: "the GPU is not open yet"))
        case .unavailable(let absence)?:
            return .failure(Refusal(reason: absence.description))
        case .available(let device, let ordinal, let api, let limits)?:
            guard let l = limits.first(where: { $0.codec == codec }) else {
                return .failure(Refusal(reason: NVENCAbsence.codecUnsupported(gpu: device, codec: codec, detail: "the engine lists \(limits.map(\.codec.rawValue).joined(separator: ", "))").description))
            }
            return .success((ordinal, "NVENC on \(device), API \(api); \(l)"))
        }
    }

    /// What runs the GPU encoder (`GL renderer, compute`), or why it cannot.
    /// A software renderer runs it only when it was asked for.
    /// `auto` keeps the software encoder where FFmpeg has it, but where the
    /// GPU encoder is as good as what it would be asked for (`baseline`;
    /// `autoRefusal` where that is not known).
    static func gpuEncoder(codec: VideoCodec, facts: GPUEncoderFacts?, requested: Bool, softwareBuilt: Bool = true,
                           baseline: SoftwareBaseline? = nil) -> Result<String, Refusal> {
        guard codec == .h264 else { return .failure(Refusal(reason: "it encodes H.264 only, not \(codecName(codec))")) }
        switch facts {
        case nil:
            return .failure(Refusal(reason: "the GPU is not open yet"))
        case .unavailable(let reason)?:
            return .failure(Refusal(reason: reason))
        case .available(let renderer, let software)?:
            if software && !requested {
                return .failure(Refusal(reason: "\(renderer) is a software renderer (--encoder gpu runs it there)"))
            }
            if !requested && softwareBuilt {
                guard let baseline else { return .failure(Refusal(reason: autoRefusal)) }
                if let why = baseline.gpuEncoderRefusal { return .failure(Refusal(reason: why)) }
                return .success("GLES compute on \(renderer), as good as libx264 \(baseline.preset) at the same bit rate")
            }
            return .success("GLES compute on \(renderer)" + (software ? " (software renderer)" : ""))
        }
    }

    struct Refusal: Error { var reason: String }

    /// Why `auto` does not take the GPU encoder where what libx264 would be
    /// asked for is not known (`SoftwareBaseline`).
    static let autoRefusal = "auto weighs it against the libx264 settings it replaces, which are not known here; --encoder gpu asks for it"


    /// The VA-API device that encodes `codec` (the GPU's own node first), or why none does.
    static func vaDevice(codec: VideoCodec, built: BuiltEncoders, report: VAAPIReport,
                         preferring node: String?) -> Result<(path: String, detail: String), Refusal> {
        let names = EncoderProbe.encoderNames(codec: codec)
        guard built.hardware else { return .failure(Refusal(reason: "FFmpeg lacks the \(names.hardware) encoder")) }
        if let problem = report.problem { return .failure(Refusal(reason: problem)) }
        let able = report.devices.filter { !$0.encodeSupport(for: codec).isEmpty }
        guard let dev = able.first(where: { $0.path == node }) ?? able.first else {
            let why = report.devices.map { d in
                d.error.map { "\(d.path): \($0)" }
                    ?? "\(d.path): no encode entrypoint for \(codecName(codec)) (\(d.vendor ?? "unknown driver"))"
            }
            return .failure(Refusal(reason: why.isEmpty ? "no VA-API device" : why.joined(separator: "; ")))
        }
        let s = dev.encodeSupport(for: codec)[0]
        return .success((dev.path, "VA-API on \(dev.path) (\(dev.vendor ?? "unknown driver"); \(s.profile) \(s.entrypoints.joined(separator: "/")))"))
    }

    /// The modifier of the zero-copy target, or why there is none.
    static func zeroCopy(codec: VideoCodec, target: EncoderTargetFacts?, vaNode: String,
                         report: VAAPIReport) -> Result<UInt64, Refusal> {
        guard let t = target else { return .failure(Refusal(reason: "the GPU is not open yet")) }
        guard t.platform == "gbm", let node = t.renderNode else {
            return .failure(Refusal(reason: "no render node: the GPU runs on the EGL \(t.platform) platform (zero copy needs GBM on a DRM render node)"))
        }
        guard node == vaNode else {
            return .failure(Refusal(reason: "no encode entrypoint for \(codecName(codec)) on the GPU's render node \(node) (the VA-API encoder is on \(vaNode))"))
        }
        if !t.missing.isEmpty { return .failure(Refusal(reason: "no NV12 import: the GPU lacks \(t.missing.joined(separator: ", "))")) }
        guard !t.renderableModifiers.isEmpty else {
            return .failure(Refusal(reason: "no NV12 import: EGL imports R8 and GR88 dma-buf planes as render targets with no modifier"))
        }
        guard let ok = t.trials.first(where: \.accepted) else {
            return .failure(Refusal(reason: "modifier refused: " + (t.trials.isEmpty ? "none was tried" : t.trials.map(\.description).joined(separator: "; "))))
        }
        if let refusal = t.sinkRefusal { return .failure(Refusal(reason: refusal)) }
        return .success(ok.modifier)
    }

    static func codecName(_ c: VideoCodec) -> String { c == .h264 ? "H.264" : "HEVC" }

    /// The order modifiers are tried in: EGL's order (drivers list their
    /// preferred layouts first), LINEAR last (every driver can read it, but
    /// encoders read tiled surfaces faster and some need them).
    public static func trialOrder(_ renderable: [UInt64]) -> [UInt64] {
        var seen = Set<UInt64>()
        let unique = renderable.filter { seen.insert($0).inserted }
        return unique.filter { $0 != 0 } + unique.filter { $0 == 0 }
    }
}

extension Result where Failure == EncoderPlanner.Refusal {
    /// Why the path is not possible; nil where it is.
    var failureReason: String? { if case .failure(let r) = self { r.reason } else { nil } }
}
