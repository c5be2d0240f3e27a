// diptych-gpu-bench: composites per second on the GPU module alone
// (upload → draw → NV12 readback), no FFmpeg. See --help.
import DiptychCore
import DiptychGPU
import Foundation

struct Options {
    var layout = "pip"
    var size = PixelSize.hd1080
    var input: PixelSize?
    var format = PixelFormat.nv12
    var frames = 240
    var warmup = 20
    var inFlight = 3
    var gpu = GPUSelection.auto
    var json: String?
    var secondaryEvery = 1
    var quiet = false
}

let usage = """
usage: diptych-gpu-bench [options]
  --layout pip|side-by-side|stacked|primary-only   (default pip)
  --size WxH          output canvas (default 1920x1080)
  --input WxH         both input streams (default: the canvas size)
  --format rgba|bgra|nv12|i420   input pixel format (default nv12)
  --frames N          measured composites (default 240)
  --warmup N          composites before measuring (default 20)
  --in-flight N       NV12 readbacks kept in flight (default 3)
  --secondary-every N upload the secondary every Nth frame (default 1)
  --gpu SEL           auto|software|N|/dev/dri/renderDN|device|surfaceless|gbm|PLATFORM:DEVICE
  --json FILE         also write the results as JSON
"""

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(message)\n".utf8))
    exit(2)
}

func parse() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else { fail("\(flag) needs a value") }
        return v
    }
    while let a = args.popFirst() {
        switch a {
        case "--layout": o.layout = value(a)
            guard ["pip", "side-by-side", "stacked", "primary-only"].contains(o.layout) else { fail("--layout '\(o.layout)': unknown layout") }
        case "--size": guard let s = PixelSize(parsing: value(a)) else { fail("--size expects WxH") }; o.size = s
        case "--input": guard let s = PixelSize(parsing: value(a)) else { fail("--input expects WxH") }; o.input = s
        case "--format": guard let f = PixelFormat(rawValue: value(a)) else { fail("--format expects rgba|bgra|nv12|i420") }; o.format = f
        case "--frames": guard let n = Int(value(a)), n > 0 else { fail("--frames expects a positive number") }; o.frames = n
        case "--warmup": guard let n = Int(value(a)), n >= 0 else { fail("--warmup expects a number") }; o.warmup = n
        case "--in-flight": guard let n = Int(value(a)), n >= 1 else { fail("--in-flight expects a positive number") }; o.inFlight = n
        case "--secondary-every": guard let n = Int(value(a)), n >= 1 else { fail("--secondary-every expects a positive number") }; o.secondaryEvery = n
        case "--gpu": let v = value(a); guard let g = GPUSelection(parsing: v) else { fail("--gpu '\(v)': expected auto|software|N|/dev/dri/renderDN|PLATFORM[:DEVICE]") }; o.gpu = g
        case "--json": o.json = value(a)
        case "--quiet": o.quiet = true
        case "-h", "--help": print(usage); exit(0)
        default: fail("unknown option \(a)\n\(usage)")
        }
    }
    return o
}

/// Aspect-fill crop of `picture` into `destination` (layouts crop, by arithmetic).
func fill(_ picture: PixelSize, _ destination: PixelSize) -> NormalizedRect {
    let pa = picture.aspect, da = destination.aspect
    if pa > da { let w = da / pa; return NormalizedRect(x: (1 - w) / 2, y: 0, width: w, height: 1) }
    let h = pa / da
    return NormalizedRect(x: 0, y: (1 - h) / 2, width: 1, height: h)
}

func plan(_ layout: String, canvas: PixelSize, input: PixelSize) -> CompositionPlan {
    let W = canvas.width, H = canvas.height
    switch layout {
    case "side-by-side":
        let half = PixelSize(width: W / 2, height: H)
        return CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: W / 2, height: H), crop: fill(input, half)),
            DrawDescription(role: .secondary, destination: PixelRect(x: W / 2, y: 0, width: W - W / 2, height: H),
                            crop: fill(input, half), orientation: Orientation(rotation: .r0, mirrored: true))])
    case "stacked":
        let half = PixelSize(width: W, height: H / 2)
        return CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: W, height: H / 2), crop: fill(input, half)),
            DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: H / 2, width: W, height: H - H / 2), crop: fill(input, half))])
    case "primary-only":
        return CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas), crop: fill(input, canvas))])
    default: // pip: secondary a quarter of the width, bottom-right, margin 2 %
        let pw = W / 4, ph = pw * H / W
        let m = max(W / 50, 2)
        return CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas), crop: fill(input, canvas)),
            DrawDescription(role: .secondary, destination: PixelRect(x: W - pw - m, y: H - ph - m, width: pw, height: ph),
                            crop: fill(input, PixelSize(width: pw, height: ph)), orientation: Orientation(rotation: .r0, mirrored: true),
                            cornerRadius: Double(ph) / 10, borderWidth: 2, zIndex: 1)])
    }
}

/// A moving test pattern frame in `format`.
func testFrame(_ size: PixelSize, _ format: PixelFormat, seed: Int) -> VideoFrame {
    let f = VideoFrame.allocate(width: size.width, height: size.height, format: format)
    for p in 0..<format.planeCount {
        let rows = format.planeHeight(plane: p, height: size.height)
        let stride = f.planes[p].stride
        let b = f.planes[p].storage.mutableBase.advanced(by: f.planes[p].offset).assumingMemoryBound(to: UInt8.self)
        for y in 0..<rows {
            for x in 0..<stride { b[y * stride + x] = UInt8(truncatingIfNeeded: x &+ y &* 3 &+ seed &* 17 &+ p &* 64) }
        }
    }
    return f
}

