import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia
import DiptychText
import Synchronization

/// Everything a take needs once it has started: the configuration as it
/// will run (canvas, rate, orientations), its open inputs, GPU and outputs.
struct PreparedTake {
    var config: TakeConfiguration
    var canvas: PixelSize
    var frameRate: FrameRate
    var inputs: InputStage
    var gpu: GPUStage
    var encoders: [EncoderStage]
    var warnings: TakeWarnings
    /// The take's audio (nil: no audio track).
    var audio: AudioMixer?
    var encoderSettings: VideoEncoderSettings
    /// Each output's canvas, rate and settings, by output index (0: the main output, then `alsoOut`'s).
    var renditions: [OutputRendition]
    /// `--slate`, decoded.
    var slate: InputFrame?
    /// The overlays' images by path, decoded (RGBA); each one's picture id is its index.
    var overlayImages: [(path: String, frame: VideoFrame)] = []
    /// The texts' fonts by path, read once (`TakeTexts`).
    var fonts: [String: FontFile] = [:]
    /// The encoder path of the take and of each output it adds later.
    var zeroCopy: ZeroCopySetup
    /// The main output's encoder path (nil when its sink encodes with another encoder than the plan's).
    var mainPlan: EncoderPlan?
    /// Where each input stream is decoded, and its falls back from NVDEC.
    var decoders: DecoderLog
}

