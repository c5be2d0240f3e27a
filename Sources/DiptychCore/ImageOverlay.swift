/// Where an overlay is stacked: over every stream, or over the background
/// beneath them.
public enum OverlayLayer: String, Hashable, Sendable, CaseIterable {
    case top
    case bottom
}

/// An image drawn over an output's streams (`--overlay`, JSON `overlays`):
/// a PNG (alpha kept) stretched to `rect`, a normalized rectangle of the
/// canvas (top-left origin, edges rounded to even pixels), at `opacity`
/// times its own alpha. The image is an input: it is read once when the take
/// starts, through the take's source policy (`--input-root` on a server).
public struct ImageOverlay: Hashable, Sendable {
    public var image: String
    public var rect: NormalizedRect
    public var opacity: Double
    public var layer: OverlayLayer

    public init(image: String, rect: NormalizedRect, opacity: Double = 1, layer: OverlayLayer = .top) {
        self.image = image; self.rect = rect; self.opacity = opacity; self.layer = layer
    }

    /// Overlays one output may have (the compute pass samples eight pictures a frame).
    public static let maximumPerOutput = 8

    /// Parses `IMAGE@X,Y,W,H[,OPACITY][,top|bottom]` (`logo.png@0.8,0.05,0.15,0.1,0.9`).
    public static func parse(_ text: String, field: String = "--overlay") throws(ConfigurationError) -> ImageOverlay {
        let usage = "expected IMAGE@X,Y,W,H[,OPACITY][,top|bottom] with X, Y, W, H fractions of the canvas, e.g. logo.png@0.8,0.05,0.15,0.1"
        guard let at = text.lastIndex(of: "@"), at != text.startIndex else {
            throw ConfigurationError(field: field, value: text, reason: usage)
        }
        var parts = text[text.index(after: at)...].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var layer = OverlayLayer.top
        if let last = parts.last, let l = OverlayLayer(rawValue: last.lowercased()) { layer = l; parts.removeLast() }
        let numbers = parts.compactMap { Double($0) }
        guard numbers.count == parts.count, parts.count == 4 || parts.count == 5 else {
            throw ConfigurationError(field: field, value: text, reason: usage)
        }
        let o = ImageOverlay(image: String(text[..<at]), rect: NormalizedRect(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3]),
                             opacity: parts.count == 5 ? numbers[4] : 1, layer: layer)
        if let e = o.validationError(field: field) { throw e }
        return o
    }

    /// Nil when valid, else the reason naming `field`.
    public func validationError(field: String) -> ConfigurationError? {
        if image.isEmpty { return ConfigurationError(field: "\(field).image", value: image, reason: "must be an image file (PNG)") }
        if !rect.isWithinUnitSquare {
            return ConfigurationError(field: "\(field).rect", value: rect.description, reason: "must have a positive size and lie within 0...1")
        }
        if !(opacity.isFinite && (0...1).contains(opacity)) {
            return ConfigurationError(field: "\(field).opacity", value: "\(opacity)", reason: "must be between 0 and 1")
        }
        return nil
    }

    /// Checks a list of one output's overlays.
    public static func check(_ overlays: [ImageOverlay], field: String) throws(ConfigurationError) {
        if overlays.count > maximumPerOutput {
            throw ConfigurationError(field: field, value: overlays[maximumPerOutput].image,
                                     reason: "at most \(maximumPerOutput) overlays an output")
        }
        for (i, o) in overlays.enumerated() {
            if let e = o.validationError(field: "\(field)[\(i)]") { throw e }
        }
    }

    /// Its draw on `canvas`, showing overlay picture `id`; `order` stacks
    /// overlays of one layer in the order given.
    public func draw(id: Int, canvas: PixelSize, order: Int) -> DrawDescription {
        .overlay(id, destination: rect.evenPixelRect(in: canvas).clamped(to: PixelRect(size: canvas)), opacity: opacity,
                 zIndex: (layer == .top ? 1_000 : -1_000) + order)
    }
}

extension CompositionPlan {
    /// The plan with `overlays` drawn over (or beneath) its streams; `ids`
    /// gives each overlay's picture id (`ImageOverlay.image` → id).
    public func adding(_ overlays: [ImageOverlay], ids: [String: Int]) -> CompositionPlan {
        guard !overlays.isEmpty else { return self }
        let extra = overlays.enumerated().compactMap { i, o in ids[o.image].map { o.draw(id: $0, canvas: canvas, order: i) } }
        return CompositionPlan(canvas: canvas, background: background, draws: draws + extra)
    }
}
