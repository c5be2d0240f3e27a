import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// One running take: the render loop that pulls paired frames from the
/// input stage, renders every output through the GPU stage, hands the
/// readbacks to each output's encoder stage, watches the machine, and ends
/// through `finalize`, the one path every ending takes (docs/ARCHITECTURE.md,
/// "Failure paths"). Built by `TakeSetup`; used by one thread.
final class TakeRun {
    let session: RecordingSession
    let config: TakeConfiguration
    let hooks: SessionHooks
    let canvas: PixelSize
    let frameRate: FrameRate
    private let inputs: InputStage
    private let gpu: GPUStage
    private var encoders: [EncoderStage]
    /// Layouts by output key; nil follows the main output's (key 0).
    private var layouts: [Int: Layout?]
    private let taps: [any RenderTap & Sendable]
    private let encoderSettings: VideoEncoderSettings
    private var nextOutputKey: Int
    private var outputResults: [OutputSummary] = []

    private var frames = 0
    private var warnings: [String]
    private var lastPTS: MediaTime?
    private var lastThermal: ThermalState = .nominal
    private let started = Date()
    private let preview: PreviewTap?
    private(set) var summary: TakeSummary?

    init(session: RecordingSession, prepared p: PreparedTake) {
        self.session = session
        config = p.config; hooks = session.hooks
        canvas = p.canvas; frameRate = p.frameRate
        inputs = p.inputs; gpu = p.gpu; encoders = p.encoders
        warnings = p.warnings
        encoderSettings = p.encoderSettings
        layouts = [0: p.config.layout]
        for (i, o) in p.config.extraOutputs.enumerated() { layouts[i + 1] = o.layout }
        nextOutputKey = p.encoders.count
        gpu.simulateLossAt = hooks.simulateContextLossAtFrames
        preview = p.config.preview.map { PreviewTap(path: $0, at: min(1.0, (p.config.duration ?? 2.0) / 2)) }
        var taps = session.io.taps
        if let cb = hooks.frameCallback { taps.append(FrameCallbackTap(callback: cb, interval: hooks.frameCallbackInterval)) }
        if let preview { taps.append(preview) }
        self.taps = taps
    }

    // MARK: The loop

    func run() throws(SessionError) -> TakeSummary {
        session.io.started(gpu.gpu.info)
        return try finalize(renderLoop())
    }

    private func renderLoop() -> StopReason {
        var lastMonitor = Date.distantPast
        var lastProgress = Date()
        while true {
            let control = session.takeControl()
            if let stop = control.stop { return stop }
            if let r = encoderFailure() { return r }
            if let l = control.layout { layouts[0] = l }
            for s in control.switches { inputs.beginSwitch(s.role, to: s.spec, at: lastPTS ?? .zero) }
            for change in control.outputs { apply(change) }

            let now = Date()
            if now.timeIntervalSince(lastMonitor) >= hooks.monitorInterval {
                lastMonitor = now
                if let r = checkMonitors() { return r }
            }

            // The primary drives: one output frame per primary frame.
            guard let event = inputs.nextPrimary(lastPTS: lastPTS) else { continue }
            let primary: InputFrame
            switch event {
            case .stop(.endOfPrimary) where config.duration != nil && Double(frames) * frameRate.frameDuration.seconds >= config.duration! - 1e-6:
                return .durationReached
            case .stop(let r): return r
            case .frame(let f): primary = f
            }
            if frames == 0, let origin = inputs.timelineOrigin { session.io.timelineOrigin(origin) }
            let t = primary.pts
            if let l = primary.layout { layouts[0] = l }
            if let d = config.duration, t.seconds >= d - 1e-9 { return .durationReached }
            if let last = lastPTS, t <= last {
                warn("primary frame at \(t.seconds) s is not after the previous one; skipped")
                continue
            }
            let paired = inputs.pair(primary)
            do throws(GPUError) {
                try gpu.render(paired, plans: plans(for: paired), index: frames, taps: taps)
            } catch {
                return .gpuFailed(error)
            }
            lastPTS = t
            frames += 1
            if let r = deliverReadbacks(wait: false) { return r }

            if now.timeIntervalSince(lastProgress) >= 0.5, let p = hooks.progress {
                lastProgress = now
                p(progress())
            }
        }
    }

