#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything one take (recording) needs, from the command line and/or a
/// JSON file. Frozen when the take starts (DESIGN rule 6), except for the
/// scheduled `secondarySwitches`.
///
/// Build it with `parse(arguments:)` (which loads `--config FILE` first and
/// lets the other flags override it) or `load(path:)`, then call
/// `validate()` before using it. Defaults match `diptych record` without
/// options.
///
/// JSON form (every key optional; names as below):
/// ```json
/// { "primary": "testsrc:smpte:1920x1080@30", "secondary": "selfie.mp4",
///   "out": "take.mp4", "format": "mp4", "size": "1080x1920",
///   "layout": { "kind": "pip", "pip": { "corner": "top-right", "size": 0.3, "margin": { "pixels": 32 } } },
///   "rotatePrimary": 90, "rotateSecondary": 270, "mirrorPrimary": false, "mirrorSecondary": true,
///   "encoder": "auto", "codec": "h264", "bitrate": "10M", "preset": "veryfast", "keyframeInterval": 1,
///   "audio": "primary", "duration": 10, "preview": "take.png", "thermalState": "nominal",
///   "secondaryTimeout": 2, "gpu": "auto", "json": false,
///   "switchSecondary": [ { "at": 5, "source": "testsrc:gradient" } ] }
/// ```
/// Unknown keys are errors (a typo should not be silently ignored).
public struct TakeConfiguration: Hashable, Sendable {
    /// `--primary SRC` (required; `.none` until set).
    public var primary: SourceSpec = .none
    /// `--secondary SRC`; `.none` records the primary alone.
    public var secondary: SourceSpec = .none
    /// `--layout`, `--pip-corner`, `--pip-size`, `--pip-margin`, `--swap-roles`,
    /// `--content-mode`, `--background`.
    public var layout = Layout()
    /// `--size WxH`; nil = the primary's upright size (rounded down to even).
    public var canvasSize: PixelSize?
    /// `--rotate-primary DEG`, `--mirror-primary`.
    public var primaryOrientation = Orientation.identity
    /// `--rotate-secondary DEG`, `--mirror-secondary`.
    public var secondaryOrientation = Orientation.identity
    /// `--encoder auto|vaapi|x264`.
    public var encoder = EncoderChoice.auto
    /// `--codec h264|hevc`.
    public var codec = VideoCodec.h264
    /// `--bitrate` in bits per second (`10M`, `2500k`, `8000000`).
    public var bitrate = TakeConfiguration.defaultBitrate
    /// `--preset` (x264/x265 preset name).
    public var preset = "veryfast"
    /// `--keyframe-interval SECONDS` (GOP length).
    public var keyframeInterval = 1.0
    /// `--audio primary|none`.
    public var audio = AudioMode.primary
    /// `--duration SECONDS`; nil = until the primary ends.
    public var duration: Double?
    /// `--out FILE|URL` (required).
    public var output: String?
    /// `--format`; nil = inferred from `output` (`ContainerFormat.infer`).
    public var format: ContainerFormat?
    /// `--preview FILE`: PNG of the composite (same render target as the encoder).
    public var preview: String?
    /// `--thermal-state`: pretend the machine is in this state (testing rule 5).
    public var thermalState: ThermalState?
    /// `--secondary-timeout SECONDS`: how long the secondary may deliver
    /// nothing (at the start or mid-take) before the take continues with the
    /// primary alone (see `clockConfiguration`).
    public var secondaryTimeout = 2.0
    /// `--primary-timeout SECONDS`: a primary that delivers nothing for this
    /// long counts as interrupted and the take is finalized.
    public var primaryTimeout = 10.0
    /// `--gpu auto|software|N|/dev/dri/renderDN`, optionally as `PLATFORM`
    /// or `PLATFORM:DEVICE` (platforms `gbm`, `device`, `surfaceless`).
    /// Kept as text: DiptychGPU's `GPUSelection(parsing:)` interprets it;
    /// `parse` and `validate` check the grammar (`checkGPU`).
    public var gpu = "auto"
    /// `--json`: machine-readable report on stdout.
    public var json = false
    /// `--switch-secondary SECONDS=SRC` (repeatable), in the order given.
    public var secondarySwitches: [SecondarySwitch] = []

