/// Mapping points between the canvas and each stream's sensor image
/// ("tap to focus": a tap on the composite becomes a focus point on the
/// right camera). Both directions use exactly the mapping the renderer
/// uses (`DrawDescription`): canvas pixel → local (s, t) in the destination
/// → upright point through `crop` → sensor point through
/// `Orientation.sensorPoint(fromUpright:)`.
///
/// Rounded-corner cut-outs and borders count as part of a draw. Draws with
/// opacity 0 are invisible and never hit.

/// The result of `CompositionPlan.hitTest(canvasPoint:)`.
public struct CanvasHit: Hashable, Sendable {
    /// The stream under the point.
    public var role: StreamRole
    /// The sensor (texture) point shown there, normalized, top-left origin.
    public var sensorPoint: NormalizedPoint
    /// Index into `CompositionPlan.draws` of the draw that was hit.
    public var drawIndex: Int
}

extension DrawDescription {
    /// The sensor point this draw shows at canvas pixel (`px`, `py`) (which
    /// should be inside `destination`).
    public func sensorPoint(canvasPixelX px: Double, y py: Double) -> NormalizedPoint {
        let s = (px - Double(destination.x)) / Double(destination.width)
        let t = (py - Double(destination.y)) / Double(destination.height)
        return orientation.sensorPoint(fromUpright: crop.point(atLocal: NormalizedPoint(x: s, y: t)))
    }

    /// The canvas pixel where this draw shows `sensorPoint`, or nil when the
    /// crop cuts that point away. Points exactly on the crop's edge count as
    /// shown (they map onto the destination's edge).
    public func canvasPixel(forSensorPoint sensorPoint: NormalizedPoint) -> (x: Double, y: Double)? {
        guard crop.width > 0, crop.height > 0, !destination.isEmpty else { return nil }
        let upright = orientation.uprightPoint(fromSensor: sensorPoint)
        guard crop.containsClosed(upright) else { return nil }
        let local = crop.localPoint(of: upright)
        return (Double(destination.x) + local.x * Double(destination.width),
                Double(destination.y) + local.y * Double(destination.height))
    }
}

extension CompositionPlan {
    /// The topmost visible draw containing `canvasPoint` (normalized canvas
    /// coordinates), with the stream's sensor point shown there; nil over
    /// background (gaps, letterbox bars) or outside the canvas.
    public func hitTest(canvasPoint p: NormalizedPoint) -> CanvasHit? {
        let px = p.x * Double(canvas.width), py = p.y * Double(canvas.height)
        for index in draws.indices.reversed() {
            let d = draws[index]
            guard d.opacity > 0, d.destination.contains(x: px, y: py) else { continue }
            return CanvasHit(role: d.role, sensorPoint: d.sensorPoint(canvasPixelX: px, y: py), drawIndex: index)
        }
        return nil
    }

    /// Where on the canvas (normalized) the topmost draw of `role` shows the
    /// sensor point `sensorPoint`; nil when the role has no visible draw or
    /// the crop cuts the point away. Occlusion by other draws is not
    /// considered: the point may lie under an inset (check with `hitTest`).
    public func canvasPoint(for role: StreamRole, sensorPoint: NormalizedPoint) -> NormalizedPoint? {
        guard let d = draws.last(where: { $0.role == role && $0.opacity > 0 }),
              let px = d.canvasPixel(forSensorPoint: sensorPoint) else { return nil }
        return NormalizedPoint(x: px.x / Double(canvas.width), y: px.y / Double(canvas.height))
    }

    /// The topmost visible draw of `role`, if any.
    public func draw(for role: StreamRole) -> DrawDescription? {
        draws.last(where: { $0.role == role && $0.opacity > 0 })
    }
}