/// The take's setup stage: every check that can fail on bad input runs
/// before anything is opened, then the GPU, the inputs, the machine's state
/// (thermal, storage), the cost trial for live sources, and the outputs
/// last, so a failure leaves no file behind.
enum TakeSetup {
    static func prepare(_ session: RecordingSession) throws(SessionError) -> PreparedTake {
        let config = session.configuration, hooks = session.hooks, io = session.io
        do { try config.validate() } catch { throw .configuration(error) }
        guard let outputPath = config.output else {
            throw .configuration(ConfigurationError(field: "--out", value: "", reason: "is required (an output file or URL)"))
        }
        if io.outputIsNamed { try checkDistinctFiles(config: config, output: outputPath) }
        // Text overlays' fonts: each read once, and each text set once to check it can be (before anything opens).
        var fonts: [String: FontFile] = [:]
        do { try TakeTexts.loadFonts(TakeTexts.all(config), policy: hooks.sourcePolicy, into: &fonts) } catch { throw .configuration(error) }
        // The GPU encoder and NVENC are decided once the GPU is open (ZeroCopySetup).
        if config.encoder != .gpu && config.encoder != .nvenc {
            do { _ = try EncoderProbe.choose(codec: config.codec, choice: config.encoder) } catch { throw .encoder(error) }
        }
        do {
            try VideoEncoderSettings.validate(codec: config.codec, encoder: config.encoder, preset: config.preset, tune: nil,
                                              bitrate: config.bitrate)
        } catch {
            guard case .invalidSetting(let setting, let value, let reason) = error else { throw .encoder(error) }
            throw .configuration(ConfigurationError(field: "--\(setting.rawValue)", value: value, reason: reason))
        }
        for (i, o) in config.extraOutputs.enumerated() { try OutputRendition.check(o, config: config, field: "alsoOut[\(i)]") }
        if case .startRefused(let why) = StoragePolicy.standard.decide(freeBytes: hooks.storage.freeBytes(at: outputPath), recording: false) {
            throw .refused(.storage(path: outputPath, reason: why))
        }

        guard let selection = GPUSelection(parsing: config.gpu) else {
            throw .configuration(ConfigurationError(field: "--gpu", value: config.gpu, reason: "expected auto, software, an index or /dev/dri/renderDN"))
        }
        let make = hooks.makeCompositor
        // The GPU's lines wait until the take starts: bad input found later gets one line only.
        let held = HeldLog(hooks.log)
        let log: @Sendable (String) -> Void = { held.write($0) }
        let warnings = TakeWarnings(log: log)
        let gpu: GPUStage
        do {
            gpu = try GPUStage(makeCompositor: { () throws(GPUError) -> GPUCompositor in
                if let make { return try make(selection) }
                // The GPU encoder reads the compute pass's NV12 buffer: asked for, it runs even on a software renderer.
                let gpuEncoder = config.encoder == .gpu
                return try GPUCompositor(selection: selection, directCopy: gpuEncoder ? .off : .auto,
                                         pass: gpuEncoder ? .compute : .auto, log: log)
            }, warn: { warnings.add($0) }, retiring: hooks.compositorRetiring)
        } catch { throw .gpu(error) }
        // A compositor made by the caller (the server's, in a shared context) logs nothing itself: the take says its plan.
        if make != nil { log("GPU \(gpu.plan)") }
        var keepGPU = false
        defer { if !keepGPU { gpu.shutdown() } }
        if let size = config.canvasSize { try checkCanvas(size, on: gpu.gpu, field: "--size", value: size.description) }
        for (i, o) in config.extraOutputs.enumerated() {
            if let size = o.encoding.size { try checkCanvas(size, on: gpu.gpu, field: "alsoOut[\(i)].size", value: size.description) }
        }
        // `--encoder gpu` where the GPU cannot run it is bad input, said before the GPU's lines.
        if config.encoder == .gpu {
            let facts = hooks.zeroCopyOverride?.gpuEncoder ?? ZeroCopySetup.gpuEncoderFacts(gpu.gpu.info)
            do {
                _ = try EncoderProbe.plan(codec: config.codec, choice: .gpu, report: VAAPIReport(directory: "", devices: [], problem: nil),
                                          target: nil, gpu: facts)
            } catch { throw .encoder(error) }
        }
        // `--encoder nvenc` where NVENC cannot open on the compositor's GPU is bad input, said likewise.
        if config.encoder == .nvenc {
            let facts = hooks.zeroCopyOverride?.nvenc ?? NVENCProbe.facts(codec: config.codec, cudaDevice: gpu.gpu.cudaDevice())
            do {
                _ = try EncoderProbe.plan(codec: config.codec, choice: .nvenc, report: VAAPIReport(directory: "", devices: [], problem: nil),
                                          target: nil, nvenc: facts)
            } catch { throw .encoder(error) }
        }
        // A pattern's size is known before it is opened (and making its first frame can take long).
        if config.canvasSize == nil, case .testPattern(_, let size, _) = config.primary {
            let canvas = config.resolvedCanvas(primaryUprightSize: size.rotated(config.primaryOrientation.rotation))
            try checkCanvas(canvas, on: gpu.gpu, field: "--primary", value: "\(config.primary) (canvas \(canvas))")
        }

        // Inputs, decoded where `--decoder` says (NVDEC on the compositor's GPU).
        let decoders = DecoderLog()
        let decoding = decoderSettings(config, gpu: gpu.gpu, hooks: hooks, log: decoders, warn: warnings.add)
        // Opening a source blocks at most its role's timeout, and stops at once when the take is stopped.
        let policy = hooks.sourcePolicy, cancel = session.openCancel
        // A listening source waits for its publisher for --listen-timeout instead.
        let opening = { @Sendable (role: StreamRole, spec: SourceSpec) in
            SourceOpening(policy: policy, timeout: config.openTimeout(role, spec), cancel: cancel)
        }
        // A role's priority list: the take shows the first source that opens (docs/ARCHITECTURE.md, "Source recovery").
        let primary: any TakeInput, primaryShown: Int
        do {
            (primary, primaryShown) = try openFirst(.primary, config.sources(.primary), policy: policy, log: hooks.log) { spec throws(MediaError) in
                // A primary camera is asked for the canvas of --size, if any, at the rate it sets for the take.
                let camera = config.cameraRequest(.primary, canvas: config.canvasSize, rate: nil)
                // --duration cuts a file or pattern at that length; a live source is not cut (the take ends at that
                // take time): its length is its own, so the end of a live stream is a loss it is reopened from.
                let limit = SourceRecovery.isReopened(spec) ? nil : config.duration
                return try decoders.opened(.primary, io.openInput(.primary, spec, limit, decoding(.primary),
                                                                  opening(.primary, spec).asking(camera)))
            }
        } catch { throw .source(.primary, error) }
        var secondary: (any TakeInput)?, secondaryShown = 0
        if config.secondary != .none {
            // A secondary camera is asked for the take's canvas at the primary's rate.
            let upright = primary.info.geometry(orientation: InputStage.orientation(metadata: primary.info.orientation,
                                                                                    configured: config.primaryOrientation)).uprightSize
            let camera = config.cameraRequest(.secondary, canvas: config.resolvedCanvas(primaryUprightSize: upright), rate: primary.info.frameRate)
            do {
                let (input, shown) = try openFirst(.secondary, config.sources(.secondary), policy: policy, log: hooks.log) { spec throws(MediaError) in
                    try decoders.opened(.secondary, io.openInput(.secondary, spec, nil, decoding(.secondary), opening(.secondary, spec).asking(camera)))
                }
                secondary = input
                secondaryShown = shown
            } catch {
                primary.close(); throw .source(.secondary, error)
            }
        }
        var keepInputs = false
        defer { if !keepInputs { primary.close(); secondary?.close() } }
        let frameRate = primary.info.frameRate
        let primaryOrientation = InputStage.orientation(metadata: primary.info.orientation, configured: config.primaryOrientation)
        for (role, input) in [(StreamRole.primary, Optional(primary)), (.secondary, secondary)] {
            guard let input else { continue }
            let size = input.info.size
            let limit = gpu.gpu.info.maxTextureSize
            if size.width > limit || size.height > limit {
                throw .configuration(ConfigurationError(field: "--\(role.rawValue)", value: input.info.name,
                    reason: "its \(size) frames exceed this GPU's largest texture (\(limit)x\(limit), \(gpu.gpu.info.renderer))"))
            }
        }
        var canvas = config.resolvedCanvas(primaryUprightSize: primary.info.geometry(orientation: primaryOrientation).uprightSize)
        if config.canvasSize == nil {
            try checkCanvas(canvas, on: gpu.gpu, field: "--primary", value: "\(config.primary) (canvas \(canvas))")
        }
        if let e = config.layout.validationError(canvas: canvas) { throw .configuration(e) }
        for (i, o) in config.extraOutputs.enumerated() {
            if let e = config.outputLayoutError(o, canvas: o.encoding.size ?? canvas, field: "alsoOut[\(i)]") { throw .configuration(e) }
        }
        if config.codec == .hevc && (canvas.width < 16 || canvas.height < 16) {
            throw .configuration(ConfigurationError(field: "--size", value: "\(canvas)", reason: "HEVC needs a canvas of at least 16x16"))
        }
        for (i, o) in config.extraOutputs.enumerated() where (o.encoding.codec ?? config.codec) == .hevc {
            let c = o.encoding.size ?? canvas
            if c.width < 16 || c.height < 16 {
                throw .configuration(ConfigurationError(field: o.encoding.size == nil ? "--size" : "alsoOut[\(i)].size", value: "\(c)",
                                                        reason: "HEVC needs a canvas of at least 16x16"))
            }
        }

        held.release()

        // The machine: critical refuses, serious drops 1080p to 720p.
        let thermal = TakeRun.readThermal(config: config, hooks: hooks)
        switch ThermalPolicy.decide(state: thermal.state, recording: false, canvas: canvas) {
        case .refuseToStart, .stopRecording:
            throw .refused(.thermalCritical(source: thermal.source))
        case .dropTo720p:
            let reduced = ThermalPolicy.reducedCanvas(for: canvas)
            warnings.add("thermal state serious (\(thermal.source)): recording at \(reduced) instead of \(canvas)")
            canvas = reduced
        case .warn:
            warnings.add("thermal state \(thermal.state) (\(thermal.source))")
        case .none, .dropToOneStream:
            break
        }

        // Live sources: measure the canvas's cost and roll back while it is over budget.
        var settings = VideoEncoderSettings(size: canvas, frameRate: frameRate, codec: config.codec, encoder: config.encoder,
                                            bitrate: config.bitrate, preset: config.preset,
                                            gop: max(1, Int((config.keyframeInterval * frameRate.fps).rounded())))
        settings.qp = config.qp
        settings.maxrate = config.maxrate
        settings.bufsize = config.bufsize
        settings.slices = config.slices
        // NVENC encodes on the compositor's CUDA device (the cost trial's encoder too).
        if config.encoder == .nvenc, case .success(let device) = gpu.gpu.cudaDevice() { settings.cudaDevice = device }
        let vaapi = ZeroCopySetup.vaapiReport(codec: config.codec, choice: config.encoder, override: hooks.zeroCopyOverride)
        if hooks.costTrial.applies(live: TakeRun.isLive(config.primary) || TakeRun.isLive(config.secondary)) {
            let g = gpu.gpu
            let secondaryOrientation = InputStage.orientation(metadata: secondary?.info.orientation ?? .identity,
                                                              configured: config.secondaryOrientation)
            // Under auto, NVENC or the GPU encoder where auto will take it (NVENC's facts are examined once per device and codec).
            let auto = config.encoder == .auto
            let trialSettings = CostTrial.encoderSettings(
                settings, choice: config.encoder,
                nvenc: auto ? hooks.zeroCopyOverride?.nvenc ?? NVENCProbe.facts(codec: config.codec, cudaDevice: g.cudaDevice()) : nil,
                gpu: auto ? hooks.zeroCopyOverride?.gpuEncoder ?? ZeroCopySetup.gpuEncoderFacts(g) : nil,
                vaapi: vaapi)
            let measure: (PixelSize) throws -> [Double] = hooks.costMeasurement.map { m in { m($0) } }
                ?? CostTrial.real(gpu: g, primary: primary.info.size, secondary: secondary?.info.size, layout: config.layout,
                                  orientations: (primaryOrientation, secondaryOrientation), settings: trialSettings, frames: 12)
            let outcome = CostTrial(frames: 12, measure: measure).choose(requested: canvas, frameRate: frameRate)
            if outcome.canvas == canvas {
                outcome.messages.forEach(hooks.log)
            } else {
                switch config.resolvedOverBudget {
                case .reduce:
                    outcome.messages.forEach(warnings.add)
                    canvas = outcome.canvas
                case .keep:
                    outcome.messages.forEach(hooks.log)
                    warnings.add("canvas \(canvas) is over its measured budget (\(outcome.messages.first ?? "")); kept as asked "
                                 + "(--over-budget keep\(config.overBudget == nil ? ", the default with --size" : "")): frames may be late")
                case .refuse:
                    outcome.messages.forEach(hooks.log)
                    throw .refused(.overBudget(canvas: canvas.description, reason: outcome.messages.first ?? "measured over budget"))
                }
            }
        }
        var resized = settings
        resized.size = canvas
        resized.threads = hooks.encoderThreads ?? 0
        let video = resized
        gpu.canvas = canvas

        var slate: InputFrame?
        if let path = config.slate {
            do throws(MediaError) {
                let source = try MediaSources.open(.url(path), opening: opening(.secondary, .url(path)))
                defer { source.close() }
                guard let f = try source.nextFrame() else { throw MediaError.emptyFile(path: path) }
                slate = InputFrame(f)
            } catch {
                throw .configuration(ConfigurationError(field: "--slate", value: path, reason: "\(error)"))
            }
        }
        // Overlay images: each file read once, through the source policy, as any input.
        var overlayImages: [(path: String, frame: VideoFrame)] = []
        for (field, o) in config.overlays.map({ ("--overlay", $0) }) + config.extraOutputs.flatMap({ s in s.overlays.map { ("alsoOut.overlays", $0) } })
        where !overlayImages.contains(where: { $0.path == o.image }) {
            let f = try loadOverlayImage(o.image, field: field, opening: opening(.secondary, .url(o.image)))
            do { try gpu.gpu.setOverlay(overlayImages.count, image: f) } catch {
                guard case .badFrame(let why) = error else { throw .gpu(error) }
                throw .configuration(ConfigurationError(field: field, value: o.image, reason: why))
            }
            overlayImages.append((o.image, f))
        }
        gpu.overlayImages = overlayImages.map(\.frame)
        // The outputs last, so a failure above leaves no file behind.
        let audio = try makeAudio(config, primary: primary, secondary: secondary, log: hooks.log)
        let specs = [OutputSpec(out: outputPath, format: config.format, segmentTime: config.segmentTime, hlsListSize: config.hlsListSize)]
            + config.extraOutputs
        // Each output's canvas, rate and encoder settings (the main output's are the take's).
        var renditions = [OutputRendition(take: video)] + config.extraOutputs.map { OutputRendition($0, take: video, config: config) }
        do { for (i, r) in renditions.enumerated() { try gpu.addOutput(i, size: r.canvas) } } catch { throw .gpu(error) }
        // The encoder path: VA-API devices, the GPU's side and the trial of the
        // zero-copy target (docs/ARCHITECTURE.md, "Encoder paths").
        let zeroCopy: ZeroCopySetup
        do {
            zeroCopy = try ZeroCopySetup(codec: config.codec, choice: config.encoder, gpu: gpu, trialOutput: 0, settings: video,
                                         report: vaapi, override: hooks.zeroCopyOverride)
        } catch { throw .encoder(error) }
        let outputVideo = zeroCopy.settings(video)
        for i in renditions.indices { renditions[i].video = zeroCopy.settings(renditions[i].video) }
        // Outputs encoded on the GPU (docs/ARCHITECTURE.md, "The GPU encoder"), before any file is opened.
        do { for (i, r) in renditions.enumerated() { try zeroCopy.attachGPUEncoder(i, settings: r.video) } } catch { throw .gpu(error) }
        var encoders: [EncoderStage] = []
        var plans: [EncoderPlan] = []
        for (i, spec) in specs.enumerated() {
            do throws(MediaError) {
                let live = ContainerFormat.isLive(spec.out)
                let sink = try openSink(i, spec, renditions[i].video, audioTrack(audio, for: spec), config: config, io: io, log: hooks.log,
                                          change: hooks.streamChange)
                var onWritten: (@Sendable (MediaTime) -> Void)?
                if i == 0, let event = hooks.frameEvent { onWritten = { event(.written, $0) } }
                let stage = EncoderStage(key: i, name: spec.out, sink: sink, live: live, onWritten: onWritten,
                                         onFallback: TakeRun.reportFallback(output: i, out: spec.out, warn: warnings.add, change: hooks.streamChange))
                encoders.append(stage)
                if !spec.encoding.isEmpty { hooks.log("output \(spec.out): \(renditions[i].description)") }
                plans.append(zeroCopy.attach(i, stage: stage, settings: renditions[i].video, log: hooks.log, warn: warnings.add))
            } catch {
                for e in encoders { _ = e.finish() }
                // An extra output that cannot be opened is named as the option that gave it.
                if i > 0, case .writeFailed(_, let detail) = error,
                   !ContainerFormat.isLive(spec.out) || spec.out.lowercased().hasPrefix("pipe:") {
                    throw .configuration(ConfigurationError(field: "--also-out", value: spec.out, reason: "write failed: \(detail)"))
                }
                throw .output(spec.out, error)
            }
        }
        let mainSink = encoders[0].sink
        let mainPlan = plans[0].encoder == mainSink.encoderName ? plans[0] : nil
        hooks.log("encoder: \(mainPlan.map { "\($0.encoder) (\($0.reason))" } ?? mainSink.encoderDescription); audio: \(mainSink.audioDescription)")
        if let tuning = (mainSink as? MediaWriter)?.encoderTuning { hooks.log("encoder rate control: \(tuning)") }
        // What `scripts/verify-nvenc` reads: whether NVENC's frames cross host memory.
        if mainPlan?.path == .nvenc, let frames = zeroCopy.nvencFrames { hooks.log("NVENC: \(frames)") }
        for (role, input) in [("primary", Optional(primary)), ("secondary", secondary)] {
            if let d = input?.info.decoder { hooks.log("\(role) decoder: \(d)") }
            for notice in input?.info.notices ?? [] { hooks.log("\(role): \(notice)") }
        }

        let cameraCanvas = canvas
        var inputSettings = InputSettings(primarySpec: config.primary, primaryOrientation: config.primaryOrientation,
                                          secondaryOrientation: config.secondaryOrientation, frameRate: frameRate,
                                          primaryTimeout: config.primaryTimeout, secondaryTimeout: config.secondaryTimeout,
                                          switches: config.secondarySwitches, sharedClock: io.sharedClock,
                                          open: { role, spec, cancel throws(MediaError) in
                                              // Every reopen goes through the take's source policy, within the role's timeout;
                                              // a camera is asked for the take's canvas and rate.
                                              let within = SourceOpening(policy: policy, timeout: config.openTimeout(role, spec), cancel: cancel,
                                                                         camera: config.cameraRequest(role, canvas: cameraCanvas, rate: frameRate))
                                              let input = try io.openInput(role, spec, nil, decoding(role), within)
                                              if let dec = input.info.decoder { hooks.log("\(role.rawValue) decoder (\(spec)): \(dec)") }
                                              if let capture = input.info.capture { hooks.log("\(role.rawValue) (\(spec)): \(capture)") }
                                              return decoders.opened(role, input)
                                          })
        inputSettings.primarySources = config.sources(.primary)
        inputSettings.secondarySources = config.sources(.secondary)
        inputSettings.primaryShown = primaryShown
        inputSettings.secondaryShown = secondaryShown
        inputSettings.recovery = config.sourceRecovery
        var clock = config.clockConfiguration
        // File sources are paced by timestamp, so the clock never has to wait.
        clock.beforeFirstFrame = .primaryOnly
        clock.afterEnd = .primaryOnlyAfter(MediaTime(seconds: config.secondaryTimeout))
        // Each queued frame pins a decoder buffer (3 MB at 1080p): a file needs
        // two (its decoder's threads already work ahead), a live source four for jitter.
        func depth(_ spec: SourceSpec) -> Int { TakeRun.isLive(spec) ? 4 : 2 }
        let primarySpec = config.sources(.primary)[primaryShown]
        let secondarySpec = config.sources(.secondary).indices.contains(secondaryShown) ? config.sources(.secondary)[secondaryShown] : config.secondary
        let inputs = InputStage(primary: SourceReader(spec: primarySpec, source: primary, capacity: depth(primarySpec), wake: session.inputWake),
                                secondary: secondary.map { SourceReader(spec: secondarySpec, source: $0, capacity: depth(secondarySpec)) },
                                settings: inputSettings, clock: clock, log: hooks.log,
                                warn: warnings.add, change: { hooks.streamChange?($0) }, isStopRequested: { session.isStopRequested },
                                wake: session.inputWake)
        keepGPU = true
        keepInputs = true
        return PreparedTake(config: config, canvas: canvas, frameRate: frameRate, inputs: inputs, gpu: gpu,
                            encoders: encoders, warnings: warnings, audio: audio, encoderSettings: outputVideo, renditions: renditions, slate: slate,
                            overlayImages: overlayImages, fonts: fonts, zeroCopy: zeroCopy, mainPlan: mainPlan, decoders: decoders)
    }

