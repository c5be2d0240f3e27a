import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// A take's outputs while it runs: failures, outputs added and removed,
/// live outputs' dropped frames; and the machine's state.
extension TakeRun {
    /// A full disk ends the take (docs/ARCHITECTURE.md, "Failure paths"); so
    /// does the failure of the last open output. Any other failed output is
    /// closed and reported, and the take goes on with the others.
    func encoderFailure() -> StopReason? {
        for e in encoders {
            guard let failure = e.failure else { continue }
            if failure.isStorageFull { return .storageFull(failure) }
            if encoders.count == 1 { return .outputFailed(failure) }
            warn("output \(e.name) failed (\(failure)); the take goes on without it")
            close(e, failure: failure)
        }
        return nil
    }

    /// An output added or removed over the API. Its sink is opened, and a
    /// removed one completed, beside the loop (`OutputHandovers`): a
    /// receiver that never answers holds up no frame of the others.
    func apply(_ change: OutputChange) {
        switch change {
        case .add(let spec, let reply):
            // An added output's overlays are images the take read when it started.
            if let o = spec.overlays.first(where: { overlayIDs[$0.image] == nil }) {
                reply(.failure(.configuration(ConfigurationError(field: "overlays", value: o.image,
                                                                 reason: "an added output's overlays must be images the take already shows (read when it started)"))))
                return
            }
            // Its texts' fonts are read now (each once a take), so a bad one is refused before the output opens.
            var fonts = texts.fonts
            do {
                try TakeTexts.loadFonts(spec.texts.enumerated().map { ("texts[\($0.offset)]", $0.element) }, policy: hooks.sourcePolicy, into: &fonts)
            } catch {
                reply(.failure(.configuration(error)))
                return
            }
            // Its segments and its own encoding: checked as an alsoOut's are, its layout against its canvas.
            do throws(SessionError) {
                if let e = spec.segmentsError(fields: ("output.segmentTime", "output.hlsListSize"), named: "output") { throw .configuration(e) }
                if spec.splits, let id = FileIdentity(spec.out), let existing = TakeSetup.existingSegment(of: id.path) {
                    throw .configuration(ConfigurationError(field: "output.out", value: spec.out,
                                                            reason: "\(existing) exists already; a split recording never writes over a file"))
                }
                try OutputRendition.check(spec, config: config, field: "output")
                if let size = spec.encoding.size {
                    try TakeSetup.checkCanvas(size, on: gpu.gpu, field: "output.size", value: size.description)
                }
                let layout = spec.layout ?? (layouts[0] ?? nil) ?? config.layout
                if let e = config.outputLayoutError(OutputSpec(out: spec.out, layout: layout, encoding: spec.encoding),
                                                    canvas: spec.encoding.size ?? canvas, field: "output") {
                    throw .configuration(e)
                }
            } catch {
                reply(.failure(error))
                return
            }
            texts.add(fonts: fonts)
            // The output's key is given when it is attached, so one that fails to open takes none.
            // (Opening sees a key of an added output; only the main output's, 0, means anything to a sink.)
            let index = nextOutputKey
            let settings = zeroCopy.settings(OutputRendition(spec, take: encoderSettings, config: config).video)
            let config = self.config, io = session.io, log = hooks.log, change = hooks.streamChange
            let track = TakeSetup.audioTrack(audio, for: spec)
            handovers.open(spec: spec, reply: reply) { () throws(MediaError) in
                try TakeSetup.openSink(index, spec, settings, track, config: config, io: io, log: log, change: change)
            }
        case .remove(let key, let reply):
            guard key != 0, let e = encoders.first(where: { $0.key == key }) else { reply(nil); return }
            _ = deliverReadbacks(wait: true)
            let r = renditions[e.key]
            detach(e)
            handovers.close(e, summarize: { Self.summary(of: e, rendition: r, failure: $0) }, reply: reply)
            log("output \(key) removed: \(e.name)")
        }
    }

    /// Takes an output whose sink has opened into the loop: its render
    /// target, encoder stage and encoder path.
    func attach(_ opened: OutputHandovers.Opened) {
        let spec = opened.spec
        let sink: any TakeOutput
        switch opened.result {
        case .failure(let error): opened.reply(.failure(.output(spec.out, error))); return
        case .success(let s): sink = s
        }
        let key = nextOutputKey
        var rendition = OutputRendition(spec, take: encoderSettings, config: config)
        rendition.video = zeroCopy.settings(rendition.video)
        do { try gpu.addOutput(key, size: rendition.canvas) } catch {
            handovers.discard(sink)
            opened.reply(.failure(.gpu(error)))
            return
        }
        nextOutputKey += 1
        layouts[key] = spec.layout
        overlays[key] = spec.overlays
        do { try texts.set(spec.texts, output: key, gpu: gpu) } catch { warn("output \(spec.out): texts: \(error)") }
        let live = ContainerFormat.isLive(spec.out)
        let stage = EncoderStage(key: key, name: spec.out, sink: sink, live: live,
                                 onFallback: TakeRun.reportFallback(output: key, out: spec.out, warn: warnings.add, change: hooks.streamChange))
        encoders.append(stage)
        renditions[key] = rendition
        _ = zeroCopy.attach(key, stage: stage, settings: rendition.video, log: hooks.log, warn: warnings.add)
        do { try zeroCopy.attachGPUEncoder(key, settings: rendition.video) } catch {
            encoders.removeAll { $0 === stage }
            renditions[key] = nil
            gpu.removeOutput(key)
            handovers.discard(sink)
            opened.reply(.failure(.gpu(error)))
            return
        }
        if live {
            let liveSource = TakeRun.isLive(config.primary)
            timing.liveOutputAdded(pace: config.realtime != .off && !liveSource && !TakeRun.isLive(config.secondary),
                                   cadence: liveSource)
        }
        log("output \(key) added: \(spec.out)" + (spec.encoding.isEmpty ? "" : " (\(rendition.description))"))
        opened.reply(.success(key))
    }

