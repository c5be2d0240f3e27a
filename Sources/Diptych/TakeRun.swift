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

/// The secondary stream's state: its reader, the held frame and the next one.
private struct SecondaryState {
    var reader: SourceReader?
    var geometry: StreamGeometry?
    var held: VideoFrame?
    var heldUploaded = false
    var heldShownCount = 0
    /// The next decoded frame, already rebased to the take's timeline.
    var next: VideoFrame?
    var firstPTS: MediaTime?
    var base = MediaTime.zero
    var ended = false
    var endedAt: MediaTime?
    var lastDelivery = Date()
    var stalled = false
}

/// The state of one running take (see `RecordingSession`).
final class TakeRun {
    let session: RecordingSession
    let config: TakeConfiguration
    let hooks: SessionHooks
    let log: @Sendable (String) -> Void

    var canvas: PixelSize
    var layout: Layout
    var primaryReader: SourceReader
    var primaryInfo: SourceInfo
    var primaryGeometry: StreamGeometry
    var primaryFirstPTS: MediaTime?
    var primaryBase = MediaTime.zero
    var pendingPrimary: (reader: SourceReader, base: MediaTime?)?
    private var secondary = SecondaryState()
    private var pendingSecondary: SourceReader?
    var scheduledSwitches: [(at: Double, spec: SourceSpec)]
    let frameRate: FrameRate

    var gpu: GPUCompositor
    var output: OutputID
    let writer: MediaWriter
    let encodeQueue = BoundedQueue<VideoFrame>(capacity: 4)
    var encoderThread: Thread?
    let encoderDone = DispatchSemaphore(value: 0)
    let encoderState = EncoderState()
    private var inFlight: [InFlight] = []

    // Counters.
    var frames = 0
    var primaryOnlyFrames = 0
    var secondaryShown = 0
    var secondaryRepeated = 0
    var secondaryDropped = 0
    var gpuRebuilds = 0
    var hotSwaps = 0
    var warnings: [String] = []
    var lastPTS: MediaTime?
    var previewPath: String?
    var previewWritten = false
    var previewSeconds: Double?
    var lastThermal: ThermalState = .nominal
    let started = Date()

    /// Secondary held this long (media seconds) after its stream stops, then primary-only.
    var secondaryTimeout: Double { config.secondaryTimeout }

    init(session: RecordingSession) throws(SessionError) {
        self.session = session
        self.config = session.configuration
        self.hooks = session.hooks
        self.log = session.hooks.log
        do { try config.validate() } catch { throw .badInput("\(error)") }

        // Sources first: bad input must fail before anything is written.
        let primarySource: VideoSource
        do { primarySource = try MediaSources.open(config.primary, duration: config.duration) }
        catch { throw .badInput("\(error)") }
        primaryInfo = primarySource.info
        primaryGeometry = StreamGeometry(size: primaryInfo.size,
                                         orientation: Self.orientation(metadata: primaryInfo.rotation,
                                                                       forced: config.primaryRotation,
                                                                       mirrored: config.mirrorPrimary))
        var secondarySource: VideoSource?
        if config.secondary != .none {
            do { secondarySource = try MediaSources.open(config.secondary, duration: nil) }
            catch { primarySource.close(); throw .badInput("\(error)") }
        }
        frameRate = primaryInfo.frameRate ?? FrameRate(30)
        layout = config.layout
        scheduledSwitches = config.secondarySwitches.map { ($0.seconds, $0.source) }.sorted { $0.0 < $1.0 }

        var canvas = config.canvas ?? primaryGeometry.uprightSize
        canvas = PixelSize(width: canvas.width & ~1, height: canvas.height & ~1)

        // Thermal policy before the take: critical refuses, serious drops 1080p to 720p.
        let thermal = Self.readThermal(config: config, hooks: hooks)
        switch ThermalPolicy.decide(state: thermal.state, recording: false, isAbove720p: canvas.height > 720 && canvas.width > 720) {
        case .stopRecording:
            primarySource.close(); secondarySource?.close()
            throw .runtime("not starting: critical thermal state (\(thermal.source))")
        case .dropTo720p:
            let scaled = canvas.scaled(toShortSide: 720)
            hooks.log("thermal state serious (\(thermal.source)): recording at \(scaled) instead of \(canvas)")
            warnings.append("thermal state serious: canvas reduced from \(canvas) to \(scaled)")
            canvas = scaled
        case .warn:
            hooks.log("warning: thermal state \(thermal.state) (\(thermal.source))")
        case .none:
            break
        }
        lastThermal = thermal.state
        self.canvas = canvas

        // Storage: 200 MiB free to start.
        if let free = hooks.storage.freeBytes(at: config.output) {
            if case .refuse(let why) = StoragePolicy.canStart(freeBytes: free) {
                primarySource.close(); secondarySource?.close()
                throw .runtime("not starting: \(config.output): \(why)")
            }
        }

        // GPU.
        do {
            gpu = try GPUCompositor(selection: try GPUSelection(parsing: config.gpu), log: hooks.log)
            output = try gpu.addOutput(canvas: canvas)
        } catch {
            primarySource.close(); secondarySource?.close()
            throw .runtime("GPU: \(error)")
        }

        // Output last, so a failure above leaves no file behind.
        let audio: AudioTrack? = config.audio == .primary ? primarySource.audioTrack : nil
        do {
            writer = try MediaWriter(
                url: config.output,
                container: config.container,
                video: VideoEncoderSettings(size: canvas, frameRate: frameRate, codec: config.codec,
                                            encoder: config.encoder, bitrate: config.bitrate,
                                            preset: config.preset, keyframeInterval: config.keyframeInterval),
                audio: audio)
        } catch {
            gpu.shutdown(); primarySource.close(); secondarySource?.close()
            switch error {
            case .encoderUnavailable: throw .badInput("\(error)")
            default: throw .runtime("\(error)")
            }
        }
        hooks.log("encoder: \(writer.encoderName) (\(writer.encoderReason))")

        primaryReader = SourceReader(spec: config.primary, source: primarySource)
        if let s = secondarySource {
            secondary.reader = SourceReader(spec: config.secondary, source: s)
            secondary.geometry = StreamGeometry(size: s.info.size,
                                                orientation: Self.orientation(metadata: s.info.rotation,
                                                                              forced: config.secondaryRotation,
                                                                              mirrored: config.mirrorSecondary))
        }
        previewPath = config.preview
    }

