/// The arrangement of a layout, named as on the command line.
public enum LayoutKind: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The main stream fills the canvas; the other is an inset in a corner.
    case pip
    /// Left and right halves.
    case sideBySide = "side-by-side"
    /// Top and bottom halves.
    case stacked
    /// Only the primary stream, full canvas.
    case primaryOnly = "primary-only"
    /// Only the secondary stream, full canvas.
    case secondaryOnly = "secondary-only"
    /// Explicit normalized rectangles per role (`Layout.custom`).
    case custom

    /// Parses a `--layout` value. `custom` is accepted only from JSON (it
    /// needs rectangles), so the command line offers the other five.
    public static func parse(_ text: String, field: String = "--layout") throws(ConfigurationError) -> LayoutKind {
        guard let k = LayoutKind(rawValue: text.lowercased()), k != .custom else {
            throw ConfigurationError(field: field, value: text,
                                     reason: "unknown layout; expected pip, side-by-side, stacked, primary-only or secondary-only")
        }
        return k
    }
    public var description: String { rawValue }
}

/// Which draw is painted last (on top) where draws overlap.
public enum ZOrder: String, Hashable, Sendable, Codable, CaseIterable {
    /// The inset (PiP) or, for `custom`, the non-main role is on top.
    case automatic
    case primaryOnTop = "primary-on-top"
    case secondaryOnTop = "secondary-on-top"
}

/// Per-draw decoration (see `DrawDescription`).
public struct DrawStyle: Hashable, Sendable, Codable {
    /// 0...1; 1 is opaque.
    public var opacity: Double
    /// Rounded-corner radius in canvas pixels.
    public var cornerRadius: Double
    /// Border inside the destination, in canvas pixels (0 = none).
    public var borderWidth: Double
    public var borderColor: RGBAColor
    public init(opacity: Double = 1, cornerRadius: Double = 0, borderWidth: Double = 0, borderColor: RGBAColor = .white) {
        self.opacity = opacity; self.cornerRadius = cornerRadius; self.borderWidth = borderWidth; self.borderColor = borderColor
    }
    /// Opaque, square, no border.
    public static let plain = DrawStyle()

    private enum Keys: String, CodingKey { case opacity, cornerRadius, borderWidth, borderColor }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(opacity: try c.decodeIfPresent(Double.self, forKey: .opacity) ?? 1,
                  cornerRadius: try c.decodeIfPresent(Double.self, forKey: .cornerRadius) ?? 0,
                  borderWidth: try c.decodeIfPresent(Double.self, forKey: .borderWidth) ?? 0,
                  borderColor: try c.decodeIfPresent(RGBAColor.self, forKey: .borderColor) ?? .white)
    }

    /// Nil when valid, else the reason naming `field`.
    func validationError(field: String) -> ConfigurationError? {
        if !(0...1).contains(opacity) {
            return ConfigurationError(field: "\(field).opacity", value: "\(opacity)", reason: "must be between 0 and 1")
        }
        if !(cornerRadius >= 0 && cornerRadius.isFinite) {
            return ConfigurationError(field: "\(field).cornerRadius", value: "\(cornerRadius)", reason: "must be zero or positive")
        }
        if !(borderWidth >= 0 && borderWidth.isFinite) {
            return ConfigurationError(field: "\(field).borderWidth", value: "\(borderWidth)", reason: "must be zero or positive")
        }
        return nil
    }
}

/// Explicit canvas rectangles (normalized, top-left origin) for `custom`.
/// A nil rectangle leaves that role out.
public struct CustomRects: Hashable, Sendable, Codable {
    public var primary: NormalizedRect?
    public var secondary: NormalizedRect?
    public init(primary: NormalizedRect? = nil, secondary: NormalizedRect? = nil) {
        self.primary = primary; self.secondary = secondary
    }
    public subscript(role: StreamRole) -> NormalizedRect? {
        get { role == .primary ? primary : secondary }
        set { if role == .primary { primary = newValue } else { secondary = newValue } }
    }
}