    /// An overlay's image: its first picture, decoded with its alpha (a PNG
    /// through FFmpeg's png decoder), opened as an input is (the source policy).
    static func loadOverlayImage(_ path: String, field: String, opening: SourceOpening) throws(SessionError) -> VideoFrame {
        let f: VideoFrame
        do throws(MediaError) {
            let source = try MediaSources.open(.url(path), opening: opening)
            defer { source.close() }
            guard let first = try source.nextFrame() else { throw MediaError.emptyFile(path: path) }
            f = first
        } catch {
            throw .configuration(ConfigurationError(field: field, value: path, reason: "\(error)"))
        }
        guard f.format == .rgba else {
            throw .configuration(ConfigurationError(field: field, value: path, reason: "is not an RGB image (decoded as \(f.format.rawValue)); use a PNG"))
        }
        return f
    }

    /// The take's audio (docs/ARCHITECTURE.md, "Take audio"): the roles
    /// `--audio` hears, at their gains, when one of their sources has audio
    /// at the start (else no track: frozen at start).
    static func makeAudio(_ config: TakeConfiguration, primary: any TakeInput, secondary: (any TakeInput)?,
                          log: @escaping @Sendable (String) -> Void) throws(SessionError) -> AudioMixer? {
        let roles = config.audio.roles
        let has = roles.contains { ($0 == .primary ? primary.audioTrack : secondary?.audioTrack) != nil }
        guard has else {
            if config.audio != .none && config.audio != .primary {
                log("audio: none (no \(roles.map(\.rawValue).joined(separator: " or ")) audio stream at the start)")
            }
            return nil
        }
        do {
            return try AudioMixer(names: roles.map(\.rawValue), gains: roles.map { $0 == .primary ? config.primaryGain : config.secondaryGain },
                                  log: log)
        } catch { throw .output(config.output ?? "", error) }
    }

