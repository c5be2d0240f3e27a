import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// Tests: the VA-API devices, zero-copy devices and dma-buf-taking outputs
/// of a take on a machine that has none (GBM and VA-API cannot run here).
struct ZeroCopyOverride: Sendable {
    /// Stands in for `EncoderProbe.vaapi()`.
    var report: VAAPIReport
    /// Stands in for the GPU's side (`GPUCompositor.encoderTargetSupport`).
    var support: EncoderTargetFacts
    /// Stands in for the GPU encoder's facts (`gpuEncoderFacts`); nil: the GPU's own.
    var gpuEncoder: GPUEncoderFacts? = nil
    /// Stands in for NVENC's facts (`NVENCProbe.facts`); nil: the machine's own.
    var nvenc: NVENCFacts? = nil
    /// Makes output `key`'s device; `encoder` is nil during the setup's trial.
    var device: @Sendable (_ current: @escaping @Sendable () -> (GPUCompositor, OutputID)?, _ encoder: EncoderStage?) -> any ZeroCopyDevice
}

/// A take's encoder path (docs/ARCHITECTURE.md, "Encoder paths"): what this
/// machine's VA-API devices and the take's GPU offer, the trial of the
/// zero-copy target, the plan every output runs, and each zero-copy output's
/// ring. Used by the take's thread.
final class ZeroCopySetup {
    let codec: VideoCodec
    let choice: EncoderChoice
    let report: VAAPIReport?
    /// Whether the GPU runs the GPU encoder.
    let gpuEncoder: GPUEncoderFacts
    /// NVENC on the compositor's CUDA device; nil where it was not asked for (`--encoder vaapi`, `x264`, `gpu`).
    let nvenc: NVENCFacts?
    /// What libx264 would be asked for (the take's output 0), against which `auto` weighs the GPU encoder.
    let baseline: SoftwareBaseline
    /// The GPU's side; nil when no VA-API path can run (nothing was asked of the GPU).
    let facts: EncoderTargetFacts?
    /// The plan of an output whose encoder takes dma-bufs.
    let plan: EncoderPlan
    private let chosen: (modifier: UInt64, layout: EncoderBufferLayout)?
    private let allocator: EncoderBufferAllocator?
    private let override: ZeroCopyOverride?
    private let gpu: StageBox

    /// The GPU stage for devices' `current()`: read on the take's thread only.
    final class StageBox: @unchecked Sendable {   // a weak reference to the take's GPU stage, which is not Sendable; read on the take's thread only
        weak var stage: GPUStage?
        init(_ s: GPUStage) { stage = s }
        func current(_ key: Int) -> (GPUCompositor, OutputID)? {
            guard let s = stage, let t = s.target(of: key) else { return nil }
            return (s.gpu, t)
        }
    }

    /// Examines VA-API, NVENC on the compositor's CUDA device, then (where a
    /// VA-API path can run) the GPU, and tries the zero-copy target on output
    /// `trialOutput`. Throws when `--encoder vaapi` or `nvenc` cannot run at
    /// all (bad input: exit 2).
    /// This machine's VA-API devices where `choice` can take VA-API and FFmpeg
    /// has its encoder (examined once a take: its cost trial and its encoder path read them), else nil.
    static func vaapiReport(codec: VideoCodec, choice: EncoderChoice, override: ZeroCopyOverride?) -> VAAPIReport? {
        override?.report ?? (EncoderProbe.built(codec: codec).hardware && (choice == .auto || choice == .vaapi) ? EncoderProbe.vaapi() : nil)
    }