    public static let defaultBitrate = 10_000_000
    /// Largest accepted `--bitrate` (1 Gb/s).
    public static let maximumBitrate = 1_000_000_000

    public init() {}

    /// The output container: `format` when given, else inferred from `output`.
    public var container: ContainerFormat? {
        format ?? output.flatMap { ContainerFormat.infer(from: $0) }
    }

    /// The canvas for this take: `canvasSize` when set, else the primary's
    /// upright size rounded down to even, else 1920×1080.
    public func resolvedCanvas(primaryUprightSize: PixelSize?) -> PixelSize {
        if let s = canvasSize { return s.evenAligned() }
        if let p = primaryUprightSize, !p.isEmpty { return p.evenAligned() }
        return .hd1080
    }

    /// The stream geometry of `role` for a decoded frame size, with this
    /// configuration's rotation and mirror.
    public func geometry(_ role: StreamRole, sensorSize: PixelSize) -> StreamGeometry {
        StreamGeometry(sensorSize: sensorSize, orientation: role == .primary ? primaryOrientation : secondaryOrientation)
    }

    /// The frame clock settings this take implies: hold the latest secondary
    /// frame; wait up to `secondaryTimeout` for the secondary's first frame;
    /// a secondary that ends, or delivers nothing for `secondaryTimeout`,
    /// leaves the primary alone (rule 11). Without a secondary (`.none`)
    /// there is nothing to wait for: primary-only from the first frame.
    public var clockConfiguration: FrameClockConfiguration {
        let timeout = MediaTime(seconds: secondaryTimeout)
        return FrameClockConfiguration(mode: .latest,
                                       beforeFirstFrame: secondary == .none ? .primaryOnly : .wait(upTo: timeout),
                                       afterEnd: .primaryOnlyAfter(.zero), stallTimeout: timeout)
    }

    // MARK: - Validation

