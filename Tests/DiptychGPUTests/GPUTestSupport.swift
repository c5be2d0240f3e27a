import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Every GL test lives under this one serialized suite (suites of other files
/// extend it), so only one test touches llvmpipe at a time.
@Suite(.serialized) struct GPU {}

/// 8-bit RGBA.
struct RGBA8: Equatable, CustomStringConvertible {
    var r: UInt8, g: UInt8, b: UInt8, a: UInt8 = 255
    var description: String { "(\(r),\(g),\(b),\(a))" }
    func close(to o: RGBA8, within t: Int) -> Bool {
        abs(Int(r) - Int(o.r)) <= t && abs(Int(g) - Int(o.g)) <= t && abs(Int(b) - Int(o.b)) <= t && abs(Int(a) - Int(o.a)) <= t
    }
}

/// A compositor on llvmpipe: the planner's plan for `request` (the defaults,
/// whatever the environment says), or `plan` where given.
func makeCompositor(_ selection: GPUSelection = .software, hooks: GPUTestHooks = GPUTestHooks(), request: GPURequest = GPURequest(),
                    plan: GPUPlan? = nil, readbackDepth: Int = 4, uploadDepth: Int? = nil, pass: GPUPass = .compute,
                    log: @escaping @Sendable (String) -> Void = { _ in }) throws -> GPUCompositor {
    try GPUCompositor(selection: selection, readbackDepth: readbackDepth, uploadDepth: uploadDepth, pass: pass, request: request,
                      plan: plan, hooks: hooks, log: log)
}

extension GPURequest {
    /// NV12 read back through imported memory, uploads staged in GL's buffers.
    static var readbackOnly: GPURequest { var r = GPURequest(); r.uploads = .off; return r }
    /// Uploads staged in imported memory, NV12 read back through GL's buffers.
    static var stagingOnly: GPURequest { var r = GPURequest(); r.uploads = .import; r.readback = .gl; return r }
}

/// An RGBA frame whose pixel (x, y) is `f(x, y)`; `padding` extra bytes per row.
func rgbaFrame(_ w: Int, _ h: Int, padding: Int = 0, format: PixelFormat = .rgba, _ f: (Int, Int) -> RGBA8) -> VideoFrame {
    let stride = w * 4 + padding
    let storage = FrameStorage(zeroedCount: stride * h)
    let p = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
    for y in 0..<h {
        for x in 0..<w {
            let c = f(x, y)
            let o = y * stride + x * 4
            if format == .bgra { p[o] = c.b; p[o + 1] = c.g; p[o + 2] = c.r } else { p[o] = c.r; p[o + 1] = c.g; p[o + 2] = c.b }
            p[o + 3] = c.a
        }
    }
    return VideoFrame(width: w, height: h, format: format, planes: [FramePlane(storage: storage, stride: stride)], pts: .zero)
}

/// A pattern where every pixel of a picture up to 256×256 is distinct: (x, y, tag).
func coordinateFrame(_ w: Int, _ h: Int, tag: UInt8) -> VideoFrame {
    rgbaFrame(w, h) { x, y in RGBA8(r: UInt8(x), g: UInt8(y), b: tag) }
}

func solidFrame(_ w: Int, _ h: Int, _ c: RGBA8) -> VideoFrame { rgbaFrame(w, h) { _, _ in c } }

extension VideoFrame {
    /// Pixel of an RGBA frame.
    func rgba(_ x: Int, _ y: Int) -> RGBA8 {
        let p = planes[0].baseAddress.assumingMemoryBound(to: UInt8.self) + y * planes[0].stride + x * 4
        return RGBA8(r: p[0], g: p[1], b: p[2], a: p[3])
    }
    /// Byte of plane `plane` at (x, y) (x in bytes).
    func byte(plane: Int, _ x: Int, _ y: Int) -> UInt8 {
        planes[plane].baseAddress.assumingMemoryBound(to: UInt8.self)[y * planes[plane].stride + x]
    }
}

/// glGetError on the render thread (must stay GL_NO_ERROR after every typed error).
func glErrorNow(_ c: GPUCompositor) throws -> UInt32 {
    try c.withRenderer { _ in glGetError() }
}

func color(_ c: RGBA8) -> RGBAColor {
    RGBAColor(r: Double(c.r) / 255, g: Double(c.g) / 255, b: Double(c.b) / 255, a: Double(c.a) / 255)
}

func renderPreview(_ c: GPUCompositor, _ out: OutputID, _ plan: CompositionPlan) throws -> VideoFrame {
    try c.render(output: out, plan: plan, pts: .zero, readback: false)
    return try c.previewRGBA(output: out)
}

/// CPU reference of the compositor for opaque, unmasked draws sampled 1:1
/// (nearest): canvas pixel centre → local (s, t) → upright crop point →
/// `Orientation.sensorPoint(fromUpright:)` → texel.
func referenceComposite(canvas: PixelSize, background: RGBA8, draws: [(DrawDescription, VideoFrame)]) -> [[RGBA8]] {
    var img = [[RGBA8]](repeating: [RGBA8](repeating: background, count: canvas.width), count: canvas.height)
    let ordered = draws.enumerated().sorted { ($0.element.0.zIndex, $0.offset) < ($1.element.0.zIndex, $1.offset) }.map(\.element)
    for y in 0..<canvas.height {
        for x in 0..<canvas.width {
            let px = Double(x) + 0.5, py = Double(y) + 0.5
            for (d, f) in ordered where d.destination.contains(x: px, y: py) {
                let s = (px - Double(d.destination.x)) / Double(d.destination.width)
                let t = (py - Double(d.destination.y)) / Double(d.destination.height)
                let up = NormalizedPoint(x: d.crop.x + s * d.crop.width, y: d.crop.y + t * d.crop.height)
                let sp = d.orientation.sensorPoint(fromUpright: up)
                let tx = min(max(Int((sp.x * Double(f.width)).rounded(.down)), 0), f.width - 1)
                let ty = min(max(Int((sp.y * Double(f.height)).rounded(.down)), 0), f.height - 1)
                img[y][x] = f.rgba(tx, ty)
            }
        }
    }
    return img
}

/// Compares a preview with a reference image; returns the first few mismatches.
func mismatches(_ frame: VideoFrame, _ ref: [[RGBA8]], tolerance: Int = 0, limit: Int = 5) -> [String] {
    var out: [String] = []
    for y in 0..<ref.count {
        for x in 0..<ref[y].count where !frame.rgba(x, y).close(to: ref[y][x], within: tolerance) {
            out.append("(\(x),\(y)): got \(frame.rgba(x, y)) want \(ref[y][x])")
            if out.count >= limit { return out }
        }
    }
    return out
}

/// Aspect-fill crop of a picture (upright size) into a destination, as layouts do.
func aspectFillCrop(picture: PixelSize, destination: PixelSize) -> NormalizedRect {
    let pa = picture.aspect, da = destination.aspect
    if pa > da { let w = da / pa; return NormalizedRect(x: (1 - w) / 2, y: 0, width: w, height: 1) }
    let h = pa / da
    return NormalizedRect(x: 0, y: (1 - h) / 2, width: 1, height: h)
}

/// Deterministic pseudo-random bytes.
struct LCG {
    var state: UInt64
    mutating func next() -> UInt8 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}

/// Builds an NV12 or I420 frame from a function giving (Y, U, V) per luma pixel
/// (chroma taken at even coordinates). Extra padding bytes per row per plane.
func yuvFrame(_ w: Int, _ h: Int, format: PixelFormat, matrix: ColorMatrix, range: ColorRange,
              padding: [Int] = [0, 0, 0], _ f: (Int, Int) -> (UInt8, UInt8, UInt8)) -> VideoFrame {
    var strides: [Int] = [], offsets: [Int] = []
    var total = 0
    for p in 0..<format.planeCount {
        let s = format.minimumStride(plane: p, width: w) + padding[p]
        strides.append(s); offsets.append(total)
        total += s * format.planeHeight(plane: p, height: h) + 7
    }
    let storage = FrameStorage(zeroedCount: total)
    let b = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
    for y in 0..<h { for x in 0..<w { b[offsets[0] + y * strides[0] + x] = f(x, y).0 } }
    for cy in 0..<(h / 2) {
        for cx in 0..<(w / 2) {
            let (_, u, v) = f(cx * 2, cy * 2)
            if format == .nv12 {
                b[offsets[1] + cy * strides[1] + cx * 2] = u
                b[offsets[1] + cy * strides[1] + cx * 2 + 1] = v
            } else {
                b[offsets[1] + cy * strides[1] + cx] = u
                b[offsets[2] + cy * strides[2] + cx] = v
            }
        }
    }
    let planes = (0..<format.planeCount).map { FramePlane(storage: storage, offset: offsets[$0], stride: strides[$0]) }
    return VideoFrame(width: w, height: h, format: format, planes: planes, pts: .zero, matrix: matrix, range: range)
}

func byte(_ v: Double) -> UInt8 { UInt8(min(max((v * 255).rounded(), 0), 255)) }
