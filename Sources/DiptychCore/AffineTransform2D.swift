/// A 2-D affine map: `x' = m11·x + m21·y + tx`, `y' = m12·x + m22·y + ty`.
public struct AffineTransform2D: Hashable, Sendable {
    public var m11: Double, m12: Double, m21: Double, m22: Double, tx: Double, ty: Double
    public init(m11: Double, m12: Double, m21: Double, m22: Double, tx: Double, ty: Double) {
        self.m11 = m11; self.m12 = m12; self.m21 = m21; self.m22 = m22; self.tx = tx; self.ty = ty
    }
    public static let identity = AffineTransform2D(m11: 1, m12: 0, m21: 0, m22: 1, tx: 0, ty: 0)

    /// The affine map taking (0,0), (1,0) and (0,1) to `origin`, `xEnd` and `yEnd`.
    public init(origin: NormalizedPoint, xEnd: NormalizedPoint, yEnd: NormalizedPoint) {
        self.init(m11: xEnd.x - origin.x, m12: xEnd.y - origin.y, m21: yEnd.x - origin.x, m22: yEnd.y - origin.y,
                  tx: origin.x, ty: origin.y)
    }

    public func apply(_ p: NormalizedPoint) -> NormalizedPoint {
        NormalizedPoint(x: m11 * p.x + m21 * p.y + tx, y: m12 * p.x + m22 * p.y + ty)
    }

    /// Column-major 3×3 matrix for a GLSL `mat3` uniform (`uv = (M * vec3(st, 1)).xy`).
    public var columnMajor3x3: [Float] {
        [Float(m11), Float(m12), 0, Float(m21), Float(m22), 0, Float(tx), Float(ty), 1]
    }
}

extension DrawDescription {
    /// The whole per-draw mapping of `DrawDescription` as one affine map:
    /// local (s, t) in `destination` (0...1, top-left origin) → the sensor
    /// point sampled there (through `crop`, then `orientation`). With frames
    /// uploaded row 0 first (the Diptych convention) the sensor point is the
    /// texture coordinate, so a shader can use this as its only uv uniform.
    /// Equal to `sensorPoint(canvasPixelX:y:)` by construction.
    public var localToSensor: AffineTransform2D {
        func f(_ s: Double, _ t: Double) -> NormalizedPoint {
            orientation.sensorPoint(fromUpright: crop.point(atLocal: NormalizedPoint(x: s, y: t)))
        }
        return AffineTransform2D(origin: f(0, 0), xEnd: f(1, 0), yEnd: f(0, 1))
    }
}
