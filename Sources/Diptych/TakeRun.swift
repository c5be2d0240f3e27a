import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// A frame rendered but not yet read back: kept so it can be rendered again
/// on a fresh context if the GPU context is lost before its readback.
private struct InFlight {
    var primary: VideoFrame
    var secondary: VideoFrame?
    var plan: CompositionPlan
    var pts: MediaTime
}

/// The secondary stream's reader and the decoded frame not yet due.
private struct SecondaryState {
    var reader: SourceReader?
    var orientation = Orientation.identity
    /// The next decoded frame, already rebased to the take's timeline.
    var next: VideoFrame?
    var firstPTS: MediaTime?
    var base = MediaTime.zero
    var ended = false
    var stalled = false
}

/// The state of one running take (see `RecordingSession`). Used by one thread.
final class TakeRun {
    let session: RecordingSession
    let config: TakeConfiguration
    let hooks: SessionHooks
    let log: @Sendable (String) -> Void
    let outputPath: String

    private(set) var canvas: PixelSize
    var layout: Layout
    let frameRate: FrameRate

    private var primaryReader: SourceReader
    private var primaryOrientation: Orientation
    private var primaryFirstPTS: MediaTime?
    private var primaryBase = MediaTime.zero
    private var pendingPrimary: SourceReader?
    private var pendingPrimarySince = Date()
    private var secondary = SecondaryState()
    private var pendingSecondary: SourceReader?
    /// When the pending secondary is a scheduled switch (`--switch-secondary`),
    /// opened ahead of time: the take time at which it replaces the current one.
    private var pendingSecondaryAt: MediaTime?
    private var scheduledSwitches: [SecondarySwitch]
    private var clock: FrameClock<VideoFrame>
    /// The clock frame whose picture is in the GPU's secondary texture.
    private var uploadedSecondary: SecondaryFrameID?

    private var gpu: GPUCompositor
    private var output: OutputID
    private let selection: GPUSelection
    private let writer: any TakeOutput
    private let encodeQueue = BoundedQueue<VideoFrame>(capacity: 4)
    private let encoderDone = DispatchSemaphore(value: 0)
    private let encoderState = EncoderState()
    private var inFlight: [InFlight] = []

    private var frames = 0
    private var gpuRebuilds = 0
    private var hotSwaps = 0
    private var warnings: [String] = []
    private var lastPTS: MediaTime?
    private var previewWritten = false
    private var lastThermal: ThermalState
    private let started = Date()
    private(set) var summary: TakeSummary?

