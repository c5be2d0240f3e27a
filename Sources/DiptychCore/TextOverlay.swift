import Glibc

/// How a text's lines sit on its anchor: the anchor is the left edge, the
/// centre or the right edge of the text's box, at its top.
public enum TextAlignment: String, Hashable, Sendable, CaseIterable {
    case left
    case center
    case right
}

/// A text drawn over an output's streams (`--text`, JSON `texts`): a
/// template expanded every frame from the take's clock (`TextTemplate`),
/// rasterised with FreeType and shaped with HarfBuzz only when the expanded
/// text changes, and drawn as an image overlay is, one canvas pixel a texel
/// (docs/ARCHITECTURE.md, "Overlays"). `x` and `y` are fractions of the
/// canvas where the top of the text's box is anchored (`align`), `size` its
/// em in canvas pixels; lines break at newlines.
public struct TextOverlay: Hashable, Sendable {
    /// The template as given (`{timecode}`, `Camera 2`).
    public var text: String
    public var x: Double
    public var y: Double
    /// Pixels per em (FreeType's pixel size).
    public var size: Int
    public var color: RGBAColor
    /// A TrueType/OpenType font file; nil: `defaultFont`.
    public var font: String?
    /// Width of the outline stroked around each glyph, in pixels (0: none).
    public var outlineWidth: Double
    public var outlineColor: RGBAColor
    /// A box filled behind the text (nil: none), `boxPadding` pixels around its lines.
    public var box: RGBAColor?
    /// Nil: a quarter of `size`.
    public var boxPadding: Int?
    public var opacity: Double
    public var layer: OverlayLayer
    public var align: TextAlignment

    public init(text: String, x: Double, y: Double, size: Int = 48, color: RGBAColor = .white, font: String? = nil,
                outlineWidth: Double = 0, outlineColor: RGBAColor = .black, box: RGBAColor? = nil, boxPadding: Int? = nil,
                opacity: Double = 1, layer: OverlayLayer = .top, align: TextAlignment = .left) {
        self.text = text; self.x = x; self.y = y; self.size = size; self.color = color; self.font = font
        self.outlineWidth = outlineWidth; self.outlineColor = outlineColor; self.box = box; self.boxPadding = boxPadding
        self.opacity = opacity; self.layer = layer; self.align = align
    }

    /// The font a text without `font` is set in (Debian's fonts-dejavu-core).
    public static let defaultFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    /// The font file this text is set in.
    public var fontPath: String { font ?? Self.defaultFont }
    /// The padding around the lines inside the box, in pixels.
    public var padding: Int { box == nil ? 0 : boxPadding ?? (size + 2) / 4 }

    public static let sizes = 4...1000
    public static let maximumTemplateBytes = 1000
    public static let maximumOutlineWidth = 50.0
    public static let maximumPadding = 500

    static let usage = "expected TEMPLATE@X,Y[,SIZE][,color=RRGGBB[AA]][,font=FILE][,outline=WIDTH[:RRGGBB[AA]]]"
        + "[,box=RRGGBB[AA][:PADDING]][,opacity=O][,align=left|center|right][,top|bottom] with X, Y fractions of the canvas,"
        + " e.g. '{timecode}@0.05,0.9,48,box=00000080'"

    /// Parses `TEMPLATE@X,Y[,SIZE][,KEY=VALUE]...[,top|bottom]`, split at the
    /// last `@` (`{timecode}@0.05,0.9,48,outline=2,box=00000080`).
    public static func parse(_ text: String, field: String = "--text") throws(ConfigurationError) -> TextOverlay {
        guard let at = text.lastIndex(of: "@"), at != text.startIndex else { throw ConfigurationError(field: field, value: text, reason: usage) }
        var parts = text[text.index(after: at)...].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, let x = Double(parts[0]), let y = Double(parts[1]) else {
            throw ConfigurationError(field: field, value: text, reason: usage)
        }
        var o = TextOverlay(text: String(text[..<at]), x: x, y: y)
        parts.removeFirst(2)
        if let first = parts.first, let size = Int(first) { o.size = size; parts.removeFirst() }
        for part in parts {
            if let layer = OverlayLayer(rawValue: part.lowercased()) { o.layer = layer; continue }
            guard let eq = part.firstIndex(of: "=") else {
                throw ConfigurationError(field: field, value: text, reason: "'\(part)' is not KEY=VALUE, top or bottom; " + usage)
            }
            let key = part[..<eq].lowercased(), value = String(part[part.index(after: eq)...])
            func color(_ s: some StringProtocol) throws(ConfigurationError) -> RGBAColor {
                guard let c = RGBAColor(hex: String(s)) else { throw ConfigurationError(field: "\(field) \(key)", value: String(s), reason: "expected a colour as RRGGBB or RRGGBBAA") }
                return c
            }
            func number(_ s: some StringProtocol) throws(ConfigurationError) -> Double {
                guard let d = Double(String(s)) else { throw ConfigurationError(field: "\(field) \(key)", value: String(s), reason: "expected a number") }
                return d
            }
            switch key {
            case "size":
                guard let s = Int(value) else { throw ConfigurationError(field: "\(field) size", value: value, reason: "expected whole pixels") }
                o.size = s
            case "color", "colour": o.color = try color(value)
            case "font": o.font = value
            case "outline":
                let p = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                o.outlineWidth = try number(p[0])
                if p.count == 2 { o.outlineColor = try color(p[1]) }
            case "box":
                let p = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                o.box = try color(p[0])
                if p.count == 2 {
                    guard let pad = Int(p[1]) else { throw ConfigurationError(field: "\(field) box", value: value, reason: "expected COLOR:PADDING with whole pixels") }
                    o.boxPadding = pad
                }
            case "opacity": o.opacity = try number(value)
            case "align":
                guard let a = TextAlignment(rawValue: value.lowercased()) else {
                    throw ConfigurationError(field: "\(field) align", value: value, reason: "expected left, center or right")
                }
                o.align = a
            default:
                throw ConfigurationError(field: field, value: text, reason: "unknown key '\(key)'; " + usage)
            }
        }
        if var e = o.validationError(field: field) {
            if e.field == "\(field).text" { e.field = field }   // `--text '{clock}': unknown field {clock}`
            throw e
        }
        return o
    }

