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

func makeCompositor(_ selection: GPUSelection = .software, hooks: GPUTestHooks = GPUTestHooks(),
                    readbackDepth: Int = 4) throws -> GPUCompositor {
    try GPUCompositor(selection: selection, readbackDepth: readbackDepth, hooks: hooks)
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
