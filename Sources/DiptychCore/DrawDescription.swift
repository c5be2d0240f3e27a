/// One draw of a composite: a stream's picture placed on the canvas.
///
/// The renderer maps a canvas pixel inside `destination` to local (s, t) in
/// 0...1, then to the upright picture point `crop.x + s·crop.width,
/// crop.y + t·crop.height`, then through `orientation.sensorPoint(fromUpright:)`
/// to the texture coordinate it samples. Each draw carries its own uniforms.
public struct DrawDescription: Hashable, Sendable, Codable {
    public var role: StreamRole
    /// Where on the canvas, in pixels (top-left origin).
    public var destination: PixelRect
    /// Which part of the upright picture fills `destination` (normalized).
    public var crop: NormalizedRect
    public var orientation: Orientation
    /// 0...1; 1 is opaque.
    public var opacity: Double
    /// Radius of the rounded corners, in canvas pixels (0 = square).
    public var cornerRadius: Double
    /// Border drawn inside `destination`, in canvas pixels (0 = none).
    public var borderWidth: Double
    public var borderColor: RGBAColor
    /// Higher draws later (on top).
    public var zIndex: Int
    /// The overlay picture this draw shows instead of a stream: the id it
    /// was given to the compositor with (`GPUCompositor.setOverlay`); nil:
    /// the stream of `role`. An overlay is premultiplied RGBA, drawn with
    /// its own alpha times `opacity` (no corner radius or border).
    public var overlay: Int?

    public init(role: StreamRole, destination: PixelRect, crop: NormalizedRect = .unit,
                orientation: Orientation = .identity, opacity: Double = 1, cornerRadius: Double = 0,
                borderWidth: Double = 0, borderColor: RGBAColor = .white, zIndex: Int = 0, overlay: Int? = nil) {
        self.role = role; self.destination = destination; self.crop = crop
        self.orientation = orientation; self.opacity = opacity; self.cornerRadius = cornerRadius
        self.borderWidth = borderWidth; self.borderColor = borderColor; self.zIndex = zIndex; self.overlay = overlay
    }

    /// A draw of overlay `id` filling `destination` (the whole picture, upright).
    public static func overlay(_ id: Int, destination: PixelRect, opacity: Double = 1, zIndex: Int = 0) -> DrawDescription {
        DrawDescription(role: .primary, destination: destination, opacity: opacity, zIndex: zIndex, overlay: id)
    }
}

/// Everything needed to render one output frame: the canvas, the background
/// and the draws in painting order (ascending `zIndex`).
public struct CompositionPlan: Hashable, Sendable, Codable {
    public var canvas: PixelSize
    public var background: RGBAColor
    public var draws: [DrawDescription]
    public init(canvas: PixelSize, background: RGBAColor = .black, draws: [DrawDescription]) {
        self.canvas = canvas; self.background = background
        self.draws = draws.enumerated().sorted { ($0.element.zIndex, $0.offset) < ($1.element.zIndex, $1.offset) }.map(\.element)
    }
}