    /// Checks every field; the error names the flag (or JSON field) and the
    /// bad value, e.g. `--bitrate '-5': must be positive`.
    public func validate() throws(ConfigurationError) {
        if primary == .none {
            throw ConfigurationError(field: "--primary", value: primary.description, reason: "a primary stream is required")
        }
        if primary == .stdin && secondary == .stdin {
            throw ConfigurationError(field: "--secondary", value: "-", reason: "only one stream can read standard input")
        }
        guard let out = output, !out.isEmpty else {
            throw ConfigurationError(field: "--out", value: output ?? "", reason: "is required (an output file or URL)")
        }
        guard container != nil else {
            throw ConfigurationError(field: "--out", value: out,
                                     reason: "cannot tell the container from the name; use .mp4, .ts, rtmp://, srt:// or --format")
        }
        if let f = format, let inferred = ContainerFormat.infer(from: out), f != inferred,
           inferred == .rtmp || inferred == .srt || f == .rtmp || f == .srt {
            throw ConfigurationError(field: "--format", value: f.rawValue, reason: "does not match the output '\(out)' (\(inferred.rawValue))")
        }
        if let s = canvasSize {
            if s.width <= 0 || s.height <= 0 {
                throw ConfigurationError(field: "--size", value: s.description, reason: "width and height must be positive")
            }
            if s.width > 16384 || s.height > 16384 {
                throw ConfigurationError(field: "--size", value: s.description, reason: "width and height must be at most 16384")
            }
            if !s.isEven {
                throw ConfigurationError(field: "--size", value: s.description,
                                         reason: "width and height must be even (4:2:0 output)")
            }
        }
        if bitrate <= 0 {
            throw ConfigurationError(field: "--bitrate", value: "\(bitrate)", reason: "must be positive")
        }
        if bitrate > TakeConfiguration.maximumBitrate {
            throw ConfigurationError(field: "--bitrate", value: "\(bitrate)", reason: "must be at most 1G (1000000000)")
        }
        if preset.isEmpty || preset.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
            throw ConfigurationError(field: "--preset", value: preset, reason: "must be a preset name such as veryfast")
        }
        if !(keyframeInterval > 0 && keyframeInterval <= 3600) {
            throw ConfigurationError(field: "--keyframe-interval", value: "\(keyframeInterval)", reason: "must be a positive number of seconds, at most 3600")
        }
        if let d = duration, !(d > 0 && d <= 1e7) {
            throw ConfigurationError(field: "--duration", value: "\(d)", reason: "must be a positive number of seconds, at most 10000000")
        }
        if !(primaryTimeout > 0 && primaryTimeout <= 3600) {
            throw ConfigurationError(field: "--primary-timeout", value: "\(primaryTimeout)", reason: "must be a positive number of seconds, at most 3600")
        }
        if !(secondaryTimeout > 0 && secondaryTimeout <= 3600) {
            throw ConfigurationError(field: "--secondary-timeout", value: "\(secondaryTimeout)", reason: "must be a positive number of seconds, at most 3600")
        }
        try TakeConfiguration.checkGPU(gpu)
        if let p = preview, p.isEmpty {
            throw ConfigurationError(field: "--preview", value: p, reason: "must be a file path")
        }
        if let e = layout.validationError() { throw e }
        for s in secondarySwitches {
            let text = "\(s.time)=\(s.source)"
            if !(s.time >= 0 && s.time <= 1e7) {
                throw ConfigurationError(field: "--switch-secondary", value: text, reason: "time must be 0 or more seconds, at most 10000000")
            }
            if let d = duration, s.time >= d {
                throw ConfigurationError(field: "--switch-secondary", value: text, reason: "time is after the end of the take (--duration \(d))")
            }
            if s.source == .stdin {
                throw ConfigurationError(field: "--switch-secondary", value: text, reason: "cannot switch to standard input")
            }
        }
    }

    // MARK: - Command line

    /// Flags that take a value.
    static let valueFlags: Set<String> = [
        "--primary", "--secondary", "--out", "--layout", "--pip-corner", "--pip-size", "--pip-margin", "--size",
        "--rotate-primary", "--rotate-secondary", "--encoder", "--codec", "--bitrate", "--preset",
        "--keyframe-interval", "--audio", "--duration", "--preview", "--config", "--format", "--thermal-state",
        "--secondary-timeout", "--primary-timeout", "--gpu", "--switch-secondary", "--content-mode", "--background",
    ]
    /// Flags that take no value.
    static let switchFlags: Set<String> = ["--mirror-primary", "--mirror-secondary", "--json", "--swap-roles"]

    /// Parses `diptych record` options (the arguments after the subcommand).
    /// `--config FILE` is loaded first wherever it appears; the other flags
    /// then apply in order and override it (a repeated flag: the last wins;
    /// `--switch-secondary` accumulates and replaces the file's list).
    /// Accepts `--flag value` and `--flag=value`. Does not call `validate()`.
    ///
    /// Errors: unknown flags, missing values, unparsable values, and an
    /// unreadable or invalid config file, each naming the flag (or the file).
    public static func parse(arguments: [String]) throws(ConfigurationError) -> TakeConfiguration {
        var options: [(flag: String, value: String?)] = []
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            guard arg.hasPrefix("--"), arg.count > 2 else {
                throw ConfigurationError(field: "argument", value: arg, reason: "unexpected argument; options start with --")
            }
            var flag = arg
            var inline: String?
            if let eq = arg.firstIndex(of: "=") {
                flag = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...])
            }
            if switchFlags.contains(flag) {
                if inline != nil { throw ConfigurationError(field: flag, value: inline!, reason: "takes no value") }
                options.append((flag, nil))
            } else if valueFlags.contains(flag) {
                if let v = inline {
                    options.append((flag, v))
                } else {
                    guard i < arguments.count, !arguments[i].hasPrefix("--") else {
                        throw ConfigurationError(field: flag, value: "", reason: "needs a value")
                    }
                    options.append((flag, arguments[i]))
                    i += 1
                }
            } else {
                throw unknownOption(flag)
            }
        }

        let configs = options.filter { $0.flag == "--config" }
        if configs.count > 1 {
            throw ConfigurationError(field: "--config", value: configs[1].value ?? "", reason: "given more than once")
        }
        var c = try configs.first.map { (o) throws(ConfigurationError) in try load(path: o.value ?? "") } ?? TakeConfiguration()
        var switches: [SecondarySwitch] = []
        for (flag, value) in options where flag != "--config" {
            try c.apply(flag: flag, value: value ?? "", switches: &switches)
        }
        if !switches.isEmpty { c.secondarySwitches = switches }
        return c
    }

    private mutating func apply(flag: String, value v: String, switches: inout [SecondarySwitch]) throws(ConfigurationError) {
        func number(_ reason: String = "must be a number of seconds") throws(ConfigurationError) -> Double {
            guard let d = Double(v), d.isFinite else { throw ConfigurationError(field: flag, value: v, reason: reason) }
            return d
        }
        func rotation() throws(ConfigurationError) -> Rotation {
            guard let n = Int(v), let r = Rotation(degrees: n) else {
                throw ConfigurationError(field: flag, value: v, reason: "must be 0, 90, 180 or 270")
            }
            return r
        }
        switch flag {
        case "--primary": primary = try SourceSpec.parse(v, field: flag)
        case "--secondary": secondary = try SourceSpec.parse(v, field: flag)
        case "--out": output = v
        case "--layout": layout.kind = try LayoutKind.parse(v, field: flag)
        case "--pip-corner": layout.pip.corner = try PiPCorner.parse(v, field: flag)
        case "--pip-size": layout.pip.size = try PiPPlacement.parseSize(v, field: flag)
        case "--pip-margin": layout.pip.margin = try PiPMargin.parse(v, field: flag)
        case "--swap-roles": layout.swapRoles = true
        case "--content-mode":
            guard let m = ContentMode(rawValue: v.lowercased()) else {
                throw ConfigurationError(field: flag, value: v, reason: "expected fill or fit")
            }
            layout.contentMode = m
        case "--background":
            guard let color = RGBAColor(hex: v) else {
                throw ConfigurationError(field: flag, value: v, reason: "expected a colour as RRGGBB or RRGGBBAA")
            }
            layout.background = color
        case "--size": canvasSize = try TakeConfiguration.parseSize(v, field: flag)
        case "--rotate-primary": primaryOrientation.rotation = try rotation()
        case "--rotate-secondary": secondaryOrientation.rotation = try rotation()
        case "--mirror-primary": primaryOrientation.mirrored = true
        case "--mirror-secondary": secondaryOrientation.mirrored = true
        case "--encoder":
            guard let e = EncoderChoice(rawValue: v.lowercased()) else {
                throw ConfigurationError(field: flag, value: v, reason: "expected auto, vaapi or x264")
            }
            encoder = e
        case "--codec":
            guard let k = VideoCodec(rawValue: v.lowercased()) else {
                throw ConfigurationError(field: flag, value: v, reason: "expected h264 or hevc")
            }
            codec = k
        case "--bitrate": bitrate = try TakeConfiguration.parseBitrate(v, field: flag)
        case "--preset": preset = v
        case "--keyframe-interval": keyframeInterval = try number()
        case "--audio":
            guard let a = AudioMode(rawValue: v.lowercased()) else {
                throw ConfigurationError(field: flag, value: v, reason: "expected primary or none")
            }
            audio = a
        case "--duration": duration = try number()
        case "--preview": preview = v
        case "--format": format = try TakeConfiguration.parseFormat(v, field: flag)
        case "--thermal-state": thermalState = try ThermalState.parse(v, field: flag)
        case "--secondary-timeout": secondaryTimeout = try number()
        case "--primary-timeout": primaryTimeout = try number()
        case "--gpu": try TakeConfiguration.checkGPU(v, field: flag); gpu = v
        case "--json": json = true
        case "--switch-secondary": switches.append(try SecondarySwitch.parse(v, field: flag))
        default:
            throw TakeConfiguration.unknownOption(flag)
        }
    }

    /// `option '--pip-sise': unknown option (did you mean --pip-size?)`.
    static func unknownOption(_ flag: String) -> ConfigurationError {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            var row = Array(0...b.count)
            for i in 1...max(a.count, 1) where !a.isEmpty {
                var previous = row[0]
                row[0] = i
                for j in 1...max(b.count, 1) where !b.isEmpty {
                    let old = row[j]
                    row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                    previous = old
                }
            }
            return row[b.count]
        }
        let known = (valueFlags.union(switchFlags)).sorted()
        let best = known.map { ($0, distance(Array(flag), Array($0))) }.min { $0.1 < $1.1 }
        var reason = "unknown option"
        if let (name, d) = best, d <= 2 { reason += " (did you mean \(name)?)" }
        return ConfigurationError(field: "option", value: flag, reason: reason)
    }

    /// Help text for `diptych record` options (kept in step with the parser by a test).
    public static let usage = """
        diptych record --primary SRC [--secondary SRC] --out FILE|URL [options]
          SRC: a media file or URL, testsrc:NAME[:WxH[@FPS]], - (Y4M on stdin) or none
          --layout pip|side-by-side|stacked|primary-only|secondary-only   (default pip)
          --pip-corner top-left|top-right|bottom-left|bottom-right          (default bottom-right)
          --pip-size F        inset's shorter side as a fraction of the canvas's shorter side (0.05-1, default 0.3; or 30%)
          --pip-margin M      pixels (24, 24px) or a fraction of the shorter side (0.03, 3%; default 0.03)
          --swap-roles        the secondary is the big picture
          --content-mode fill|fit   crop to fill (default) or letterbox
          --background RRGGBB       canvas colour (default 000000)
          --size WxH          even canvas size (default: the primary's upright size)
          --rotate-primary DEG, --rotate-secondary DEG   0, 90, 180 or 270 (clockwise, to upright)
          --mirror-primary, --mirror-secondary
          --encoder auto|vaapi|x264   --codec h264|hevc   --preset NAME (default veryfast)
          --bitrate B         bits per second: 10M, 2500k, 8000000 (default 10M)
          --keyframe-interval SECONDS (default 1)
          --audio primary|none        (default primary)
          --duration SECONDS          stop after this much output
          --format mp4|mpegts|rtmp|srt   container (default: from --out)
          --preview FILE      PNG of the composite
          --config FILE.json  load options from JSON first; flags override
          --thermal-state nominal|fair|serious|critical   pretend thermal state
          --secondary-timeout SECONDS   continue with the primary alone after this long without secondary frames (default 2)
          --primary-timeout SECONDS     finalize when the primary delivers nothing for this long (default 10)
          --gpu auto|software|N|/dev/dri/renderDN|PLATFORM[:DEVICE]   PLATFORM: gbm, device, surfaceless
          --switch-secondary SECONDS=SRC   hot-swap the secondary at that time (repeatable)
          --json              machine-readable report
        """

    /// Parses `WxH`, distinguishing malformed from out-of-range values.
    public static func parseSize(_ text: String, field: String = "--size") throws(ConfigurationError) -> PixelSize {
        if let s = PixelSize(parsing: text) { return s }
        let p = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        if p.count == 2, let w = Int(p[0]), let h = Int(p[1]) {
            if w <= 0 || h <= 0 { throw ConfigurationError(field: field, value: text, reason: "width and height must be positive") }
            throw ConfigurationError(field: field, value: text, reason: "width and height must be at most 16384")
        }
        throw ConfigurationError(field: field, value: text, reason: "expected WxH, e.g. 1920x1080")
    }

    /// Parses a bit rate: `8000000`, `2500k`, `10M`, `1.5M`, `1G` (k = 1000).
    /// The sign is kept (`validate()` rejects non-positive rates).
    public static func parseBitrate(_ text: String, field: String = "--bitrate") throws(ConfigurationError) -> Int {
        var digits = Substring(text)
        var scale = 1.0
        switch digits.last {
        case "k", "K": scale = 1e3; digits = digits.dropLast()
        case "m", "M": scale = 1e6; digits = digits.dropLast()
        case "g", "G": scale = 1e9; digits = digits.dropLast()
        default: break
        }
        if scale == 1, let n = Int(digits) { return n }
        guard let d = Double(digits), d.isFinite, abs(d * scale) < 1e15 else {
            throw ConfigurationError(field: field, value: text, reason: "expected bits per second such as 10M, 2500k or 8000000")
        }
        return Int((d * scale).rounded())
    }

    /// EGL platforms `--gpu` may name (DiptychGPU's display ladder).
    public static let gpuPlatforms = ["gbm", "device", "surfaceless"]

    /// Checks a `--gpu` value: `auto`, `software` (or `cpu`, `llvmpipe`), a
    /// device index `N` ≥ 0, a render node `/dev/dri/...`, a platform name,
    /// or `PLATFORM:DEVICE` (`device:1`, `gbm:/dev/dri/renderD129`).
    public static func checkGPU(_ text: String, field: String = "--gpu") throws(ConfigurationError) {
        func isDevice(_ d: Substring) -> Bool {
            if ["auto", "software", "cpu", "llvmpipe"].contains(d) { return true }
            if let n = Int(d) { return n >= 0 }
            return d.hasPrefix("/dev/dri/") && d.count > "/dev/dri/".count
        }
        let t = Substring(text)
        if gpuPlatforms.contains(String(t)) || isDevice(t) { return }
        if let colon = t.firstIndex(of: ":"), gpuPlatforms.contains(String(t[..<colon])),
           isDevice(t[t.index(after: colon)...]) { return }
        if let n = Int(t), n < 0 {
            throw ConfigurationError(field: field, value: text, reason: "device index must be 0 or more")
        }
        throw ConfigurationError(field: field, value: text, reason:
            "expected auto, software, a device index (0, 1, ...), a render node such as /dev/dri/renderD128, "
            + "or PLATFORM[:DEVICE] with PLATFORM gbm, device or surfaceless")
    }

    /// Parses `--format` (`mp4`, `mpegts` or its alias `ts`, `rtmp`, `srt`).
    public static func parseFormat(_ text: String, field: String = "--format") throws(ConfigurationError) -> ContainerFormat {
        let t = text.lowercased()
        if t == "ts" { return .mpegts }
        guard let f = ContainerFormat(rawValue: t) else {
            throw ConfigurationError(field: field, value: text, reason: "expected mp4, mpegts, rtmp or srt")
        }
        return f
    }

    // MARK: - JSON files

    /// Loads a JSON configuration file; errors name the file (`--config 'FILE': ...`).
    public static func load(path: String) throws(ConfigurationError) -> TakeConfiguration {
        guard !path.isEmpty else { throw ConfigurationError(field: "--config", value: path, reason: "needs a file path") }
        let data: Data
        do { data = try JSONFile.read(path: path, field: "--config") }
        return try TakeConfiguration(jsonData: data, source: path)
    }

    /// Decodes the JSON form; errors name `source` (the file) and the key.
    public init(jsonData data: Data, source: String = "JSON") throws(ConfigurationError) {
        do { self = try JSONDecoder().decode(TakeConfiguration.self, from: data) } catch {
            throw ConfigurationError(field: "--config", value: source, reason: "invalid configuration: \(JSONFile.describe(error))")
        }
    }

    /// The JSON form (sorted keys, pretty-printed); `load` reads it back.
    public func jsonData() -> Data {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted]
        return (try? e.encode(self)) ?? Data()
    }

    /// Writes the JSON form to `path`.
    public func save(toPath path: String) throws(ConfigurationError) {
        try JSONFile.write(jsonData(), toPath: path)
    }
}

