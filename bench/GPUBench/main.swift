// diptych-gpu-bench: composites per second on the GPU module alone
// (upload → draw → NV12 readback), no FFmpeg. See --help.
import DiptychCore
import DiptychGPU
import DiptychOptions
import Foundation

// The driver's settings before any thread starts (docs/ENVIRONMENT.md).
DriverEnvironment.apply()

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
    var streams = 1
    var contexts: Int?
    var direct = DirectCopyMode.auto
    var pass = GPUPass.auto
    var stagger = false
    var bandwidth = false
    var pace: Double?
    var batched = true
    var quiet = false
    var probe = false
    var pageLocked = false
    /// `--overlays N`: RGBA image overlays drawn over every composite.
    var overlays = 0
    /// Frame batch, copiers, timer queries, streaming copy, fences: the plan's tuning.
    var tuning = GPUTuning()
}

let usage = """
usage: diptych-gpu-bench [options]
  --layout pip|side-by-side|stacked|primary-only   (default pip)
  --size WxH          output canvas (default 1920x1080)
  --input WxH         both input streams (default: the canvas size)
  --format rgba|bgra|nv12|i420   input pixel format (default nv12)
  --frames N          measured composites (default 240)
  --overlays N        draw N image overlays (256x128 RGBA with alpha, at 80 %) over every
                      composite, 0 to 8 (default 0), to compare the rate with and without
  --warmup N          composites before measuring (default 20)
  --in-flight N       NV12 readbacks kept in flight (default 3)
  --secondary-every N upload the secondary every Nth frame (default 1)
  --streams N         independent compositors (own context and render thread) run
                      at once, as a server compositing N stream pairs (default 1)
  --contexts K        GL contexts the streams share (default: one per stream);
                      streams i, i+K, ... share context i (one render thread each)
  --direct auto|on|off the direct-copy shortcut: auto takes it on software renderers only
                      (default auto: a hardware GPU draws every frame)
  --pass auto|compute|fragment  the GPU pass (default auto: compute where OpenGL ES 3.1 exists)
  --pace FPS          each stream submits at FPS (a live 1080p60 source) and polls for its
                      readbacks, so latency is upload → NV12 in host memory at that rate
  --stagger           with --pace: stream i starts i/N of a frame interval late (independent
                      sources' phases) instead of all streams submitting at the same instant
  --host-memory pageable|page-locked  where the input frames' bytes are (default pageable,
                      as a caller's own frames; page-locked: in the compositor's upload storage,
                      GPUCompositor.makeUploadStorage, which uploads without a copy into staging)
  --frame-batch N     frames of compositors sharing a context run phase by phase together,
                      1 to 256 (default 16; 1: one at a time)
  --copiers N         CUDA streams each way for imported memory's copies, 1 to 64 (default 16)
  --timer-queries on|off  GPU timer queries around passes (default on)
  --streaming-copy on|off host frames gathered into page-locked bounce buffers with
                      streaming stores (default on)
  --fences watched|egl|gl  GL fences the render thread polls, waited for on the callers'
                      threads (default); EGL fences waited for there (where the context
                      has them); or GL fences waited for on the render thread
  --bandwidth         measure host copy bandwidth, memcpy and streaming stores (1..16 threads), and exit
  --api batched|calls one composite() call per frame (default) or upload/render/nextNV12 calls
  --gpu SEL           auto|software|N|/dev/dri/renderDN|device|surfaceless|gbm|PLATFORM:DEVICE
  --json FILE         also write the results as JSON
  --probe             list every display-ladder rung and the chosen GPU's extensions, then exit
  --encode            the GPU H.264 encoder alone (see --encode --help)
"""

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(message)\n".utf8))
    exit(2)
}

