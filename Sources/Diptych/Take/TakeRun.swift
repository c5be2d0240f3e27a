import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// One running take: the render loop that pulls paired frames from the
/// input stage, renders every output through the GPU stage, hands the
/// readbacks to each output's encoder stage, keeps live outputs at real
/// time, watches the machine, and ends through `finalize`, the one path
/// every ending takes (docs/ARCHITECTURE.md, "Failure paths"). Built by
/// `TakeSetup`; used by one thread.
final class TakeRun {
    let session: RecordingSession
    let config: TakeConfiguration
    let hooks: SessionHooks
    let canvas: PixelSize
    let frameRate: FrameRate
    let inputs: InputStage
    let gpu: GPUStage
    /// The outputs still open; `main` (`--out`, key 0) stays for the summary once closed.
    var encoders: [EncoderStage]
    let main: EncoderStage
    /// Layouts by output key; nil follows the main output's (key 0).
    var layouts: [Int: Layout?]
    let taps: [any RenderTap & Sendable]
    let encoderSettings: VideoEncoderSettings
    /// Each output's canvas, rate and encoder settings, by output key.
    var renditions: [Int: OutputRendition] = [:]
    /// The encoder path, for outputs added later (`ZeroCopySetup.attach`).
    let zeroCopy: ZeroCopySetup
    /// The main output's encoder path, for the summary.
    let mainPlan: EncoderPlan?
    var nextOutputKey: Int
    /// Outputs being opened or closed beside the loop.
    let handovers = OutputHandovers()
    let timing: LiveTiming
    /// Shown on live outputs while the primary is interrupted (`--slate`).
    let slate: InputFrame?
    /// The primary's list holds a live source (docs/ARCHITECTURE.md, "Source recovery").
    let livePrimaryList: Bool
    let decoders: DecoderLog
    /// The take's audio (docs/ARCHITECTURE.md, "Take audio"); nil: no audio track.
    let audio: AudioMixer?

    var frames = 0
    let warnings: TakeWarnings
    var lastPTS: MediaTime?
    var lastPaired: PairedFrame?
    var lastThermal: ThermalState = .nominal
    let started = Date()
    let preview: PreviewTap?
    var summary: TakeSummary?
    /// Each output's overlays, by output key; `overlayIDs` their pictures' ids by image path.
    var overlays: [Int: [ImageOverlay]] = [:]
    let overlayIDs: [String: Int]
    /// Each output's texts, set again when their expanded text changes.
    let texts: TakeTexts
    /// The transition of the last layout change (outputs take it up as they next render).
    var pendingTransition: LayoutTransition?
    /// Each output's layout over time (transitions), by output key.
    var animators: [Int: LayoutAnimator] = [:]
    /// `--layout-at` changes not yet applied, in time order.
    var schedule: ArraySlice<ScheduledLayout>
    /// The layout each output's zoom was last checked for.
    var zoomChecked: [Int: Layout] = [:]
    var droppedReported: [Int: Int] = [:]
    /// The process's CPU time by stage when the take's setup began (`TakeSummary.cpuStages`).
    var stageBaseline = StageTimes()

    init(session: RecordingSession, prepared p: PreparedTake) {
        self.session = session
        config = p.config; hooks = session.hooks
        canvas = p.canvas; frameRate = p.frameRate
        inputs = p.inputs; gpu = p.gpu; encoders = p.encoders; main = p.encoders[0]
        warnings = p.warnings
        encoderSettings = p.encoderSettings
        for (i, r) in p.renditions.enumerated() { renditions[i] = r }
        zeroCopy = p.zeroCopy
        mainPlan = p.mainPlan
        slate = p.slate
        decoders = p.decoders
        audio = p.audio
        livePrimaryList = p.config.realtime != .off && p.config.primaryFallbacks.count > 0
            && p.config.sources(.primary).contains { TakeRun.isLive($0) }
        layouts = [0: p.config.layout]
        for (i, o) in p.config.extraOutputs.enumerated() { layouts[i + 1] = o.layout }
        schedule = p.config.layoutSchedule[...]
        overlays[0] = p.config.overlays
        for (i, o) in p.config.extraOutputs.enumerated() { overlays[i + 1] = o.overlays }
        overlayIDs = Dictionary(p.overlayImages.enumerated().map { ($0.element.path, $0.offset) }, uniquingKeysWith: { a, _ in a })
        texts = TakeTexts(fonts: p.fonts, take: session.hooks.takeName ?? TakeRun.takeName(output: p.config.output ?? "take"))
        do {
            try texts.set(p.config.texts, output: 0, gpu: p.gpu)
            for (i, o) in p.config.extraOutputs.enumerated() { try texts.set(o.texts, output: i + 1, gpu: p.gpu) }
        } catch {
            p.warnings.add("texts: \(error)")
        }
        nextOutputKey = p.encoders.count
        gpu.simulateLossAt = hooks.simulateContextLossAtFrames
        let live = p.encoders.contains { $0.live }
        let paced = p.config.realtime == .on || (p.config.realtime == .auto && live
            && !TakeRun.isLive(p.config.primary) && !TakeRun.isLive(p.config.secondary))
        // Only a live primary can be interrupted; a file or pattern that is late is the machine being slow.
        timing = LiveTiming(frameRate: p.frameRate, paced: paced, keepsCadence: live && TakeRun.isLive(p.config.primary))
        if paced { hooks.log("pacing at the primary's real-time rate (\(p.frameRate) fps)") }
        preview = p.config.preview.map { PreviewTap(path: $0, at: min(1.0, (p.config.duration ?? 2.0) / 2)) }
        var taps = session.io.taps
        if let cb = hooks.frameCallback { taps.append(FrameCallbackTap(callback: cb, interval: hooks.frameCallbackInterval)) }
        if let preview { taps.append(preview) }
        if let s = hooks.snapshots { taps.append(SnapshotTap(s)) }
        self.taps = taps
    }