extension TakeConfiguration: Codable {
    enum Keys: String, CodingKey, CaseIterable {
        case primary, secondary, out, layout, size, rotatePrimary, rotateSecondary, mirrorPrimary, mirrorSecondary
        case encoder, codec, bitrate, preset, keyframeInterval, audio, duration, format, preview, thermalState
        case secondaryTimeout, primaryTimeout, gpu, json, switchSecondary
    }
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let all = try decoder.container(keyedBy: AnyKey.self)
        for key in all.allKeys where Keys(rawValue: key.stringValue) == nil {
            throw DecodingError.dataCorruptedError(forKey: key, in: all, debugDescription:
                "unknown key; expected one of \(Keys.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let c = try decoder.container(keyedBy: Keys.self)
        /// Decodes a string with a command-line parser, mapping its error onto the key.
        func parsed<T>(_ key: Keys, _ parse: (String) throws(ConfigurationError) -> T) throws -> T? {
            guard let text = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
            do { return try parse(text) } catch {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "'\(error.value)': \(error.reason)")
            }
        }
        func rotation(_ key: Keys) throws -> Rotation? {
            guard let deg = try c.decodeIfPresent(Int.self, forKey: key) else { return nil }
            guard let r = Rotation(degrees: deg) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "'\(deg)': must be 0, 90, 180 or 270")
            }
            return r
        }
        var t = TakeConfiguration()
        t.primary = try parsed(.primary) { (s) throws(ConfigurationError) in try SourceSpec.parse(s, field: "primary") } ?? .none
        t.secondary = try parsed(.secondary) { (s) throws(ConfigurationError) in try SourceSpec.parse(s, field: "secondary") } ?? .none
        t.output = try c.decodeIfPresent(String.self, forKey: .out)
        t.layout = try c.decodeIfPresent(Layout.self, forKey: .layout) ?? Layout()
        if let s = try? c.decodeIfPresent(PixelSize.self, forKey: .size) {
            t.canvasSize = s
        } else if (try? c.decodeIfPresent(String.self, forKey: .size)) != nil {
            t.canvasSize = try parsed(.size) { (s) throws(ConfigurationError) in try TakeConfiguration.parseSize(s) }
        } else if c.contains(.size), try !c.decodeNil(forKey: .size) {
            throw DecodingError.dataCorruptedError(forKey: .size, in: c,
                debugDescription: "expected \"WxH\" or {\"width\": W, \"height\": H}")
        }
        t.primaryOrientation = Orientation(rotation: try rotation(.rotatePrimary) ?? .r0,
                                           mirrored: try c.decodeIfPresent(Bool.self, forKey: .mirrorPrimary) ?? false)
        t.secondaryOrientation = Orientation(rotation: try rotation(.rotateSecondary) ?? .r0,
                                             mirrored: try c.decodeIfPresent(Bool.self, forKey: .mirrorSecondary) ?? false)
        t.encoder = try c.decodeIfPresent(EncoderChoice.self, forKey: .encoder) ?? .auto
        t.codec = try c.decodeIfPresent(VideoCodec.self, forKey: .codec) ?? .h264
        if let n = try? c.decodeIfPresent(Int.self, forKey: .bitrate) {
            t.bitrate = n
        } else if (try? c.decodeIfPresent(String.self, forKey: .bitrate)) != nil {
            t.bitrate = try parsed(.bitrate) { (s) throws(ConfigurationError) in try TakeConfiguration.parseBitrate(s) }
                ?? TakeConfiguration.defaultBitrate
        } else if c.contains(.bitrate), try !c.decodeNil(forKey: .bitrate) {
            throw DecodingError.dataCorruptedError(forKey: .bitrate, in: c,
                debugDescription: "expected bits per second as a number (8000000) or a string (\"10M\", \"2500k\")")
        }
        t.preset = try c.decodeIfPresent(String.self, forKey: .preset) ?? t.preset
        t.keyframeInterval = try c.decodeIfPresent(Double.self, forKey: .keyframeInterval) ?? t.keyframeInterval
        t.audio = try c.decodeIfPresent(AudioMode.self, forKey: .audio) ?? .primary
        t.duration = try c.decodeIfPresent(Double.self, forKey: .duration)
        t.format = try parsed(.format) { (s) throws(ConfigurationError) in try TakeConfiguration.parseFormat(s) }
        t.preview = try c.decodeIfPresent(String.self, forKey: .preview)
        t.thermalState = try parsed(.thermalState) { (s) throws(ConfigurationError) in try ThermalState.parse(s) }
        t.secondaryTimeout = try c.decodeIfPresent(Double.self, forKey: .secondaryTimeout) ?? t.secondaryTimeout
        t.primaryTimeout = try c.decodeIfPresent(Double.self, forKey: .primaryTimeout) ?? t.primaryTimeout
        if let n = try? c.decodeIfPresent(Int.self, forKey: .gpu) {
            t.gpu = String(n)
        } else if let text = try c.decodeIfPresent(String.self, forKey: .gpu) {
            do { try TakeConfiguration.checkGPU(text) } catch {
                throw DecodingError.dataCorruptedError(forKey: .gpu, in: c, debugDescription: "'\(error.value)': \(error.reason)")
            }
            t.gpu = text
        }
        t.json = try c.decodeIfPresent(Bool.self, forKey: .json) ?? false
        t.secondarySwitches = try c.decodeIfPresent([SecondarySwitch].self, forKey: .switchSecondary) ?? []
        self = t
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(primary.description, forKey: .primary)
        try c.encode(secondary.description, forKey: .secondary)
        try c.encodeIfPresent(output, forKey: .out)
        try c.encode(layout, forKey: .layout)
        try c.encodeIfPresent(canvasSize?.description, forKey: .size)
        try c.encode(primaryOrientation.rotation.rawValue, forKey: .rotatePrimary)
        try c.encode(secondaryOrientation.rotation.rawValue, forKey: .rotateSecondary)
        try c.encode(primaryOrientation.mirrored, forKey: .mirrorPrimary)
        try c.encode(secondaryOrientation.mirrored, forKey: .mirrorSecondary)
        try c.encode(self.encoder, forKey: .encoder)
        try c.encode(codec, forKey: .codec)
        try c.encode(bitrate, forKey: .bitrate)
        try c.encode(preset, forKey: .preset)
        try c.encode(keyframeInterval, forKey: .keyframeInterval)
        try c.encode(audio, forKey: .audio)
        try c.encodeIfPresent(duration, forKey: .duration)
        try c.encodeIfPresent(format?.rawValue, forKey: .format)
        try c.encodeIfPresent(preview, forKey: .preview)
        try c.encodeIfPresent(thermalState?.rawValue, forKey: .thermalState)
        try c.encode(secondaryTimeout, forKey: .secondaryTimeout)
        try c.encode(primaryTimeout, forKey: .primaryTimeout)
        try c.encode(gpu, forKey: .gpu)
        try c.encode(json, forKey: .json)
        if !secondarySwitches.isEmpty { try c.encode(secondarySwitches, forKey: .switchSecondary) }
    }
}