struct Result: Codable {
    var layout: String
    var canvas: String
    var input: String
    var format: String
    var frames: Int
    var inFlight: Int
    var platform: String
    var device: String
    var renderer: String
    var compositesPerSecond: Double
    var latencyP50Ms: Double
    var latencyP99Ms: Double
    var latencyMaxMs: Double
    var gpuTimerQueries: Bool
    var uploadGPUMs: Double?
    var compositeGPUMs: Double?
    var nv12GPUMs: Double?
    var uploadCPUMs: Double
    var compositeCPUMs: Double
    var nv12CPUMs: Double
}

let o = parse()
let input = o.input ?? o.size
let lines = o.quiet ? { (_: String) in } : { (l: String) in FileHandle.standardError.write(Data((l + "\n").utf8)) }
let compositor: GPUCompositor
do {
    compositor = try GPUCompositor(selection: o.gpu, readbackDepth: o.inFlight + 1, log: { lines($0) })
} catch {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(error)\n".utf8))
    exit(1)
}
defer { compositor.shutdown() }

do {
    let out = try compositor.addOutput(canvas: o.size)
    let p = plan(o.layout, canvas: o.size, input: input)
    let primaries = (0..<3).map { testFrame(input, o.format, seed: $0) }
    let secondaries = (0..<3).map { testFrame(input, o.format, seed: $0 + 7) }
    var submitted: [Int64: UInt64] = [:]
    var latencies: [Double] = []
    let rate = FrameRate(60)

    func collect(_ f: VideoFrame) {
        if let t0 = submitted.removeValue(forKey: f.pts.value) {
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
        }
    }
    func run(_ count: Int, from start: Int) throws {
        for i in start..<(start + count) {
            submitted[Int64(i)] = DispatchTime.now().uptimeNanoseconds
            try compositor.upload(primaries[i % primaries.count], role: .primary)
            if i % o.secondaryEvery == 0 || i == start {
                try compositor.upload(secondaries[i % secondaries.count], role: .secondary)
            }
            try compositor.render(output: out, plan: p, pts: rate.time(ofFrame: Int64(i)))
            while compositor.outstandingReadbacks > o.inFlight, let f = try compositor.nextNV12(wait: true) { collect(f) }
            while let f = try compositor.nextNV12(wait: false) { collect(f) }
        }
        for f in try compositor.flush() { collect(f) }
    }

    try run(o.warmup, from: 0)
    latencies.removeAll()
    compositor.resetStats()
    let t0 = DispatchTime.now().uptimeNanoseconds
    try run(o.frames, from: o.warmup)
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
    let s = compositor.stats
    let sorted = latencies.sorted()
    func pct(_ q: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((q * Double(sorted.count - 1)).rounded()))] }
    let info = compositor.info
    let r = Result(layout: o.layout, canvas: "\(o.size)", input: "\(input)", format: o.format.rawValue, frames: o.frames,
                   inFlight: o.inFlight, platform: info.platform.rawValue, device: info.device, renderer: info.renderer,
                   compositesPerSecond: Double(o.frames) / seconds,
                   latencyP50Ms: pct(0.5), latencyP99Ms: pct(0.99), latencyMaxMs: sorted.last ?? 0,
                   gpuTimerQueries: s.timerQueries,
                   uploadGPUMs: s.upload.gpuMeanMs.map { $0 * Double(s.upload.count) / Double(max(s.framesRendered, 1)) },
                   compositeGPUMs: s.composite.gpuMeanMs, nv12GPUMs: s.nv12.gpuMeanMs,
                   uploadCPUMs: s.upload.cpuTotalMs / Double(max(s.framesRendered, 1)),
                   compositeCPUMs: s.composite.cpuMeanMs, nv12CPUMs: s.nv12.cpuMeanMs)
    func ms(_ v: Double?) -> String { v.map { String(format: "%.3f", $0) } ?? "n/a" }
    print("\(info.renderer) [\(info.platform) \(info.device)]")
    print(String(format: "%@ %@ in %@ %@: %.1f composites/s, latency p50 %.2f ms, p99 %.2f ms (in flight %d, %d frames)",
                 o.layout, "\(o.size)", o.format.rawValue, "\(input)", r.compositesPerSecond, r.latencyP50Ms, r.latencyP99Ms, o.inFlight, o.frames))
    print("per frame  GPU: upload \(ms(r.uploadGPUMs)) ms, composite \(ms(r.compositeGPUMs)) ms, nv12 \(ms(r.nv12GPUMs)) ms"
          + (s.timerQueries ? "" : " (no GL_EXT_disjoint_timer_query)"))
    print("per frame  CPU: upload \(ms(r.uploadCPUMs)) ms, composite \(ms(r.compositeCPUMs)) ms, nv12 \(ms(r.nv12CPUMs)) ms")
    if let path = o.json {
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try enc.encode(r).write(to: URL(fileURLWithPath: path))
    }
} catch {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(error)\n".utf8))
    exit(1)
}