    /// `report`: `vaapiReport(codec:choice:override:)`.
    init(codec: VideoCodec, choice: EncoderChoice, gpu stage: GPUStage, trialOutput: Int, settings: VideoEncoderSettings,
         report: VAAPIReport?, override: ZeroCopyOverride?) throws(MediaError) {
        self.codec = codec; self.choice = choice; self.override = override
        let baseline = SoftwareBaseline(settings)
        self.baseline = baseline
        gpu = StageBox(stage)
        self.report = report
        let gpuEncoder = override?.gpuEncoder ?? ZeroCopySetup.gpuEncoderFacts(stage.gpu)
        self.gpuEncoder = gpuEncoder
        let nvenc: NVENCFacts? = choice == .auto || choice == .nvenc
            ? override?.nvenc ?? NVENCProbe.facts(codec: codec, cudaDevice: stage.gpu.cudaDevice()) : nil
        self.nvenc = nvenc
        // The GPU's side first (no allocation yet): the VA-API device on the GPU's own node is preferred.
        // NVENC joins the final plan only (before the trial, zero copy cannot be told from NVENC's turn).
        var facts = override?.support ?? ZeroCopySetup.facts(stage.gpu.encoderTargetSupport())
        let base = try EncoderProbe.plan(codec: codec, choice: choice, report: report ?? VAAPIReport(directory: "", devices: [], problem: nil),
                                         target: facts, gpu: gpuEncoder, nvenc: choice == .nvenc ? nvenc : nil, baseline: baseline)
        guard base.path != .software, let node = base.devicePath else {
            self.facts = nil; chosen = nil; allocator = nil
            plan = choice == .auto && nvenc != nil
                ? try EncoderProbe.plan(codec: codec, choice: choice, report: report ?? VAAPIReport(directory: "", devices: [], problem: nil),
                                        target: facts, gpu: gpuEncoder, nvenc: nvenc, baseline: baseline)
                : base
            return
        }
        var allocator: EncoderBufferAllocator?
        var chosen: (modifier: UInt64, layout: EncoderBufferLayout)?
        if facts.platform == "gbm", facts.renderNode == node, facts.missing.isEmpty, !facts.renderableModifiers.isEmpty {
            var trialSettings = settings
            trialSettings.preferredRenderNode = node
            let box = gpu
            let outcome: ZeroCopyTrial.Outcome
            if let override {
                outcome = ZeroCopyTrial.run(modifiers: facts.renderableModifiers, size: stage.canvas) { _ in
                    override.device({ box.current(trialOutput) }, nil)
                }
            } else {
                do throws(GPUError) { allocator = try EncoderBufferAllocator(renderNode: node) } catch {
                    facts.trials = [ModifierTrial(modifier: facts.renderableModifiers[0], failedAt: .gbm, reason: "\(error)")]
                }
                outcome = allocator.map { a in
                    ZeroCopyTrial.run(modifiers: facts.renderableModifiers, size: stage.canvas) { layout in
                        GBMVATargets(allocator: a, layout: layout, settings: trialSettings, current: { box.current(trialOutput) })
                    }
                } ?? ZeroCopyTrial.Outcome(trials: facts.trials, chosen: nil)
            }
            facts.trials = outcome.trials
            chosen = outcome.chosen
        }
        self.facts = facts
        self.allocator = allocator
        self.chosen = chosen
        plan = try EncoderProbe.plan(codec: codec, choice: choice, report: report, target: facts, gpu: gpuEncoder, nvenc: nvenc,
                                     baseline: baseline)
    }

    /// The GPU encoder's settings for an output's: `--qp` (a constant
    /// quantizer), else `--bitrate` with the VBV buffer of `--maxrate` and
    /// `--bufsize` (a second at maxrate when only it is given; a bit rate
    /// above maxrate is brought down to it); a keyframe every `keyframeInterval` frames; `--slices`
    /// (else `GPUH264Settings.defaultSlices`).
    static func gpuH264Settings(_ s: VideoEncoderSettings) -> GPUH264Settings {
        let slices = s.slices ?? GPUH264Settings.defaultSlices(height: s.size.height)
        if let qp = s.qp { return GPUH264Settings(qp: qp, keyframeInterval: s.keyframeInterval, slices: slices) }
        let bitrate = min(s.bitrate, s.maxrate ?? s.bitrate)
        return GPUH264Settings(keyframeInterval: s.keyframeInterval, bitrate: bitrate, maxrate: s.maxrate,
                               bufsize: s.maxrate.map { s.bufsize ?? $0 }, slices: slices)
    }

    /// Output `key`'s frames are encoded on the GPU from now on, at its own
    /// settings and rate, when the plan is the GPU encoder (and so are its settings: `settings(_:)`).
    func attachGPUEncoder(_ key: Int, settings: VideoEncoderSettings) throws(GPUError) {
        guard plan.path == .gpu, settings.encoder == .gpu, let g = gpu.stage else { return }
        _ = try g.attachGPUEncoder(key, settings: Self.gpuH264Settings(settings), rate: settings.frameRate)
    }

    /// How output 0's frames reach NVENC, for the take log's `NVENC: …` line
    /// (`scripts/verify-nvenc` reads it); nil unless the plan is NVENC.
    private(set) var nvencFrames: String?

    /// NVENC's frames where the compositor reads back into CUDA memory: each
    /// frame copied device to device from the readback's CUDA memory into a
    /// CUDA frame the encoder lends (`GPUStage.attachCUDAFrames`).
    static let nvencInCUDA = "frames copied device to device from the compositor's CUDA memory into the encoder's CUDA frames (in CUDA memory, no host copy)"

    /// NVENC's frames elsewhere: read back into host memory, then uploaded
    /// into a CUDA frame of the encoder's pool (`av_hwframe_transfer_data`).
    static func nvencUploaded(_ why: String) -> String { "frames read back and uploaded into CUDA frames (a host copy a frame: \(why))" }

    /// Whether the compositor's GPU runs the GPU encoder: OpenGL ES 3.1
    /// compute, in a GPU stage that hands encoded pictures over.
    static func gpuEncoderFacts(_ info: GPUInfo) -> GPUEncoderFacts {
        guard info.capabilities.computeShaders else {
            return .unavailable(reason: "\(info.renderer) has no compute shaders (\(info.version); OpenGL ES 3.1 needed)")
        }
        return .available(renderer: info.renderer, software: info.isSoftware)
    }

