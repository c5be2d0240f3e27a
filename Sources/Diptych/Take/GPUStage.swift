import DiptychCore
import DiptychGPU

/// A take's output as the GPU stage sees it: its key in the take, its
/// canvas (its own, or the take's) and its render target in the current compositor.
struct RenderOutput {
    let key: Int
    let canvas: PixelSize
    var target: OutputID
}

/// What the GPU stage hands an output's encoder: an NV12 frame read back,
/// or a picture the GPU encoder already wrote (docs/ARCHITECTURE.md, "The GPU encoder").
enum StageDelivery {
    case frame(VideoFrame)
    case encoded(GPUEncodedPicture)
    /// A CUDA frame the output's encoder lent, filled device to device (NVENC).
    case cuda(CUDAFrameTarget, pts: MediaTime)
}

/// Something that reads an output's render target right after each frame is
/// drawn into it (preview, RGBA and dma-buf callbacks): the same target the
/// encoder's frames come from (docs/ARCHITECTURE.md, "One render target").
protocol RenderTap: AnyObject {
    /// Called on the render loop's thread after output `key`'s frame `index` at `pts` is drawn.
    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int)
}

/// The GPU side of a take: the compositor (its own, or one handed in to
/// share a context), one render target per output, uploads of the paired
/// frames, and the readbacks that go to the encoders. A lost context is
/// rebuilt from nothing and every frame whose readback had not come back is
/// rendered again (docs/ARCHITECTURE.md, "Failure paths"). Used by one thread.
final class GPUStage {
    typealias Factory = () throws(GPUError) -> GPUCompositor

    private let makeCompositor: Factory
    /// The take's canvas, an output's unless it has its own (set before the first output is added).
    var canvas = PixelSize.hd1080
    private let warn: (String) -> Void
    private(set) var gpu: GPUCompositor
    private(set) var outputs: [RenderOutput] = []
    private(set) var rebuilds = 0
    /// The clock frame whose picture is in the GPU's secondary texture.
    private var uploadedSecondary: SecondaryFrameID?
    private var inFlight: [InFlight] = []
    /// Outputs whose encoder reads their frames in place: each one's ring of
    /// encoder targets (docs/ARCHITECTURE.md, "Encoder paths"). Their frames
    /// are rendered without readback and delivered by the ring.
    private(set) var rings: [Int: EncoderTargetRing] = [:]
    /// Per ring: the frames handed over that `inFlight` has been told of.
    private var accounted: [Int: Int] = [:]
    /// Outputs encoded on the GPU: their encoder's settings and rate (attached again after a rebuild).
    private(set) var gpuEncoded: [Int: (settings: GPUH264Settings, rate: FrameRate)] = [:]
    /// The overlay pictures (id = index), uploaded once and again on a rebuilt context.
    var overlayImages: [VideoFrame] = []
    /// The texts' pictures by overlay id (premultiplied), uploaded again on a rebuilt context.
    private var textPictures: [Int: VideoFrame] = [:]
    /// Test hook: frame indices at which the context is lost as by a reset.
    var simulateLossAt: Set<Int> = []
    /// The plan frames follow: the compositor's, with CUDA frames through
    /// host memory once taking them on the GPU failed (`cudaFailure`,
    /// `GPUPlanner.afterCUDAFailure`), rebuilt compositors included.
    private(set) var plan: GPUPlan
    private var cudaFailure: GPUError?
    /// CUDA frames went through host memory, and the log said so.
    private var saidViaHost = false

    /// A frame rendered but not yet read back in full: kept so it can be
    /// rendered again on a fresh context.
    private struct InFlight {
        var frame: PairedFrame
        var plans: [Int: OutputPlan]
        var pending: Set<Int>
    }

    /// One output's draws for a frame, and the timestamp its frame carries.
    struct OutputPlan {
        var plan: CompositionPlan
        var pts: MediaTime
    }

    /// Told each compositor's last figures just before it is shut down (`SessionHooks.compositorRetiring`).
    private let retiring: (@Sendable (GPUStats) -> Void)?

    init(makeCompositor: @escaping Factory, warn: @escaping (String) -> Void,
         retiring: (@Sendable (GPUStats) -> Void)? = nil) throws(GPUError) {
        self.makeCompositor = makeCompositor
        self.warn = warn
        self.retiring = retiring
        gpu = try makeCompositor()
        plan = gpu.plan
    }

