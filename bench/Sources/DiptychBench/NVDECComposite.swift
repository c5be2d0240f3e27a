import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation

/// Composites per second with one input kind, `streams` compositors dealt to `contexts` GL contexts.
public struct NVDECCompositeRate: Sendable, Codable {
    /// `nvdec` (CUDA frames through CUDA–GL interop) or `host` (the same pictures from host memory).
    public var inputs: String
    public var layout: String
    public var canvas: String
    public var primary: String
    public var secondary: String
    public var streams: Int
    /// GL contexts (each with its own render thread) the compositors were dealt to in turn.
    public var contexts: Int?
    public var framesPerStream: Int
    public var seconds: Double
    public var compositesPerSecond: Double
    /// CUDA frames copied per map/unmap pair (several frames of a batch share one).
    public var cudaFramesPerMap: Double?
    /// Render-thread CPU time of those copies (register, map, copies, unmap) per composite, milliseconds.
    public var cudaCPUMsPerComposite: Double?
    public var path: String
    public var gpuUploadMs: Double?
    public var gpuCompositeMs: Double?
    public var gpuNV12Ms: Double?
    /// CPU time of the whole process per composite, milliseconds.
    public var cpuMsPerComposite: Double
    /// The render threads (one per context, added up): the share of the run
    /// they were running work (above 100 % with several), their CPU time per
    /// composite (milliseconds), the items (calls and frames) they ran per
    /// composite, and the render-thread time of each pass's calls per
    /// composite (milliseconds).
    public var renderThreadBusy: Double?
    public var renderThreadCPUMsPerComposite: Double?
    public var renderThreadItemsPerComposite: Double?
    public var renderThreadMsByPass: [String: Double]?
    /// Items run per wake-up of the render thread (frames batched together, or single calls).
    public var renderThreadItemsPerWakeup: Double?
    /// The render thread's busy time per composite by `RenderPhase`, milliseconds.
    public var renderThreadMsByPhase: [String: Double]?
    /// With `--encoder gpu`: each composite encoded by the GPU H.264 encoder
    /// in place of the NV12 readback (QP 26, an IDR a second), and its mean size.
    public var encoder: String?
    public var bytesPerPicture: Double?
}

/// The composite rate of `NVDECStage`: a few frames of each input decoded
/// once by NVDEC and kept in CUDA memory, then uploaded (primary every frame,
/// secondary every second frame, as in a 60 + 30 fps take), drawn (PiP) and
/// read back as NV12 by every stream, three readbacks in flight, as
/// `diptych-gpu-bench` does with host frames; then the same with those
/// pictures copied to host memory. Compositor `i` runs in context `i % contexts`.
/// With `--encoder gpu` each composite is encoded on the GPU where it was
/// drawn (the path of a take with `--encoder gpu`) instead of read back.
struct NVDECComposite {
    let options: BenchOptions
    let gpu: GPUSelection
    static let kept = (primary: 8, secondary: 4)
    /// For finding what bounds the rate (`DIPTYCH_BENCH_NVDEC_VARIANT`):
    /// `upload-once` uploads the pictures in the warm-up only (no CUDA copies
    /// or interop in the timed frames).
    static let variant = ProcessInfo.processInfo.environment["DIPTYCH_BENCH_NVDEC_VARIANT"] ?? ""