    /// Whether this compositor runs it as opened: the encoder reads the
    /// compute pass's NV12 buffer of every frame, which `--encoder gpu` asks
    /// the compositor for and `auto` finds on a hardware GPU with compute.
    static func gpuEncoderFacts(_ gpu: GPUCompositor) -> GPUEncoderFacts {
        let facts = gpuEncoderFacts(gpu.info)
        guard case .available = facts else { return facts }
        if gpu.plan.pass != .compute { return .unavailable(reason: "the compositor draws with the fragment pass") }
        if gpu.plan.softwareShortcut { return .unavailable(reason: "the compositor copies some frames without drawing them") }
        return facts
    }

    static func facts(_ s: EncoderTargetSupport) -> EncoderTargetFacts {
        EncoderTargetFacts(platform: s.platform.rawValue, renderNode: s.renderNode, missing: s.missing, renderableModifiers: s.renderableModifiers)
    }

    /// The settings outputs open with: VA-API on the plan's device when a
    /// VA-API path runs; the GPU encoder (outputs that take its pictures) when
    /// it runs, under `auto` only for outputs whose libx264 settings it is as
    /// good as (`SoftwareBaseline`).
    /// An output of another codec than the take's (`alsoOut`'s `codec`) keeps
    /// its settings: its encoder is chosen as `--encoder` says, and its frames are read back.
    func settings(_ s: VideoEncoderSettings) -> VideoEncoderSettings {
        var s = s
        guard s.codec == codec else { return s }
        switch plan.path {
        case .vaapiZeroCopy, .vaapiUpload: s.preferredRenderNode = plan.devicePath
        case .nvenc: s.encoder = .nvenc; s.cudaDevice = plan.cudaDevice
        case .gpu:
            // Under auto, an output whose own libx264 settings the GPU encoder is not as good as keeps libx264.
            if choice == .gpu || SoftwareBaseline(s).gpuEncoderRefusal == nil { s.encoder = .gpu }
        case .software: break
        }
        return s
    }

    /// The plan of output `key` (opened as `stage`), and its ring when its
    /// frames go to the encoder in place. An output whose encoder takes
    /// frames in host memory, or whose ring cannot be made, reads back.
    func attach(_ key: Int, stage: EncoderStage, settings: VideoEncoderSettings, log: (String) -> Void,
                warn: (String) -> Void) -> EncoderPlan {
        guard settings.codec == codec else { return plan }
        if plan.path == .gpu, settings.encoder != .gpu {
            // An output `settings(_:)` kept on libx264: its own plan says why.
            return (try? EncoderProbe.plan(codec: codec, choice: choice, report: report, target: facts, gpu: gpuEncoder, nvenc: nvenc,
                                           baseline: SoftwareBaseline(settings))) ?? plan
        }
        if plan.path == .nvenc, let g = gpu.stage {
            let sink = stage.sink, line: String
            if !sink.takesCUDA {
                line = Self.nvencUploaded("output \(stage.name) takes no CUDA frames (\(sink.encoderName))")
            } else if g.attachCUDAFrames(key, provider: { size in sink.lendCUDAFrame(size) }) {
                line = Self.nvencInCUDA
            } else {
                line = Self.nvencUploaded("the compositor reads back into \(g.plan.readback.rawValue) memory, not CUDA memory")
            }
            if key == 0 { nvencFrames = line } else if line != Self.nvencInCUDA { log("output \(stage.name): NVENC \(line)") }
            return plan
        }
        guard plan.path == .vaapiZeroCopy, let chosen, let facts, override != nil || allocator != nil else { return plan }
        guard override != nil || stage.sink.takesDmaBuf else {
            return replan(facts, refusal: "output \(stage.name) takes frames in host memory (\(stage.sink.encoderName))")
        }
        let box = gpu, current: @Sendable () -> (GPUCompositor, OutputID)? = { box.current(key) }
        let device: any ZeroCopyDevice
        if let override {
            device = override.device(current, stage)
        } else {
            let d = GBMVATargets(allocator: allocator!, layout: chosen.layout, settings: settings, current: current)
            d.encoder = stage
            device = d
        }
        // FFmpeg's VA-API encoder holds async_depth (2) pictures in flight, the
        // one being issued and the last reference until the next completes; B-frames more.
        let count = EncoderTargetRing.size(queueDepth: stage.queueDepth, encoderHold: 4 + max(0, settings.maxBFrames ?? 0), gpuInFlight: 2)
        guard let g = gpu.stage else { return plan }
        do throws(GPUError) {
            let ring = try EncoderTargetRing(device: device, size: g.canvas(of: key) ?? g.canvas, modifier: chosen.modifier, count: count)
            g.attachRing(ring, output: key)
            if key == 0 || stage.live { log("output \(stage.name): \(count) encoder targets (\(chosen.layout), modifier \(ModifierTrial.name(chosen.modifier)))") }
            return plan
        } catch {
            warn("output \(stage.name): \(count) encoder targets cannot be made (\(error)); its frames are read back")
            return replan(facts, refusal: "its \(count) encoder targets cannot be made: \(error)")
        }
    }

    private func replan(_ facts: EncoderTargetFacts, refusal: String) -> EncoderPlan {
        var f = facts
        f.sinkRefusal = refusal
        return (try? EncoderProbe.plan(codec: codec, choice: choice, report: report, target: f, gpu: gpuEncoder, nvenc: nvenc,
                                       baseline: baseline)) ?? plan
    }
}
