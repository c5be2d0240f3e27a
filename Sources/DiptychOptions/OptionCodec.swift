import DiptychCore

/// JSON forms of the structured option values (colours, rectangles,
/// margins, switch lists, outputs). Objects are read strictly: a key that
/// is not expected is an error naming its path.
enum OptionCodec {
    static func object(_ j: JSONValue, field: String, keys: Set<String>) throws(ConfigurationError) -> [String: JSONValue] {
        guard case .object(let o) = j else { throw .json(field, j, "expected an object, found \(j.kindName)") }
        if let bad = o.keys.sorted().first(where: { !keys.contains($0) }) {
            throw .json("\(field).\(bad)", o[bad]!, "unknown key (expected \(keys.sorted().joined(separator: ", ")))")
        }
        return o
    }

    static func decodeNumber(_ j: JSONValue, field: String) throws(ConfigurationError) -> Double {
        guard case .number(let d) = j else { throw .json(field, j, "expected a number, found \(j.kindName)") }
        return d
    }

    /// A whole number in `range` (a fraction, or a number beyond it, is an
    /// error naming the field, never a truncation or a trap).
    static func decodeWhole(_ j: JSONValue, field: String, range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        let d = try decodeNumber(j, field: field)
        guard d.rounded() == d, d >= Double(range.lowerBound), d <= Double(range.upperBound) else {
            throw .json(field, j, "expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(d)
    }

    /// One of a type's named values (`"top"`: `OverlayLayer.top`); `reason` says which when it is none.
    static func decodeChoice<T: RawRepresentable>(_ j: JSONValue, field: String, reason: String) throws(ConfigurationError) -> T
        where T.RawValue == String {
        let name = try decodeString(j, field: field)
        guard let value = T(rawValue: name) else { throw ConfigurationError(field: field, value: name, reason: reason) }
        return value
    }

    static func decodeString(_ j: JSONValue, field: String) throws(ConfigurationError) -> String {
        guard case .string(let s) = j else { throw .json(field, j, "expected a string, found \(j.kindName)") }
        guard s.utf8.count <= Option.maximumTextLength else {
            throw ConfigurationError(field: field, value: s, reason: "is longer than \(Option.maximumTextLength) characters")
        }
        return s
    }

    static func decodeSize(_ j: JSONValue, field: String) throws(ConfigurationError) -> PixelSize? {
        switch j {
        case .null: return nil
        case .string(let s): return try TakeConfiguration.parseSize(s, field: field)
        case .object:
            let o = try object(j, field: field, keys: ["width", "height"])
            guard let w = o["width"], let h = o["height"] else { throw .json(field, j, "needs width and height") }
            let range = 1...TakeConfiguration.maximumDimension
            let width = try decodeWhole(w, field: "\(field).width", range: range)
            let height = try decodeWhole(h, field: "\(field).height", range: range)
            return try TakeConfiguration.parseSize("\(width)x\(height)", field: field)
        default: throw .json(field, j, "expected \"WxH\" or {\"width\": W, \"height\": H}")
        }
    }

    static func encode(_ m: PiPMargin) -> JSONValue {
        switch m {
        case .pixels(let p): .object(["pixels": .number(Double(p))])
        case .fraction(let f): .object(["fraction": .number(f)])
        }
    }

    /// The margins in pixels `PiPMargin` accepts.
    static let marginPixels = 0...4096

    static func decodeMargin(_ j: JSONValue, field: String) throws(ConfigurationError) -> PiPMargin {
        switch j {
        case .number(let d) where d.rounded() == d && d >= 1: return .pixels(try decodeWhole(j, field: field, range: Self.marginPixels))
        case .number(let d): return .fraction(d)
        case .string(let s): return try PiPMargin.parse(s, field: field)
        case .object:
            let o = try object(j, field: field, keys: ["pixels", "fraction"])
            if let p = o["pixels"] { return .pixels(try decodeWhole(p, field: "\(field).pixels", range: Self.marginPixels)) }
            if let f = o["fraction"] { return .fraction(try decodeNumber(f, field: "\(field).fraction")) }
            throw .json(field, j, "needs pixels or fraction")
        default: throw .json(field, j, "expected pixels, a fraction, or {\"pixels\": N} / {\"fraction\": F}")
        }
    }

    static func encode(_ c: RGBAColor) -> JSONValue {
        .object(["r": .number(c.r), "g": .number(c.g), "b": .number(c.b), "a": .number(c.a)])
    }

    static func decodeColor(_ j: JSONValue, field: String) throws(ConfigurationError) -> RGBAColor {
        if case .string(let s) = j {
            guard let c = RGBAColor(hex: s) else { throw .json(field, j, "expected RRGGBB or RRGGBBAA") }
            return c
        }
        let o = try object(j, field: field, keys: ["r", "g", "b", "a"])
        func part(_ k: String, _ d: Double?) throws(ConfigurationError) -> Double {
            guard let v = o[k] else {
                if let d { return d }
                throw .json(field, j, "needs r, g and b (0...1)")
            }
            let x = try decodeNumber(v, field: "\(field).\(k)")
            guard (0...1).contains(x) else { throw .json("\(field).\(k)", v, "must be between 0 and 1") }
            return x
        }
        return RGBAColor(r: try part("r", nil), g: try part("g", nil), b: try part("b", nil), a: try part("a", 1))
    }

    static func encode(_ r: NormalizedRect) -> JSONValue {
        .object(["x": .number(r.x), "y": .number(r.y), "width": .number(r.width), "height": .number(r.height)])
    }

    static func decodeRect(_ j: JSONValue, field: String) throws(ConfigurationError) -> NormalizedRect? {
        if case .null = j { return nil }
        let o = try object(j, field: field, keys: ["x", "y", "width", "height"])
        func part(_ k: String) throws(ConfigurationError) -> Double {
            guard let v = o[k] else { throw .json(field, j, "needs x, y, width and height") }
            return try decodeNumber(v, field: "\(field).\(k)")
        }
        return NormalizedRect(x: try part("x"), y: try part("y"), width: try part("width"), height: try part("height"))
    }

    static func encode(_ s: SecondarySwitch) -> JSONValue {
        .object(["at": .number(s.time), "source": .string(s.source.description)])
    }

    static func decodeSwitches(_ j: JSONValue, field: String) throws(ConfigurationError) -> [SecondarySwitch] {
        guard case .array(let items) = j else { throw .json(field, j, "expected a list of {\"at\": SECONDS, \"source\": SRC}") }
        var out: [SecondarySwitch] = []
        for (i, item) in items.enumerated() {
            let f = "\(field)[\(i)]"
            let o = try object(item, field: f, keys: ["at", "source"])
            guard let at = o["at"] else { throw .json("\(f).at", item, "missing") }
            guard let source = o["source"] else { throw .json("\(f).source", item, "missing") }
            let t = try decodeNumber(at, field: "\(f).at")
            out.append(SecondarySwitch(time: t, source: try SourceSpec.parse(try decodeString(source, field: "\(f).source"), field: "\(f).source")))
        }
        return out
    }

    static func encode(_ t: LayoutTransition) -> JSONValue {
        .object(["ms": .number(t.milliseconds), "easing": .string(t.easing.rawValue)])
    }

    /// `{"ms": 400, "easing": "ease-in-out"}` (easing optional) or `"400:ease-in-out"`.
    static func decodeTransition(_ j: JSONValue, field: String) throws(ConfigurationError) -> LayoutTransition {
        if case .string(let s) = j { return try LayoutTransition.parse(s, field: field) }
        if case .number(let d) = j { return try LayoutTransition.parse(LayoutTransition.format(d), field: field) }
        let o = try object(j, field: field, keys: ["ms", "easing"])
        guard let ms = o["ms"] else { throw .json("\(field).ms", j, "missing (the duration in milliseconds)") }
        var t = LayoutTransition(milliseconds: try decodeNumber(ms, field: "\(field).ms"))
        if let e = o["easing"] {
            t.easing = try decodeChoice(e, field: "\(field).easing",
                                        reason: "unknown easing; expected \(Easing.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if let e = t.validationError(field: "\(field).ms") { throw e }
        return t
    }

    /// `SECONDS=KIND` of `--layout-at`.
    static func parseLayoutAt(_ text: String, field: String) throws(ConfigurationError) -> OptionValues.LayoutAt {
        guard let eq = text.firstIndex(of: "="), let at = Double(text[..<eq]), at.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "expected SECONDS=KIND, e.g. 5=side-by-side")
        }
        return OptionValues.LayoutAt(at: at, kind: try LayoutKind.parse(String(text[text.index(after: eq)...]), field: field))
    }

    static func encode(_ c: ScheduledLayout) -> JSONValue {
        var o: [String: JSONValue] = ["at": .number(c.at), "layout": OptionParser.encodeLayout(c.layout)]
        if let t = c.transition { o["transition"] = encode(t) }
        return .object(o)
    }

    /// `[{"at": SECONDS, "layout": {...}, "transition": {...}}]`: each layout
    /// merged over the one before it (the first over `base`, the take's).
    static func decodeSchedule(_ j: JSONValue, field: String, base: Layout) throws(ConfigurationError) -> [ScheduledLayout] {
        guard case .array(let items) = j else {
            throw .json(field, j, "expected a list of {\"at\": SECONDS, \"layout\": {...}, \"transition\": {...}}")
        }
        var out: [ScheduledLayout] = []
        var layout = base
        for (i, item) in items.enumerated() {
            let f = "\(field)[\(i)]"
            let o = try object(item, field: f, keys: ["at", "layout", "transition"])
            guard let at = o["at"] else { throw .json("\(f).at", item, "missing (seconds into the take)") }
            guard let l = o["layout"] else { throw .json("\(f).layout", item, "missing (the layout fields to change)") }
            layout = try OptionParser.decodeLayout(l, field: "\(f).layout", base: layout)
            var transition: LayoutTransition?
            if let t = o["transition"] { transition = try decodeTransition(t, field: "\(f).transition") }
            out.append(ScheduledLayout(at: try decodeNumber(at, field: "\(f).at"), layout: layout, transition: transition))
        }
        return out
    }

    static func encode(_ o: ImageOverlay) -> JSONValue {
        .object(["image": .string(o.image), "rect": encode(o.rect), "opacity": .number(o.opacity), "z": .string(o.layer.rawValue)])
    }

    /// An output's overlays, images or texts, are at most `ImageOverlay.maximumPerOutput`.
    static func checkOverlayCount(_ n: Int, field: String) throws(ConfigurationError) {
        if n > ImageOverlay.maximumPerOutput {
            throw ConfigurationError(field: field, value: "", reason: "at most \(ImageOverlay.maximumPerOutput) overlays an output")
        }
    }

    /// `[{"image": "logo.png", "rect": {"x", "y", "width", "height"}, "opacity": 0.8, "z": "top"}]` (opacity and z optional).
    static func decodeOverlays(_ j: JSONValue, field: String) throws(ConfigurationError) -> [ImageOverlay] {
        guard case .array(let items) = j else {
            throw .json(field, j, "expected a list of {\"image\": FILE, \"rect\": {\"x\", \"y\", \"width\", \"height\"}, \"opacity\", \"z\"}")
        }
        var out: [ImageOverlay] = []
        for (i, item) in items.enumerated() {
            let f = "\(field)[\(i)]"
            let o = try object(item, field: f, keys: ["image", "rect", "opacity", "z"])
            guard let image = o["image"] else { throw .json("\(f).image", item, "missing (a PNG file)") }
            guard let rect = o["rect"], case .object = rect else { throw .json("\(f).rect", item, "missing (an object {\"x\", \"y\", \"width\", \"height\"} in 0...1)") }
            var overlay = ImageOverlay(image: try decodeString(image, field: "\(f).image"), rect: try decodeRect(rect, field: "\(f).rect")!)
            if let op = o["opacity"] { overlay.opacity = try decodeNumber(op, field: "\(f).opacity") }
            if let z = o["z"] {
                overlay.layer = try decodeChoice(z, field: "\(f).z", reason: "expected top or bottom")
            }
            if let e = overlay.validationError(field: f) { throw e }
            out.append(overlay)
        }
        try checkOverlayCount(out.count, field: field)
        return out
    }

    static func encode(_ t: TextOverlay) -> JSONValue {
        var o: [String: JSONValue] = ["text": .string(t.text), "x": .number(t.x), "y": .number(t.y), "size": .number(Double(t.size)),
                                      "color": .string(t.color.hexString), "opacity": .number(t.opacity), "z": .string(t.layer.rawValue),
                                      "align": .string(t.align.rawValue)]
        if let f = t.font { o["font"] = .string(f) }
        if t.outlineWidth > 0 { o["outline"] = .object(["width": .number(t.outlineWidth), "color": .string(t.outlineColor.hexString)]) }
        if let b = t.box {
            var box: [String: JSONValue] = ["color": .string(b.hexString)]
            if let p = t.boxPadding { box["padding"] = .number(Double(p)) }
            o["box"] = .object(box)
        }
        return .object(o)
    }

    static let textShape = "expected a list of {\"text\", \"x\", \"y\", \"size\", \"color\", \"font\", \"outline\": {\"width\", \"color\"}, \"box\": {\"color\", \"padding\"}, \"opacity\", \"z\", \"align\"}"

    /// `[{"text": "{timecode}", "x": 0.05, "y": 0.9, "size": 48, "color": "FFFFFF", "font": FILE,
    /// "outline": {"width": 2, "color": "000000"}, "box": {"color": "00000080", "padding": 8},
    /// "opacity": 1, "z": "top", "align": "left"}]` (text, x and y required).
    static func decodeTexts(_ j: JSONValue, field: String) throws(ConfigurationError) -> [TextOverlay] {
        guard case .array(let items) = j else { throw .json(field, j, textShape) }
        var out: [TextOverlay] = []
        for (i, item) in items.enumerated() {
            let f = "\(field)[\(i)]"
            let o = try object(item, field: f, keys: ["text", "x", "y", "size", "color", "font", "outline", "box", "opacity", "z", "align"])
            guard let text = o["text"] else { throw .json("\(f).text", item, "missing (the text, a template such as \"{timecode}\")") }
            guard let x = o["x"], let y = o["y"] else { throw .json(f, item, "needs x and y (fractions of the canvas, 0...1)") }
            var t = TextOverlay(text: try decodeString(text, field: "\(f).text"), x: try decodeNumber(x, field: "\(f).x"),
                                y: try decodeNumber(y, field: "\(f).y"))
            if let v = o["size"] { t.size = try decodeWhole(v, field: "\(f).size", range: TextOverlay.sizes) }
            if let v = o["color"] { t.color = try decodeColor(v, field: "\(f).color") }
            if let v = o["font"] { t.font = try decodeString(v, field: "\(f).font") }
            if let v = o["outline"] {
                let ol = try object(v, field: "\(f).outline", keys: ["width", "color"])
                guard let w = ol["width"] else { throw .json("\(f).outline", v, "needs width (pixels)") }
                t.outlineWidth = try decodeNumber(w, field: "\(f).outline.width")
                if let c = ol["color"] { t.outlineColor = try decodeColor(c, field: "\(f).outline.color") }
            }
            if let v = o["box"] {
                let b = try object(v, field: "\(f).box", keys: ["color", "padding"])
                t.box = try b["color"].map { c throws(ConfigurationError) in try decodeColor(c, field: "\(f).box.color") } ?? RGBAColor(r: 0, g: 0, b: 0, a: 0.5)
                if let p = b["padding"] { t.boxPadding = try decodeWhole(p, field: "\(f).box.padding", range: 0...TextOverlay.maximumPadding) }
            }
            if let v = o["opacity"] { t.opacity = try decodeNumber(v, field: "\(f).opacity") }
            if let v = o["z"] {
                t.layer = try decodeChoice(v, field: "\(f).z", reason: "expected top or bottom")
            }
            if let v = o["align"] {
                t.align = try decodeChoice(v, field: "\(f).align", reason: "expected left, center or right")
            }
            if let e = t.validationError(field: f) { throw e }
            out.append(t)
        }
        try checkOverlayCount(out.count, field: field)
        return out
    }

    /// Bits per second (or, `bits`, a number of bits) as the main options
    /// take them: a number (8000000) or a string ("10M", "2500k").
    static func decodeBitrate(_ j: JSONValue, field: String, bits: Bool = false) throws(ConfigurationError) -> Int {
        switch j {
        case .number(let d) where d.isFinite && abs(d) < 1e15: return Int(d)
        case .string(let s):
            return bits ? try TakeConfiguration.parseBits(s, field: field) : try TakeConfiguration.parseBitrate(s, field: field)
        default:
            throw .json(field, j, bits ? "expected bits as a number (20000000) or a string (\"20M\", \"2500k\")"
                                       : "expected bits per second as a number (8000000) or a string (\"10M\", \"2500k\")")
        }
    }

    static func encode(_ o: OutputSpec) -> JSONValue {
        var out: [String: JSONValue] = ["out": .string(o.out)]
        if let f = o.format { out["format"] = .string(f.rawValue) }
        if let l = o.layout { out["layout"] = OptionParser.encodeLayout(l) }
        if !o.overlays.isEmpty { out["overlays"] = .array(o.overlays.map(encode)) }
        if !o.texts.isEmpty { out["texts"] = .array(o.texts.map(encode)) }
        if let v = o.segmentTime { out["segmentTime"] = .number(v) }
        if let v = o.hlsListSize { out["hlsListSize"] = .number(Double(v)) }
        let e = o.encoding
        if let v = e.size { out["size"] = .string(v.description) }
        if let v = e.codec { out["codec"] = .string(v.rawValue) }
        if let v = e.bitrate { out["bitrate"] = .number(Double(v)) }
        if let v = e.maxrate { out["maxrate"] = .number(Double(v)) }
        if let v = e.bufsize { out["bufsize"] = .number(Double(v)) }
        if let v = e.preset { out["preset"] = .string(v) }
        if let v = e.rateDivisor { out["rateDivisor"] = .number(Double(v)) }
        return .object(out)
    }

    /// The keys of an output's own encoding, as the main options spell them (`OutputEncoding`).
    static let encodingKeys: Set<String> = ["size", "codec", "bitrate", "maxrate", "bufsize", "preset", "rateDivisor"]
    /// Every key of an output's object (`alsoOut`'s entries, `POST .../outputs`).
    static let outputKeys = Set(["out", "format", "layout", "overlays", "texts", "segmentTime", "hlsListSize"]).union(encodingKeys)

    /// An output's own encoding from its object's keys (`encodingKeys`), checked as far as it can be without the take.
    static func decodeEncoding(_ o: [String: JSONValue], field f: String) throws(ConfigurationError) -> OutputEncoding {
        var e = OutputEncoding()
        if let v = o["size"], v != .null { e.size = try decodeSize(v, field: "\(f).size") }
        if let v = o["codec"] {
            let name = try decodeString(v, field: "\(f).codec")
            guard let c = VideoCodec(rawValue: name.lowercased()) else {
                throw ConfigurationError(field: "\(f).codec", value: name, reason: "expected h264 or hevc")
            }
            e.codec = c
        }
        if let v = o["bitrate"] { e.bitrate = try decodeBitrate(v, field: "\(f).bitrate") }
        if let v = o["maxrate"] { e.maxrate = try decodeBitrate(v, field: "\(f).maxrate") }
        if let v = o["bufsize"] { e.bufsize = try decodeBitrate(v, field: "\(f).bufsize", bits: true) }
        if let v = o["preset"] { e.preset = try decodeString(v, field: "\(f).preset") }
        if let v = o["rateDivisor"] {
            e.rateDivisor = try decodeWhole(v, field: "\(f).rateDivisor", range: OutputEncoding.rateDivisors)
        }
        if let error = e.validationError(field: f) { throw error }
        return e
    }

    static func decodeOutputs(_ j: JSONValue, field: String) throws(ConfigurationError) -> [OutputSpec] {
        guard case .array(let items) = j else { throw .json(field, j, "expected a list of {\"out\": URL, \"layout\": {...}}") }
        var out: [OutputSpec] = []
        for (i, item) in items.enumerated() { out.append(try decodeOutput(item, field: "\(field)[\(i)]")) }
        return out
    }

    /// One output: `{"out": URL, "format": "mp4", "layout": {...}, "segmentTime": 2, "size": "640x360", "bitrate": "800k", ...}`
    /// (the server's `POST /v1/takes/{id}/outputs` body, one `alsoOut` element).
    static func decodeOutput(_ item: JSONValue, field f: String) throws(ConfigurationError) -> OutputSpec {
        let o = try object(item, field: f, keys: outputKeys)
        guard let url = o["out"] else { throw .json(f, item, "needs out") }
        var spec = OutputSpec(out: try decodeString(url, field: "\(f).out"))
        if let fmt = o["format"] { spec.format = try TakeConfiguration.parseFormat(try decodeString(fmt, field: "\(f).format"), field: "\(f).format") }
        if let l = o["layout"] { spec.layout = try OptionParser.decodeLayout(l, field: "\(f).layout") }
        if let l = o["overlays"] { spec.overlays = try decodeOverlays(l, field: "\(f).overlays") }
        if let l = o["texts"] { spec.texts = try decodeTexts(l, field: "\(f).texts") }
        if let v = o["segmentTime"] {
            switch v {
            case .number(let d): spec.segmentTime = d
            case .string(let t):
                guard let d = Double(t), d.isFinite else { throw ConfigurationError(field: "\(f).segmentTime", value: t, reason: "must be a number of seconds") }
                spec.segmentTime = d
            default: throw .json("\(f).segmentTime", v, "expected a number of seconds, found \(v.kindName)")
            }
        }
        if let v = o["hlsListSize"] { spec.hlsListSize = try decodeWhole(v, field: "\(f).hlsListSize", range: 0...1_000_000) }
        if let e = spec.segmentsError(fields: ("\(f).segmentTime", "\(f).hlsListSize"), named: "output") { throw e }
        spec.encoding = try decodeEncoding(o, field: f)
        return spec
    }
}