    /// Adds a render target for output `key`, of `size` (nil: the take's canvas).
    func addOutput(_ key: Int, size: PixelSize? = nil) throws(GPUError) {
        let c = size ?? canvas
        outputs.append(RenderOutput(key: key, canvas: c, target: try gpu.addOutput(canvas: c)))
    }

    /// Output `key`'s canvas (nil: no such output).
    func canvas(of key: Int) -> PixelSize? { outputs.first { $0.key == key }?.canvas }

    /// Removes output `key`'s render target (readbacks already in flight
    /// still arrive; a ring's buffers are freed as its encoder lets them go).
    func removeOutput(_ key: Int) {
        syncDeliveries()
        if cudaFrames.removeValue(forKey: key) != nil, let t = target(of: key) { gpu.setCUDAFrameProvider(output: t, nil) }
        rings.removeValue(forKey: key)?.shutdown()
        accounted[key] = nil
        gpuEncoded[key] = nil
        guard let i = outputs.firstIndex(where: { $0.key == key }) else { return }
        gpu.removeOutput(outputs[i].target)
        outputs.remove(at: i)
    }

    /// Outputs whose frames go device to device into CUDA frames their
    /// encoder lends (NVENC), kept to be set again on a rebuilt compositor.
    private var cudaFrames: [Int: CUDAFrameProvider] = [:]

    /// From now on output `key`'s frames go device to device into the CUDA
    /// frames `provider` lends, where the compositor reads back into CUDA
    /// memory; returns whether it does (else they come in host memory).
    func attachCUDAFrames(_ key: Int, provider: @escaping CUDAFrameProvider) -> Bool {
        guard let t = target(of: key) else { return false }
        cudaFrames[key] = provider
        return gpu.setCUDAFrameProvider(output: t, provider)
    }

    /// From now on output `key`'s frames go through `ring` (none is in flight for it yet).
    func attachRing(_ ring: EncoderTargetRing, output key: Int) {
        precondition(!inFlight.contains { $0.pending.contains(key) }, "output \(key) has frames in flight")
        rings[key] = ring
        accounted[key] = ring.handedOver
    }

    /// Marks the frames each ring has handed to its encoder (by `deliver`, or
    /// by `render` making room) as no longer in flight.
    private func syncDeliveries() {
        for (key, ring) in rings {
            let n = ring.handedOver, before = accounted[key] ?? 0
            for _ in before..<max(before, n) { delivered(key) }
            accounted[key] = n
        }
    }

    /// From now on output `key`'s frames are encoded on the GPU (none is in flight for it yet).
    func attachGPUEncoder(_ key: Int, settings: GPUH264Settings, rate: FrameRate) throws(GPUError) -> GPUEncodedStream {
        precondition(!inFlight.contains { $0.pending.contains(key) }, "output \(key) has frames in flight")
        guard let t = target(of: key) else { preconditionFailure("output \(key) does not exist") }
        let stream = try gpu.attachEncoder(output: t, settings: settings, rate: rate)
        gpuEncoded[key] = (settings, rate)
        return stream
    }

    var encodesOnGPU: Bool { !gpuEncoded.isEmpty }
    /// Outputs asked for an IDR and still waiting for it.
    private var keyframesAsked: Set<Int> = []

    /// The next GPU-encoded picture of each output in `keys` is an IDR (a
    /// live output that dropped one); asked once until the output has it.
    func requestKeyframes(_ keys: [Int]) {
        let waiting = Set(keys)
        keyframesAsked.formIntersection(waiting)
        for key in waiting.subtracting(keyframesAsked) {
            guard gpuEncoded[key] != nil, let t = target(of: key) else { continue }
            try? gpu.requestKeyframe(output: t)
            keyframesAsked.insert(key)
        }
    }

    /// The output's render target in the current compositor.
    func target(of key: Int) -> OutputID? { outputs.first { $0.key == key }?.target }

    /// One output's frame: drawn into its render target, then read back or
    /// converted into its ring's next encoder target.
    private func renderOutput(_ o: RenderOutput, _ p: OutputPlan) throws(GPUError) {
        let ring = rings[o.key]
        try gpu.render(output: o.target, plan: p.plan, pts: p.pts, readback: ring == nil && gpuEncoded[o.key] == nil)
        try ring?.render(pts: p.pts)
    }