/// How two streams are arranged on one canvas. A value: resolve it into a
/// `CompositionPlan` for a canvas and two stream geometries.
///
/// Roles: the *main* role is the primary, or the secondary when `swapRoles`
/// is set. It is the full-canvas picture in `pip`, the left half in
/// `sideBySide`, the top half in `stacked`; the other role is the inset, the
/// right half, the bottom half. For `custom`, `swapRoles` exchanges the two
/// rectangles. `primaryOnly` and `secondaryOnly` ignore `swapRoles`.
///
/// Fallback (docs/ARCHITECTURE.md, "Single-stream fallback"): whatever the kind, when only one stream is
/// present it fills the canvas (with `contentMode`, plain style); when none
/// is, the plan has no draws (background only). `secondaryOnly` without a
/// secondary shows the primary, and `primaryOnly` without a primary shows
/// the secondary.
///
/// Every destination rectangle has even x, y, width and height (see
/// `Geometry+Alignment.swift`); crops are in the upright picture's normalized
/// space, as `DrawDescription` documents.
public struct Layout: Hashable, Sendable {
    public var kind: LayoutKind
    /// Inset placement, used when `kind == .pip`.
    public var pip: PiPPlacement
    /// Rectangles, used when `kind == .custom`.
    public var custom: CustomRects
    /// Exchange the roles: the secondary becomes the big (main) picture.
    public var swapRoles: Bool
    public var zOrder: ZOrder
    /// Fill (crop, the default) or fit (letterbox with `background`).
    public var contentMode: ContentMode
    /// Canvas colour behind all draws; shows in letterbox bars and gaps.
    public var background: RGBAColor
    /// Opacity, corner radius and border of the inset (the top draw of
    /// `pip` and `custom`). Other draws are plain.
    public var insetStyle: DrawStyle
    /// Per-stream zoom, 1...8: the centre 1/zoom of what the layout would
    /// show of that stream, enlarged to the same destination.
    public var primaryZoom: Double = 1
    public var secondaryZoom: Double = 1

    public static let zoomRange: ClosedRange<Double> = 1...8

    /// The zoom of `role`.
    public func zoom(_ role: StreamRole) -> Double { role == .primary ? primaryZoom : secondaryZoom }

    public init(kind: LayoutKind = .pip, pip: PiPPlacement = PiPPlacement(), custom: CustomRects = CustomRects(),
                swapRoles: Bool = false, zOrder: ZOrder = .automatic, contentMode: ContentMode = .aspectFill,
                background: RGBAColor = .black, insetStyle: DrawStyle = .plain) {
        self.kind = kind; self.pip = pip; self.custom = custom; self.swapRoles = swapRoles
        self.zOrder = zOrder; self.contentMode = contentMode; self.background = background; self.insetStyle = insetStyle
    }

    public static func pip(_ placement: PiPPlacement = PiPPlacement()) -> Layout { Layout(kind: .pip, pip: placement) }
    public static let sideBySide = Layout(kind: .sideBySide)
    public static let stacked = Layout(kind: .stacked)
    public static let primaryOnly = Layout(kind: .primaryOnly)
    public static let secondaryOnly = Layout(kind: .secondaryOnly)
    public static func custom(primary: NormalizedRect?, secondary: NormalizedRect?) -> Layout {
        Layout(kind: .custom, custom: CustomRects(primary: primary, secondary: secondary))
    }

    /// The role shown big (full canvas in PiP, left, top).
    public var mainRole: StreamRole { swapRoles ? .secondary : .primary }

    /// Nil when valid, else a `ConfigurationError` naming the field.
    public func validationError() -> ConfigurationError? {
        // The inset's settings are checked whatever the kind: a later change to pip must not find them out of range.
        if let e = pip.validationError() { return e }
        if kind == .custom {
            if custom.primary == nil && custom.secondary == nil {
                return ConfigurationError(field: "layout.custom", value: "{}", reason: "needs a rectangle for at least one role")
            }
            for role in StreamRole.allCases {
                if let r = custom[role], !r.isWithinUnitSquare {
                    return ConfigurationError(field: "layout.custom.\(role.rawValue)", value: r.description,
                                              reason: "must have a positive size and lie within 0...1")
                }
            }
        }
        for role in StreamRole.allCases where !(zoom(role).isFinite && Layout.zoomRange.contains(zoom(role))) {
            return ConfigurationError(field: "--zoom-\(role.rawValue)", value: "\(zoom(role))", reason: "must be between 1 and 8")
        }
        return insetStyle.validationError(field: "layout.insetStyle")
    }