func parse() -> Options {
    var o = Options()
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.contains("-h") || arguments.contains("--help") { print(usage); exit(0) }
    let valued = ["--layout", "--size", "--input", "--format", "--frames", "--warmup", "--in-flight", "--secondary-every", "--gpu",
                  "--streams", "--contexts", "--direct", "--pass", "--pace", "--api", "--json", "--host-memory",
                  "--frame-batch", "--copiers", "--timer-queries", "--streaming-copy", "--fences", "--overlays"]
    let reader = ArgumentReader(valued.map { ($0, true) } + ["--stagger", "--bandwidth", "--quiet", "--probe"].map { ($0, false) })
    let given: [(flag: String, value: String?)]
    do { given = try reader.read(arguments) } catch { fail("\(error)") }
    var current = ""
    func value(_ flag: String) -> String { current }
    for (a, v) in given {
        current = v ?? ""
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
        case "--streams": guard let n = Int(value(a)), n >= 1 else { fail("--streams expects a positive number") }; o.streams = n
        case "--contexts": guard let n = Int(value(a)), n >= 1 else { fail("--contexts expects a positive number") }; o.contexts = n
        case "--direct": let v = value(a); guard let m = DirectCopyMode(rawValue: v) else { fail("--direct expects auto|on|off") }; o.direct = m
        case "--pass": let v = value(a); guard let p = GPUPass(rawValue: v) else { fail("--pass expects auto|compute|fragment") }; o.pass = p
        case "--overlays": guard let n = Int(value(a)), (0...8).contains(n) else { fail("--overlays expects 0 to 8") }; o.overlays = n
        case "--stagger": o.stagger = true
        case "--bandwidth": o.bandwidth = true
        case "--pace": guard let v = Double(value(a)), v > 0 else { fail("--pace expects frames per second") }; o.pace = v
        case "--api": let v = value(a); guard v == "batched" || v == "calls" else { fail("--api expects batched|calls") }; o.batched = v == "batched"
        case "--json": o.json = value(a)
        case "--host-memory": let v = value(a)
            guard v == "pageable" || v == "page-locked" else { fail("--host-memory '\(v)': expected pageable|page-locked") }
            o.pageLocked = v == "page-locked"
        case "--frame-batch": guard let n = Int(value(a)), (1...256).contains(n) else { fail("--frame-batch expects 1 to 256") }
            o.tuning.frameBatch = n
        case "--copiers": guard let n = Int(value(a)), (1...64).contains(n) else { fail("--copiers expects 1 to 64") }
            o.tuning.copiers = n
        case "--timer-queries": o.tuning.timerQueries = onOff(a, value(a))
        case "--streaming-copy": o.tuning.streamingCopy = onOff(a, value(a))
        case "--fences": guard let f = GPUTuning.Fences(rawValue: value(a)) else { fail("--fences expects watched|egl|gl") }; o.tuning.fences = f
        case "--quiet": o.quiet = true
        case "--probe": o.probe = true
        default: fail("unknown option \(a)\n\(usage)")
        }
    }
    return o
}

func onOff(_ flag: String, _ v: String) -> Bool {
    switch v {
    case "on": return true
    case "off": return false
    default: fail("\(flag) expects on|off")
    }
}

/// Aspect-fill crop of `picture` into `destination` (layouts crop, by arithmetic).
func fill(_ picture: PixelSize, _ destination: PixelSize) -> NormalizedRect {
    let pa = picture.aspect, da = destination.aspect
    if pa > da { let w = da / pa; return NormalizedRect(x: (1 - w) / 2, y: 0, width: w, height: 1) }
    let h = pa / da
    return NormalizedRect(x: 0, y: (1 - h) / 2, width: 1, height: h)
}

