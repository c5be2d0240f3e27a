import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation

/// The composite stage: both frames uploaded, the layout drawn, NV12 read
/// back, pipelined as in a take (the session's `GPUCompositor` with the
/// direct-copy path, up to 3 readbacks in flight). The primary is uploaded
/// every frame at the canvas size (60 fps), the secondary, 1280×720, every
/// second frame (30 fps), like the end-to-end inputs.
struct CompositeStage {
    static let secondarySize = PixelSize.hd720

    let options: BenchOptions

    /// The plan `diptych record --layout KIND` draws for these streams.
    static func plan(_ kind: LayoutKind, canvas: PixelSize, primary: PixelSize, secondary: PixelSize,
                     mirrored: Bool = false) -> CompositionPlan {
        Layout(kind: kind).resolve(canvas: canvas, primary: StreamGeometry(sensorSize: primary),
                                   secondary: StreamGeometry(sensorSize: secondary, orientation: Orientation(rotation: .r0, mirrored: mirrored)))
    }

    /// A few distinct frames of a test pattern in `format`.
    static func frames(_ pattern: String, size: PixelSize, format: PixelFormat, count: Int) throws -> [VideoFrame] {
        let src = try TestPatternSource(name: pattern, size: size, rate: FrameRate(60), format: .nv12)
        var out: [VideoFrame] = []
        for _ in 0..<count {
            guard let f = try src.nextFrame() else { break }
            out.append(format == .rgba ? rgba(fromNV12: f) : f)
        }
        return out
    }

    /// BT.709 limited NV12 → RGBA on the CPU (input preparation only).
    static func rgba(fromNV12 f: VideoFrame) -> VideoFrame {
        let out = VideoFrame.allocate(width: f.width, height: f.height, format: .rgba, pts: f.pts)
        let k = YUVCoefficients(matrix: .bt709, range: .limited)
        let dst = out.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        let y = f.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self), uv = f.planes[1].baseAddress.assumingMemoryBound(to: UInt8.self)
        func c(_ v: Double) -> UInt8 { UInt8(max(0, min(255, (v * 255).rounded()))) }
        for row in 0..<f.height {
            for x in 0..<f.width {
                let Y = Double(y[row * f.planes[0].stride + x]) / 255
                let o = (row / 2) * f.planes[1].stride + (x / 2) * 2
                let p = k.rgb(y: Y, u: Double(uv[o]) / 255, v: Double(uv[o + 1]) / 255)
                let d = (row * f.width + x) * 4
                dst[d] = c(p.r); dst[d + 1] = c(p.g); dst[d + 2] = c(p.b); dst[d + 3] = 255
            }
        }
        return out
    }

    /// The path most frames took (`compute`, `fragment`, `direct copy`), then the compositor's setup.
    static func pathTaken(_ s: GPUStats, _ plan: GPUPlan) -> String {
        let counts = [(CompositePath.compute, s.framesCompute), (.fragment, s.framesFragment), (.directCopy, s.framesDirect)]
        return "\(counts.max { $0.1 < $1.1 }!.0); \(plan)"
    }

    /// Measures one case; `preview` gets the composite as RGBA (for the contact sheet).
    func run(layout: LayoutKind, canvas: PixelSize, format: PixelFormat, gpu: GPUSelection,
             preview: ((VideoFrame) -> Void)? = nil, gpuName: (String) -> Void = { _ in }) throws -> BenchResult {
        let primaries = try Self.frames("smpte", size: canvas, format: format, count: 2)
        let secondaries = try Self.frames("counter", size: Self.secondarySize, format: format, count: 4)
        let plan = Self.plan(layout, canvas: canvas, primary: canvas, secondary: Self.secondarySize)
        let c = try GPUCompositor(selection: gpu, readbackDepth: 4, directCopy: true)
        defer { c.shutdown() }
        gpuName(c.info.description)
        let out = try c.addOutput(canvas: canvas)
        var submitted: [Int64: Double] = [:]
        var latencies: [Double] = []
        let rate = FrameRate(60)
        func collect(_ f: VideoFrame) {
            if let t0 = submitted.removeValue(forKey: f.pts.value) { latencies.append((now() - t0) * 1000) }
        }
        func run(_ count: Int, from first: Int) throws {
            for i in first..<(first + count) {
                var uploads = [(primaries[i % primaries.count], StreamRole.primary)]
                if i % 2 == 0 || i == first { uploads.append((secondaries[(i / 2) % secondaries.count], .secondary)) }
                let pts = rate.time(ofFrame: Int64(i))
                submitted[pts.value] = now()
                for f in try c.composite(uploads: uploads, output: out, plan: plan, pts: pts) { collect(f) }
                while c.outstandingReadbacks > 3, let f = try c.nextNV12(wait: true) { collect(f) }
            }
            for f in try c.flush() { collect(f) }
        }
        try run(options.warmup, from: 0)
        latencies.removeAll()
        c.resetStats()
        let cpu0 = CPUClock.seconds(), t0 = now()
        try run(options.frames, from: options.warmup)
        let seconds = now() - t0, cpu = CPUClock.seconds() - cpu0
        let s = c.stats
        if let preview { preview(try c.previewRGBA(output: out)) }
        let sorted = latencies.sorted()
        let n = Double(max(s.framesRendered, 1))
        var r = BenchResult(stage: .composite, layout: layout.rawValue, canvas: "\(canvas)", input: format.rawValue,
                            frames: options.frames, seconds: seconds, fps: Double(options.frames) / seconds,
                            realtime60: Double(options.frames) / seconds / 60,
                            latencyP50Ms: percentile(sorted, 0.5), latencyP99Ms: percentile(sorted, 0.99),
                            gpuUploadMs: s.upload.gpuMeanMs.map { $0 * Double(s.upload.count) / n },
                            gpuCompositeMs: s.composite.gpuMeanMs.map { $0 * Double(s.composite.count) / n },
                            gpuNV12Ms: s.nv12.gpuMeanMs.map { $0 * Double(s.nv12.count) / n },
                            directFrames: s.framesDirect,
                            path: Self.pathTaken(s, c.plan),
                            cpuMsPerFrame: cpu * 1000 / Double(options.frames))
        if !s.timerQueries { r.notes.append("no GL_EXT_disjoint_timer_query: no GPU times") }
        return r
    }
}