    /// The branch of the take's audio an output reads: the take's own
    /// timeline on a live output, the files' (held times taken out) otherwise.
    static func audioTrack(_ audio: AudioMixer?, for spec: OutputSpec) -> AudioTrack? {
        guard let audio else { return nil }
        return ContainerFormat.isLive(spec.out) ? audio.liveTrack.branch() : audio.fileTrack.branch()
    }

    /// Opens the first source of `role`'s priority list that opens, and says
    /// which; a source that cannot be opened is logged and the next tried.
    /// The fallbacks are checked against the source policy first (a refused
    /// or missing one is bad input, as the first source is); when none opens,
    /// the first source's error.
    static func openFirst(_ role: StreamRole, _ list: [SourceSpec], policy: SourcePolicy, log: (String) -> Void,
                          open: (SourceSpec) throws(MediaError) -> any TakeInput) throws(MediaError) -> (any TakeInput, Int) {
        for spec in list.dropFirst() { try MediaSources.checkAllowed(spec, policy: policy) }
        var firstError: MediaError?
        for (i, spec) in list.enumerated() {
            do throws(MediaError) {
                let input = try open(spec)
                if i > 0 { log("\(role.rawValue): showing \(spec), source \(i + 1) of its list") }
                return (input, i)
            } catch {
                switch error {
                case .refused, .fileNotFound: throw error
                default: break
                }
                if firstError == nil { firstError = error }
                if i + 1 < list.count { log("\(role.rawValue) \(spec) could not be opened (\(error)); trying \(list[i + 1])") }
            }
        }
        throw firstError ?? .invalidSource(spec: role.rawValue, reason: "no source to open")
    }

