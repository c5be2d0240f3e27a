// diptych-gpu-check: checks the compositor on a machine's real GPU, without
// Swift or FFmpeg installed there (it links only DiptychGPU and DiptychCore).
// For each EGL platform it creates a context, draws known patterns and
// checks pixels exactly, checks the NV12 conversion against a CPU reference,
// round-trips a render target through dma-buf export and import where the
// platform offers both, and reads timer queries. Exit 0 when every check
// passed, 1 otherwise.
//
//   diptych-gpu-check [--gpu SELECTION]...
import DiptychCore
import DiptychGPU
import DiptychOptions
import Foundation

// The driver's settings before any thread starts (docs/ENVIRONMENT.md).
DriverEnvironment.apply()

struct Failure: Error, CustomStringConvertible { var description: String }

var failures = 0
@MainActor func check(_ name: String, _ body: () throws -> String) {
    do {
        let note = try body()
        print("PASS  \(name)\(note.isEmpty ? "" : ": \(note)")")
    } catch {
        failures += 1
        print("FAIL  \(name): \(error)")
    }
}

func rgbaFrame(_ w: Int, _ h: Int, _ f: (Int, Int) -> (UInt8, UInt8, UInt8)) -> VideoFrame {
    let frame = VideoFrame.allocate(width: w, height: h, format: .rgba)
    let p = frame.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
    for y in 0..<h { for x in 0..<w {
        let c = f(x, y), o = y * w * 4 + x * 4
        p[o] = c.0; p[o + 1] = c.1; p[o + 2] = c.2; p[o + 3] = 255
    } }
    return frame
}

func pixel(_ f: VideoFrame, _ x: Int, _ y: Int) -> (UInt8, UInt8, UInt8) {
    let p = f.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self) + y * f.planes[0].stride + x * 4
    return (p[0], p[1], p[2])
}

func expectPixel(_ f: VideoFrame, _ x: Int, _ y: Int, _ want: (UInt8, UInt8, UInt8), _ what: String) throws {
    let got = pixel(f, x, y)
    guard got == want else { throw Failure(description: "\(what) at (\(x), \(y)): got \(got), want \(want)") }
}

/// A smooth in-gamut pattern in `format` (YUV planes at BT.709 limited).
func patternFrame(_ w: Int, _ h: Int, _ format: PixelFormat, seed: Int) -> VideoFrame {
    let f = VideoFrame.allocate(width: w, height: h, format: format)
    for p in 0..<format.planeCount {
        let rows = format.planeHeight(plane: p, height: h), stride = f.planes[p].stride
        let b = f.planes[p].storage.mutableBase.advanced(by: f.planes[p].offset).assumingMemoryBound(to: UInt8.self)
        for y in 0..<rows { for x in 0..<stride {
            b[y * stride + x] = format.isYUV ? UInt8(p == 0 ? 40 + (x / 3 + y / 2 + seed * 13) % 170 : 100 + (x / 5 + y / 3 + p * 7) % 56)
                                             : (x % 4 == 3 ? 255 : UInt8(truncatingIfNeeded: x / 2 + y + seed * 29))
        } }
    }
    return f
}

/// Largest difference between two NV12 frames of the same size, and where.
func maxDifference(_ a: VideoFrame, _ b: VideoFrame) -> (Int, String) {
    var worst = (0, "")
    for plane in 0..<2 {
        for y in 0..<(plane == 0 ? a.height : a.height / 2) { for x in 0..<a.width {
            let u = a.planes[plane].baseAddress.load(fromByteOffset: y * a.planes[plane].stride + x, as: UInt8.self)
            let v = b.planes[plane].baseAddress.load(fromByteOffset: y * b.planes[plane].stride + x, as: UInt8.self)
            let d = abs(Int(u) - Int(v))
            if d > worst.0 { worst = (d, "plane \(plane) (\(x), \(y)): \(u) vs \(v)") }
        } }
    }
    return worst
}

var selections = [String]()
let arguments = Array(CommandLine.arguments.dropFirst())
if case .failure(let e) = GPURequest.process {
    FileHandle.standardError.write(Data("diptych-gpu-check: \(e)\n".utf8))
    exit(2)
}
if arguments.contains("-h") || arguments.contains("--help") { print("usage: diptych-gpu-check [--gpu SELECTION]..."); exit(0) }
do {
    for (_, value) in try ArgumentReader(flags: ["--gpu": true]).read(arguments) { selections.append(value!) }
} catch {
    FileHandle.standardError.write(Data("diptych-gpu-check: \(error)\n".utf8)); exit(2)
}
if selections.isEmpty { selections = ["device", "surfaceless"] }