    /// Uploads the frame's pictures and draws every output's plan. A lost
    /// context is rebuilt (up to three times in a row) and the frame retried.
    func render(_ frame: PairedFrame, plans: [Int: OutputPlan], index: Int, taps: [RenderTap]) throws(GPUError) {
        let entry = InFlight(frame: frame, plans: plans, pending: Set(plans.keys))
        var attempts = 0
        while true {
            do throws(GPUError) {
                if attempts == 0, simulateLossAt.contains(index) { gpu.simulateContextLoss() }
                try draw(entry)
                break
            } catch {
                if case .cudaInterop = error, plan.takesCUDAFrames {
                    leaveInterop(error)
                    continue
                }
                attempts += 1
                guard case .contextLost = error, attempts <= 3 else { throw error }
                try rebuild(after: error)
            }
        }
        if !entry.pending.isEmpty { inFlight.append(entry) }
        for o in outputs {
            guard let p = plans[o.key] else { continue }
            for tap in taps { tap.rendered(gpu: gpu, target: o.target, output: o.key, pts: p.pts, index: index) }
        }
    }

    private func draw(_ e: InFlight) throws(GPUError) {
        try upload(e.frame.primary, role: .primary)
        if let s = e.frame.secondary, uploadedSecondary != s.id {
            try upload(s.payload, role: .secondary)
            uploadedSecondary = s.id
        }
        for o in outputs {
            guard let p = e.plans[o.key] else { continue }
            try renderOutput(o, p)
        }
    }

    private func upload(_ f: InputFrame, role: StreamRole) throws(GPUError) {
        switch f.payload {
        case .cpu(let v): try gpu.upload(v, role: role)
        case .dmaBuf(let d, _): try gpu.upload(d, role: role)
        case .cuda(let c, let holder): try upload(c, holder: holder, role: role)
        }
    }

    /// A CUDA frame goes to the pass on the GPU where the plan takes CUDA
    /// frames (staged or through CUDA–GL interop). If that fails (here, or in
    /// the render that copies it), this take copies CUDA frames through host
    /// memory from then on instead of failing.
    private func upload(_ c: CUDAFrame, holder: any CUDAFrameHolder, role: StreamRole) throws(GPUError) {
        if plan.takesCUDAFrames {
            do throws(GPUError) {
                try gpu.upload(c, holder: holder, role: role)
                return
            } catch {
                guard case .cudaInterop = error else { throw error }
                leaveInterop(error)
            }
        } else if !saidViaHost {
            saidViaHost = true
            let why = if case .viaHost(let why) = plan.cudaFrames { why } else { "no CUDA for the GPU context" }
            warn("NVDEC frames cannot go into the GPU's textures directly (\(why)); copying them through host memory")
        }
        guard let v = holder.download() else { throw .badFrame("an NVDEC \(c.format.rawValue) \(c.width)x\(c.height) frame could not be copied to host memory") }
        try gpu.upload(v, role: role)
    }

    /// CUDA frames go through host memory from now on; the secondary's picture is uploaded again.
    private func leaveInterop(_ error: GPUError) {
        cudaFailure = error
        plan = GPUPlanner.afterCUDAFailure(plan, error)
        saidViaHost = true
        uploadedSecondary = nil
        warn("NVDEC frames cannot go into the GPU's textures directly (\(error)); copying them through host memory from here")
    }