    /// The decoder settings of each role: `--decoder`, NVDEC on the CUDA
    /// device of the compositor's GL context (asked only when NVDEC may be
    /// used), and a fall back mid-take logged as a warning (a move the server
    /// asked for is not one) and kept for the summary.
    static func decoderSettings(_ config: TakeConfiguration, gpu: GPUCompositor, hooks: SessionHooks,
                                log: DecoderLog, warn: @escaping @Sendable (String) -> Void) -> @Sendable (StreamRole) -> DecoderSettings {
        let device: Result<Int, DecoderUnavailable> = config.decoder == .cpu
            ? .failure(DecoderUnavailable("--decoder cpu"))
            : gpu.cudaDevice().mapError { DecoderUnavailable($0.reason) }
        let choice = config.decoder, override = hooks.decoderSettings
        return { role in
            let settings = DecoderSettings.with(choice, cudaDevice: device, onFallback: { f in
                // A move asked for (`DecoderMove`) is the server's choice, not a failure.
                if f.requested != true { warn("\(role.rawValue): NVDEC stopped \(f); decoding on the CPU from there") }
                log.fellBack(role, f)
            })
            return override?(role, settings) ?? settings
        }
    }

    /// Opens output `index`. A live stream is encoded without lookahead or
    /// frame-thread delay (frames leave when they are due) and is reopened
    /// when it fails (`ReconnectingOutput`), keeping the take's timeline;
    /// a pipe is not (its reader cannot come back).
    static func openSink(_ index: Int, _ spec: OutputSpec, _ video: VideoEncoderSettings, _ audio: AudioTrack?,
                         config: TakeConfiguration, io: TakeIO, log: @escaping @Sendable (String) -> Void,
                         change: (@Sendable (StreamChange) -> Void)? = nil) throws(MediaError) -> any TakeOutput {
        guard ContainerFormat.isLive(spec.out) else { return try io.openOutput(index, spec, video, audio, nil, nil) }
        var settings = video
        settings.tune = settings.tune ?? "zerolatency"
        let live = settings
        // A pipe whose reader has gone cannot be opened again: its failure is passed on at once.
        guard config.reconnectWindow > 0, !spec.out.lowercased().hasPrefix("pipe:") else {
            return try io.openOutput(index, spec, live, audio, nil, nil)
        }
        return try ReconnectingOutput(name: spec.out, window: config.reconnectWindow, log: log,
                                      lost: { change?(.outputLost(output: index, out: spec.out, reason: $0)) },
                                      back: { change?(.outputBack(output: index, out: spec.out, seconds: $0)) },
                                      open: { (again: Bool, cancel: OpenCancel?, after: EncoderFallback?) throws(MediaError) in
                                          // NVENC failed on an earlier writer: the software encoder that took over goes on.
                                          let settings = after == nil ? live : live.takenOverBySoftware(streamGoesOn: true)
                                          return try io.openOutput(index, spec, settings, audio, again ? .zero : nil, cancel)
                                      })
    }