    static func orientation(metadata: Rotation, forced: Rotation?, mirrored: Bool) -> Orientation {
        Orientation(rotation: forced ?? metadata, mirrored: mirrored)
    }

    static func readThermal(config: TakeConfiguration, hooks: SessionHooks) -> (state: ThermalState, source: String) {
        if let forced = config.thermalState { return (forced, "forced") }
        return (hooks.thermal ?? SysfsThermalMonitor()).read()
    }

    // MARK: - The take

    func run() throws(SessionError) -> TakeSummary {
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
            if let r = encoderState.failure { return r }
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
            case .stop(let r): return r
            case .frame(let f): primary = f
            }
            let t = primary.pts
            if let d = config.duration, t.seconds >= d - 1e-9 { return .durationReached }
            if let last = lastPTS, t <= last {
                warn("primary frame at \(t.seconds) s is not after the previous one; skipped")
                continue
            }

            while let s = scheduledSwitches.first, s.at <= t.seconds {
                scheduledSwitches.removeFirst()
                beginSwitch(.secondary, to: s.spec)
            }
            pumpSecondary(until: t)

            let showSecondary = secondaryVisible(at: t)
            if let r = renderFrame(primary: primary, t: t, showSecondary: showSecondary) { return r }
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
    private func nextPrimary() -> PrimaryEvent? {
        // A pending primary swap takes over once its first frame is ready.
        if let pending = pendingPrimary {
            switch pending.reader.queue.tryPop() {
            case .frame(let f)?:
                let old = primaryReader
                DispatchQueue.global().async { old.stop() }
                primaryReader = pending.reader
                if let info = pending.reader.info {
                    primaryInfo = info
                    primaryGeometry = StreamGeometry(size: info.size,
                                                     orientation: Self.orientation(metadata: info.rotation,
                                                                                   forced: config.primaryRotation,
                                                                                   mirrored: config.mirrorPrimary))
                }
                primaryBase = (lastPTS ?? .zero) + frameRate.frameDuration
                primaryFirstPTS = f.pts
                pendingPrimary = nil
                hotSwaps += 1
                log("primary switched to \(pending.reader.spec)")
                return .frame(rebasedPrimary(f))
            case .failed(let m)?:
                warn("primary switch to \(pending.reader.spec) failed: \(m); keeping the current stream")
                let r = pending.reader
                DispatchQueue.global().async { r.stop() }
                pendingPrimary = nil
            case .end?:
                warn("primary switch to \(pending.reader.spec) failed: the stream is empty; keeping the current stream")
                let r = pending.reader
                DispatchQueue.global().async { r.stop() }
                pendingPrimary = nil
            case nil:
                break
            }
        }
        switch primaryReader.queue.pop(timeout: pendingPrimary == nil ? nil : 0.05) {
        case .frame(let f)?:
            if primaryFirstPTS == nil { primaryFirstPTS = f.pts }
            return .frame(rebasedPrimary(f))
        case .end?:
            if pendingPrimary != nil { return nil }
            return .stop(.endOfPrimary)
        case .failed(let m)?:
            if pendingPrimary != nil { return nil }
            return .stop(.primaryInterrupted(m))
        case nil:
            if pendingPrimary != nil { return nil }
            return .stop(.endOfPrimary)
        }
    }