    // MARK: The loop

    func run() throws(SessionError) -> TakeSummary {
        session.io.started(gpu.gpu.info)
        let stop = StageClock.measure(.render) { renderLoop() }
        return try finalize(stop)
    }

    private func renderLoop() -> StopReason {
        var lastMonitor = Date.distantPast
        var lastProgress = Date()
        while true {
            let control = session.takeControl()
            if let stop = control.stop { return stop }
            if let r = encoderFailure() { return r }
            if let c = control.layout { changeLayout(c.layout, transition: c.transition) }
            if let c = control.texts {
                texts.add(fonts: c.fonts)
                do { try texts.set(c.texts, output: 0, gpu: gpu) } catch { warn("texts: \(error)") }
            }
            if let o = control.overlays { overlays[0] = o }
            for s in control.switches { inputs.beginSwitch(s.role, to: s.spec, at: lastPTS ?? .zero) }
            for change in control.outputs { apply(change) }
            for opened in handovers.takeOpened() { attach(opened) }

            let now = Date()
            if now.timeIntervalSince(lastMonitor) >= hooks.monitorInterval {
                lastMonitor = now
                if let r = checkMonitors() { return r }
                reportDrops()
            }

            // The primary drives: one output frame per primary frame.
            guard let event = inputs.nextPrimary(lastPTS: lastPTS, holdDeadline: frames > 0 ? timing.holdDeadline : nil) else { continue }
            let primary: InputFrame
            switch event {
            case .late:
                if let r = holdFrame() { return r }
                continue
            case .stop(.endOfPrimary) where config.duration != nil && Double(frames) * frameRate.frameDuration.seconds >= config.duration! - 1e-6:
                return .durationReached
            case .stop(let r): return r
            case .frame(let f): primary = f
            }
            if frames == 0, let origin = inputs.timelineOrigin { session.io.timelineOrigin(origin) }
            // A live primary's list showing a file or pattern is paced at real time while it does.
            if livePrimaryList { timing.pace(!inputs.primaryIsLive) }
            let t = primary.pts
            hooks.frameEvent?(.primaryTaken, t)
            if let l = primary.layout { changeLayout(l, transition: primary.layoutTransition) }
            if let d = config.duration, t.seconds >= d - 1e-9 { return .durationReached }
            while let next = schedule.first, t.seconds >= next.at - 1e-9 {
                schedule.removeFirst()
                changeLayout(next.layout, transition: next.transition)
            }
            if let last = lastPTS, t <= last {
                warn("primary frame at \(t.seconds) s is not after the previous one; skipped")
                continue
            }
            guard timing.waitUntilDue(t, stopRequested: { session.isStopRequested }, wake: session.inputWake) else { continue }
            if timing.holding {
                log("primary resumed at \(String(format: "%.3f", t.seconds)) s; live outputs held \(timing.held) frames in all")
            }
            let paired = inputs.pair(primary)
            advanceAudio(to: t + frameRate.frameDuration)
            do throws(GPUError) {
                try gpu.render(paired, plans: try plans(for: paired, t: t, liveOnly: false), index: frames, taps: taps)
            } catch {
                return .gpuFailed(error)
            }
            timing.sent(held: false)
            lastPTS = t
            lastPaired = paired
            frames += 1
            if let r = deliverReadbacks(wait: false) { return r }

            if now.timeIntervalSince(lastProgress) >= 0.5, let p = hooks.progress {
                lastProgress = now
                p(progress())
            }
        }
    }

    /// The primary is late and a live output exists: live outputs get the
    /// last frame again (or the slate) at the next frame time, file outputs
    /// nothing; the primary's later frames move that much later.
    private func holdFrame() -> StopReason? {
        guard let last = lastPaired, let lastPTS else { return nil }
        let t = lastPTS + frameRate.frameDuration
        var frame = last
        frame.primary.pts = t
        if let slate {
            frame = PairedFrame(primary: slate, primaryOrientation: .identity, secondary: nil, secondaryOrientation: .identity)
            frame.primary.pts = t
        }
        if !timing.holding { log("primary interrupted at \(String(format: "%.3f", t.seconds)) s: live outputs hold its last frame\(slate == nil ? "" : " (the slate)")") }
        do throws(GPUError) {
            try gpu.render(frame, plans: try plans(for: frame, t: t, liveOnly: true), index: frames, taps: [])
        } catch {
            return .gpuFailed(error)
        }
        inputs.shiftPrimary(by: frameRate.frameDuration)
        audio?.hold(at: t, duration: frameRate.frameDuration)
        advanceAudio(to: t + frameRate.frameDuration)
        timing.sent(held: true)
        self.lastPTS = t
        return deliverReadbacks(wait: false)
    }