    /// Context lost: throw every GPU object away, build a new compositor, and
    /// render again every frame whose readback (or hand-over to an encoder
    /// reading in place) had not completed. Rings keep their buffers (GBM,
    /// apart from the context) and import them into the new context.
    private func rebuild(after error: GPUError) throws(GPUError) {
        rebuilds += 1
        syncDeliveries()
        warn("GPU context lost (\(error)); rebuilding the GPU side and rendering \(inFlight.count) frames in flight again")
        for ring in rings.values { _ = ring.abandonUndelivered() }
        retiring?(gpu.stats)
        gpu.shutdown()
        uploadedSecondary = nil
        do throws(GPUError) {
            gpu = try makeCompositor()
            plan = cudaFailure.map { GPUPlanner.afterCUDAFailure(gpu.plan, $0) } ?? gpu.plan
            for (id, image) in overlayImages.enumerated() { try gpu.setOverlay(id, image: image) }
            for (id, image) in textPictures { try gpu.setOverlay(id, image: image, premultiplied: true) }
            for i in outputs.indices { outputs[i].target = try gpu.addOutput(canvas: outputs[i].canvas) }
            for (key, provider) in cudaFrames { if let t = target(of: key) { gpu.setCUDAFrameProvider(output: t, provider) } }
            // A fresh encoder starts with an IDR: its references were on the lost context.
            for (key, e) in gpuEncoded {
                if let t = target(of: key) { _ = try gpu.attachEncoder(output: t, settings: e.settings, rate: e.rate) }
            }
            for ring in rings.values { try ring.reimport() }
            for e in inFlight {
                try upload(e.frame.primary, role: .primary)
                if let s = e.frame.secondary { try upload(s.payload, role: .secondary) }
                for o in outputs where e.pending.contains(o.key) { try renderOutput(o, e.plans[o.key]!) }
            }
        } catch {
            throw .deviceUnavailable("cannot rebuild the GPU context: \(error)")
        }
    }

    /// The NV12 frames read back so far, with the output each belongs to,
    /// in submission order; the rings hand their finished frames to their
    /// encoders. `wait` blocks until everything in flight is back.
    func readbacks(wait: Bool) throws(GPUError) -> [(key: Int, delivery: StageDelivery)] {
        var out: [(key: Int, delivery: StageDelivery)] = []
        var rebuilt = 0
        for key in rings.keys.sorted() {
            while true {
                do throws(GPUError) { try rings[key]?.deliver(wait: wait) } catch {
                    rebuilt += 1
                    guard case .contextLost = error, rebuilt <= 3 else { throw error }
                    try rebuild(after: error)
                    continue
                }
                break
            }
        }
        syncDeliveries()
        if !gpuEncoded.isEmpty {
            while true {
                let p: GPUEncodedPicture?
                do throws(GPUError) {
                    p = try gpu.nextEncoded(wait: wait && inFlight.contains { !$0.pending.isDisjoint(with: gpuEncoded.keys) })
                } catch {
                    rebuilt += 1
                    guard case .contextLost = error, rebuilt <= 3 else { throw error }
                    try rebuild(after: error)
                    continue
                }
                guard let p else { break }
                guard let o = outputs.first(where: { $0.target == p.output }) else { continue }
                delivered(o.key)
                out.append((o.key, .encoded(p)))
            }
        }
        while true {
            let r: NV12Readback?
            do throws(GPUError) {
                r = try gpu.nextReadback(wait: wait && !inFlight.isEmpty)
            } catch {
                rebuilt += 1
                guard case .contextLost = error, rebuilt <= 3 else { throw error }
                try rebuild(after: error)
                continue
            }
            guard let r else { return out }
            guard let o = outputs.first(where: { $0.target == r.output }) else { continue }
            delivered(o.key)
            out.append((o.key, r.device.map { .cuda($0, pts: r.frame.pts) } ?? .frame(r.frame)))
        }
    }

    /// Output `key`'s oldest frame in flight has reached its encoder.
    private func delivered(_ key: Int) {
        guard let i = inFlight.firstIndex(where: { $0.pending.contains(key) }) else { return }
        inFlight[i].pending.remove(key)
        if inFlight[i].pending.isEmpty { inFlight.remove(at: i) }
    }

    /// The output's render target as RGBA now.
    func previewRGBA(output key: Int) throws(GPUError) -> VideoFrame? {
        guard let o = outputs.first(where: { $0.key == key }) else { return nil }
        return try gpu.previewRGBA(output: o.target)
    }

    /// Frees the rings' buffers (each as its encoder lets it go), then the GPU.
    func shutdown() {
        for ring in rings.values { ring.shutdown() }
        rings.removeAll()
        retiring?(gpu.stats)
        gpu.shutdown()
    }
}

extension GPUStage {
    /// Makes `image` (a rendered text, premultiplied) text overlay `id`'s
    /// picture from the next render on, or removes it (nil).
    func setText(_ id: Int, _ image: VideoFrame?) throws(GPUError) {
        textPictures[id] = image
        try gpu.setOverlay(id, image: image, premultiplied: true)
    }
}