    /// A canvas the GPU cannot render is bad input, named by `field`.
    static func checkCanvas(_ canvas: PixelSize, on gpu: GPUCompositor, field: String, value: String) throws(SessionError) {
        do { try gpu.checkCanvas(canvas) } catch {
            guard case .badCanvas(let why) = error else { throw .gpu(error) }
            throw .configuration(ConfigurationError(field: field, value: value, reason: why))
        }
    }

    /// No file a take writes (`--out`, `--also-out`, `--preview`) may be a
    /// file it reads (the inputs, the slate, the scheduled switches, the
    /// overlay images, the texts' fonts) or
    /// another of its outputs, however spelled (`FileIdentity`: resolved
    /// links, `file:` URLs, device and inode); and each must be a regular
    /// file (not a device, FIFO, or a file under /dev, /proc or /sys).
    static func checkDistinctFiles(config: TakeConfiguration, output: String) throws(SessionError) {
        var reads: [(value: String, id: FileIdentity)] = []
        for spec in [config.primary, config.secondary] + config.secondarySwitches.map(\.source) {
            if case .url(let u) = spec, let id = FileIdentity(u) { reads.append((u, id)) }
        }
        if let slate = config.slate, let id = FileIdentity(slate) { reads.append((slate, id)) }
        for o in config.overlays + config.extraOutputs.flatMap(\.overlays) {
            if let id = FileIdentity(o.image) { reads.append((o.image, id)) }
        }
        for t in TakeTexts.all(config) {
            if let font = t.text.font, let id = FileIdentity(font) { reads.append((font, id)) }
        }
        var writes: [(field: String, id: FileIdentity)] = []
        let outs = [("--out", output)] + config.extraOutputs.map { ("--also-out", $0.out) } + (config.preview.map { [("--preview", $0)] } ?? [])
        for (field, out) in outs {
            guard let id = FileIdentity(out) else { continue }
            if let why = id.unwritableReason ?? unwritableFile(id.path) {
                throw .configuration(ConfigurationError(field: field, value: out, reason: why))
            }
            if let input = reads.first(where: { $0.id.isSame(as: id) }) {
                let same = input.value == out ? "" : " (\(input.value))"
                throw .configuration(ConfigurationError(field: field, value: out, reason: "is also an input\(same); recording over it would destroy it"))
            }
            if let earlier = writes.first(where: { $0.id.isSame(as: id) }) {
                throw .configuration(ConfigurationError(field: field, value: out, reason: "is the same file as \(earlier.field)"))
            }
            writes.append((field, id))
        }
        // A split output's files: none there already, none another output of the take.
        let splits = [("--out", output, config.splitsOutput)] + config.extraOutputs.map { ("--also-out", $0.out, $0.splits) }
        for (field, out, split) in splits where split {
            guard let id = FileIdentity(out) else { continue }
            if let existing = existingSegment(of: id.path) {
                throw .configuration(ConfigurationError(field: field, value: out,
                                                        reason: "\(existing) exists already; a split recording never writes over a file (choose another name or remove it)"))
            }
            let folder = URL(fileURLWithPath: id.path).deletingLastPathComponent().path
            for (_, other, _) in splits where other != out {
                // Another output named as one of this one's files.
                guard let o = FileIdentity(other), URL(fileURLWithPath: o.path).deletingLastPathComponent().path == folder else { continue }
                if SegmentNaming.isSegment(SegmentNaming.lastComponent(o.path), of: id.path) {
                    throw .configuration(ConfigurationError(field: field, value: out,
                                                            reason: "its files would include \(other), which the take writes too"))
                }
            }
        }
        // An HLS output's playlist, initialization segment and segments are
        // written by FFmpeg's muxer, which would replace a file of the same name.
        let hls = [("--out", output, config.container)] + config.extraOutputs.map { ("--also-out", $0.out, $0.container) }
        for (field, out, container) in hls where container == .hls {
            guard let id = FileIdentity(out), let existing = HLSNaming.existingFile(of: id.path) else { continue }
            throw .configuration(ConfigurationError(field: field, value: out,
                                                    reason: "\(existing) exists already; an HLS output never writes over a file (choose another name or folder, or remove it)"))
        }
    }

