import Testing
@testable import DiptychCore

func approx(_ a: Double, _ b: Double, _ tolerance: Double = 1e-9) -> Bool { abs(a - b) <= tolerance }
func approx(_ a: NormalizedPoint, _ b: NormalizedPoint, _ tolerance: Double = 1e-9) -> Bool {
    approx(a.x, b.x, tolerance) && approx(a.y, b.y, tolerance)
}
func approx(_ a: NormalizedRect, _ b: NormalizedRect, _ tolerance: Double = 1e-12) -> Bool {
    approx(a.x, b.x, tolerance) && approx(a.y, b.y, tolerance)
        && approx(a.width, b.width, tolerance) && approx(a.height, b.height, tolerance)
}
func rect(_ x: Int, _ y: Int, _ w: Int, _ h: Int) -> PixelRect { PixelRect(x: x, y: y, width: w, height: h) }
func nrect(_ x: Double, _ y: Double, _ w: Double, _ h: Double) -> NormalizedRect {
    NormalizedRect(x: x, y: y, width: w, height: h)
}
func size(_ w: Int, _ h: Int) -> PixelSize { PixelSize(width: w, height: h) }
func stream(_ w: Int, _ h: Int, _ r: Rotation = .r0, mirrored: Bool = false) -> StreamGeometry {
    StreamGeometry(width: w, height: h, rotation: r, mirrored: mirrored)
}