    init(session: RecordingSession) throws(SessionError) {
        self.session = session
        let config = session.configuration
        self.config = config
        self.hooks = session.hooks
        self.log = session.hooks.log
        do { try config.validate() } catch { throw .badInput("\(error)") }
        guard let outputPath = config.output else { throw .badInput("--out: missing (give a file or URL)") }
        self.outputPath = outputPath
        guard let gpuSelection = GPUSelection(parsing: config.gpu) else {
            throw .badInput("--gpu '\(config.gpu)': expected auto, software, an index or /dev/dri/renderDN")
        }
        selection = gpuSelection

        // The output must not be one of the inputs, nor the preview the output.
        try Self.checkDistinctFiles(config: config, output: outputPath)

        // The encoder choice, sources: bad input must fail before anything starts.
        do { _ = try EncoderProbe.choose(codec: config.codec, choice: config.encoder) }
        catch { throw .badInput("\(error)") }
        let primarySource: any VideoSource
        do { primarySource = try session.embedding?.source(.primary) ?? MediaSources.open(config.primary, duration: config.duration) }
        catch { throw .badInput("\(error)") }
        var secondarySource: (any VideoSource)?
        if config.secondary != .none {
            do { secondarySource = try session.embedding?.source(.secondary) ?? MediaSources.open(config.secondary, duration: nil) }
            catch { primarySource.close(); throw .badInput("\(error)") }
        }
        func closeSources() { primarySource.close(); secondarySource?.close() }

        primaryOrientation = Self.orientation(metadata: primarySource.info.orientation, configured: config.primaryOrientation)
        frameRate = primarySource.info.frameRate
        layout = config.layout
        scheduledSwitches = config.secondarySwitches.sorted { $0.time < $1.time }
        var clockConfig = config.clockConfiguration
        // File sources are paced by timestamp below, so the clock never has to wait.
        clockConfig.beforeFirstFrame = .primaryOnly
        clockConfig.afterEnd = .primaryOnlyAfter(MediaTime(seconds: config.secondaryTimeout))
        clock = FrameClock(configuration: clockConfig)

        var canvas = config.resolvedCanvas(primaryUprightSize: primarySource.info.size.rotated(primaryOrientation.rotation))

        // Thermal policy before the take: critical refuses, serious drops 1080p to 720p.
        let thermal = Self.readThermal(config: config, hooks: hooks)
        switch ThermalPolicy.decide(state: thermal.state, recording: false, canvas: canvas) {
        case .refuseToStart, .stopRecording:
            closeSources()
            throw .runtime("not starting: critical thermal state (\(thermal.source))")
        case .dropTo720p:
            let reduced = ThermalPolicy.reducedCanvas(for: canvas)
            let message = "thermal state serious (\(thermal.source)): recording at \(reduced) instead of \(canvas)"
            hooks.log(message)
            warnings.append(message)
            canvas = reduced
        case .warn:
            hooks.log("warning: thermal state \(thermal.state) (\(thermal.source))")
        case .none:
            break
        }
        lastThermal = thermal.state
        self.canvas = canvas

        // Storage: 200 MiB free to start.
        if case .startRefused(let why) = StoragePolicy.standard.decide(freeBytes: hooks.storage.freeBytes(at: outputPath), recording: false) {
            closeSources()
            throw .runtime("not starting: \(outputPath): \(why)")
        }

        do {
            gpu = try Self.compositor(gpuSelection, hooks: hooks)
            output = try gpu.addOutput(canvas: canvas)
        } catch {
            closeSources()
            throw .runtime("GPU: \(error)")
        }

        // Live sources: measure the canvas's cost and roll back while it is over budget.
        let live = Self.isLive(config.primary) || Self.isLive(config.secondary)
        let trialWanted: Bool
        switch hooks.costTrial {
        case .liveSources: trialWanted = live
        case .always: trialWanted = true
        case .never: trialWanted = false
        }
        if trialWanted {
            let settings = VideoEncoderSettings(size: canvas, frameRate: frameRate, codec: config.codec,
                                                encoder: config.encoder, bitrate: config.bitrate, preset: config.preset)
            let g = gpu
            let measure: (PixelSize) throws -> [Double] = hooks.costMeasurement.map { m in { m($0) } }
                ?? CostTrial.real(gpu: g, primary: primarySource.info.size, secondary: secondarySource?.info.size,
                                  layout: config.layout,
                                  orientations: (primaryOrientation, Self.orientation(metadata: secondarySource?.info.orientation ?? .identity,
                                                                                      configured: config.secondaryOrientation)),
                                  settings: settings, frames: 12)
            let outcome = CostTrial(frames: 12, measure: measure).choose(requested: canvas, frameRate: frameRate)
            for m in outcome.messages { hooks.log(m) }
            if outcome.canvas != canvas {
                warnings.append(contentsOf: outcome.messages)
                canvas = outcome.canvas
                self.canvas = canvas
                gpu.removeOutput(output)
                do { output = try gpu.addOutput(canvas: canvas) } catch {
                    gpu.shutdown(); closeSources()
                    throw .runtime("GPU: \(error)")
                }
            }
        }

        // The output last, so a failure above leaves no file behind.
        let audio = config.audio == .primary ? primarySource.audioTrack : nil
        do {
            var video = VideoEncoderSettings(size: canvas, frameRate: frameRate, codec: config.codec,
                                             encoder: config.encoder, bitrate: config.bitrate, preset: config.preset,
                                             gop: max(1, Int((config.keyframeInterval * frameRate.fps).rounded())))
            video.threads = hooks.encoderThreads ?? 0
            if let embedding = session.embedding {
                writer = try embedding.makeOutput(video: video)
            } else {
                writer = try MediaWriter(url: outputPath, container: config.container, video: video, audio: audio)
            }
        } catch {
            gpu.shutdown()
            closeSources()
            switch error {
            case .encoderUnavailable: throw .badInput("\(error)")
            case .writeFailed: throw .badInput("--out \(error)")
            default: throw .runtime("\(error)")
            }
        }
        hooks.log("encoder: \(writer.encoderDescription); audio: \(writer.audioDescription)")

        primaryReader = SourceReader(spec: config.primary, source: primarySource)
        if let s = secondarySource {
            secondary.reader = SourceReader(spec: config.secondary, source: s)
            secondary.orientation = Self.orientation(metadata: s.info.orientation, configured: config.secondaryOrientation)
        }
    }

