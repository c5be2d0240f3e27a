import DiptychCore

func nrect(_ x: Double, _ y: Double, _ w: Double, _ h: Double) -> NormalizedRect {
    NormalizedRect(x: x, y: y, width: w, height: h)
}
func size(_ w: Int, _ h: Int) -> PixelSize { PixelSize(width: w, height: h) }