    func measure(inputs: EndToEndStage.Inputs) throws -> [NVDECCompositeRate] {
        let roots = try (0..<min(options.contexts, options.streams)).map { _ in
            try GPUCompositor(selection: gpu, readbackDepth: 4, directCopy: .auto, tuning: GPUTuning(frameBatch: options.frameBatch))
        }
        defer { for r in roots { r.shutdown() } }
        let root = roots[0]
        let device = root.cudaDevice().mapError { DecoderUnavailable($0.reason) }
        func decode(_ path: String, _ count: Int) throws -> [InputFrame] {
            let src = try FileSource(url: path, decoding: .with(.nvdec, cudaDevice: device))
            defer { src.close() }
            var out: [InputFrame] = []
            while out.count < count, let f = try src.nextInput() { out.append(f) }
            guard case .cuda? = out.first?.payload else { throw BenchRunError("\(path): NVDEC delivered no CUDA frames") }
            return out
        }
        let primaries = try decode(inputs.primary, Self.kept.primary), secondaries = try decode(inputs.secondary, Self.kept.secondary)
        func host(_ frames: [InputFrame]) throws -> [InputFrame] {
            try frames.map { f in
                guard case .cuda(_, let holder) = f.payload, let v = holder.download() else { throw BenchRunError("cannot copy an NVDEC frame to host memory") }
                return InputFrame(v)
            }
        }
        let plan = CompositeStage.plan(.pip, canvas: inputs.primarySize, primary: inputs.primarySize, secondary: inputs.secondarySize)
        var rates: [NVDECCompositeRate] = []
        for (kind, p, s) in [("nvdec", primaries, secondaries), ("host", try host(primaries), try host(secondaries))] {
            rates.append(try rate(kind, roots: roots, primaries: p, secondaries: s, plan: plan, inputs: inputs))
        }
        return rates
    }

    private final class Streams: @unchecked Sendable {
        let lock = NSLock()
        var stats: [GPUStats] = []
        var error: String?
        var bytes = 0, pictures = 0
        func done(_ s: GPUStats?, _ e: String?, bytes b: Int = 0, pictures p: Int = 0) {
            lock.lock(); if let s { stats.append(s) }; if let e { error = error ?? e }; bytes += b; pictures += p; lock.unlock()
        }
    }

    /// The GPU encoder's settings here: QP 26, an IDR every second.
    static let gpuEncoder = GPUH264Settings(qp: 26, keyframeInterval: 60)