    private func rebasedPrimary(_ f: VideoFrame) -> VideoFrame {
        var f = f
        f.pts = primaryBase + (f.pts - (primaryFirstPTS ?? f.pts))
        return f
    }

    private func beginSwitch(_ role: StreamRole, to spec: SourceSpec) {
        switch role {
        case .primary:
            if let p = pendingPrimary { let r = p.reader; DispatchQueue.global().async { r.stop() } }
            pendingPrimary = (SourceReader(opening: spec, duration: nil), nil)
            log("switching primary to \(spec)")
        case .secondary:
            if let p = pendingSecondary { DispatchQueue.global().async { p.stop() } }
            if spec == .none {
                pendingSecondary = nil
                if let r = secondary.reader { DispatchQueue.global().async { r.stop() } }
                secondary = SecondaryState()
                gpu.clearStream(.secondary)
                hotSwaps += 1
                log("secondary removed")
                return
            }
            pendingSecondary = SourceReader(opening: spec, duration: nil)
            log("switching secondary to \(spec)")
        }
    }

    /// Advances the secondary to the newest frame due at `t` (DESIGN rule 1).
    /// File sources are paced by timestamp; a source that delivers nothing for
    /// `secondaryTimeout` wall seconds counts as stalled and is no longer waited for.
    private func pumpSecondary(until t: MediaTime) {
        if let pending = pendingSecondary {
            switch pending.queue.tryPop() {
            case .frame(let f)?:
                if let old = secondary.reader { DispatchQueue.global().async { old.stop() } }
                var s = SecondaryState()
                s.reader = pending
                if let info = pending.info {
                    s.geometry = StreamGeometry(size: info.size,
                                                orientation: Self.orientation(metadata: info.rotation,
                                                                              forced: config.secondaryRotation,
                                                                              mirrored: config.mirrorSecondary))
                }
                s.base = t
                s.firstPTS = f.pts
                var g = f; g.pts = t
                s.next = g
                // The old picture stays until the new frame replaces it below.
                s.held = secondary.held
                s.heldUploaded = secondary.heldUploaded
                s.heldShownCount = 1
                secondary = s
                pendingSecondary = nil
                hotSwaps += 1
                log("secondary switched to \(pending.spec)")
            case .failed(let m)?:
                warn("secondary switch to \(pending.spec) failed: \(m); keeping the current stream")
                DispatchQueue.global().async { pending.stop() }
                pendingSecondary = nil
            case .end?:
                warn("secondary switch to \(pending.spec) failed: the stream is empty; keeping the current stream")
                DispatchQueue.global().async { pending.stop() }
                pendingSecondary = nil
            case nil:
                break
            }
        }
        guard let reader = secondary.reader else { return }
        while true {
            if secondary.next == nil, !secondary.ended {
                let wait: Double? = secondary.stalled ? 0 : config.secondaryTimeout
                let event = wait == 0 ? reader.queue.tryPop() : reader.queue.pop(timeout: wait)
                switch event {
                case .frame(var f)?:
                    if secondary.firstPTS == nil { secondary.firstPTS = f.pts }
                    f.pts = secondary.base + (f.pts - secondary.firstPTS!)
                    secondary.next = f
                    secondary.lastDelivery = Date()
                    if secondary.stalled { secondary.stalled = false; log("secondary stream resumed") }
                case .end?:
                    markSecondaryEnded(at: t)
                case nil where reader.queue.isClosed:
                    markSecondaryEnded(at: t)
                case .failed(let m)?:
                    secondary.ended = true
                    secondary.endedAt = t
                    warn("secondary stream interrupted at \(String(format: "%.3f", t.seconds)) s: \(m); holding its last frame")
                case nil:
                    if !secondary.stalled {
                        secondary.stalled = true
                        warn("secondary stream delivered nothing for \(config.secondaryTimeout) s; holding its last frame")
                    }
                }
            }
            guard let next = secondary.next, next.pts <= t else { return }
            if secondary.held != nil, secondary.heldShownCount == 0 { secondaryDropped += 1 }
            secondary.held = next
            secondary.heldUploaded = false
            secondary.heldShownCount = 0
            secondary.next = nil
        }
    }