    /// Each output's draws for this frame.
    private func plans(for f: PairedFrame) -> [Int: CompositionPlan] {
        let p = StreamGeometry(sensorSize: f.primary.size, orientation: f.primaryOrientation)
        let s = f.secondary.map { StreamGeometry(sensorSize: $0.payload.size, orientation: f.secondaryOrientation) }
        var out: [Int: CompositionPlan] = [:]
        for e in encoders {
            let layout = (layouts[e.key] ?? nil) ?? (layouts[0] ?? nil) ?? config.layout
            let plan = layout.resolve(canvas: canvas, primary: p, secondary: s)
            out[e.key] = plan
            if zoomChecked[e.key] != layout {
                zoomChecked[e.key] = layout
                let sizes = [StreamRole.primary: p.uprightSize, .secondary: s?.uprightSize ?? .init(width: 0, height: 0)]
                for (role, scale) in plan.zoomUpsampling(layout: layout, uprightSizes: sizes) {
                    warn("output \(e.name): --zoom-\(role.rawValue) \(layout.zoom(role)) shows the \(role) (\(sizes[role]!)) at "
                         + String(format: "%.2f", scale) + "x its resolution (upsampled)")
                }
            }
        }
        return out
    }
    /// The layout each output's zoom was last checked for.
    private var zoomChecked: [Int: Layout] = [:]

    /// Moves finished readbacks to their encoders (blocking while one is behind).
    private func deliverReadbacks(wait: Bool) -> StopReason? {
        let frames: [(key: Int, frame: VideoFrame)]
        do { frames = try gpu.readbacks(wait: wait) } catch { return .gpuFailed(error) }
        for (key, frame) in frames { encoders.first { $0.key == key }?.push(frame) }
        return nil
    }

    /// The main output's failure ends the take; an added output's failure
    /// closes that output alone.
    private func encoderFailure() -> StopReason? {
        for e in encoders {
            guard let failure = e.failure else { continue }
            if e.key == 0 {
                if case .storageFull = failure { return .storageFull(failure) }
                return .outputFailed(failure)
            }
            warn("output \(e.name) failed (\(failure)); the take goes on without it")
            close(e, failure: failure)
        }
        return nil
    }

    // MARK: Outputs added and removed

    private func apply(_ change: OutputChange) {
        switch change {
        case .add(let spec, let reply):
            let key = nextOutputKey
            nextOutputKey += 1
            do throws(SessionError) {
                do { try gpu.addOutput(key) } catch { throw .gpu(error) }
                let sink: any TakeOutput
                do { sink = try session.io.openOutput(key, spec, encoderSettings, nil) } catch {
                    gpu.removeOutput(key)
                    throw .output(spec.out, error)
                }
                layouts[key] = spec.layout
                encoders.append(EncoderStage(key: key, name: spec.out, sink: sink))
                log("output \(key) added: \(spec.out)")
                reply(.success(key))
            } catch {
                reply(.failure(error))
            }
        case .remove(let key, let reply):
            guard key != 0, let e = encoders.first(where: { $0.key == key }) else { reply(false); return }
            _ = deliverReadbacks(wait: true)
            close(e, failure: nil)
            log("output \(key) removed: \(e.name)")
            reply(true)
        }
    }

    private func close(_ e: EncoderStage, failure: MediaError?) {
        encoders.removeAll { $0 === e }
        gpu.removeOutput(e.key)
        layouts[e.key] = nil
        let finishError = e.finish()
        outputResults.append(OutputSummary(output: e.name, frames: e.written, failure: (failure ?? finishError).map { "\($0)" }))
    }

    // MARK: The machine

    private func checkMonitors() -> StopReason? {
        let outputPath = config.output ?? ""
        let free = hooks.storage.freeBytes(at: outputPath)
        if case .stop = StoragePolicy.standard.decide(freeBytes: free, recording: true), let free {
            return .storageLow(freeBytes: free)
        }
        let thermal = Self.readThermal(config: config, hooks: hooks)
        switch ThermalPolicy.decide(state: thermal.state, recording: true, canvas: canvas) {
        case .stopRecording, .refuseToStart:
            return .thermalCritical(thermal.source)
        case .warn, .dropTo720p:
            if thermal.state != lastThermal {
                warn("thermal state \(thermal.state) (\(thermal.source)); the resolution stays \(canvas) for this take")
            }
        case .none:
            break
        }
        lastThermal = thermal.state
        return nil
    }

