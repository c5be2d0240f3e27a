import DiptychCore

/// RGB ↔ YUV coefficients for a matrix and range, on normalized (0...1) values.
///
/// Forward: `yuv = rgbToYUV · rgb + offset`; inverse: `rgb = yuvToRGB · (yuv − offset)`.
/// Matrices are row-major `[[Double]]` here; `columnMajor` gives GL's order.
public struct YUVCoefficients: Hashable, Sendable {
    public var rgbToYUV: [[Double]]
    public var offset: [Double]
    public var yuvToRGB: [[Double]]

    public init(matrix: ColorMatrix, range: ColorRange) {
        let (kr, kb): (Double, Double) = matrix == .bt709 ? (0.2126, 0.0722) : (0.299, 0.114)
        let kg = 1 - kr - kb
        let (ys, cs, yo): (Double, Double, Double) = range == .limited ? (219.0 / 255, 224.0 / 255, 16.0 / 255) : (1, 1, 0)
        let co = 128.0 / 255
        let y = [kr, kg, kb].map { $0 * ys }
        let u = [-kr / (2 * (1 - kb)), -kg / (2 * (1 - kb)), 0.5].map { $0 * cs }
        let v = [0.5, -kg / (2 * (1 - kr)), -kb / (2 * (1 - kr))].map { $0 * cs }
        rgbToYUV = [y, u, v]
        offset = [yo, co, co]
        yuvToRGB = YUVCoefficients.invert(rgbToYUV)
    }

    /// rgb (0...1) → yuv (0...1).
    public func yuv(r: Double, g: Double, b: Double) -> (y: Double, u: Double, v: Double) {
        let m = rgbToYUV
        return (m[0][0] * r + m[0][1] * g + m[0][2] * b + offset[0],
                m[1][0] * r + m[1][1] * g + m[1][2] * b + offset[1],
                m[2][0] * r + m[2][1] * g + m[2][2] * b + offset[2])
    }
    /// yuv (0...1) → rgb (0...1), unclamped.
    public func rgb(y: Double, u: Double, v: Double) -> (r: Double, g: Double, b: Double) {
        let m = yuvToRGB
        let a = y - offset[0], b = u - offset[1], c = v - offset[2]
        return (m[0][0] * a + m[0][1] * b + m[0][2] * c,
                m[1][0] * a + m[1][1] * b + m[1][2] * c,
                m[2][0] * a + m[2][1] * b + m[2][2] * c)
    }

    static func columnMajor(_ m: [[Double]]) -> [Float] {
        (0..<3).flatMap { c in (0..<3).map { r in Float(m[r][c]) } }
    }

    static func invert(_ m: [[Double]]) -> [[Double]] {
        let a = m[0][0], b = m[0][1], c = m[0][2]
        let d = m[1][0], e = m[1][1], f = m[1][2]
        let g = m[2][0], h = m[2][1], i = m[2][2]
        let A = e * i - f * h, B = -(d * i - f * g), C = d * h - e * g
        let det = a * A + b * B + c * C
        return [[A / det, -(b * i - c * h) / det, (b * f - c * e) / det],
                [B / det, (a * i - c * g) / det, -(a * f - c * d) / det],
                [C / det, -(a * h - b * g) / det, (a * e - b * d) / det]]
    }
}