    private func markSecondaryEnded(at t: MediaTime) {
        secondary.ended = true
        secondary.endedAt = t
        if secondary.held != nil {
            log("secondary stream ended at \(String(format: "%.3f", t.seconds)) s; holding its last frame for \(config.secondaryTimeout) s")
        }
    }

    private func secondaryVisible(at t: MediaTime) -> Bool {
        guard secondary.reader != nil, secondary.held != nil else { return false }
        if let endedAt = secondary.endedAt, (t - endedAt).seconds > config.secondaryTimeout { return false }
        if secondary.stalled, Date().timeIntervalSince(secondary.lastDelivery) > 2 * config.secondaryTimeout { return false }
        return true
    }

    /// Uploads, composites and starts the readback of one output frame.
    /// A lost GPU context is rebuilt (nothing old reused) and the frame retried.
    private func renderFrame(primary: VideoFrame, t: MediaTime, showSecondary: Bool) -> StopReason? {
        let secondaryFrame = showSecondary ? secondary.held : nil
        let plan = layout.resolve(canvas: canvas,
                                  primary: StreamGeometry(size: primary.size, orientation: primaryGeometry.orientation),
                                  secondary: secondaryFrame.map { StreamGeometry(size: $0.size, orientation: secondary.geometry?.orientation ?? .identity) })
        let entry = InFlight(primary: primary, secondary: secondaryFrame, plan: plan, pts: t)
        var attempts = 0
        while true {
            do {
                if hooks.simulateContextLossAtFrames.contains(frames), attempts == 0, gpuRebuilds < hooks.simulateContextLossAtFrames.count {
                    throw GPUError.contextLost("simulated context loss at frame \(frames)")
                }
                try gpu.upload(primary, role: .primary)
                if let s = secondaryFrame, !secondary.heldUploaded {
                    try gpu.upload(s, role: .secondary)
                    secondary.heldUploaded = true
                }
                try gpu.render(output: output, plan: plan, pts: t)
                break
            } catch let error {
                attempts += 1
                if case .contextLost = error, attempts <= 3 {
                    if let r = rebuildGPU(after: error) { return r }
                    continue
                }
                return .gpuFailed("\(error)")
            }
        }
        inFlight.append(entry)
        if secondaryFrame != nil {
            if secondary.heldShownCount > 0 { secondaryRepeated += 1 } else { secondaryShown += 1 }
            secondary.heldShownCount += 1
        } else {
            primaryOnlyFrames += 1
        }
        if let cb = hooks.frameCallback, frames % hooks.frameCallbackInterval == 0,
           let rgba = try? gpu.previewRGBA(output: output) {
            cb(rgba, frames)
        }
        if let path = previewPath, !previewWritten, t.seconds >= previewTime {
            writePreview(path, at: t)
        }
        return nil
    }

    /// The preview shows the first frame at or after one second (or the last
    /// frame of a shorter take).
    var previewTime: Double { min(1.0, (config.duration ?? 2.0) / 2) }

    private func writePreview(_ path: String, at t: MediaTime) {
        do {
            let rgba = try gpu.previewRGBA(output: output)
            try PNGWriter.write(rgba, to: path)
            previewWritten = true
            previewSeconds = t.seconds
        } catch {
            warn("preview \(path): \(error)")
            previewWritten = true
        }
    }

    /// Context lost: throw every GPU object away, build a new context, and
    /// render again every frame whose readback had not completed.
    private func rebuildGPU(after error: GPUError) -> StopReason? {
        gpuRebuilds += 1
        warn("GPU context lost (\(error)); rebuilding the GPU side (\(inFlight.count) frames in flight are rendered again)")
        gpu.shutdown()
        do {
            gpu = try GPUCompositor(selection: try GPUSelection(parsing: config.gpu), log: hooks.log)
            output = try gpu.addOutput(canvas: canvas)
            secondary.heldUploaded = false
            let pending = inFlight
            inFlight = []
            for e in pending {
                try gpu.upload(e.primary, role: .primary)
                if let s = e.secondary { try gpu.upload(s, role: .secondary) }
                try gpu.render(output: output, plan: e.plan, pts: e.pts)
                inFlight.append(e)
            }
            return nil
        } catch {
            return .gpuFailed("cannot rebuild the GPU context: \(error)")
        }
    }