    /// A file already in the folder of `out` named as one of its segments
    /// would be (`SegmentNaming`: `take-0001.mp4`, any number): the first by
    /// name, with its folder; nil when there is none.
    static func existingSegment(of out: String) -> String? {
        let url = URL(fileURLWithPath: out)
        let folder = url.deletingLastPathComponent().path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { SegmentNaming.isSegment($0, of: url.lastPathComponent) }.sorted().first
            .map { URL(fileURLWithPath: folder).appendingPathComponent($0).path }
    }

    /// Why a file cannot be written at `path` (a folder there, a folder
    /// missing or read-only), found before anything is opened; nil when it can.
    static func unwritableFile(_ path: String) -> String? {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue { return "is a folder" }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDir), isDir.boolValue else { return "no such folder \(folder)" }
        guard access(folder, W_OK) == 0 else { return "the folder \(folder) is not writable" }
        return nil
    }
}

/// Log lines held back until `release()`, then passed straight through.
final class HeldLog: Sendable {
    private let out: @Sendable (String) -> Void
    /// The lines held back; nil once released.
    private let held = Mutex<[String]?>([])
    init(_ out: @escaping @Sendable (String) -> Void) { self.out = out }
    func write(_ line: String) {
        let kept = held.withLock { h -> Bool in
            guard h != nil else { return false }
            h!.append(line)
            return true
        }
        if !kept { out(line) }
    }
    func release() {
        let lines = held.withLock { h in defer { h = nil }; return h ?? [] }
        for l in lines { out(l) }
    }
}