    /// Nil when valid, else the reason naming `field` (the template's fields
    /// included; whether the font can be read is known only when it is opened).
    public func validationError(field: String) -> ConfigurationError? {
        if text.isEmpty { return ConfigurationError(field: "\(field).text", value: text, reason: "must not be empty") }
        if text.utf8.count > Self.maximumTemplateBytes {
            return ConfigurationError(field: "\(field).text", value: text, reason: "at most \(Self.maximumTemplateBytes) bytes")
        }
        do { _ = try TextTemplate(parsing: text, field: "\(field).text") } catch { return error }
        if !(x.isFinite && y.isFinite && (0...1).contains(x) && (0...1).contains(y)) {
            return ConfigurationError(field: "\(field).x", value: "\(x),\(y)", reason: "x and y must be fractions of the canvas (0...1)")
        }
        if !Self.sizes.contains(size) {
            return ConfigurationError(field: "\(field).size", value: "\(size)", reason: "must be \(Self.sizes.lowerBound)...\(Self.sizes.upperBound) pixels")
        }
        if let f = font, f.isEmpty || f.contains("\0") { return ConfigurationError(field: "\(field).font", value: f, reason: "must be a font file (TrueType or OpenType)") }
        if !(outlineWidth.isFinite && (0...Self.maximumOutlineWidth).contains(outlineWidth)) {
            return ConfigurationError(field: "\(field).outline", value: "\(outlineWidth)", reason: "width must be 0...\(Int(Self.maximumOutlineWidth)) pixels")
        }
        if let p = boxPadding, !(0...Self.maximumPadding).contains(p) {
            return ConfigurationError(field: "\(field).box.padding", value: "\(p)", reason: "must be 0...\(Self.maximumPadding) pixels")
        }
        for (name, c) in [("color", color), ("outline.color", outlineColor), ("box", box ?? .black)]
        where ![c.r, c.g, c.b, c.a].allSatisfy({ $0.isFinite && (0...1).contains($0) }) {
            return ConfigurationError(field: "\(field).\(name)", value: c.hexString, reason: "components must be 0...1")
        }
        if !(opacity.isFinite && (0...1).contains(opacity)) {
            return ConfigurationError(field: "\(field).opacity", value: "\(opacity)", reason: "must be between 0 and 1")
        }
        return nil
    }

    /// Checks one output's texts, beside its `images` image overlays (the
    /// compute pass samples `ImageOverlay.maximumPerOutput` pictures in all).
    public static func check(_ texts: [TextOverlay], images: Int, field: String) throws(ConfigurationError) {
        if images + texts.count > ImageOverlay.maximumPerOutput {
            throw ConfigurationError(field: field, value: texts.last?.text ?? "",
                                     reason: "at most \(ImageOverlay.maximumPerOutput) overlays an output, images and texts together (\(images) images, \(texts.count) texts)")
        }
        for (i, t) in texts.enumerated() {
            if let e = t.validationError(field: "\(field)[\(i)]") { throw e }
        }
    }

    /// The anchor on `canvas`, in pixels, rounded to even coordinates (a
    /// rendered text is padded to even edges around it, as image overlays are).
    public func anchor(in canvas: PixelSize) -> (x: Int, y: Int) {
        func even(_ v: Double) -> Int { 2 * Int((v / 2).rounded()) }
        return (even(x * Double(canvas.width)), even(y * Double(canvas.height)))
    }

    /// Its draw of overlay picture `id` at `destination` (the rendered
    /// text's pixels, one texel a pixel); `order` stacks the output's
    /// overlays of one layer (texts after its images).
    public func draw(id: Int, destination: PixelRect, order: Int) -> DrawDescription {
        .overlay(id, destination: destination, opacity: opacity, zIndex: (layer == .top ? 1_000 : -1_000) + order)
    }
}