    /// Moves finished readbacks to the encoder (blocking when it is behind).
    private func collectReadbacks(wait: Bool) -> StopReason? {
        while true {
            let f: VideoFrame?
            do { f = try gpu.nextNV12(wait: wait && !inFlight.isEmpty) }
            catch {
                if case .contextLost = error, gpuRebuilds < 3 + hooks.simulateContextLossAtFrames.count {
                    if let r = rebuildGPU(after: error) { return r }
                    continue
                }
                return .gpuFailed("\(error)")
            }
            guard let frame = f else { return nil }
            if !inFlight.isEmpty { inFlight.removeFirst() }
            encodeQueue.push(frame)
        }
    }

    private func checkMonitors() -> StopReason? {
        if let free = hooks.storage.freeBytes(at: config.output),
           case .stop = StoragePolicy.canContinue(freeBytes: free) {
            return .storageLow(freeBytes: free)
        }
        let thermal = Self.readThermal(config: config, hooks: hooks)
        let action = ThermalPolicy.decide(state: thermal.state, recording: true, isAbove720p: canvas.height > 720)
        switch action {
        case .stopRecording: return .thermalCritical(thermal.source)
        case .warn, .dropTo720p:
            if thermal.state != lastThermal { warn("thermal state \(thermal.state) (\(thermal.source)); resolution stays \(canvas) for this take") }
        case .none: break
        }
        lastThermal = thermal.state
        return nil
    }

    private func warn(_ message: String) {
        warnings.append(message)
        log("warning: \(message)")
    }

    func progress() -> TakeProgress {
        TakeProgress(frames: frames, mediaSeconds: (lastPTS ?? .zero).seconds + (frames > 0 ? frameRate.frameDuration.seconds : 0),
                     wallSeconds: Date().timeIntervalSince(started),
                     secondaryRepeated: secondaryRepeated, secondaryDropped: secondaryDropped)
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
        let queue = encodeQueue, writer = self.writer, state = encoderState, done = encoderDone
        let t = Thread {
            defer { done.signal() }
            while let frame = queue.pop() {
                if state.failure != nil { continue }
                do {
                    try writer.write(frame)
                    state.wrote()
                } catch {
                    if case .storageFull = error { state.fail(.storageFull("\(error)")) }
                    else { state.fail(.outputFailed("\(error)")) }
                }
            }
        }
        t.name = "diptych.encoder"
        encoderThread = t
        t.start()
    }

    // MARK: - Finalize: the one path every ending takes

    private func finalize(_ reason: StopReason) throws(SessionError) -> TakeSummary {
        var reason = reason
        primaryReader.stop()
        secondary.reader?.stop()
        pendingSecondary?.stop()
        pendingPrimary?.reader.stop()

        // Drain the GPU: every rendered frame reaches the encoder.
        if encoderState.failure == nil {
            if let r = collectReadbacks(wait: true), reason.isNormal { reason = r }
        }
        if let path = previewPath, !previewWritten, frames > 0, let t = lastPTS {
            writePreview(path, at: t)
        }
        encodeQueue.close()
        encoderDone.wait()
        if let failure = encoderState.failure, reason.isNormal || reason == .endOfPrimary { reason = failure }
        gpu.shutdown()

        var finishError: String?
        do { try writer.finish() } catch { finishError = "\(error)" }
        let written = encoderState.written
        let wall = Date().timeIntervalSince(started)
        let duration = frames > 0 ? ((lastPTS ?? .zero) + frameRate.frameDuration).seconds : 0
        let summary = TakeSummary(
            output: config.output, frames: written, durationSeconds: duration,
            frameRate: frameRate.description, canvas: canvas.description,
            encoder: writer.encoderName, encoderReason: writer.encoderReason, gpu: gpu.info.summary,
            wallSeconds: wall, fps: wall > 0 ? Double(written) / wall : 0,
            realtimeFactor: wall > 0 ? duration / wall : 0,
            secondaryFramesShown: secondaryShown, secondaryRepeated: secondaryRepeated,
            secondaryDropped: secondaryDropped, primaryOnlyFrames: primaryOnlyFrames,
            gpuRebuilds: gpuRebuilds, hotSwaps: hotSwaps,
            stopReason: reason.description, normalStop: reason.isNormal && finishError == nil,
            warnings: warnings + (finishError.map { ["finishing \(config.output): \($0)"] } ?? []),
            preview: previewPath.flatMap { previewWritten ? $0 : nil })
        self.summary = summary
        if let finishError, reason.isNormal {
            throw .runtime("\(config.output): \(finishError)")
        }
        if !reason.isNormal {
            throw .runtime("\(reason); \(written) frames (\(String(format: "%.2f", duration)) s) saved to \(config.output)")
        }
        return summary
    }

    var summary: TakeSummary?
}
