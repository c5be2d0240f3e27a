import Foundation
import DiptychCore
import DiptychMedia

/// The one path every ending takes (docs/ARCHITECTURE.md, "Failure paths").
extension TakeRun {
    func finalize(_ stopReason: StopReason) throws(SessionError) -> TakeSummary {
        var reason = stopReason
        session.io.ending(stopReason)
        // The audio up to the last frame's end, before the sources close and the outputs finish.
        audio?.finish(at: (lastPTS ?? .zero) + frameRate.frameDuration, feeds: config.audio.roles.map { inputs.audioFeed($0) })
        inputs.stop()

        // Drain the GPU: every rendered frame reaches its encoder.
        if encoderFailure() == nil, let r = StageClock.measure(.render, { deliverReadbacks(wait: true) }), reason.isNormal { reason = r }
        if let preview, frames > 0, let t = lastPTS { preview.writeIfPending(gpu: gpu, at: t) }
        if let w = preview?.warning { warnings.add(w) }
        let gpuSummary = gpu.gpu.info.description
        // Outputs closed while the take ran (and any still opening or closing) first.
        var outputResults = handovers.settle(ended: .ended(.nothingRecorded(.requested("take over"), output: config.output ?? "")))
        var finishError: MediaError?
        for e in encoders {
            let error = StageClock.measure(.encode) { e.finish() }
            if e === main {
                if let f = e.failure, reason.isNormal { reason = f.isStorageFull ? .storageFull(f) : .outputFailed(f) }
                finishError = error
            } else {
                outputResults.append(Self.summary(of: e, rendition: renditions[e.key], failure: e.failure ?? error))
            }
        }
        gpu.shutdown()

        let outputPath = config.output ?? ""
        let mainResult = Self.summary(of: main, rendition: nil, failure: main.failure)
        // Frames sent (or, in a file cut short by a full disk, held); the take's
        // length counts those a reconnecting stream lost too.
        let written = mainResult.frames
        let wall = Date().timeIntervalSince(started)
        let duration = Double(written + (mainResult.lost ?? 0)) * frameRate.frameDuration.seconds
        let c = inputs.clock.counters
        let sink = main.sink
        // The main output may have failed and been closed while others went on;
        // the others' failures are reported in `outputs`.
        let lost = main.failure != nil && !encoders.contains { $0 === main } ? [mainResult] : []
        summary = TakeSummary(
            output: outputPath, frames: written, durationSeconds: duration,
            frameRate: frameRate.description, canvas: canvas.description,
            encoder: mainResult.encoderFallback?.from ?? sink.encoderName, encoderReason: mainPlan?.reason ?? sink.encoderReason,
            encoderPath: mainPlan?.path.rawValue ?? (sink.encoderName == "none" ? "none" : EncoderPath.software.rawValue),
            audio: sink.audioDescription,
            gpu: gpuSummary, wallSeconds: wall, fps: wall > 0 ? Double(written) / wall : 0,
            realtimeFactor: wall > 0 ? duration / wall : 0,
            secondaryFramesShown: c.secondaryFramesShown, secondaryRepeated: c.secondaryRepeatShows,
            secondaryDropped: c.secondaryFramesDropped, primaryOnlyFrames: c.primaryOnlyFrames,
            gpuRebuilds: gpu.rebuilds, hotSwaps: inputs.hotSwaps,
            stopReason: reason.description,
            normalStop: reason.isNormal && finishError == nil && lost.isEmpty && !outputResults.contains { $0.failure != nil },
            warnings: warnings.all + (finishError.map { ["finishing \(outputPath): \($0)"] } ?? []),
            preview: preview?.seconds != nil ? config.preview : nil, previewSeconds: preview?.seconds,
            outputs: outputResults, segments: sink.segments.isEmpty ? nil : sink.segments, heldFrames: timing.held,
            sourceSwitches: inputs.sourceSwitches, droppedFrames: mainResult.dropped, outages: mainResult.outages,
            lostFrames: mainResult.lost,
            cpuStages: StageClock.times() - stageBaseline,
            decoders: decoders.entries, gpuPlan: gpu.plan)
        summary?.encoderFallback = mainResult.encoderFallback
        if !reason.isNormal {
            throw .ended(.abnormal(reason, frames: written, seconds: duration, output: outputPath, live: main.live))
        }
        if written == 0, session.io.emptyTakeFails, lost.isEmpty { throw .ended(.nothingRecorded(reason, output: outputPath)) }
        if let finishError { throw .ended(.finishFailed(output: outputPath, finishError)) }
        if let first = lost.first { throw .ended(.outputLost(first)) }
        return summary!
    }
}