/// What a text template's fields read: the frame's time on the take's
/// clock (docs/ARCHITECTURE.md, "One clock"), the output's rate, the wall
/// clock and the take's name.
public struct TextClock: Hashable, Sendable {
    /// The frame's time since the take started.
    public var time: MediaTime
    public var rate: FrameRate
    /// Seconds since 1970 (UTC).
    public var wallClock: Double
    public var take: String

    public init(time: MediaTime, rate: FrameRate, wallClock: Double, take: String) {
        self.time = time; self.rate = rate; self.wallClock = wallClock; self.take = take
    }

    /// The frame's number at the output rate: its time × the rate, rounded.
    public var frame: Int64 {
        let n = time.value.multipliedFullWidth(by: Int64(rate.numerator))
        let d = Int64(time.timescale) * Int64(rate.denominator)
        let (q, r) = d.dividingFullWidth(n)
        return q + (2 * r.magnitude >= d.magnitude ? (time.value >= 0 ? 1 : -1) : 0)
    }

    /// `HH:MM:SS:FF`: the frame number counted in whole frames of the
    /// nominal rate (the rate rounded up: 30 for 30000/1001, non-drop), the
    /// hours wrapping at 24.
    public var timecode: String {
        let nominal = Int64((Int(rate.numerator) + Int(rate.denominator) - 1) / Int(rate.denominator))
        let n = max(frame, 0)
        let seconds = n / nominal
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(two(seconds / 3600 % 24)):\(two(seconds / 60 % 60)):\(two(seconds % 60)):\(two(n % nominal))"
    }

    /// The wall clock in local time through strftime's `format`.
    public func wallClock(format: String) -> String {
        var t = time_t(wallClock.rounded(.down))
        var tm = tm()
        guard localtime_r(&t, &tm) != nil else { return "" }
        var buffer = [CChar](repeating: 0, count: 256)
        let n = strftime(&buffer, buffer.count, format, &tm)
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A text overlay's template: literal text with fields in braces, `{time}`
/// (the wall clock, `HH:MM:SS` local time; `{time:FORMAT}` through
/// strftime), `{timecode}` (`HH:MM:SS:FF` at the output rate, from the take's
/// clock), `{frame}` (the frame's number at that rate) and `{take}` (the
/// take's name); `{{` and `}}` are braces.
public struct TextTemplate: Hashable, Sendable {
    public enum Part: Hashable, Sendable {
        case literal(String)
        case time(format: String)
        case timecode
        case frame
        case take
    }
    public let parts: [Part]

    public init(parsing text: String, field: String) throws(ConfigurationError) {
        var parts: [Part] = []
        var literal = ""
        var i = text.startIndex
        func fail(_ why: String) -> ConfigurationError { ConfigurationError(field: field, value: text, reason: why) }
        while i < text.endIndex {
            let c = text[i]
            let next = text.index(after: i)
            if c == "}" {
                guard next < text.endIndex, text[next] == "}" else { throw fail("a lone } (write }} for a brace)") }
                literal.append("}"); i = text.index(after: next); continue
            }
            guard c == "{" else { literal.append(c); i = next; continue }
            if next < text.endIndex, text[next] == "{" { literal.append("{"); i = text.index(after: next); continue }
            guard let close = text[next...].firstIndex(of: "}") else { throw fail("a { without its } (write {{ for a brace)") }
            let name = text[next..<close]
            let part: Part
            switch name {
            case "time": part = .time(format: "%H:%M:%S")
            case "timecode": part = .timecode
            case "frame": part = .frame
            case "take": part = .take
            case _ where name.hasPrefix("time:") && name.count > 5: part = .time(format: String(name.dropFirst(5)))
            default: throw fail("unknown field {\(name)}; expected {time}, {time:FORMAT}, {timecode}, {frame} or {take}")
            }
            if !literal.isEmpty { parts.append(.literal(literal)); literal = "" }
            parts.append(part)
            i = text.index(after: close)
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    /// Whether the text is the same on every frame.
    public var isConstant: Bool { parts.allSatisfy { if case .literal = $0 { true } else { false } } }

    /// The text of the frame `clock` describes.
    public func expand(_ clock: TextClock) -> String {
        var s = ""
        for p in parts {
            switch p {
            case .literal(let l): s += l
            case .time(let f): s += clock.wallClock(format: f)
            case .timecode: s += clock.timecode
            case .frame: s += String(clock.frame)
            case .take: s += clock.take
            }
        }
        return s
    }
}

extension CompositionPlan {
    /// The plan with `extra` draws (an output's texts) added to its own.
    public func adding(_ extra: [DrawDescription]) -> CompositionPlan {
        extra.isEmpty ? self : CompositionPlan(canvas: canvas, background: background, draws: draws + extra)
    }
}