    private func rate(_ kind: String, roots: [GPUCompositor], primaries: [InputFrame], secondaries: [InputFrame],
                      plan: CompositionPlan, inputs: EndToEndStage.Inputs) throws -> NVDECCompositeRate {
        let n = options.streams, frames = options.frames, warmup = options.warmup
        let streams = Streams()
        let ready = DispatchSemaphore(value: 0), start = DispatchSemaphore(value: 0), finished = DispatchGroup()
        for i in 0..<n {
            finished.enter()
            Thread {
                defer { finished.leave() }
                var signalled = false
                defer { if !signalled { ready.signal() } }
                do {
                    let own = i >= roots.count
                    let c = own ? try GPUCompositor(sharingContextOf: roots[i % roots.count], readbackDepth: 4, directCopy: .auto) : roots[i]
                    defer { if own { c.shutdown() } }
                    let out = try c.addOutput(canvas: plan.canvas)
                    let encodes = options.encoder == .gpu
                    if encodes { _ = try c.attachEncoder(output: out, settings: Self.gpuEncoder, rate: FrameRate(60)) }
                    var bytes = 0, pictures = 0
                    func take(wait: Bool) throws {
                        while let p = try c.nextEncoded(wait: wait) { bytes += p.picture.data.count; pictures += 1 }
                    }
                    func run(_ count: Int, from first: Int) throws {
                        let uploads = first == 0 || Self.variant != "upload-once"
                        for f in first..<(first + count) {
                            if uploads {
                                try Self.upload(primaries[(f + i) % primaries.count], .primary, to: c)
                                if f % 2 == 0 || f == first { try Self.upload(secondaries[(f / 2 + i) % secondaries.count], .secondary, to: c) }
                            }
                            try c.render(output: out, plan: plan, pts: FrameRate(60).time(ofFrame: Int64(f)), readback: !encodes)
                            if encodes { try take(wait: false) }
                            while c.outstandingReadbacks > 3, try c.nextNV12(wait: true) != nil {}
                        }
                        if encodes { try take(wait: true) } else { _ = try c.flush() }
                    }
                    try run(warmup, from: 0)
                    c.resetStats()
                    bytes = 0; pictures = 0
                    ready.signal(); signalled = true
                    start.wait()
                    try run(frames, from: warmup)
                    guard !encodes || pictures == frames else { throw BenchRunError("the GPU encoder gave \(pictures) pictures for \(frames) frames") }
                    streams.done(c.stats, nil, bytes: bytes, pictures: pictures)
                    c.removeOutput(out)
                } catch {
                    streams.done(nil, "\(error)")
                }
            }.start()
        }
        for _ in 0..<n { ready.wait() }
        func totalLoad() -> RenderThreadLoad { roots.map(\.renderThreadLoad).reduce(RenderThreadLoad(), +) }
        let load0 = totalLoad(), root = roots[0]
        let cpu0 = CPUClock.seconds(), t0 = now()
        for _ in 0..<n { start.signal() }
        finished.wait()
        let seconds = now() - t0, cpu = CPUClock.seconds() - cpu0
        let load = totalLoad() - load0
        if let e = streams.error { throw BenchRunError("\(kind) inputs: \(e)") }
        let all = streams.stats, total = n * frames
        func mean(_ f: (GPUStats) -> Double?) -> Double? {
            let v = all.compactMap(f)
            return v.isEmpty ? nil : v.reduce(0, +) / Double(v.count)
        }
        let cudaFrames = all.map(\.cudaFrames).reduce(0, +), maps = all.map(\.cudaMaps).reduce(0, +)
        let compute = all.map(\.framesCompute).reduce(0, +), fragment = all.map(\.framesFragment).reduce(0, +)
        let direct = all.map(\.framesDirect).reduce(0, +)
        return NVDECCompositeRate(inputs: Self.variant.isEmpty ? kind : "\(kind), \(Self.variant)", layout: "pip", canvas: "\(plan.canvas)", primary: "\(inputs.primarySize)",
                                  secondary: "\(inputs.secondarySize)", streams: n, contexts: roots.count, framesPerStream: frames, seconds: seconds,
                                  compositesPerSecond: Double(total) / seconds,
                                  cudaFramesPerMap: maps > 0 ? Double(cudaFrames) / Double(maps) : nil,
                                  cudaCPUMsPerComposite: maps > 0 ? all.map(\.cudaCPUMs).reduce(0, +) / Double(total) : nil,
                                  path: "compute \(compute), fragment \(fragment), direct copy \(direct) of \(total) (\(root.plan))",
                                  gpuUploadMs: mean { s in s.upload.gpuMeanMs.map { $0 * Double(s.upload.count) / Double(max(s.framesRendered, 1)) } },
                                  gpuCompositeMs: mean { $0.composite.gpuMeanMs }, gpuNV12Ms: mean { $0.nv12.gpuMeanMs },
                                  cpuMsPerComposite: cpu * 1000 / Double(total),
                                  renderThreadBusy: load.busySeconds / seconds,
                                  renderThreadCPUMsPerComposite: load.cpuSeconds * 1000 / Double(total),
                                  renderThreadItemsPerComposite: Double(load.items) / Double(total),
                                  renderThreadMsByPass: ["upload": all.map(\.upload.cpuTotalMs).reduce(0, +) / Double(total),
                                                         "composite": all.map(\.composite.cpuTotalMs).reduce(0, +) / Double(total),
                                                         "nv12": all.map(\.nv12.cpuTotalMs).reduce(0, +) / Double(total),
                                                         "cuda": all.map(\.cudaCPUMs).reduce(0, +) / Double(total)],
                                  renderThreadItemsPerWakeup: load.wakeups > 0 ? Double(load.items) / Double(load.wakeups) : nil,
                                  renderThreadMsByPhase: load.phaseSeconds.mapValues { $0 * 1000 / Double(total) },
                                  encoder: options.encoder == .gpu ? "gpu (QP \(Self.gpuEncoder.qp), IDR every \(Self.gpuEncoder.keyframeInterval) frames)" : nil,
                                  bytesPerPicture: streams.pictures > 0 ? Double(streams.bytes) / Double(streams.pictures) : nil)
    }

    private static func upload(_ f: InputFrame, _ role: StreamRole, to c: GPUCompositor) throws {
        switch f.payload {
        case .cpu(let v): try c.upload(v, role: role)
        case .cuda(let frame, let holder): try c.upload(frame, holder: holder, role: role)
        case .dmaBuf(let d, _): try c.upload(d, role: role)
        }
    }

}