    /// Feeds the take's audio up to take time `t` from what each heard role shows now.
    func advanceAudio(to t: MediaTime) {
        guard let audio else { return }
        audio.advance(to: t, feeds: config.audio.roles.map { inputs.audioFeed($0) })
    }

    /// The take's layout from the next frame on (`layouts[0]`, which outputs
    /// without their own follow); `transition` nil takes `--transition`.
    func changeLayout(_ layout: Layout, transition: LayoutTransition?) {
        layouts[0] = layout
        pendingTransition = transition ?? config.layoutTransition
    }

    /// Each output's draws for this frame, and the time its frame carries:
    /// the take's time on live outputs, less the held time on files. Each is
    /// drawn on its own canvas; an output with a rate divisor N has a plan
    /// on every Nth frame of its timeline only (a file's frames, a live
    /// output's frames with the held ones).
    private func plans(for f: PairedFrame, t: MediaTime, liveOnly: Bool) throws(GPUError) -> [Int: GPUStage.OutputPlan] {
        let p = StreamGeometry(sensorSize: f.primary.size, orientation: f.primaryOrientation, sampleAspect: f.primary.sampleAspect)
        let s = f.secondary.map {
            StreamGeometry(sensorSize: $0.payload.size, orientation: f.secondaryOrientation, sampleAspect: $0.payload.sampleAspect)
        }
        var out: [Int: GPUStage.OutputPlan] = [:]
        let wallClock = Date().timeIntervalSince1970
        for e in encoders where e.live || !liveOnly {
            let rendition = renditions[e.key] ?? OutputRendition(take: encoderSettings)
            guard rendition.takes(e.live ? frames + timing.held : frames) else { continue }
            let canvas = rendition.canvas
            let clock = TextClock(time: t, rate: rendition.video.frameRate, wallClock: wallClock, take: texts.take)
            let layout = (layouts[e.key] ?? nil) ?? (layouts[0] ?? nil) ?? config.layout
            var animator = animators[e.key] ?? LayoutAnimator(layout: layout, frameDuration: frameRate.frameDuration)
            if animator.layout != layout { animator.change(to: layout, transition: pendingTransition) }
            let images = overlays[e.key] ?? []
            let plan = animator.plan(at: t, canvas: canvas, primary: p, secondary: s).adding(images, ids: overlayIDs)
                .adding(try texts.draws(output: e.key, clock: clock, canvas: canvas, order: images.count, gpu: gpu, warn: warn))
            animators[e.key] = animator
            out[e.key] = GPUStage.OutputPlan(plan: plan, pts: e.live ? t : t - timing.pause)
            if !liveOnly, zoomChecked[e.key] != layout {
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

    /// Moves finished readbacks to their encoders (blocking while a file's is behind).
    func deliverReadbacks(wait: Bool) -> StopReason? {
        let frames: [(key: Int, delivery: StageDelivery)]
        do { frames = try gpu.readbacks(wait: wait) } catch { return .gpuFailed(error) }
        for (key, delivery) in frames {
            guard let e = encoders.first(where: { $0.key == key }) else { continue }
            switch delivery {
            case .frame(let f): e.push(f)
            case .encoded(let p): e.push(EncodedVideoPacket(data: p.picture.data, pts: p.picture.pts, keyframe: p.picture.keyframe))
            case .cuda(let frame, let pts): e.push(.cuda(frame, pts: pts))
            }
        }
        // A live output that dropped a picture waits for a keyframe: ask its encoder for one.
        if gpu.encodesOnGPU { gpu.requestKeyframes(outputsNeedingKeyframe) }
        return nil
    }

    /// The outputs whose next encoded picture should be a keyframe (a live
    /// output dropped one and waits for the next: `EncoderStage.needsKeyframe`).
    var outputsNeedingKeyframe: [Int] { encoders.filter(\.needsKeyframe).map(\.key) }

    func log(_ message: String) { hooks.log(message) }

    func warn(_ message: String) { warnings.add(message) }

    private func progress() -> TakeProgress {
        let c = inputs.clock.counters
        return TakeProgress(frames: frames, mediaSeconds: Double(frames) * frameRate.frameDuration.seconds,
                            wallSeconds: Date().timeIntervalSince(started),
                            secondaryRepeated: c.secondaryRepeatShows, secondaryDropped: c.secondaryFramesDropped,
                            segments: encoders.first { $0.key == 0 }?.segments ?? [],
                            sources: inputs.sourceStatus, sourceSwitches: inputs.sourceSwitches)
    }

    /// A take's name for `{take}` where its host gave none: its main
    /// output's file or stream name, without the extension.
    static func takeName(output: String) -> String {
        let last = output.split(separator: "/").last.map(String.init) ?? output
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return last }
        return String(last[..<dot])
    }
}