    /// Nil when the layout fits `canvas`, else why not (a PiP margin that
    /// leaves no room for the inset).
    public func validationError(canvas: PixelSize) -> ConfigurationError? {
        guard kind == .pip, !canvas.isEmpty else { return nil }
        let shorter = canvas.shorterSide
        // The inset's shorter side must fit between the margins (at least
        // half of it, where a large inset is shrunk to fit anyway).
        let inset = min(pip.size * Double(shorter), Double(shorter) / 2)
        let margin = pip.margin.pixels(for: canvas)
        if Double(2 * margin) + inset > Double(shorter) {
            let most = max(0, PixelRect.evenEdge((Double(shorter) - inset) / 2 - 1))
            return ConfigurationError(field: "--pip-margin", value: pip.margin.description,
                                      reason: "leaves no room for the inset on a \(canvas) canvas (at most \(most) px with --pip-size \(pip.size))")
        }
        return nil
    }

    /// The draws for one output frame.
    ///
    /// - Parameters:
    ///   - canvas: output size; must be even (an odd dimension is rounded
    ///     down to even, and the plan's `canvas` is that even size).
    ///   - primary, secondary: stream geometries, or nil when a stream is
    ///     absent (see the fallback rule in the type's documentation).
    public func resolve(canvas requested: PixelSize, primary: StreamGeometry?, secondary: StreamGeometry?) -> CompositionPlan {
        let canvas = requested.evenAligned()
        let full = PixelRect(size: canvas)
        func geometry(_ role: StreamRole) -> StreamGeometry? { role == .primary ? primary : secondary }
        func draw(_ role: StreamRole, cell: PixelRect, style: DrawStyle = .plain, z: Int = 0,
                  mode: ContentMode? = nil) -> DrawDescription? {
            guard let g = geometry(role), !cell.isEmpty else { return nil }
            let placed = (mode ?? contentMode).place(content: g.uprightAspect, in: cell)
            return DrawDescription(role: role, destination: placed.destination, crop: placed.crop.zoomed(by: zoom(role)),
                                   orientation: g.orientation, opacity: style.opacity, cornerRadius: style.cornerRadius,
                                   borderWidth: style.borderWidth, borderColor: style.borderColor, zIndex: z)
        }
        func plan(_ draws: [DrawDescription?]) -> CompositionPlan {
            CompositionPlan(canvas: canvas, background: background, draws: draws.compactMap { $0 })
        }
        // Rule 11: one stream present → it fills the canvas.
        switch (primary, secondary) {
        case (nil, nil): return plan([])
        case (.some, nil): return plan([draw(.primary, cell: full)])
        case (nil, .some): return plan([draw(.secondary, cell: full)])
        case (.some, .some): break
        }
        let main = mainRole, other = mainRole.other
        /// zIndex for `role` when `defaultTop` is on top unless `zOrder` says otherwise.
        func z(_ role: StreamRole, defaultTop: StreamRole) -> Int {
            switch zOrder {
            case .automatic: return role == defaultTop ? 1 : 0
            case .primaryOnTop: return role == .primary ? 1 : 0
            case .secondaryOnTop: return role == .secondary ? 1 : 0
            }
        }
        switch kind {
        case .primaryOnly:
            return plan([draw(.primary, cell: full)])
        case .secondaryOnly:
            return plan([draw(.secondary, cell: full)])
        case .pip:
            let content = geometry(other)!.uprightAspect
            let inset = pip.insetRect(canvas: canvas, content: content)
            return plan([
                draw(main, cell: full, z: z(main, defaultTop: other)),
                // The inset has its stream's aspect already; fill only absorbs even-pixel rounding.
                draw(other, cell: inset, style: insetStyle, z: z(other, defaultTop: other), mode: .aspectFill),
            ])
        case .sideBySide:
            let split = PixelRect.evenEdge(Double(canvas.width) / 2)
            return plan([
                draw(main, cell: PixelRect(x: 0, y: 0, width: split, height: canvas.height), z: z(main, defaultTop: other)),
                draw(other, cell: PixelRect(x: split, y: 0, width: canvas.width - split, height: canvas.height),
                     z: z(other, defaultTop: other)),
            ])
        case .stacked:
            let split = PixelRect.evenEdge(Double(canvas.height) / 2)
            return plan([
                draw(main, cell: PixelRect(x: 0, y: 0, width: canvas.width, height: split), z: z(main, defaultTop: other)),
                draw(other, cell: PixelRect(x: 0, y: split, width: canvas.width, height: canvas.height - split),
                     z: z(other, defaultTop: other)),
            ])
        case .custom:
            // swapRoles exchanges the rectangles.
            let rectFor: (StreamRole) -> NormalizedRect? = { role in swapRoles ? custom[role.other] : custom[role] }
            let top: StreamRole = zOrder == .primaryOnTop ? .primary : (zOrder == .secondaryOnTop ? .secondary : other)
            return plan(StreamRole.allCases.map { role in
                guard let r = rectFor(role) else { return nil }
                let cell = r.evenPixelRect(in: canvas).clamped(to: full)
                return draw(role, cell: cell, style: role == top ? insetStyle : .plain, z: role == top ? 1 : 0)
            })
        }
    }
}