/// A 256×128 RGBA picture with an alpha ramp (opaque at the left, clear at the right) and a soft edge.
func rgbaLogo(seed: Int) -> VideoFrame {
    let w = 256, h = 128
    let storage = FrameStorage(zeroedCount: w * h * 4)
    let p = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
    for y in 0..<h {
        for x in 0..<w {
            let o = (y * w + x) * 4
            p[o] = UInt8((x + seed * 40) & 255); p[o + 1] = UInt8((y * 2 + seed * 20) & 255); p[o + 2] = UInt8((x ^ y) & 255)
            p[o + 3] = UInt8(255 - x)
        }
    }
    return VideoFrame(width: w, height: h, format: .rgba, planes: [FramePlane(storage: storage, stride: w * 4)], pts: .zero)
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

if case .failure(let e) = GPURequest.process {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(e)\n".utf8))
    exit(2)
}
if CommandLine.arguments.contains("--encode") { runEncodeBench() }
let o = parse()
if o.probe {
    for r in GPUCompositor.probeLadder(o.gpu) { print("rung \(r)") }
    do {
        let c = try GPUCompositor(selection: o.gpu, tuning: o.tuning)
        print("chosen: \(c.info)")
        print("\(c.plan)")
        print("max texture size: \(c.info.maxTextureSize)")
        for (name, present) in c.info.capabilities.summary { print("  \(present ? "yes" : "no ") \(name)") }
        c.shutdown()
        exit(0)
    } catch {
        print("no GPU: \(error)")
        exit(1)
    }
}
if o.bandwidth { measureCopyBandwidth(); exit(0) }
let input = o.input ?? o.size
let contexts = min(o.contexts ?? o.streams, o.streams)
let lines = o.quiet ? { (_: String) in } : { (l: String) in FileHandle.standardError.write(Data((l + "\n").utf8)) }

/// The first compositor of each context (made before the streams start).
nonisolated(unsafe) var roots: [GPUCompositor] = []
for i in 0..<contexts {
    do {
        roots.append(try GPUCompositor(selection: o.gpu, readbackDepth: o.inFlight + 1, directCopy: o.direct, pass: o.pass,
                                       tuning: o.tuning, log: { l in if i == 0 { lines(l) } }))
    } catch {
        fail("GPU: \(error)")
    }
}

func runStream(_ index: Int, start: DispatchSemaphore, ready: DispatchSemaphore) -> StreamRun {
    var result = StreamRun()
    let compositor: GPUCompositor
    do {
        compositor = index < contexts ? roots[index]
            : try GPUCompositor(sharingContextOf: roots[index % contexts], readbackDepth: o.inFlight + 1, directCopy: o.direct, pass: o.pass)
    } catch {
        ready.signal()
        result.error = "\(error)"
        return result
    }
    defer { compositor.shutdown() }
    var signalled = false
    defer { if !signalled { ready.signal() } }   // a failure before the start must not leave the main thread waiting
    result.info = compositor.info
    result.plan = compositor.plan
    do {
        let out = try compositor.addOutput(canvas: o.size)
        var built = plan(o.layout, canvas: o.size, input: input)
        // Image overlays: uploaded once, one draw each over the streams, spread along the top.
        for k in 0..<o.overlays {
            let logo = rgbaLogo(seed: k)
            try compositor.setOverlay(k, image: logo)
            let w = max(o.size.width / 8, 2) & ~1, h = max(w / 2, 2) & ~1
            let x = min(k * (w + w / 4) + w / 4, max(o.size.width - w, 0)) & ~1
            built.draws.append(.overlay(k, destination: PixelRect(x: x, y: max(o.size.height / 20, 2) & ~1, width: w, height: h),
                                        opacity: 0.8, zIndex: 10 + k))
        }
        let p = built
        let kept = { (f: VideoFrame) in o.pageLocked ? compositor.copyIntoUploadStorage(f) : f }
        let primaries = (0..<3).map { kept(testFrame(input, o.format, seed: $0 + index)) }
        let secondaries = (0..<3).map { kept(testFrame(input, o.format, seed: $0 + 7 + index)) }
        result.pageLocked = (primaries + secondaries).allSatisfy { $0.planes[0].storage.pageLocked }
        var submitted: [Int64: UInt64] = [:]
        var latencies: [Double] = [], lateness: [Double] = []
        let rate = FrameRate(60)
        var lastBack: UInt64 = 0, flushNs: UInt64 = 0
        func collect(_ f: VideoFrame) {
            if let t0 = submitted.removeValue(forKey: f.pts.value) {
                lastBack = DispatchTime.now().uptimeNanoseconds
                latencies.append(Double(lastBack - t0) / 1e6)
            }
        }
        func run(_ count: Int, from first: Int) throws {
            var start = DispatchTime.now().uptimeNanoseconds
            if let pace = o.pace, o.stagger { start += UInt64(Double(index) / Double(o.streams) * 1e9 / pace) }
            for i in first..<(first + count) {
                if let pace = o.pace {
                    // Wait for the frame's time, collecting readbacks meanwhile (polling, never blocking the shared render thread).
                    let due = start + UInt64(Double(i - first) * 1e9 / pace)
                    while true {
                        let now = DispatchTime.now().uptimeNanoseconds
                        guard now < due else { break }
                        // Poll only while this stream has readbacks outstanding: every poll is a hop to the shared render thread.
                        if submitted.isEmpty { usleep(UInt32(min((due - now) / 1000, 1_000_000))); continue }
                        while let f = try compositor.nextNV12(wait: false) { collect(f) }
                        if !submitted.isEmpty { usleep(250) }
                    }
                    let now = DispatchTime.now().uptimeNanoseconds
                    lateness.append(Double(now - min(due, now)) / 1e6)
                }
                submitted[Int64(i)] = DispatchTime.now().uptimeNanoseconds
                var uploads = [(primaries[i % primaries.count], StreamRole.primary)]
                if i % o.secondaryEvery == 0 || i == first { uploads.append((secondaries[i % secondaries.count], .secondary)) }
                let pts = rate.time(ofFrame: Int64(i))
                if o.batched {
                    for f in try compositor.composite(uploads: uploads, output: out, plan: p, pts: pts) { collect(f) }
                } else {
                    for (f, role) in uploads { try compositor.upload(f, role: role) }
                    try compositor.render(output: out, plan: p, pts: pts)
                    while let f = try compositor.nextNV12(wait: false) { collect(f) }
                }
                // Keep at most `inFlight` readbacks outstanding.
                while compositor.outstandingReadbacks > o.inFlight, let f = try compositor.nextNV12(wait: true) { collect(f) }
            }
            let f0 = DispatchTime.now().uptimeNanoseconds
            for f in try compositor.flush() { collect(f) }
            flushNs = DispatchTime.now().uptimeNanoseconds - f0
        }
        try run(o.warmup, from: 0)
        latencies.removeAll()
        lateness.removeAll()
        compositor.resetStats()
        ready.signal()
        signalled = true
        start.wait()
        result.begin = DispatchTime.now().uptimeNanoseconds
        try run(o.frames, from: o.warmup)
        result.end = lastBack
        result.flushMs = Double(flushNs) / 1e6
        result.latencies = latencies
        result.lateness = lateness
        result.stats = compositor.stats
    } catch {
        result.error = "\(error)"
    }
    return result
}

let runs = Runs()
let startAll = DispatchSemaphore(value: 0)
let readyAll = DispatchSemaphore(value: 0)
let finished = DispatchGroup()
for i in 0..<o.streams {
    finished.enter()
    Thread {
        runs.add(runStream(i, start: startAll, ready: readyAll))
        finished.leave()
    }.start()
}
for _ in 0..<o.streams { readyAll.wait() }
let t0 = DispatchTime.now().uptimeNanoseconds
for _ in 0..<o.streams { startAll.signal() }
finished.wait()
// Until the last frame came back: shutting the compositors down is not timed.
let seconds = Double((runs.runs.map(\.end).max() ?? t0) - t0) / 1e9

if let failed = runs.runs.first(where: { $0.error != nil }) {
    FileHandle.standardError.write(Data("diptych-gpu-bench: \(failed.error!)\n".utf8))
    exit(1)
}
let all = runs.runs
let sorted = all.flatMap(\.latencies).sorted()
func pct(_ q: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((q * Double(sorted.count - 1)).rounded()))] }
func mean(_ f: (GPUStats) -> Double?) -> Double? {
    let v = all.compactMap { f($0.stats) }
    return v.isEmpty ? nil : v.reduce(0, +) / Double(v.count)
}
let late = all.flatMap(\.lateness).sorted()
let spans = all.map { Double($0.end - $0.begin) / 1e6 }.sorted()
let info = all[0].info!
let frames = o.frames * o.streams
let computeFrames = all.map(\.stats.framesCompute).reduce(0, +), fragmentFrames = all.map(\.stats.framesFragment).reduce(0, +)
let directFrames = all.map(\.stats.framesDirect).reduce(0, +)
// The path named is the one most frames took (every frame of a run normally takes one).
let path = [(CompositePath.compute, computeFrames), (.fragment, fragmentFrames), (.directCopy, directFrames)].max { $0.1 < $1.1 }!.0
let r = Result(layout: o.layout, canvas: "\(o.size)", input: "\(input)", format: o.format.rawValue, frames: o.frames,
               streams: o.streams, contexts: contexts, direct: o.direct.rawValue, path: path.rawValue,
               computeFrames: computeFrames, fragmentFrames: fragmentFrames, directFrames: directFrames, staggered: o.stagger, overlays: o.overlays,
               inFlight: o.inFlight, api: o.batched ? "batched" : "calls",
               platform: info.platform.rawValue, device: info.device, renderer: info.renderer,
               compositesPerSecond: Double(frames) / seconds, hostMemory: all.allSatisfy(\.pageLocked) ? "page-locked"
                   : o.pageLocked ? "pageable (no page-locked upload storage here)" : "pageable",
               offeredPerSecond: o.pace.map { $0 * Double(o.streams) },
               submittedLateP99Ms: o.pace == nil ? nil : late.isEmpty ? 0 : late[min(late.count - 1, Int((0.99 * Double(late.count - 1)).rounded()))],
               streamStartSpreadMs: Double((all.map(\.begin).max() ?? 0) - (all.map(\.begin).min() ?? 0)) / 1e6,
               submittedLateMaxMs: o.pace == nil ? nil : late.last ?? 0,
               streamSpanMaxMs: spans.last ?? 0, streamSpanMedianMs: spans.isEmpty ? 0 : spans[spans.count / 2],
               flushMaxMs: all.map(\.flushMs).max() ?? 0,
               delivered: sorted.count,
               latencyP50Ms: pct(0.5), latencyP99Ms: pct(0.99), latencyMaxMs: sorted.last ?? 0,
               gpuTimerQueries: all[0].stats.timerQueries,
               uploadGPUMs: mean { s in s.upload.gpuMeanMs.map { $0 * Double(s.upload.count) / Double(max(s.framesRendered, 1)) } },
               compositeGPUMs: mean { $0.composite.gpuMeanMs }, nv12GPUMs: mean { $0.nv12.gpuMeanMs },
               uploadCPUMs: mean { $0.upload.cpuTotalMs / Double(max($0.framesRendered, 1)) } ?? 0,
               compositeCPUMs: mean { $0.composite.cpuMeanMs } ?? 0, nv12CPUMs: mean { $0.nv12.cpuMeanMs } ?? 0,
               plan: all[0].plan.map { "\($0)" } ?? "", gpuPlan: all[0].plan)