    /// Throws `.badInput` when `--out` is also an input file or the preview
    /// (recording over an input destroys it while it is read).
    static func checkDistinctFiles(config: TakeConfiguration, output: String) throws(SessionError) {
        func identity(_ path: String) -> (UInt64, UInt64)? {
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            return (UInt64(st.st_dev), UInt64(st.st_ino))
        }
        func canonical(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.path }
        var inputs: [String] = []
        for spec in [config.primary, config.secondary] + config.secondarySwitches.map(\.source) {
            if case .url(let u) = spec, !u.contains("://") { inputs.append(u) }
        }
        let outID = identity(output)
        for input in inputs {
            if canonical(input) == canonical(output) || (outID != nil && identity(input).map { $0 == outID! } == true) {
                throw .badInput("--out '\(output)': is also an input; recording over it would destroy it")
            }
        }
        if let preview = config.preview, canonical(preview) == canonical(output) {
            throw .badInput("--preview '\(preview)': is the same file as --out")
        }
    }

    /// The take's compositor: from `hooks.makeCompositor`, else one with its own context.
    static func compositor(_ selection: GPUSelection, hooks: SessionHooks) throws(GPUError) -> GPUCompositor {
        if let make = hooks.makeCompositor { return try make(selection) }
        return try GPUCompositor(selection: selection, directCopy: true, log: hooks.log)
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

    /// A configured rotation wins over the stream's metadata; mirror is configured only.
    static func orientation(metadata: Orientation, configured: Orientation) -> Orientation {
        Orientation(rotation: configured.rotation != .r0 ? configured.rotation : metadata.rotation,
                    mirrored: configured.mirrored != metadata.mirrored)
    }

    static func readThermal(config: TakeConfiguration, hooks: SessionHooks) -> (state: ThermalState, source: String) {
        if let forced = config.thermalState { return (forced, "forced") }
        return (hooks.thermal ?? SysfsThermalMonitor()).read()
    }

    // MARK: - The take

    func run() throws(SessionError) -> TakeSummary {
        session.embedding?.takeStarted(gpu: gpu.info)
        startEncoderThread()
        let reason = renderLoop()
        return try finalize(reason)
    }

    private func renderLoop() -> StopReason {
        var lastMonitor = Date.distantPast
        var lastProgress = Date()
        while true {
            let (stop, switches, newLayout) = session.pollControl()
            if let stop { return stop }
            if let failure = encoderState.failure { return failure }
            if let newLayout { layout = newLayout }
            for s in switches { beginSwitch(s.role, to: s.spec) }

            let now = Date()
            if now.timeIntervalSince(lastMonitor) >= hooks.monitorInterval {
                lastMonitor = now
                if let r = checkMonitors() { return r }
            }

            // The primary drives: one output frame per primary frame.
            guard let event = nextPrimary() else { continue }
            let primary: VideoFrame
            switch event {
            case .stop(.endOfPrimary) where config.duration != nil && Double(frames) * frameRate.frameDuration.seconds >= config.duration! - 1e-6:
                return .durationReached
            case .stop(let r): return r
            case .frame(let f): primary = f
            }
            let t = primary.pts
            if let l = session.embedding?.layout(at: t) { layout = l }
            if let d = config.duration, t.seconds >= d - 1e-9 { return .durationReached }
            if let last = lastPTS, t <= last {
                warn("primary frame at \(t.seconds) s is not after the previous one; skipped")
                continue
            }
            scheduleSwitches(at: t)
            pumpSecondary(until: t)

            let decision = clock.tick(primaryPTS: t, now: t)
            let shown = decision.secondary
            if let r = renderFrame(primary: primary, secondary: shown, t: t) { return r }
            lastPTS = t
            frames += 1
            if let r = collectReadbacks(wait: false) { return r }

            if now.timeIntervalSince(lastProgress) >= 0.5, let p = hooks.progress {
                lastProgress = now
                p(progress())
            }
        }
    }

    private enum PrimaryEvent { case frame(VideoFrame), stop(StopReason) }

    /// The next primary frame on the take's timeline, or why the take ends.
    /// Nil means "nothing yet, loop again" (while a primary swap is pending).
    private func nextPrimary() -> PrimaryEvent? {
        if let pending = pendingPrimary {
            switch pending.queue.tryPop() {
            case .frame(let f)?:
                let old = primaryReader
                DispatchQueue.global().async { old.stop() }
                primaryReader = pending
                pendingPrimary = nil
                if let info = pending.info {
                    primaryOrientation = Self.orientation(metadata: info.orientation, configured: config.primaryOrientation)
                }
                primaryBase = (lastPTS ?? .zero) + frameRate.frameDuration
                primaryFirstPTS = f.pts
                hotSwaps += 1
                log("primary switched to \(pending.spec)")
                return .frame(rebasedPrimary(f))
            case .failed(let m)?:
                abandonSwitch(pending, role: .primary, because: m)
                pendingPrimary = nil
            case .end?:
                abandonSwitch(pending, role: .primary, because: "the stream is empty")
                pendingPrimary = nil
            case nil:
                break
            }
        }
        if let pending = pendingPrimary, Date().timeIntervalSince(pendingPrimarySince) > config.primaryTimeout {
            abandonSwitch(pending, role: .primary, because: "it delivered nothing for \(config.primaryTimeout) s")
            pendingPrimary = nil
        }
        let swapping = pendingPrimary != nil
        var event: ReaderEvent?
        if swapping {
            event = primaryReader.queue.pop(timeout: 0.02)
            // The old primary has ended: wait for the new one without spinning.
            if event == nil || primaryReader.queue.isClosed { Thread.sleep(forTimeInterval: 0.01) }
        } else {
            // Waits in slices, so a stop request is seen while the primary is silent.
            let deadline = Date(timeIntervalSinceNow: config.primaryTimeout)
            while true {
                // Returns queued frames even after the reader closed the queue; nil once drained.
                event = primaryReader.queue.pop(timeout: 0.1)
                if event != nil || primaryReader.queue.isClosed { break }
                if session.isStopRequested { return nil }
                if Date() >= deadline {
                    return .stop(.primaryInterrupted("\(config.primary) delivered nothing for \(config.primaryTimeout) s"))
                }
            }
        }
        switch event {
        case .frame(let f)?:
            if primaryFirstPTS == nil { primaryFirstPTS = f.pts }
            return .frame(rebasedPrimary(f))
        case .end?:
            return swapping ? nil : .stop(.endOfPrimary)
        case .failed(let m)?:
            return swapping ? nil : .stop(.primaryInterrupted(m))
        case nil:
            return swapping ? nil : .stop(.endOfPrimary)
        }
    }

    private func rebasedPrimary(_ f: VideoFrame) -> VideoFrame {
        var f = f
        f.pts = primaryBase + (f.pts - (primaryFirstPTS ?? f.pts))
        return f
    }

    /// A pending switch whose stream failed before its first frame: the
    /// current stream stays.
    private func abandonSwitch(_ reader: SourceReader, role: StreamRole, because why: String) {
        warn("\(role) switch to \(reader.spec) failed: \(why); keeping the current stream")
        DispatchQueue.global().async { reader.stop() }
    }

    /// Scheduled switches are opened ahead of time, so the new stream takes
    /// over exactly at its time; removing the secondary (`S=none`) happens at S.
    private func scheduleSwitches(at t: MediaTime) {
        while let s = scheduledSwitches.first, s.source == .none, s.time <= t.seconds {
            scheduledSwitches.removeFirst()
            beginSwitch(.secondary, to: .none)
        }
        if pendingSecondary == nil, let s = scheduledSwitches.first, s.source != .none {
            scheduledSwitches.removeFirst()
            pendingSecondary = SourceReader(opening: s.source, duration: nil)
            pendingSecondaryAt = MediaTime(seconds: s.time)
            log("secondary switches to \(s.source) at \(s.time) s")
        }
    }

    private func beginSwitch(_ role: StreamRole, to spec: SourceSpec) {
        switch role {
        case .primary:
            if let p = pendingPrimary { DispatchQueue.global().async { p.stop() } }
            pendingPrimary = SourceReader(opening: spec, duration: nil)
            pendingPrimarySince = Date()
            log("switching primary to \(spec)")
        case .secondary:
            if let p = pendingSecondary { DispatchQueue.global().async { p.stop() } }
            pendingSecondary = nil
            pendingSecondaryAt = nil
            if spec == .none {
                if let r = secondary.reader { DispatchQueue.global().async { r.stop() } }
                secondary = SecondaryState()
                clock.secondaryEnded(now: lastPTS ?? .zero)
                hotSwaps += 1
                log("secondary removed")
                return
            }
            pendingSecondary = SourceReader(opening: spec, duration: nil)
            log("switching secondary to \(spec)")
        }
    }

    /// Feeds the clock every secondary frame due at `t` (DESIGN rule 1).
    /// Files are paced by timestamp, so the take is deterministic; a source
    /// that delivers nothing for `secondaryTimeout` wall seconds counts as
    /// stalled and is no longer waited for (the clock then falls back to the
    /// primary alone after the same time on the take's timeline).
    private func pumpSecondary(until t: MediaTime) {
        if let pending = pendingSecondary, pendingSecondaryAt.map({ t >= $0 }) ?? true {
            // A scheduled switch is waited for (as file sources are), once, up to the timeout.
            let event = pendingSecondaryAt != nil ? pending.queue.pop(timeout: config.secondaryTimeout) : pending.queue.tryPop()
            let switchTime = pendingSecondaryAt ?? t
            pendingSecondaryAt = nil
            switch event {
            case .frame(let f)?:
                if let old = secondary.reader { DispatchQueue.global().async { old.stop() } }
                var s = SecondaryState()
                s.reader = pending
                if let info = pending.info {
                    s.orientation = Self.orientation(metadata: info.orientation, configured: config.secondaryOrientation)
                }
                s.base = switchTime
                s.firstPTS = f.pts
                var first = f
                first.pts = switchTime
                s.next = first
                secondary = s
                pendingSecondary = nil
                clock.replaceSecondary(now: t)
                hotSwaps += 1
                log("secondary switched to \(pending.spec) at \(String(format: "%.3f", t.seconds)) s")
            case .failed(let m)?:
                abandonSwitch(pending, role: .secondary, because: m)
                pendingSecondary = nil
            case .end?:
                abandonSwitch(pending, role: .secondary, because: "the stream is empty")
                pendingSecondary = nil
            case nil:
                break
            }
        }
        guard let reader = secondary.reader else { return }
        while true {
            if secondary.next == nil && !secondary.ended {
                let event = secondary.stalled ? reader.queue.tryPop() : reader.queue.pop(timeout: config.secondaryTimeout)
                switch event {
                case .frame(var f)?:
                    // Pushed streams share one clock: both are rebased on the primary's first frame.
                    let first = secondary.firstPTS ?? session.embedding?.primary.firstPTS ?? f.pts
                    secondary.firstPTS = first
                    f.pts = secondary.base + (f.pts - first)
                    secondary.next = f
                    if secondary.stalled { secondary.stalled = false; log("secondary stream resumed") }
                case .end?:
                    endSecondary(at: t, because: "ended")
                case .failed(let m)?:
                    endSecondary(at: t, because: "interrupted: \(m)")
                case nil:
                    if reader.queue.isClosed {
                        endSecondary(at: t, because: "ended")
                    } else if !secondary.stalled {
                        secondary.stalled = true
                        warn("secondary stream delivered nothing for \(config.secondaryTimeout) s at \(String(format: "%.3f", t.seconds)) s; holding its last frame")
                    }
                }
            }
            guard let next = secondary.next, next.pts <= t else { return }
            clock.pushSecondary(next, pts: next.pts, now: next.pts)
            secondary.next = nil
        }
    }

    private func endSecondary(at t: MediaTime, because why: String) {
        secondary.ended = true
        clock.secondaryEnded(now: t)
        log("secondary stream \(why) at \(String(format: "%.3f", t.seconds)) s; holding its last frame for \(config.secondaryTimeout) s, then primary only")
    }

    /// Uploads, composites and starts the readback of one output frame.
    /// A lost GPU context is rebuilt (nothing old reused) and the frame retried.
    private func renderFrame(primary: VideoFrame, secondary shown: ClockFrame<VideoFrame>?, t: MediaTime) -> StopReason? {
        hooks.frameEvent?(.primaryTaken, t)
        let plan = layout.resolve(
            canvas: canvas,
            primary: StreamGeometry(sensorSize: primary.size, orientation: primaryOrientation),
            secondary: shown.map { StreamGeometry(sensorSize: $0.payload.size, orientation: secondary.orientation) })
        let entry = InFlight(primary: primary, secondary: shown?.payload, plan: plan, pts: t)
        var attempts = 0
        while true {
            do throws(GPUError) {
                if attempts == 0, hooks.simulateContextLossAtFrames.contains(frames) { gpu.simulateContextLoss() }
                try upload(primary, role: .primary, to: gpu)
                if let s = shown, uploadedSecondary != s.id {
                    try upload(s.payload, role: .secondary, to: gpu)
                    uploadedSecondary = s.id
                }
                try gpu.render(output: output, plan: plan, pts: t)
                break
            } catch {
                attempts += 1
                if case .contextLost = error, attempts <= 3 {
                    if let r = rebuildGPU(after: error) { return r }
                    continue
                }
                return .gpuFailed("\(error)")
            }
        }
        inFlight.append(entry)
        session.embedding?.rendered(gpu: gpu, output: output, pts: t, index: frames)
        if let cb = hooks.frameCallback, frames % hooks.frameCallbackInterval == 0,
           let rgba = try? gpu.previewRGBA(output: output) {
            cb(rgba, frames)
        }
        if let path = config.preview, !previewWritten, t.seconds >= previewTime {
            writePreview(path, at: t)
        }
        return nil
    }

    /// The preview shows the first frame at or after one second (half the
    /// duration for shorter takes), or the last frame of a take that ends sooner.
    var previewTime: Double { min(1.0, (config.duration ?? 2.0) / 2) }
    private(set) var previewSeconds: Double?

    private func writePreview(_ path: String, at t: MediaTime) {
        previewWritten = true
        do {
            try PNGWriter.write(try gpu.previewRGBA(output: output), to: path)
            previewSeconds = t.seconds
        } catch {
            warn("preview \(path): \(error)")
        }
    }

    /// Context lost: throw every GPU object away, build a new context, and
    /// render again every frame whose readback had not completed.
    private func rebuildGPU(after error: GPUError) -> StopReason? {
        gpuRebuilds += 1
        warn("GPU context lost (\(error)); rebuilding the GPU side and rendering \(inFlight.count) frames in flight again")
        gpu.shutdown()
        uploadedSecondary = nil
        do throws(GPUError) {
            gpu = try Self.compositor(selection, hooks: hooks)
            output = try gpu.addOutput(canvas: canvas)
            for e in inFlight {
                try upload(e.primary, role: .primary, to: gpu)
                if let s = e.secondary { try upload(s, role: .secondary, to: gpu) }
                try gpu.render(output: output, plan: e.plan, pts: e.pts)
            }
            return nil
        } catch {
            return .gpuFailed("cannot rebuild the GPU context: \(error)")
        }
    }

    /// Moves finished readbacks to the encoder (blocking while it is behind).
    private func collectReadbacks(wait: Bool) -> StopReason? {
        var rebuilt = 0
        while true {
            let frame: VideoFrame?
            do throws(GPUError) {
                frame = try gpu.nextNV12(wait: wait && !inFlight.isEmpty)
            } catch {
                rebuilt += 1
                if case .contextLost = error, rebuilt <= 3 {
                    if let r = rebuildGPU(after: error) { return r }
                    continue
                }
                return .gpuFailed("\(error)")
            }
            guard let frame else { return nil }
            if !inFlight.isEmpty { inFlight.removeFirst() }
            encodeQueue.push(frame)
        }
    }

    private func checkMonitors() -> StopReason? {
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

    private func warn(_ message: String) {
        warnings.append(message)
        log("warning: \(message)")
    }

    private func progress() -> TakeProgress {
        TakeProgress(frames: frames, mediaSeconds: Double(frames) * frameRate.frameDuration.seconds,
                     wallSeconds: Date().timeIntervalSince(started),
                     secondaryRepeated: clock.counters.secondaryRepeatShows,
                     secondaryDropped: clock.counters.secondaryFramesDropped)
    }

    // MARK: - Encoder thread

    final class EncoderState: @unchecked Sendable {
        private let lock = NSLock()
        private var _failure: StopReason?
        private var _written = 0
        var failure: StopReason? { lock.lock(); defer { lock.unlock() }; return _failure }
        var written: Int { lock.lock(); defer { lock.unlock() }; return _written }
        func fail(_ r: StopReason) { lock.lock(); if _failure == nil { _failure = r }; lock.unlock() }
        func wrote() { lock.lock(); _written += 1; lock.unlock() }
    }

    private func startEncoderThread() {
        let queue = encodeQueue, writer = self.writer, state = encoderState, done = encoderDone, event = hooks.frameEvent
        let t = Thread {
            defer { done.signal() }
            while let frame = queue.pop() {
                if state.failure != nil { continue }
                do throws(MediaError) {
                    try writer.write(frame)
                    state.wrote()
                    event?(.written, frame.pts)
                } catch {
                    if case .storageFull = error { state.fail(.storageFull("\(error)")) }
                    else { state.fail(.outputFailed("\(error)")) }
                }
            }
        }
        t.name = "diptych.encoder"
        t.start()
    }

    // MARK: - Finalize: the one path every ending takes

    private func finalize(_ stopReason: StopReason) throws(SessionError) -> TakeSummary {
        var reason = stopReason
        session.embedding?.takeEnding(stopReason)
        primaryReader.stop()
        secondary.reader?.stop()
        pendingSecondary?.stop()
        pendingPrimary?.stop()
        clock.primaryEnded()

        // Drain the GPU: every rendered frame reaches the encoder.
        if encoderState.failure == nil, let r = collectReadbacks(wait: true), reason.isNormal { reason = r }
        if let path = config.preview, !previewWritten, frames > 0, let t = lastPTS { writePreview(path, at: t) }
        encodeQueue.close()
        encoderDone.wait()
        if let failure = encoderState.failure, reason.isNormal { reason = failure }
        let gpuSummary = gpu.info.description
        gpu.shutdown()

        var finishError: String?
        do { try writer.finish() } catch { finishError = "\(error)" }

        let written = encoderState.written
        let wall = Date().timeIntervalSince(started)
        let duration = Double(written) * frameRate.frameDuration.seconds
        let c = clock.counters
        let s = TakeSummary(
            output: outputPath, frames: written, durationSeconds: duration,
            frameRate: frameRate.description, canvas: canvas.description,
            encoder: writer.encoderName, encoderReason: writer.encoderReason, audio: writer.audioDescription,
            gpu: gpuSummary, wallSeconds: wall, fps: wall > 0 ? Double(written) / wall : 0,
            realtimeFactor: wall > 0 ? duration / wall : 0,
            secondaryFramesShown: c.secondaryFramesShown, secondaryRepeated: c.secondaryRepeatShows,
            secondaryDropped: c.secondaryFramesDropped, primaryOnlyFrames: c.primaryOnlyFrames,
            gpuRebuilds: gpuRebuilds, hotSwaps: hotSwaps,
            stopReason: reason.description, normalStop: reason.isNormal && finishError == nil,
            warnings: warnings + (finishError.map { ["finishing \(outputPath): \($0)"] } ?? []),
            preview: previewSeconds != nil ? config.preview : nil, previewSeconds: previewSeconds)
        summary = s
        if !reason.isNormal {
            throw .runtime("\(reason); \(written) frames (\(String(format: "%.2f", duration)) s) encoded, \(outputPath) keeps every complete fragment")
        }
        if written == 0, session.embedding == nil { throw .runtime("\(reason): no frames recorded in \(outputPath)") }
        if let finishError { throw .runtime("\(outputPath): \(finishError)") }
        return s
    }
}