print("EGL display ladder:")
for rung in GPUCompositor.probeLadder(.auto) { print("  \(rung)") }

for text in selections {
    guard let selection = GPUSelection(parsing: text) else {
        FileHandle.standardError.write(Data("diptych-gpu-check: --gpu '\(text)' is not a GPU selection\n".utf8)); exit(2)
    }
    print("\n== \(text)")
    let gpu: GPUCompositor
    do { gpu = try GPUCompositor(selection: selection) } catch {
        failures += 1
        print("FAIL  context: \(error)")
        continue
    }
    defer { gpu.shutdown() }
    print("      \(gpu.info)")
    print("      \(gpu.plan)")
    for (name, present) in gpu.info.capabilities.summary { print("      \(present ? "yes" : "no ")  \(name)") }

    // Placement, crop, rotation and mirror: a 64x64 canvas, primary as a
    // coordinate pattern 1:1, secondary rotated 90° and mirrored in a 16x16 inset.
    check("composite pixels (1:1 primary, rotated mirrored inset)") {
        let canvas = PixelSize(width: 64, height: 64)
        let out = try gpu.addOutput(canvas: canvas)
        defer { gpu.removeOutput(out) }
        try gpu.upload(rgbaFrame(64, 64) { x, y in (UInt8(x * 4), UInt8(y * 4), 7) }, role: .primary)
        try gpu.upload(rgbaFrame(16, 16) { x, y in (UInt8(x * 16), UInt8(y * 16), 200) }, role: .secondary)
        let orientation = Orientation(rotation: .r90, mirrored: true)
        let plan = CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
            DrawDescription(role: .secondary, destination: PixelRect(x: 40, y: 40, width: 16, height: 16),
                            orientation: orientation, zIndex: 1)])
        try gpu.render(output: out, plan: plan, pts: .zero, readback: false)
        let img = try gpu.previewRGBA(output: out)
        for (x, y) in [(0, 0), (63, 0), (0, 63), (10, 50), (39, 39), (56, 56)] {
            try expectPixel(img, x, y, (UInt8(x * 4), UInt8(y * 4), 7), "primary")
        }
        for (lx, ly) in [(0, 0), (15, 0), (0, 15), (5, 11)] {
            // Canvas pixel centre → upright point → sensor texel.
            let s = orientation.sensorPoint(fromUpright: NormalizedPoint(x: (Double(lx) + 0.5) / 16, y: (Double(ly) + 0.5) / 16))
            let tx = Int(s.x * 16), ty = Int(s.y * 16)
            try expectPixel(img, 40 + lx, 40 + ly, (UInt8(tx * 16), UInt8(ty * 16), 200), "inset")
        }
        return "12 pixels exact"
    }

    // NV12 out against a CPU BT.709 limited-range reference (±1).
    check("NV12 conversion (BT.709 limited) within ±1") {
        let canvas = PixelSize(width: 32, height: 16)
        let out = try gpu.addOutput(canvas: canvas)
        defer { gpu.removeOutput(out) }
        let colours: [(UInt8, UInt8, UInt8)] = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (128, 128, 128)]
        try gpu.upload(rgbaFrame(32, 16) { x, _ in colours[x / 8] }, role: .primary)
        try gpu.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas))]), pts: .zero)
        guard let nv12 = try gpu.flush().first else { throw Failure(description: "no NV12 frame came back") }
        var worst = 0
        for (i, c) in colours.enumerated() {
            let r = Double(c.0) / 255, g = Double(c.1) / 255, b = Double(c.2) / 255
            let yv = 0.2126 * r + 0.7152 * g + 0.0722 * b
            let want = (Int((16 + 219 * yv).rounded()), Int((128 + 224 * (b - yv) / 1.8556).rounded()),
                        Int((128 + 224 * (r - yv) / 1.5748).rounded()))
            let x = i * 8 + 4, y = 8
            let Y = Int(nv12.planes[0].baseAddress.load(fromByteOffset: y * nv12.planes[0].stride + x, as: UInt8.self))
            let uvo = (y / 2) * nv12.planes[1].stride + (x / 2) * 2
            let U = Int(nv12.planes[1].baseAddress.load(fromByteOffset: uvo, as: UInt8.self))
            let V = Int(nv12.planes[1].baseAddress.load(fromByteOffset: uvo + 1, as: UInt8.self))
            worst = max(worst, abs(Y - want.0), abs(U - want.1), abs(V - want.2))
            if worst > 1 { throw Failure(description: "colour \(c): got YUV (\(Y), \(U), \(V)), want \(want)") }
        }
        return "worst difference \(worst)"
    }

    // The direct-copy path (the one `diptych record` uses): a 1:1 NV12 primary
    // copied on the CPU, only the inset rendered, equals the general path (±1).
    check("direct-copy path equals the general path (±1)") {
        func yuvFrame(_ w: Int, _ h: Int, seed: Int) -> VideoFrame {
            let f = VideoFrame.allocate(width: w, height: h, format: .nv12)
            let y = f.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
            // Values inside the RGB gamut, so the general path's RGB round trip is lossless but for rounding.
            for r in 0..<h { for x in 0..<w { y[r * w + x] = UInt8(60 + (x / 8 + r / 8 + seed * 31) % 120) } }
            let uv = f.planes[1].storage.mutableBase.advanced(by: f.planes[1].offset).assumingMemoryBound(to: UInt8.self)
            for r in 0..<(h / 2) { for x in 0..<(w / 2) {
                uv[r * f.planes[1].stride + 2 * x] = UInt8(108 + (x / 4 + seed * 17) % 40)
                uv[r * f.planes[1].stride + 2 * x + 1] = UInt8(108 + (r / 4 + seed * 13) % 40)
            } }
            return f
        }
        let canvas = PixelSize(width: 1920, height: 1080)
        let plan = CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
            DrawDescription(role: .secondary, destination: PixelRect(x: 1312, y: 724, width: 576, height: 324),
                            orientation: Orientation(rotation: .r0, mirrored: true), cornerRadius: 16, borderWidth: 2, zIndex: 1)])
        let primary = yuvFrame(1920, 1080, seed: 1), secondary = yuvFrame(1280, 720, seed: 2)
        var results: [VideoFrame] = []
        for direct in [false, true] {
            let c = try GPUCompositor(selection: selection, directCopy: direct ? DirectCopyMode.on : .off)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: canvas)
            try c.upload(primary, role: .primary)
            try c.upload(secondary, role: .secondary)
            try c.render(output: out, plan: plan, pts: .zero)
            guard let f = try c.flush().first else { throw Failure(description: "no frame (direct: \(direct))") }
            results.append(f)
        }
        var worst = 0, at = "", over = 0
        for plane in 0..<2 {
            let rows = plane == 0 ? 1080 : 540
            for y in 0..<rows { for x in 0..<1920 {
                let a = results[0].planes[plane].baseAddress.load(fromByteOffset: y * results[0].planes[plane].stride + x, as: UInt8.self)
                let b = results[1].planes[plane].baseAddress.load(fromByteOffset: y * results[1].planes[plane].stride + x, as: UInt8.self)
                let d = abs(Int(a) - Int(b))
                if d > 1 { over += 1 }
                if d > worst { worst = d; at = "plane \(plane) (\(x), \(y)): general \(a), direct \(b)" }
            } }
        }
        guard worst <= 1 else { throw Failure(description: "largest difference \(worst) code values at \(at); \(over) bytes differ by more than 1") }
        return "1080p PiP, largest difference \(worst)"
    }

    // The compute pass (composite and NV12 in one dispatch) against the
    // fragment passes: every input format, rotation and mirror, masked insets.
    // Opaque insets within ±1; a translucent one within ±2 (each path rounds
    // the shaded colour and the blend to 8 bits its own way).
    for opacity in [1.0, 0.8] { check("compute path equals the fragment path (±\(opacity < 1 ? 2 : 1), inset opacity \(opacity))") {
        guard gpu.info.capabilities.computeShaders else { return "skipped: no OpenGL ES 3.1" }
        let canvas = PixelSize(width: 1920, height: 1080)
        var worst = 0, cases = 0
        var tolerance = opacity < 1 ? 2 : 1
        for format in PixelFormat.allCases {
            let primary = patternFrame(1920, 1080, format, seed: 1), secondary = patternFrame(1280, 720, format, seed: 2)
            for rotation in Rotation.allCases {
                let plan = CompositionPlan(canvas: canvas, background: RGBAColor(r: 0.1, g: 0.2, b: 0.3, a: 1), draws: [
                    DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 1440, height: 1080),
                                    crop: NormalizedRect(x: 0.1, y: 0, width: 0.75, height: 1)),
                    DrawDescription(role: .secondary, destination: PixelRect(x: 1300, y: 700, width: 540, height: 304),
                                    orientation: Orientation(rotation: rotation, mirrored: rotation == .r0 || rotation == .r180),
                                    opacity: opacity, cornerRadius: 24, borderWidth: 3, zIndex: 1)])
                var frames: [VideoFrame] = []
                for pass in [GPUPass.fragment, .compute] {
                    let c = try GPUCompositor(selection: selection, pass: pass)
                    defer { c.shutdown() }
                    let out = try c.addOutput(canvas: canvas)
                    try c.upload(primary, role: .primary)
                    try c.upload(secondary, role: .secondary)
                    try c.render(output: out, plan: plan, pts: .zero)
                    guard let f = try c.flush().first else { throw Failure(description: "no frame (\(pass))") }
                    guard c.stats.framesCompute == (pass == .compute ? 1 : 0) else { throw Failure(description: "\(pass) pass not taken") }
                    // Pictures read in place (NV12, I420, RGBA, BGRA) are filtered by the pass itself: one step more at the masked edge.
                    if c.plan.pictures == .inPlace && [.nv12, .i420, .rgba, .bgra].contains(format) { tolerance = opacity < 1 ? 3 : 2 }
                    frames.append(f)
                }
                let (d, at) = maxDifference(frames[0], frames[1])
                if d > tolerance { throw Failure(description: "\(format) \(rotation): difference \(d) at \(at)") }
                worst = max(worst, d)
                cases += 1
            }
        }
        return "1080p, \(cases) cases (formats × rotations, masked inset), largest difference \(worst)"
            + (tolerance > (opacity < 1 ? 2 : 1) ? " (pictures read in place: one step more allowed)" : "")
    } }

    // A take's frame sequence: every output frame of a pipelined run (as a
    // take drives the compositor: no wait but when the readback ring is full)
    // equals the same frame rendered alone (its readback waited for at once).
    check("pipelined frames equal frames rendered one at a time") { try sequenceCheck(selection) }
    check("frames from upload storage equal frames from ordinary memory") { try sequenceCheck(selection, pageLocked: true) }

    check("dma-buf export → import → draw") {
        let caps = gpu.info.capabilities
        guard caps.dmaBufExport else { return "skipped: no EGL_MESA_image_dma_buf_export" }
        let canvas = PixelSize(width: 16, height: 16)
        let out = try gpu.addOutput(canvas: canvas)
        defer { gpu.removeOutput(out) }
        try gpu.upload(rgbaFrame(16, 16) { _, _ in (40, 80, 120) }, role: .primary)
        try gpu.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas))]), pts: .zero, readback: false)
        let exported = try gpu.exportDmaBuf(output: out)
        defer { for p in exported.planes { close(p.fd) } }
        var note = "exported \(DmaBufFrame.fourccName(exported.fourcc)) modifier \(exported.modifier.map { String($0, radix: 16) } ?? "none"), \(exported.planes.count) plane(s)"
        guard caps.dmaBufImport else { return note + "; import skipped: no EGL_EXT_image_dma_buf_import" }
        try gpu.upload(DmaBufFrame(width: 16, height: 16, fourcc: exported.fourcc, modifier: exported.modifier,
                                   planes: exported.planes), role: .secondary)
        try gpu.upload(rgbaFrame(16, 16) { _, _ in (0, 0, 0) }, role: .primary)
        try gpu.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .secondary, destination: PixelRect(size: canvas))]), pts: .zero, readback: false)
        let img = try gpu.previewRGBA(output: out)
        let got = pixel(img, 8, 8)
        guard abs(Int(got.0) - 40) <= 1 && abs(Int(got.1) - 80) <= 1 && abs(Int(got.2) - 120) <= 1 else {
            throw Failure(description: "imported picture shows \(got), want (40, 80, 120)")
        }
        note += "; imported and drawn: \(got)"
        return note
    }

    check("GPU timing") {
        gpu.resetStats()
        let canvas = PixelSize(width: 256, height: 256)
        let out = try gpu.addOutput(canvas: canvas)
        defer { gpu.removeOutput(out) }
        for i in 0..<8 {
            try gpu.upload(rgbaFrame(256, 256) { x, y in (UInt8(x), UInt8(y), UInt8(i)) }, role: .primary)
            try gpu.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas))]), pts: .zero)
        }
        _ = try gpu.flush()
        let s = gpu.stats
        func ms(_ p: GPUPassStats) -> String {
            p.gpuCount > 0 ? String(format: "%.3f ms GPU", p.gpuTotalMs / Double(p.gpuCount))
                           : String(format: "%.3f ms CPU", p.cpuTotalMs / Double(max(p.count, 1)))
        }
        guard s.framesDelivered == 8 else { throw Failure(description: "\(s.framesDelivered) of 8 frames delivered") }
        return "timer queries \(s.timerQueries ? "on" : "off"); 256x256 per frame: upload \(ms(s.upload)), composite \(ms(s.composite)), nv12 \(ms(s.nv12))"
    }
}
print(failures == 0 ? "\nall checks passed" : "\n\(failures) check(s) failed")
exit(failures == 0 ? 0 : 1)
