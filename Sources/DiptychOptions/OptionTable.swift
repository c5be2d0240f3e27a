import DiptychCore

/// Every option of a take, in `--help` order. Each is spelled here once.
extension Option {
    public static let table: [Option] = inputs + layout + encoding + takeControl + embedding

    private static func enumValue<E: RawRepresentable & CaseIterable>(_ type: E.Type, _ text: String, field: String,
                                                                       _ expected: String) throws(ConfigurationError) -> E where E.RawValue == String {
        guard let e = E(rawValue: text.lowercased()) else { throw ConfigurationError(field: field, value: text, reason: expected) }
        return e
    }

    private static func seconds(_ text: String, field: String) throws(ConfigurationError) -> Double {
        guard let d = Double(text), d.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "must be a number of seconds")
        }
        return d
    }

    /// A whole number, else the error `reason` names.
    private static func wholeNumber(_ text: String, field: String, reason: String) throws(ConfigurationError) -> Int {
        guard let n = Int(text) else { throw ConfigurationError(field: field, value: text, reason: reason) }
        return n
    }

    /// A gain in decibels: `-6`, `-6dB`, `+3 dB`.
    private static func decibels(_ text: String, field: String) throws(ConfigurationError) -> Double {
        var t = Substring(text)
        if t.lowercased().hasSuffix("db") { t = t.dropLast(2) }
        while t.last == " " { t = t.dropLast() }
        if t.first == "+" { t = t.dropFirst() }
        guard let d = Double(t), d.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "must be a number of decibels (-6, 3dB)")
        }
        return d
    }

    private static func rotation(_ text: String, field: String) throws(ConfigurationError) -> Rotation {
        guard let n = Int(text), let r = Rotation(degrees: n) else {
            throw ConfigurationError(field: field, value: text, reason: "must be 0, 90, 180 or 270")
        }
        return r
    }

    private static func number(_ text: String, field: String) throws(ConfigurationError) -> Double {
        guard let d = Double(text), d.isFinite else { throw ConfigurationError(field: field, value: text, reason: "must be a number") }
        return d
    }

    /// Sets a field of the last `--also-out`'s encoding, checked alone (one
    /// line naming the flag); the checks across fields are `validate()`'s.
    private static func alsoEncoding(_ v: inout OptionValues, _ text: String, _ field: String,
                                     _ set: (inout OutputEncoding) throws(ConfigurationError) -> Void) throws(ConfigurationError) {
        guard let last = v.take.extraOutputs.indices.last else {
            throw ConfigurationError(field: field, value: text, reason: "comes after the --also-out it applies to")
        }
        var alone = OutputEncoding()
        try set(&alone)
        if alone.bufsize != nil { alone.maxrate = alone.bufsize }  // the buffer's peak rate is checked with the others
        if let e = alone.validationError(field: "") { throw ConfigurationError(field: field, value: text, reason: e.reason) }
        try set(&v.take.extraOutputs[last].encoding)
    }

    /// Sets the last `--also-out`'s segment length or playlist size, checked
    /// against that output at once (one line naming the flag).
    private static func alsoOutput(_ v: inout OptionValues, _ text: String, _ field: String,
                                   _ set: (inout OutputSpec) -> Void) throws(ConfigurationError) {
        guard let last = v.take.extraOutputs.indices.last else {
            throw ConfigurationError(field: field, value: text, reason: "comes after the --also-out it applies to")
        }
        var o = v.take.extraOutputs[last]
        set(&o)
        if let e = o.segmentsError(fields: (field, field), named: "--also-out") { throw ConfigurationError(field: field, value: text, reason: e.reason) }
        v.take.extraOutputs[last] = o
    }

    /// A role's source as JSON: a string, or a list when it has fallbacks.
    private static func sourceList(_ head: SourceSpec, _ fallbacks: [SourceSpec]) -> JSONValue {
        fallbacks.isEmpty ? .string(head.description) : .array(([head] + fallbacks).map { .string($0.description) })
    }

    /// `"primary": "SRC"` or `"primary": ["SRC", "SRC", ...]` (a priority list, highest first).
    private static func decodeSourceList(_ j: JSONValue, field: String) throws(ConfigurationError) -> (SourceSpec, [SourceSpec]) {
        switch j {
        case .string(let s):
            return (try SourceSpec.parse(s, field: field), [])
        case .array(let items):
            guard !items.isEmpty else { throw .json(field, j, "expected a source or a non-empty list of sources") }
            var specs: [SourceSpec] = []
            for (i, item) in items.enumerated() {
                let f = "\(field)[\(i)]"
                guard case .string(let s) = item else { throw .json(f, item, "expected a string, found \(item.kindName)") }
                guard s.utf8.count <= maximumTextLength else {
                    throw ConfigurationError(field: f, value: "", reason: "is longer than \(maximumTextLength) characters")
                }
                specs.append(try SourceSpec.parse(s, field: f))
            }
            return (specs[0], Array(specs.dropFirst()))
        default:
            throw .json(field, j, "expected a string or a list of strings, found \(j.kindName)")
        }
    }

    // MARK: Inputs and outputs

    static let inputs: [Option] = [
        .text("--primary", ["primary"], "SRC", "the clock stream: a media file or URL, testsrc:NAME[:WxH[@FPS]] or - (Y4M on stdin)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.primary = try SourceSpec.parse(t, field: f) },
              get: { sourceList($0.take.primary, $0.take.primaryFallbacks) })
            .replacingJSON { v, j, f throws(ConfigurationError) in
                (v.take.primary, v.take.primaryFallbacks) = try decodeSourceList(j, field: f)
            },
        .text("--primary-fallback", nil, "SRC",
              "shown when the sources before it are lost (repeatable, highest priority first; JSON: \"primary\": [SRC, SRC, ...])",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in v.take.primaryFallbacks.append(try SourceSpec.parse(t, field: f)) },
              get: { _ in nil }),
        .text("--secondary", ["secondary"], "SRC", "the second stream, or none (default)",
              set: { v, t, f throws(ConfigurationError) in v.take.secondary = try SourceSpec.parse(t, field: f) },
              get: { sourceList($0.take.secondary, $0.take.secondaryFallbacks) })
            .replacingJSON { v, j, f throws(ConfigurationError) in
                (v.take.secondary, v.take.secondaryFallbacks) = try decodeSourceList(j, field: f)
            },
        .text("--secondary-fallback", nil, "SRC", "the same for the secondary (JSON: \"secondary\": [SRC, SRC, ...])",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in v.take.secondaryFallbacks.append(try SourceSpec.parse(t, field: f)) },
              get: { _ in nil }),
        .text("--out", ["out"], "FILE|URL", "the output: .mp4 (fragmented), .mkv, .ts, .m3u8 (HLS), rtmp://, srt://",
              set: { v, t, _ in v.take.output = t }, get: { $0.take.output.map(JSONValue.string) }),
        .text("--segment-time", ["segmentTime"], "SECONDS",
              "split an MP4 or Matroska --out into NAME-0001.mp4, NAME-0002.mp4, ... of this length, each cut at a keyframe and starting at 0; for HLS, the segment length (default 2)",
              set: { v, t, f throws(ConfigurationError) in v.take.segmentTime = try seconds(t, field: f) },
              get: { $0.take.segmentTime.map(JSONValue.number) }),
        .text("--hls-list-size", ["hlsListSize"], "N",
              "an HLS --out's live playlist lists the last N segments (default 0: all); no segment is deleted, and the finished playlist lists them all",
              set: { v, t, f throws(ConfigurationError) in
                  v.take.hlsListSize = try wholeNumber(t, field: f, reason: "must be a whole number of segments, 0 to 1000000")
              },
              get: { $0.take.hlsListSize.map { JSONValue.number(Double($0)) } }),
        .text("--format", ["format"], "mp4|mkv|mpegts|hls|rtmp|srt", "container (default: from --out)",
              set: { v, t, f throws(ConfigurationError) in v.take.format = try TakeConfiguration.parseFormat(t, field: f) },
              get: { $0.take.format.map { .string($0.rawValue) } }),
        .text("--also-out", ["alsoOut"], "FILE|URL",
              "another output from the same streams, with its own layout (repeatable; JSON: a list of {\"out\", \"format\", \"layout\"})",
              scopes: .take, set: { v, t, _ in v.take.extraOutputs.append(OutputSpec(out: t)) },
              get: { v in v.take.extraOutputs.isEmpty ? nil : .array(v.take.extraOutputs.map(OptionCodec.encode)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.extraOutputs = try OptionCodec.decodeOutputs(j, field: f) },
        .text("--also-layout", nil, "KIND", "the layout of the last --also-out (default: --layout's)", scopes: [.record],
              set: { v, t, f throws(ConfigurationError) in
                  guard !v.take.extraOutputs.isEmpty else {
                      throw ConfigurationError(field: f, value: t, reason: "comes after the --also-out it applies to")
                  }
                  v.alsoLayoutKinds[v.take.extraOutputs.count - 1] = try LayoutKind.parse(t, field: f)
              }, get: { _ in nil }),
        .text("--also-segment-time", nil, "SECONDS",
              "split the last --also-out (an MP4 or Matroska file) as --segment-time splits --out; for HLS, its segment length (JSON: alsoOut's \"segmentTime\")",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in
                  let d = try seconds(t, field: f)
                  try alsoOutput(&v, t, f) { o in o.segmentTime = d }
              }, get: { _ in nil }),
        .text("--also-hls-list-size", nil, "N", "the last --also-out's live playlist lists the last N segments, as --hls-list-size (JSON: \"hlsListSize\")",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in
                  let n = try wholeNumber(t, field: f, reason: "must be a whole number of segments, 0 to 1000000")
                  try alsoOutput(&v, t, f) { o in o.hlsListSize = n }
              }, get: { _ in nil }),
        .text("--also-size", nil, "WxH",
              "the last --also-out's canvas: drawn at this size from the same uploaded pictures, a rung of a ladder (default: the take's; JSON: alsoOut's \"size\")",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in
                  try alsoEncoding(&v, t, f) { e throws(ConfigurationError) in e.size = try TakeConfiguration.parseSize(t, field: f) }
              }, get: { _ in nil }),
        .text("--also-codec", nil, "h264|hevc", "the last --also-out's codec (default: --codec)", scopes: [.record],
              set: { v, t, f throws(ConfigurationError) in
                  try alsoEncoding(&v, t, f) { e throws(ConfigurationError) in e.codec = try enumValue(VideoCodec.self, t, field: f, "expected h264 or hevc") }
              }, get: { _ in nil }),
        .text("--also-bitrate", nil, "B",
              "the last --also-out's bit rate; an output given --also-bitrate, --also-maxrate or --also-bufsize has rate control of its own, not --bitrate/--maxrate/--bufsize/--qp",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in
                  try alsoEncoding(&v, t, f) { e throws(ConfigurationError) in e.bitrate = try TakeConfiguration.parseBitrate(t, field: f) }
              }, get: { _ in nil }),
        .text("--also-maxrate", nil, "B", "the last --also-out's peak bit rate (VBV)", scopes: [.record],
              set: { v, t, f throws(ConfigurationError) in
                  try alsoEncoding(&v, t, f) { e throws(ConfigurationError) in e.maxrate = try TakeConfiguration.parseBitrate(t, field: f) }
              }, get: { _ in nil }),
        .text("--also-bufsize", nil, "B", "the last --also-out's VBV buffer in bits (with --also-maxrate; default one second of it)", scopes: [.record],
              set: { v, t, f throws(ConfigurationError) in
                  try alsoEncoding(&v, t, f) { e throws(ConfigurationError) in e.bufsize = try TakeConfiguration.parseBits(t, field: f) }
              }, get: { _ in nil }),
        .text("--also-preset", nil, "NAME", "the last --also-out's x264/x265 preset (default: --preset)", scopes: [.record],
              set: { v, t, f throws(ConfigurationError) in try alsoEncoding(&v, t, f) { e in e.preset = t } },
              get: { _ in nil }),
        .text("--also-rate-divisor", nil, "N",
              "the last --also-out takes every Nth frame of the take, at the take's rate / N with the take's times (1-120, default 1; JSON: \"rateDivisor\")",
              scopes: [.record], set: { v, t, f throws(ConfigurationError) in
                  let n = try wholeNumber(t, field: f, reason: "must be a whole number 1 to 120 (the output takes every Nth frame)")
                  try alsoEncoding(&v, t, f) { e in e.rateDivisor = n }
              }, get: { _ in nil }),
        .text("--overlay", ["overlays"], "IMAGE@X,Y,W,H[,OPACITY][,top|bottom]",
              "draw a PNG (with its alpha) in that canvas rectangle (fractions 0-1) over the streams, or beneath them with bottom (repeatable, at most 8; JSON: a list of {\"image\", \"rect\", \"opacity\", \"z\"})",
              set: { v, t, f throws(ConfigurationError) in v.take.overlays.append(try ImageOverlay.parse(t, field: f)) },
              get: { v in v.take.overlays.isEmpty ? nil : .array(v.take.overlays.map(OptionCodec.encode)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.overlays = try OptionCodec.decodeOverlays(j, field: f) },
        .text("--text", ["texts"], "TEMPLATE@X,Y[,SIZE][,KEY=VALUE]...",
              "draw a text (fields {time}, {timecode}, {frame}, {take}) with the top of its box at X,Y (fractions 0-1; its left edge, middle or right edge by align), SIZE pixels an em (default 48); keys color=RRGGBB[AA], font=FILE, outline=WIDTH[:COLOR], box=COLOR[:PADDING], opacity=O, align=left|center|right, and top|bottom (repeatable, at most 8 overlays with the images; JSON: a list of {\"text\", \"x\", \"y\", \"size\", \"color\", \"font\", \"outline\", \"box\", \"opacity\", \"z\", \"align\"})",
              set: { v, t, f throws(ConfigurationError) in v.take.texts.append(try TextOverlay.parse(t, field: f)) },
              get: { v in v.take.texts.isEmpty ? nil : .array(v.take.texts.map(OptionCodec.encode)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.texts = try OptionCodec.decodeTexts(j, field: f) },
        .text("--preview", ["preview"], "FILE", "PNG of the composite (the render target the encoder reads)", scopes: .take,
              set: { v, t, f throws(ConfigurationError) in v.take.preview = t }, get: { $0.take.preview.map(JSONValue.string) }),
        .text("--size", ["size"], "WxH", "even canvas size (default: the primary's upright size)",
              set: { v, t, f throws(ConfigurationError) in v.take.canvasSize = try TakeConfiguration.parseSize(t, field: f) },
              get: { $0.take.canvasSize.map { .string($0.description) } })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.canvasSize = try OptionCodec.decodeSize(j, field: f) },
        .text("--rotate-primary", ["rotatePrimary"], "DEG", "0, 90, 180 or 270, clockwise to upright (default: from the file)",
              set: { v, t, f throws(ConfigurationError) in v.take.primaryOrientation.rotation = try rotation(t, field: f) },
              get: { .number(Double($0.take.primaryOrientation.rotation.rawValue)) }),
        .text("--rotate-secondary", ["rotateSecondary"], "DEG", "the same for the secondary",
              set: { v, t, f throws(ConfigurationError) in v.take.secondaryOrientation.rotation = try rotation(t, field: f) },
              get: { .number(Double($0.take.secondaryOrientation.rotation.rawValue)) }),
        .toggle("--mirror-primary", ["mirrorPrimary"], "mirror the primary left to right",
                set: { $0.take.primaryOrientation.mirrored = $1 }, get: { $0.take.primaryOrientation.mirrored }),
        .toggle("--mirror-secondary", ["mirrorSecondary"], "mirror the secondary (a selfie camera)",
                set: { $0.take.secondaryOrientation.mirrored = $1 }, get: { $0.take.secondaryOrientation.mirrored }),
    ]

    // MARK: Layout

    static let layout: [Option] = [
        .text("--layout", ["layout", "kind"], "pip|side-by-side|stacked|primary-only|secondary-only", "the arrangement (default pip)",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.kind = try LayoutKind.parse(t, field: f) },
              get: { .string($0.take.layout.kind.rawValue) })
            .replacingJSON { v, j, f throws(ConfigurationError) in
                guard case .string(let s) = j else { throw .json(f, j, "expected a string, found \(j.kindName)") }
                guard let k = LayoutKind(rawValue: s) else {
                    throw ConfigurationError(field: f, value: "", reason: "unknown layout '\(ConfigurationError.quoted(s))'; "
                                             + "expected pip, side-by-side, stacked, primary-only, secondary-only or custom")
                }
                v.take.layout.kind = k
            },
        .text("--pip-corner", ["layout", "pip", "corner"], "top-left|top-right|bottom-left|bottom-right", "the inset's corner (default bottom-right)",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.pip.corner = try PiPCorner.parse(t, field: f) },
              get: { .string($0.take.layout.pip.corner.rawValue) }),
        .text("--pip-size", ["layout", "pip", "size"], "F", "inset's shorter side as a fraction of the canvas's (0.05-1 or 30%; default 0.3)",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.pip.size = try PiPPlacement.parseSize(t, field: f) },
              get: { .number($0.take.layout.pip.size) }),
        .text("--pip-margin", ["layout", "pip", "margin"], "M", "pixels (24, 24px) or a fraction of the shorter side (0.03, 3%; default 0.03)",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.pip.margin = try PiPMargin.parse(t, field: f) },
              get: { OptionCodec.encode($0.take.layout.pip.margin) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.layout.pip.margin = try OptionCodec.decodeMargin(j, field: f) },
        .toggle("--swap-roles", ["layout", "swapRoles"], "the secondary is the big picture",
                set: { $0.take.layout.swapRoles = $1 }, get: { $0.take.layout.swapRoles }),
        .text("--content-mode", ["layout", "contentMode"], "fill|fit", "crop to fill (default) or letterbox",
              set: { v, t, f throws(ConfigurationError) in
                  v.take.layout.contentMode = try enumValue(ContentMode.self, t, field: f, "expected fill or fit")
              }, get: { .string($0.take.layout.contentMode.rawValue) }),
        .text("--background", ["layout", "background"], "RRGGBB", "canvas colour (default 000000)",
              set: { v, t, f throws(ConfigurationError) in
                  guard let c = RGBAColor(hex: t) else { throw ConfigurationError(field: f, value: t, reason: "expected a colour as RRGGBB or RRGGBBAA") }
                  v.take.layout.background = c
              }, get: { OptionCodec.encode($0.take.layout.background) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.layout.background = try OptionCodec.decodeColor(j, field: f) },
        .text("--zoom-primary", ["layout", "zoomPrimary"], "F", "show the centre 1/F of the primary, enlarged (1-8, default 1)",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.primaryZoom = try number(t, field: f) },
              get: { .number($0.take.layout.primaryZoom) }),
        .text("--zoom-secondary", ["layout", "zoomSecondary"], "F", "the same for the secondary",
              set: { v, t, f throws(ConfigurationError) in v.take.layout.secondaryZoom = try number(t, field: f) },
              get: { .number($0.take.layout.secondaryZoom) }),
        .text(nil, ["layout", "zOrder"], "automatic|primary-on-top|secondary-on-top", "which stream is drawn on top",
              scopes: [.json], set: { v, t, f throws(ConfigurationError) in
                  v.take.layout.zOrder = try enumValue(ZOrder.self, t, field: f, "expected automatic, primary-on-top or secondary-on-top")
              }, get: { .string($0.take.layout.zOrder.rawValue) }),
        .text("--transition", ["transition"], "MS[:EASING]",
              "animate layout changes over MS milliseconds of the take (0-10000), easing linear, ease-in, ease-out or ease-in-out (default); JSON {\"ms\", \"easing\"}",
              set: { v, t, f throws(ConfigurationError) in v.take.layoutTransition = try LayoutTransition.parse(t, field: f) },
              get: { $0.take.layoutTransition.map(OptionCodec.encode) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.layoutTransition = try OptionCodec.decodeTransition(j, field: f) },
        .text("--layout-at", ["layoutSchedule"], "SECONDS=KIND",
              "change the layout's kind at that time of the take (repeatable; JSON: a list of {\"at\", \"layout\", \"transition\"})",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.layoutAtKinds.append(try OptionCodec.parseLayoutAt(t, field: f)) },
              get: { v in v.take.layoutSchedule.isEmpty ? nil : .array(v.take.layoutSchedule.map(OptionCodec.encode)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in
                v.take.layoutSchedule = try OptionCodec.decodeSchedule(j, field: f, base: v.take.layout)
            },
        .json(["layout", "custom", "primary"], "the primary's rectangle for the custom layout: {\"x\", \"y\", \"width\", \"height\"} in 0...1",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.custom.primary = try OptionCodec.decodeRect(j, field: f) },
              get: { $0.take.layout.custom.primary.map(OptionCodec.encode) }),
        .json(["layout", "custom", "secondary"], "the secondary's rectangle for the custom layout",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.custom.secondary = try OptionCodec.decodeRect(j, field: f) },
              get: { $0.take.layout.custom.secondary.map(OptionCodec.encode) }),
        .json(["layout", "insetStyle", "opacity"], "the inset's opacity, 0...1",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.insetStyle.opacity = try OptionCodec.decodeNumber(j, field: f) },
              get: { .number($0.take.layout.insetStyle.opacity) }),
        .json(["layout", "insetStyle", "cornerRadius"], "the inset's corner radius in canvas pixels",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.insetStyle.cornerRadius = try OptionCodec.decodeNumber(j, field: f) },
              get: { .number($0.take.layout.insetStyle.cornerRadius) }),
        .json(["layout", "insetStyle", "borderWidth"], "the inset's border width in canvas pixels",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.insetStyle.borderWidth = try OptionCodec.decodeNumber(j, field: f) },
              get: { .number($0.take.layout.insetStyle.borderWidth) }),
        .json(["layout", "insetStyle", "borderColor"], "the inset's border colour (RRGGBB or {\"r\", \"g\", \"b\", \"a\"})",
              set: { v, j, f throws(ConfigurationError) in v.take.layout.insetStyle.borderColor = try OptionCodec.decodeColor(j, field: f) },
              get: { OptionCodec.encode($0.take.layout.insetStyle.borderColor) }),
    ]

    // MARK: Encoding

    static let encoding: [Option] = [
        .text("--encoder", ["encoder"], "auto|vaapi|nvenc|x264|gpu",
              "VA-API zero copy where the machine has it, else NVENC where the GPU has an engine, else VA-API, else software (auto); gpu: the GPU's own H.264 encoder",
              set: { v, t, f throws(ConfigurationError) in v.take.encoder = try enumValue(EncoderChoice.self, t, field: f, "expected auto, vaapi, nvenc, x264 or gpu") },
              get: { .string($0.take.encoder.rawValue) }),
        .text("--decoder", ["decoder"], "auto|cpu|nvdec", "decode the inputs with NVDEC where the GPU and the stream allow it (auto), or on the CPU",
              set: { v, t, f throws(ConfigurationError) in v.take.decoder = try enumValue(DecoderChoice.self, t, field: f, "expected auto, cpu or nvdec") },
              get: { .string($0.take.decoder.rawValue) }),
        .text("--codec", ["codec"], "h264|hevc", "video codec (default h264)",
              set: { v, t, f throws(ConfigurationError) in v.take.codec = try enumValue(VideoCodec.self, t, field: f, "expected h264 or hevc") },
              get: { .string($0.take.codec.rawValue) }),
        .text("--bitrate", ["bitrate"], "B", "bits per second: 10M, 2500k, 8000000 (default 10M)",
              set: { v, t, f throws(ConfigurationError) in v.take.bitrate = try TakeConfiguration.parseBitrate(t, field: f) },
              get: { .number(Double($0.take.bitrate)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.bitrate = try OptionCodec.decodeBitrate(j, field: f) },
        .text("--qp", ["qp"], "N", "constant quantizer 0-51 instead of --bitrate (lower is better; the GPU encoder keeps one, default 23)",
              set: { v, t, f throws(ConfigurationError) in v.take.qp = try TakeConfiguration.parseQP(t, field: f) },
              get: { $0.take.qp.map { .number(Double($0)) } }),
        .text("--maxrate", ["maxrate"], "B", "peak bits per second the rate control keeps to (VBV; with --bitrate, not --qp)",
              set: { v, t, f throws(ConfigurationError) in v.take.maxrate = try TakeConfiguration.parseBitrate(t, field: f) },
              get: { $0.take.maxrate.map { .number(Double($0)) } }),
        .text("--bufsize", ["bufsize"], "B", "bits the peak rate is measured over (VBV buffer; default: one second of --maxrate)",
              set: { v, t, f throws(ConfigurationError) in v.take.bufsize = try TakeConfiguration.parseBits(t, field: f) },
              get: { $0.take.bufsize.map { .number(Double($0)) } }),
        .text("--preset", ["preset"], "NAME", "x264/x265 preset (default veryfast)",
              set: { v, t, _ in v.take.preset = t }, get: { .string($0.take.preset) }),
        .text("--keyframe-interval", ["keyframeInterval"], "SECONDS", "GOP length (default 1; with --encoder gpu in a server an IDR may come up to a quarter early, with other takes')",
              set: { v, t, f throws(ConfigurationError) in v.take.keyframeInterval = try seconds(t, field: f) },
              get: { .number($0.take.keyframeInterval) }),
        .text("--slices", ["slices"], "N",
              "slices a picture of each H.264 output, whole macroblock rows each (at most one a row; default 1, with --encoder gpu one per 34 rows: two at 1080p): shorter chains for --encoder gpu, a little more bits",
              set: { v, t, f throws(ConfigurationError) in
                  v.take.slices = try wholeNumber(t, field: f, reason: "must be a whole number of slices, 1 to \(TakeConfiguration.maxSlices)")
              },
              get: { $0.take.slices.map { .number(Double($0)) } }),
        .text("--audio", ["audio"], "primary|secondary|mix|none",
              "the take's audio (AAC): the primary's (default), the secondary's, both mixed, or no audio track; it follows swaps and failovers",
              scopes: .take,
              set: { v, t, f throws(ConfigurationError) in
                  v.take.audio = try enumValue(AudioMode.self, t, field: f, "expected primary, secondary, mix or none")
              },
              get: { .string($0.take.audio.rawValue) }),
        .text("--primary-gain", ["primaryGain"], "DB", "gain of the primary's audio in decibels (default 0; -60 to 20)", scopes: .take,
              set: { v, t, f throws(ConfigurationError) in v.take.primaryGain = try decibels(t, field: f) },
              get: { .number($0.take.primaryGain) }),
        .text("--secondary-gain", ["secondaryGain"], "DB", "gain of the secondary's audio in decibels (default 0; -60 to 20)", scopes: .take,
              set: { v, t, f throws(ConfigurationError) in v.take.secondaryGain = try decibels(t, field: f) },
              get: { .number($0.take.secondaryGain) }),
    ]

    // MARK: The take

    static let takeControl: [Option] = [
        .text("--duration", ["duration"], "SECONDS", "stop after this much output", scopes: .take,
              set: { v, t, f throws(ConfigurationError) in v.take.duration = try seconds(t, field: f) },
              get: { $0.take.duration.map(JSONValue.number) }),
        .text("--secondary-timeout", ["secondaryTimeout"], "SECONDS",
              "continue with the primary alone after this long without secondary frames (default 2)",
              set: { v, t, f throws(ConfigurationError) in v.take.secondaryTimeout = try seconds(t, field: f) },
              get: { .number($0.take.secondaryTimeout) }),
        .text("--primary-timeout", ["primaryTimeout"], "SECONDS", "finalize when the primary delivers nothing for this long (default 10)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.primaryTimeout = try seconds(t, field: f) },
              get: { .number($0.take.primaryTimeout) }),
        .text("--listen-timeout", ["listenTimeout"], "SECONDS",
              "how long a listening source (srt://:PORT?mode=listener, rtmp://0.0.0.0:PORT/APP/KEY) waits for its publisher (default 30)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.listenTimeout = try seconds(t, field: f) },
              get: { .number($0.take.listenTimeout) }),
        .text("--switch-secondary", ["switchSecondary"], "SECONDS=SRC", "hot-swap the secondary at that time (repeatable)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.secondarySwitches.append(try SecondarySwitch.parse(t, field: f)) },
              get: { v in v.take.secondarySwitches.isEmpty ? nil : .array(v.take.secondarySwitches.map(OptionCodec.encode)) })
            .replacingJSON { v, j, f throws(ConfigurationError) in v.take.secondarySwitches = try OptionCodec.decodeSwitches(j, field: f) },
        .text("--gpu", ["gpu"], "auto|software|N|/dev/dri/renderDN|PLATFORM[:DEVICE]", "the GPU (PLATFORM: gbm, device, surfaceless)",
              set: { v, t, f throws(ConfigurationError) in try TakeConfiguration.checkGPU(t, field: f); v.take.gpu = t },
              get: { .string($0.take.gpu) }),
        .text("--thermal-state", ["thermalState"], "nominal|fair|serious|critical", "pretend the machine is in this thermal state",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.thermalState = try ThermalState.parse(t, field: f) },
              get: { $0.take.thermalState.map { .string($0.rawValue) } }),
        .text("--over-budget", ["overBudget"], "reduce|keep|refuse",
              "a live take's canvas over its measured budget: roll back (default), keep it (default with --size) or do not start",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in
                  v.take.overBudget = try enumValue(OverBudget.self, t, field: f, "expected reduce, keep or refuse")
              }, get: { $0.take.overBudget.map { .string($0.rawValue) } }),
        .text("--realtime", ["realtime"], "on|off|auto", "pace frames at the primary's real-time rate (auto: when an output is live and no source is)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in
                  v.take.realtime = try enumValue(RealtimeMode.self, t, field: f, "expected on, off or auto")
              }, get: { .string($0.take.realtime.rawValue) }),
        .text("--reconnect-window", ["reconnectWindow"], "SECONDS", "reopen a failed live output with backoff for this long (default 60; 0: never)",
              set: { v, t, f throws(ConfigurationError) in v.take.reconnectWindow = try seconds(t, field: f) },
              get: { .number($0.take.reconnectWindow) }),
        .text("--source-reconnect-window", ["sourceReconnectWindow"], "SECONDS",
              "reopen a lost network source (failed, ended or silent for its role's timeout) with backoff for this long (default 30; 0: never)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.sourceReconnectWindow = try seconds(t, field: f) },
              get: { .number($0.take.sourceReconnectWindow) }),
        .text("--source-failback", ["sourceFailback"], "SECONDS",
              "go back to a higher source of a list once it has delivered steadily this long (default 5)",
              scopes: .take, set: { v, t, f throws(ConfigurationError) in v.take.sourceFailback = try seconds(t, field: f) },
              get: { .number($0.take.sourceFailback) }),
        .text("--slate", ["slate"], "FILE.png", "shown on live outputs while the primary is interrupted (default: its last frame)",
              scopes: .take, set: { v, t, _ in v.take.slate = t }, get: { $0.take.slate.map(JSONValue.string) }),
        .text("--config", nil, "FILE.json", "load options from JSON first; flags override", scopes: [.record, .embedded],
              set: { _, _, _ in }, get: { _ in nil }),
        .toggle("--json", ["json"], "machine-readable report on stdout", scopes: .take,
                set: { $0.take.json = $1 }, get: { $0.take.json }),
    ]

    // MARK: Embedding only

    static let embedding: [Option] = [
        .text("--fps", nil, "RATE", "nominal output rate of the pushed streams (required)", scopes: [.embedded],
              set: { v, t, f throws(ConfigurationError) in
                  guard let r = FrameRate(parsing: t) else {
                      throw ConfigurationError(field: f, value: t, reason: "expected a positive rate such as 30, 29.97 or 30000/1001")
                  }
                  v.fps = r
              }, get: { _ in nil }),
        .text("--queue", nil, "N", "frames each push queue holds (1-256, default 4)", scopes: [.embedded],
              set: { v, t, f throws(ConfigurationError) in
                  guard let n = Int(t), (1...256).contains(n) else { throw ConfigurationError(field: f, value: t, reason: "expected 1 to 256 frames") }
                  v.queue = n
              }, get: { _ in nil }),
    ]
}

extension Option {
    /// The same option, with its own reading of JSON values (objects, numbers
    /// that are not text on the command line).
    func replacingJSON(_ decode: @escaping @Sendable (inout OptionValues, JSONValue, String) throws(ConfigurationError) -> Void) -> Option {
        let text = apply
        return Option(flag: flag, key: key, placeholder: placeholder, help: help, scopes: scopes, apply: { v, input, field throws(ConfigurationError) in
            switch input {
            case .text: try text(&v, input, field)
            case .json(let j): try decode(&v, j, field)
            }
        }, read: read)
    }
}