    /// Closes a failed output beside the loop: its queued frames are encoded
    /// and its file or stream completed.
    func close(_ e: EncoderStage, failure: MediaError?) {
        let r = renditions[e.key]
        detach(e)
        handovers.close(e, summarize: { Self.summary(of: e, rendition: r, failure: failure ?? $0) })
    }

    /// Takes an output out of the loop: no more frames are rendered for it.
    private func detach(_ e: EncoderStage) {
        encoders.removeAll { $0 === e }
        gpu.removeOutput(e.key)
        layouts[e.key] = nil; animators[e.key] = nil; overlays[e.key] = nil; renditions[e.key] = nil
        texts.remove(output: e.key, gpu: gpu)
    }

    /// What `e` took: frames sent (a reconnecting stream's lost frames
    /// apart; for a file cut short by a full disk, the frames it holds),
    /// dropped, outages; a split output's files; its canvas, rate and bit rate (`rendition`).
    static func summary(of e: EncoderStage, rendition: OutputRendition?, failure: MediaError?) -> OutputSummary {
        let reconnecting = e.sink as? ReconnectingOutput
        let lost = reconnecting?.framesLost
        let frames = (e.sink as? MediaWriter)?.framesInFile ?? e.written - (lost ?? 0)
        var s = OutputSummary(output: e.name, frames: frames, failure: failure.map { "\($0)" }, dropped: e.dropped,
                              outages: reconnecting?.outages ?? [], lost: lost)
        let segments = e.sink.segments
        if !segments.isEmpty { s.segments = segments }
        s.encoderFallback = e.encoderFallback
        if let r = rendition {
            s.canvas = r.canvas.description
            s.frameRate = r.video.frameRate.description
            s.bitrate = r.video.qp == nil ? r.video.bitrate : nil
        }
        return s
    }

    /// An output's encoder fell back mid-take (`EncoderStage`'s `onFallback`,
    /// on its encoder thread): a warning, and the change told.
    static func reportFallback(output: Int, out: String, warn: @escaping @Sendable (String) -> Void,
                               change: (@Sendable (StreamChange) -> Void)?) -> @Sendable (EncoderFallback) -> Void {
        { f in
            warn("output \(out): \(f)")
            change?(.encoderFellBack(output: output, out: out, f))
        }
    }

    /// Once a second: how many frames each live output dropped since the last report.
    func reportDrops() {
        for e in encoders where e.live {
            let d = e.dropped, before = droppedReported[e.key] ?? 0
            if d > before {
                log("output \(e.name): \(d - before) frames dropped in the last second (the network is not keeping up)")
                droppedReported[e.key] = d
            }
        }
    }

    // MARK: The machine

    /// Storage (every file output: the main one's low disk ends the take,
    /// another's closes that output) and heat.
    func checkMonitors() -> StopReason? {
        for e in encoders where !e.live {
            let path = e.key == 0 ? config.output ?? "" : e.name
            guard let free = hooks.storage.freeBytes(at: path),
                  case .stop = StoragePolicy.standard.decide(freeBytes: free, recording: true) else { continue }
            if e === main { return .storageLow(freeBytes: free) }
            warn("output \(e.name): \(free / (1 << 20)) MiB left on its disk; it is closed, the take goes on")
            close(e, failure: .storageFull(path: e.name))
        }
        let thermal = Self.readThermal(config: config, hooks: hooks)
        defer { lastThermal = thermal.state }
        let action = encoders.contains(where: \.live)
            ? ThermalPolicy.decideLive(state: thermal.state, bothStreams: inputs.hasSecondary)
            : ThermalPolicy.decide(state: thermal.state, recording: true, canvas: canvas)
        switch action {
        case .stopRecording, .refuseToStart:
            return .thermalCritical(thermal.source)
        case .dropToOneStream:
            warn("thermal state \(thermal.state) (\(thermal.source)): the live stream goes on with the primary stream alone")
            inputs.beginSwitch(.secondary, to: .none, at: lastPTS ?? .zero)
        case .warn, .dropTo720p:
            if thermal.state != lastThermal {
                warn("thermal state \(thermal.state) (\(thermal.source)); the resolution stays \(canvas) for this take")
            }
        case .none:
            break
        }
        return nil
    }

    static func readThermal(config: TakeConfiguration, hooks: SessionHooks) -> (state: ThermalState, source: String) {
        if let forced = config.thermalState { return (forced, "forced") }
        return (hooks.thermal ?? SysfsThermalMonitor()).read()
    }

    /// Whether a source delivers in real time (falling behind loses frames):
    /// standard input, a FIFO, a network stream, a camera.
    static func isLive(_ spec: SourceSpec) -> Bool {
        switch spec {
        case .stdin: return true
        case .url(let u):
            if u.hasPrefix("/dev/") || SourceRecovery.isCamera(spec) { return true }
            if let file = FileIdentity(u) {
                var st = stat()
                return stat(file.path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO
            }
            guard let scheme = u.split(separator: ":").first?.lowercased(), u.contains("://") else { return false }
            return ["rtsp", "rtmp", "rtmps", "srt", "udp", "tcp", "rtp", "http", "https"].contains(scheme)
        case .testPattern, .none: return false
        }
    }
}
