import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// docs/ARCHITECTURE.md, "Cost budget and rollback": whether a canvas can be sustained is only known by running
/// it. Before a take from a live source, `CostTrial` renders and encodes a
/// short burst of frames at the requested canvas with the real GPU and the
/// real encoder (into a scratch output that is thrown away), and steps down
/// (requested → 720p → 480p) while the measured per-frame cost is over the
/// budget. The take never dies for it: when even the smallest is over
/// budget, the smallest is used and the take goes on with a warning.
struct CostTrial {
    /// Frames measured per candidate (after two warm-up frames).
    var frames = 12
    /// Measures one candidate: per-frame seconds (render and encode run on
    /// separate threads in a take, so a frame costs the slower of the two).
    var measure: (PixelSize) throws -> [Double]

    struct Outcome {
        var canvas: PixelSize
        var messages: [String]
    }

    /// Candidates for `requested`, largest first: itself, then the same
    /// aspect at 720, 480 and 360 lines (only those smaller than it).
    static func ladder(from requested: PixelSize) -> [PixelSize] {
        var out = [requested]
        for lines in [720, 480, 360] where requested.shorterSide > lines {
            let s = Double(lines) / Double(requested.shorterSide)
            let c = PixelSize(width: PixelRect.evenEdge(Double(requested.width) * s),
                              height: PixelRect.evenEdge(Double(requested.height) * s))
            if !out.contains(c) { out.append(c) }
        }
        return out
    }

    func choose(requested: PixelSize, frameRate: FrameRate) -> Outcome {
        let ladder = Self.ladder(from: requested)
        var messages: [String] = []
        var previous: PixelSize? = nil
        for candidate in ladder {
            var budget = CostBudget(frameRate: frameRate, window: frames)
            let samples: [Double]
            do { samples = try measure(candidate) } catch {
                messages.append("cost trial at \(candidate) failed (\(error))")
                previous = candidate
                continue
            }
            for s in samples { budget.record(s) }
            switch budget.verdict {
            case .accept(let cost, let limit):
                if previous != nil {
                    messages.append(String(format: "canvas %@ costs %.1f ms a frame, within the %.1f ms budget", candidate.description, cost * 1000, limit * 1000))
                }
                return Outcome(canvas: candidate, messages: messages)
            case .rollBack(let cost, let limit):
                let next = ladder.firstIndex(of: candidate).map { $0 + 1 < ladder.count ? ladder[$0 + 1].description : "nothing smaller" } ?? "?"
                messages.append(String(format: "canvas %@ costs %.1f ms a frame, over the %.1f ms budget for %@ fps: rolling back to %@",
                                       candidate.description, cost * 1000, limit * 1000, frameRate.description, next))
            case .measuring:
                return Outcome(canvas: candidate, messages: messages)
            }
            previous = candidate
        }
        let last = ladder.last ?? requested
        messages.append("no canvas fits the budget; recording at \(last) and frames may be late")
        return Outcome(canvas: last, messages: messages)
    }

    /// The settings the trial encodes with: the take's, except that where
    /// `auto` will take NVENC (`nvenc`, its facts on the compositor's CUDA
    /// device, say it opens: auto takes it before all but VA-API zero copy,
    /// which is not known before the take's outputs exist), NVENC on that
    /// device, so the trial measures the encoder the take will run rather
    /// than libx264. (Frames reach it from host memory here, uploaded; the
    /// take hands it the composite device to device.) Likewise the GPU
    /// encoder where `auto` will take it (`gpu`, the compositor's facts;
    /// the trial then measures the composite alone). `vaapi`: this machine's
    /// VA-API devices (nil: none examined); without zero copy NVENC comes
    /// before them, and VA-API from uploaded frames before the GPU encoder.
    static func encoderSettings(_ settings: VideoEncoderSettings, choice: EncoderChoice, nvenc: NVENCFacts?,
                                gpu: GPUEncoderFacts? = nil, vaapi: VAAPIReport? = nil) -> VideoEncoderSettings {
        let report = vaapi ?? VAAPIReport(directory: settings.driDirectory, devices: [], problem: nil)
        guard choice == .auto, nvenc != nil || gpu != nil,
              let plan = try? EncoderProbe.plan(codec: settings.codec, choice: .auto, report: report, target: nil, gpu: gpu, nvenc: nvenc,
                                                baseline: SoftwareBaseline(settings)) else { return settings }
        var s = settings
        switch plan.path {
        case .nvenc:
            s.encoder = .nvenc
            s.cudaDevice = plan.cudaDevice
        case .gpu: s.encoder = .gpu
        case .vaapiZeroCopy, .vaapiUpload, .software: break
        }
        return s
    }

    /// The real measurement: `frames` composites of synthetic frames of the
    /// sources' sizes through `gpu` into a scratch output, each read back
    /// and encoded with the take's encoder settings into /dev/null.
    static func real(gpu: GPUCompositor, primary: PixelSize, secondary: PixelSize?, layout: Layout,
                     orientations: (Orientation, Orientation), settings: VideoEncoderSettings, frames: Int) -> (PixelSize) throws -> [Double] {
        return { canvas in
            let output = try gpu.addOutput(canvas: canvas)
            defer { gpu.removeOutput(output) }
            var s = settings
            s.size = canvas
            // The GPU encoder's passes run in the GPU stage (not measured here): the composite alone.
            let writer = s.encoder == .gpu ? nil : try MediaWriter(url: "/dev/null", container: .mpegts, video: s, audio: nil)
            defer { try? writer?.finish() }
            let p = VideoFrame.allocate(width: primary.width, height: primary.height, format: .nv12)
            let q = secondary.map { VideoFrame.allocate(width: $0.width, height: $0.height, format: .nv12) }
            let plan = layout.resolve(canvas: canvas,
                                      primary: StreamGeometry(sensorSize: primary, orientation: orientations.0),
                                      secondary: secondary.map { StreamGeometry(sensorSize: $0, orientation: orientations.1) })
            var samples: [Double] = []
            for i in 0..<(frames + 2) {
                var pf = p
                pf.pts = settings.frameRate.time(ofFrame: Int64(i))
                let t0 = Date()
                try gpu.upload(pf, role: .primary)
                if let q { try gpu.upload(q, role: .secondary) }
                try gpu.render(output: output, plan: plan, pts: pf.pts)
                let out = try gpu.flushReadbacks()
                let t1 = Date()
                for r in out where r.output == output { try writer?.write(r.frame) }
                let t2 = Date()
                if i >= 2 { samples.append(max(t1.timeIntervalSince(t0), t2.timeIntervalSince(t1))) }
            }
            return samples
        }
    }
}