extension Layout: Codable {
    private enum Keys: String, CodingKey {
        case kind, pip, custom, swapRoles, zOrder, contentMode, background, insetStyle
    }
    /// JSON: every key optional, e.g. `{"kind": "pip", "pip": {"corner": "top-left"}}`.
    /// `background` may be an object `{"r":0,"g":0,"b":0,"a":1}` or a hex string `"RRGGBB"`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        var l = Layout()
        if let k = try c.decodeIfPresent(String.self, forKey: .kind) {
            guard let kind = LayoutKind(rawValue: k) else {
                throw DecodingError.dataCorruptedError(forKey: .kind, in: c, debugDescription:
                    "unknown layout '\(k)'; expected pip, side-by-side, stacked, primary-only, secondary-only or custom")
            }
            l.kind = kind
        }
        l.pip = try c.decodeIfPresent(PiPPlacement.self, forKey: .pip) ?? l.pip
        l.custom = try c.decodeIfPresent(CustomRects.self, forKey: .custom) ?? l.custom
        l.swapRoles = try c.decodeIfPresent(Bool.self, forKey: .swapRoles) ?? false
        l.zOrder = try c.decodeIfPresent(ZOrder.self, forKey: .zOrder) ?? .automatic
        l.contentMode = try c.decodeIfPresent(ContentMode.self, forKey: .contentMode) ?? .aspectFill
        if let hex = try? c.decodeIfPresent(String.self, forKey: .background) {
            guard let color = RGBAColor(hex: hex) else {
                throw DecodingError.dataCorruptedError(forKey: .background, in: c, debugDescription: "expected RRGGBB or RRGGBBAA")
            }
            l.background = color
        } else {
            l.background = try c.decodeIfPresent(RGBAColor.self, forKey: .background) ?? .black
        }
        l.insetStyle = try c.decodeIfPresent(DrawStyle.self, forKey: .insetStyle) ?? .plain
        self = l
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(kind.rawValue, forKey: .kind)
        try c.encode(pip, forKey: .pip)
        if custom != CustomRects() { try c.encode(custom, forKey: .custom) }
        try c.encode(swapRoles, forKey: .swapRoles)
        try c.encode(zOrder, forKey: .zOrder)
        try c.encode(contentMode, forKey: .contentMode)
        try c.encode(background, forKey: .background)
        try c.encode(insetStyle, forKey: .insetStyle)
    }
}

extension CompositionPlan {
    /// For each zoomed draw that shows its stream above the stream's own
    /// resolution: the role and the enlargement (canvas pixels per stream
    /// pixel). `uprightSizes` are the streams' upright picture sizes.
    public func zoomUpsampling(layout: Layout, uprightSizes: [StreamRole: PixelSize]) -> [(role: StreamRole, scale: Double)] {
        draws.compactMap { d in
            guard d.overlay == nil, layout.zoom(d.role) > 1, let size = uprightSizes[d.role], !size.isEmpty, d.crop.width > 0 else { return nil }
            let scale = Double(d.destination.width) / (d.crop.width * Double(size.width))
            return scale > 1.0001 ? (d.role, scale) : nil
        }
    }
}