func ms(_ v: Double?) -> String { v.map { String(format: "%.3f", $0) } ?? "n/a" }
print("\(info.renderer) [\(info.platform) \(info.device)]")
print("contexts \(contexts)")
print("path \(path): compute \(computeFrames), fragment \(fragmentFrames), direct copy \(directFrames) of \(frames) frames (--direct \(o.direct.rawValue), --pass \(o.pass.rawValue)); \(sorted.count) delivered")
print(String(format: "%@%@ %@ from %@ %@ x%d streams: %.1f composites/s, latency p50 %.2f ms, p99 %.2f ms (in flight %d, %d frames/stream, %@)",
             o.layout, o.overlays > 0 ? " + \(o.overlays) overlays" : "", "\(o.size)", o.format.rawValue, "\(input)", o.streams, r.compositesPerSecond, r.latencyP50Ms, r.latencyP99Ms,
             o.inFlight, o.frames, r.api))
print("  \(r.plan)")
print("per composite GPU: upload \(ms(r.uploadGPUMs)) ms, composite \(ms(r.compositeGPUMs)) ms, nv12 \(ms(r.nv12GPUMs)) ms"
      + (r.gpuTimerQueries ? "" : " (no GL_EXT_disjoint_timer_query)"))
print("per composite CPU: upload \(ms(r.uploadCPUMs)) ms, composite \(ms(r.compositeCPUMs)) ms, nv12 \(ms(r.nv12CPUMs)) ms")
print("input frames' host memory: \(r.hostMemory)")
print(String(format: "timed until the last frame came back; the streams' closing flush() took at most %.1f ms after it", r.flushMaxMs))
if let offered = r.offeredPerSecond {
    print(String(format: "paced: %.1f composites/s offered, %.1f delivered (%.0f %%); frames submitted late by p99 %.2f ms, at most %.1f ms; "
                 + "streams began within %.1f ms and took %.1f ms (median), %.1f ms (longest)", offered, r.compositesPerSecond,
                 100 * r.compositesPerSecond / offered, r.submittedLateP99Ms ?? 0, r.submittedLateMaxMs ?? 0, r.streamStartSpreadMs,
                 r.streamSpanMedianMs, r.streamSpanMaxMs))
}
if let path = o.json {
    let enc = JSONEncoder()
    enc.outputFormatting = [.prettyPrinted, .sortedKeys]
    do { try enc.encode(r).write(to: URL(fileURLWithPath: path)) } catch {
        FileHandle.standardError.write(Data("diptych-gpu-bench: cannot write \(path): \(error)\n".utf8))
        exit(1)
    }
}