    static func readThermal(config: TakeConfiguration, hooks: SessionHooks) -> (state: ThermalState, source: String) {
        if let forced = config.thermalState { return (forced, "forced") }
        return (hooks.thermal ?? SysfsThermalMonitor()).read()
    }

    /// Whether a source delivers in real time (falling behind loses frames).
    static func isLive(_ spec: SourceSpec) -> Bool {
        switch spec {
        case .stdin: return true
        case .url(let u):
            if u.hasPrefix("/dev/") { return true }
            guard let scheme = u.split(separator: ":").first?.lowercased(), u.contains("://") else { return false }
            return ["rtsp", "rtmp", "rtmps", "srt", "udp", "tcp", "rtp", "http", "https"].contains(scheme)
        case .testPattern, .none: return false
        }
    }

    private func log(_ message: String) { hooks.log(message) }

    private func warn(_ message: String) {
        warnings.append(message)
        log("warning: \(message)")
    }

    private func progress() -> TakeProgress {
        let c = inputs.clock.counters
        return TakeProgress(frames: frames, mediaSeconds: Double(frames) * frameRate.frameDuration.seconds,
                            wallSeconds: Date().timeIntervalSince(started),
                            secondaryRepeated: c.secondaryRepeatShows, secondaryDropped: c.secondaryFramesDropped)
    }

    // MARK: Finalize: the one path every ending takes

    private func finalize(_ stopReason: StopReason) throws(SessionError) -> TakeSummary {
        var reason = stopReason
        session.io.ending(stopReason)
        inputs.stop()

        // Drain the GPU: every rendered frame reaches its encoder.
        if encoderFailure() == nil, let r = deliverReadbacks(wait: true), reason.isNormal { reason = r }
        if let preview, frames > 0, let t = lastPTS { preview.writeIfPending(gpu: gpu, at: t) }
        if let w = preview?.warning { warnings.append(w) }
        let gpuSummary = gpu.gpu.info.description
        var finishError: MediaError?
        var main: EncoderStage?
        for e in encoders {
            let error = e.finish()
            if e.key == 0 {
                main = e
                if let f = e.failure, reason.isNormal { reason = f.isStorageFull ? .storageFull(f) : .outputFailed(f) }
                finishError = error
            } else {
                outputResults.append(OutputSummary(output: e.name, frames: e.written, failure: (e.failure ?? error).map { "\($0)" }))
            }
        }
        gpu.shutdown()

        let outputPath = config.output ?? ""
        let written = main?.written ?? 0
        let wall = Date().timeIntervalSince(started)
        let duration = Double(written) * frameRate.frameDuration.seconds
        let c = inputs.clock.counters
        let sink = main?.sink
        summary = TakeSummary(
            output: outputPath, frames: written, durationSeconds: duration,
            frameRate: frameRate.description, canvas: canvas.description,
            encoder: sink?.encoderName ?? "none", encoderReason: sink?.encoderReason ?? "", audio: sink?.audioDescription ?? "none",
            gpu: gpuSummary, wallSeconds: wall, fps: wall > 0 ? Double(written) / wall : 0,
            realtimeFactor: wall > 0 ? duration / wall : 0,
            secondaryFramesShown: c.secondaryFramesShown, secondaryRepeated: c.secondaryRepeatShows,
            secondaryDropped: c.secondaryFramesDropped, primaryOnlyFrames: c.primaryOnlyFrames,
            gpuRebuilds: gpu.rebuilds, hotSwaps: inputs.hotSwaps,
            stopReason: reason.description, normalStop: reason.isNormal && finishError == nil,
            warnings: warnings + (finishError.map { ["finishing \(outputPath): \($0)"] } ?? []),
            preview: preview?.seconds != nil ? config.preview : nil, previewSeconds: preview?.seconds,
            outputs: outputResults)
        if !reason.isNormal {
            throw .ended(.abnormal(reason, frames: written, seconds: duration, output: outputPath,
                                   live: config.container.map { $0 == .rtmp || $0 == .srt } ?? false))
        }
        if written == 0, session.io.emptyTakeFails { throw .ended(.nothingRecorded(reason, output: outputPath)) }
        if let finishError { throw .ended(.finishFailed(output: outputPath, finishError)) }
        return summary!
    }
}
