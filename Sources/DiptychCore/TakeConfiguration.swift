#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything one take (recording) needs. Frozen when the take starts
/// (docs/ARCHITECTURE.md, "Frozen at start"), except for the scheduled
/// `secondarySwitches`, the layouts and the outputs added later.
///
/// The values only: the command-line flags, `--help` and the JSON form are
/// derived from the option table in DiptychOptions. Call `validate()`
/// before using it. Defaults match `diptych record` without options.
public struct TakeConfiguration: Hashable, Sendable {
    /// `--primary SRC` (required; `.none` until set).
    public var primary: SourceSpec = .none
    /// `--secondary SRC`; `.none` records the primary alone.
    public var secondary: SourceSpec = .none
    /// `--layout`, `--pip-corner`, `--pip-size`, `--pip-margin`, `--swap-roles`,
    /// `--content-mode`, `--background`.
    public var layout = Layout()
    /// `--transition MS[:EASING]` (JSON `transition: {"ms", "easing"}`): how
    /// the take's layout changes animate (scheduled ones, and `PATCH` or
    /// `setLayout` without a transition of their own); nil: at once.
    public var layoutTransition: LayoutTransition?
    /// `--layout-at SECONDS=KIND` (repeatable; JSON `layoutSchedule`: a list
    /// of `{"at", "layout", "transition"}`): layout changes at times of the take, in time order.
    public var layoutSchedule: [ScheduledLayout] = []
    /// Entries `layoutSchedule` may hold.
    public static let maximumScheduledLayouts = 1000
    /// `--overlay IMAGE@X,Y,W,H[,OPACITY][,top|bottom]` (repeatable; JSON
    /// `overlays`: a list of `{"image", "rect", "opacity", "z"}`): images
    /// drawn over the main output's streams (`--also-out` outputs have their own).
    public var overlays: [ImageOverlay] = []
    /// `--text TEMPLATE@X,Y[,SIZE][,KEY=VALUE]...` (repeatable; JSON `texts`):
    /// texts drawn over the main output's streams, counted with its images
    /// (`--also-out` outputs have their own).
    public var texts: [TextOverlay] = []
    /// `--size WxH`; nil = the primary's upright size (rounded down to even).
    public var canvasSize: PixelSize?
    /// `--rotate-primary DEG`, `--mirror-primary`.
    public var primaryOrientation = Orientation.identity
    /// `--rotate-secondary DEG`, `--mirror-secondary`.
    public var secondaryOrientation = Orientation.identity
    /// `--encoder auto|vaapi|nvenc|x264|gpu`.
    public var encoder = EncoderChoice.auto
    /// `--decoder auto|cpu|nvdec`: where the input streams are decoded.
    public var decoder = DecoderChoice.auto
    /// `--codec h264|hevc`.
    public var codec = VideoCodec.h264
    /// `--bitrate` in bits per second (`10M`, `2500k`, `8000000`).
    public var bitrate = TakeConfiguration.defaultBitrate
    /// `--preset` (x264/x265 preset name).
    public var preset = "veryfast"
    /// `--qp N` (0-51): constant quantizer instead of a bit rate; nil: rate controlled.
    public var qp: Int?
    /// `--maxrate BITS`: the VBV's peak rate in bits per second; nil: the encoder's default.
    public var maxrate: Int?
    /// `--bufsize BITS`: the VBV's buffer in bits; nil: the encoder's default.
    public var bufsize: Int?
    /// `--keyframe-interval SECONDS` (GOP length).
    public var keyframeInterval = 1.0
    /// `--slices N` (1-256): slices a picture of each H.264 output, whole
    /// macroblock rows each (at most one a row); nil: the encoder's default
    /// (one; the GPU encoder's `GPUH264Settings.defaultSlices`).
    public var slices: Int?
    public static let maxSlices = 256
    /// `--audio primary|secondary|mix|none`.
    public var audio = AudioMode.primary
    /// `--primary-gain DB`, `--secondary-gain DB`: each stream's audio gain
    /// in decibels (0: as it is), applied before the mix.
    public var primaryGain = 0.0
    public var secondaryGain = 0.0
    /// Gains a stream's audio may be given, in decibels.
    public static let gainRange = -60.0...20.0
    /// `--duration SECONDS`; nil = until the primary ends.
    public var duration: Double?
    /// `--out FILE|URL` (required).
    public var output: String?
    /// `--segment-time SECONDS`: the main output (an MP4 or Matroska file)
    /// is split into files of about this length, each cut at a keyframe
    /// (`SegmentNaming`); nil: one file. For an HLS output: the length of
    /// its segments (nil: `HLSNaming.defaultSegmentTime`).
    public var segmentTime: Double?
    /// `--hls-list-size N` (an HLS main output only): the live playlist lists
    /// the last N segments (a sliding window); nil or 0: every segment.
    public var hlsListSize: Int?
    /// `--format`; nil = inferred from `output` (`ContainerFormat.infer`).
    public var format: ContainerFormat?
    /// `--preview FILE`: PNG of the composite (same render target as the encoder).
    public var preview: String?
    /// `--thermal-state`: pretend the machine is in this state (testing "Failure paths").
    public var thermalState: ThermalState?
    /// `--secondary-timeout SECONDS`: how long the secondary may deliver
    /// nothing (at the start or mid-take) before the take continues with the
    /// primary alone (see `clockConfiguration`).
    public var secondaryTimeout = 2.0
    /// `--primary-timeout SECONDS`: a primary that delivers nothing for this
    /// long counts as interrupted and the take is finalized.
    public var primaryTimeout = 10.0
    /// `--listen-timeout SECONDS`: how long a listening source (an SRT
    /// listener, an RTMP or TCP listen URL) waits for its publisher, at the
    /// start and at each reopen once the publisher has left.
    public var listenTimeout = TakeConfiguration.defaultListenTimeout
    public static let defaultListenTimeout = 30.0

    /// How long opening `spec` for `role` may block: the listen timeout for
    /// a source that waits for a publisher, else the role's timeout.
    public func openTimeout(_ role: StreamRole, _ spec: SourceSpec) -> Double {
        if case .url(let u) = spec, SourcePolicy.listening(u) != nil { return listenTimeout }
        return role == .primary ? primaryTimeout : secondaryTimeout
    }
    /// `--primary-fallback SRC` (repeatable; JSON: `"primary": [A, B, ...]`):
    /// the primary's priority list after `primary`, highest first. The take
    /// shows the first that delivers, fails over when it is lost and fails
    /// back (docs/ARCHITECTURE.md, "Source recovery").
    public var primaryFallbacks: [SourceSpec] = []
    /// `--secondary-fallback SRC` (repeatable; JSON: `"secondary": [A, B, ...]`).
    public var secondaryFallbacks: [SourceSpec] = []
    /// `--source-reconnect-window SECONDS`: how long a role whose network
    /// source is lost (failed, ended or silent for the role's timeout) keeps
    /// reopening it, and trying the rest of its list, before it gives up; 0:
    /// never (a lost source ends the take or drops the secondary at once).
    public var sourceReconnectWindow = TakeConfiguration.defaultSourceReconnectWindow
    /// `--source-failback SECONDS`: how long a higher source of a list must
    /// deliver steadily before the take goes back to it.
    public var sourceFailback = TakeConfiguration.defaultSourceFailback
    public static let defaultSourceReconnectWindow = 30.0
    public static let defaultSourceFailback = 5.0
    /// Sources a role's list may hold.
    public static let maximumSources = 8
    /// `--gpu auto|software|N|/dev/dri/renderDN`, optionally as `PLATFORM`
    /// or `PLATFORM:DEVICE` (platforms `gbm`, `device`, `surfaceless`).
    /// Kept as text: DiptychGPU's `GPUSelection(parsing:)` interprets it;
    /// `parse` and `validate` check the grammar (`checkGPU`).
    public var gpu = "auto"
    /// `--json`: machine-readable report on stdout.
    public var json = false
    /// `--switch-secondary SECONDS=SRC` (repeatable), in the order given.
    public var secondarySwitches: [SecondarySwitch] = []
    /// `--over-budget reduce|keep|refuse`: what the cost trial's verdict
    /// does to a canvas over budget; nil: `keep` with `--size`, else `reduce`.
    public var overBudget: OverBudget?
    /// What `overBudget` means for this take.
    public var resolvedOverBudget: OverBudget { overBudget ?? (canvasSize != nil ? .keep : .reduce) }
    /// `--realtime on|off|auto`: pace frames at the primary's real-time rate
    /// (auto: when an output is live and no source is).
    public var realtime = RealtimeMode.auto
    /// `--reconnect-window SECONDS`: how long a live output that fails is
    /// reopened (with backoff) before it is closed; 0 never reopens it.
    public var reconnectWindow = 60.0
    /// `--slate FILE.png`: shown on live outputs while the primary is interrupted
    /// (instead of its last frame).
    public var slate: String?
    /// `--also-out URL [--also-layout KIND]` (repeatable): more outputs fed
    /// from the same stream textures, each with its own layout.
    public var extraOutputs: [OutputSpec] = []

    public static let defaultBitrate = 10_000_000
    /// Largest accepted `--bitrate` (1 Gb/s).
    public static let maximumBitrate = 1_000_000_000

    public init() {}

    /// The output container: `format` when given, else inferred from `output`.
    public var container: ContainerFormat? {
        format ?? output.flatMap { ContainerFormat.infer(from: $0) }
    }

    /// Whether the main output is a split recording (`segmentTime` on an MP4
    /// or Matroska file: `SegmentNaming`'s files, not `output` itself).
    public var splitsOutput: Bool {
        segmentTime != nil && (container == .mp4 || container == .matroska)
    }

    /// The canvas for this take: `canvasSize` when set, else the primary's
    /// upright size rounded down to even, else 1920×1080.
    public func resolvedCanvas(primaryUprightSize: PixelSize?) -> PixelSize {
        if let s = canvasSize { return s.evenAligned() }
        if let p = primaryUprightSize, !p.isEmpty { return p.evenAligned() }
        return .hd1080
    }

    /// The priority list of `role`: its source, then its fallbacks (empty for no secondary).
    public func sources(_ role: StreamRole) -> [SourceSpec] {
        switch role {
        case .primary: return [primary] + primaryFallbacks
        case .secondary: return secondary == .none ? [] : [secondary] + secondaryFallbacks
        }
    }

    /// How lost sources are reopened and lists fail over (`SourceRecovery`).
    public var sourceRecovery: SourceRecovery { SourceRecovery(window: sourceReconnectWindow, failback: sourceFailback) }

    /// The stream geometry of `role` for a decoded frame size, with this
    /// configuration's rotation and mirror.
    public func geometry(_ role: StreamRole, sensorSize: PixelSize) -> StreamGeometry {
        StreamGeometry(sensorSize: sensorSize, orientation: role == .primary ? primaryOrientation : secondaryOrientation)
    }

    /// The frame clock settings this take implies: hold the latest secondary
    /// frame; wait up to `secondaryTimeout` for the secondary's first frame;
    /// a secondary that ends, or delivers nothing for `secondaryTimeout`,
    /// leaves the primary alone (docs/ARCHITECTURE.md, "Single-stream fallback"). Without a secondary (`.none`)
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
                                     reason: "cannot tell the container from the name; use .mp4, .mkv, .ts, .m3u8, rtmp://, srt:// or --format")
        }
        if let f = format, let inferred = ContainerFormat.infer(from: out), f != inferred,
           inferred == .rtmp || inferred == .srt || f == .rtmp || f == .srt {
            throw ConfigurationError(field: "--format", value: f.rawValue, reason: "does not match the output '\(out)' (\(inferred.rawValue))")
        }
        if let e = OutputSpec(out: out, format: format, segmentTime: segmentTime, hlsListSize: hlsListSize)
            .segmentsError(fields: ("--segment-time", "--hls-list-size"), named: "--out") { throw e }
        if let s = canvasSize {
            if s.width <= 0 || s.height <= 0 {
                throw ConfigurationError(field: "--size", value: s.description, reason: "width and height must be positive")
            }
            if s.width > Self.maximumDimension || s.height > Self.maximumDimension {
                throw ConfigurationError(field: "--size", value: s.description, reason: "width and height must be at most \(Self.maximumDimension)")
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
        if !encoder.encodes(codec) {
            throw ConfigurationError(field: "--encoder", value: encoder.rawValue,
                                     reason: "encodes H.264 only, not --codec \(codec.rawValue) (use --codec h264, or --encoder auto, vaapi, nvenc or x264)")
        }
        try TakeConfiguration.checkRateControl(qp: qp, maxrate: maxrate, bufsize: bufsize, encoder: encoder)
        if !(keyframeInterval > 0 && keyframeInterval <= 3600) {
            throw ConfigurationError(field: "--keyframe-interval", value: "\(keyframeInterval)", reason: "must be a positive number of seconds, at most 3600")
        }
        if let s = slices {
            guard (1...Self.maxSlices).contains(s) else {
                throw ConfigurationError(field: "--slices", value: "\(s)", reason: "must be 1 to \(Self.maxSlices)")
            }
            guard codec == .h264 else {
                throw ConfigurationError(field: "--slices", value: "\(s)", reason: "applies to H.264 (--codec h264), not --codec \(codec.rawValue)")
            }
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
        if !(listenTimeout > 0 && listenTimeout <= 3600) {
            throw ConfigurationError(field: "--listen-timeout", value: "\(listenTimeout)", reason: "must be a positive number of seconds, at most 3600")
        }
        try TakeConfiguration.checkGPU(gpu)
        if !(reconnectWindow >= 0 && reconnectWindow <= 3600) {
            throw ConfigurationError(field: "--reconnect-window", value: "\(reconnectWindow)", reason: "must be 0 to 3600 seconds")
        }
        try checkSources()
        try checkAudio()
        if let s = slate, s.isEmpty { throw ConfigurationError(field: "--slate", value: s, reason: "must be a PNG file") }
        if let p = preview, p.isEmpty {
            throw ConfigurationError(field: "--preview", value: p, reason: "must be a file path")
        }
        if let p = preview, Self.samePath(p, output) || extraOutputs.contains(where: { Self.samePath($0.out, p) }) {
            throw ConfigurationError(field: "--preview", value: p, reason: "names an output of the take (the preview would overwrite it)")
        }
        if let e = layout.validationError() { throw e }
        if let s = canvasSize, let e = layout.validationError(canvas: s) { throw e }
        try checkLayoutSchedule()
        try ImageOverlay.check(overlays, field: "overlays")
        for (i, o) in extraOutputs.enumerated() { try ImageOverlay.check(o.overlays, field: "alsoOut[\(i)].overlays") }
        try TextOverlay.check(texts, images: overlays.count, field: "texts")
        for (i, o) in extraOutputs.enumerated() { try TextOverlay.check(o.texts, images: o.overlays.count, field: "alsoOut[\(i)].texts") }
        if extraOutputs.count > Self.maximumExtraOutputs {
            throw ConfigurationError(field: "--also-out", value: extraOutputs[Self.maximumExtraOutputs].out,
                                     reason: "at most \(Self.maximumExtraOutputs) extra outputs (each has its own encoder)")
        }
        for (i, o) in extraOutputs.enumerated() {
            if o.out.isEmpty { throw ConfigurationError(field: "--also-out", value: o.out, reason: "is empty") }
            guard o.container != nil else {
                throw ConfigurationError(field: "--also-out", value: o.out,
                                         reason: "cannot tell the container from the name; use .mp4, .mkv, .ts, .m3u8, rtmp:// or srt://")
            }
            if Self.samePath(o.out, output) || extraOutputs[..<i].contains(where: { Self.samePath($0.out, o.out) }) {
                throw ConfigurationError(field: "--also-out", value: o.out, reason: "names an output given already")
            }
            if let l = o.layout, let e = l.validationError() { throw e }
            if let e = o.segmentsError(fields: ("alsoOut[\(i)].segmentTime", "alsoOut[\(i)].hlsListSize"), named: "output") { throw e }
            try checkEncoding(o.encoding, field: "alsoOut[\(i)]")
            if let s = o.encoding.size ?? canvasSize, let e = outputLayoutError(o, canvas: s, field: "alsoOut[\(i)]") { throw e }
        }
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

    /// Checks an output's own encoding against the take: its fields
    /// (`OutputEncoding.validationError`), and a codec `--encoder` encodes.
    public func checkEncoding(_ e: OutputEncoding, field: String) throws(ConfigurationError) {
        if let error = e.validationError(field: field) { throw error }
        if let c = e.codec, !encoder.encodes(c) {
            throw ConfigurationError(field: "\(field).codec", value: c.rawValue,
                                     reason: "--encoder \(encoder.rawValue) encodes H.264 only (use h264, or --encoder auto, vaapi, nvenc or x264)")
        }
    }

    /// Whether output `o`'s layouts fit its canvas `canvas`: its own, or
    /// the take's and its scheduled ones when it follows the take's. An
    /// output of its own size is named by its size (`alsoOut[1].size`).
    public func outputLayoutError(_ o: OutputSpec, canvas: PixelSize, field: String) -> ConfigurationError? {
        let layouts = o.layout.map { [$0] } ?? ([layout] + layoutSchedule.map(\.layout))
        for l in layouts {
            guard let e = l.validationError(canvas: canvas) else { continue }
            guard let size = o.encoding.size else { return e }
            return ConfigurationError(field: "\(field).size", value: size.description,
                                      reason: "\(e.field) '\(ConfigurationError.quoted(e.value))' \(e.reason)")
        }
        return nil
    }

    /// What output `e` is encoded with: its own fields, the take's for
    /// those it leaves out (rate control whole: `OutputEncoding`'s rule).
    public func resolvedEncoding(_ e: OutputEncoding) -> ResolvedEncoding {
        let own = e.ownsRateControl
        return ResolvedEncoding(codec: e.codec ?? codec, bitrate: e.bitrate ?? min(bitrate, e.maxrate ?? bitrate), qp: own ? nil : qp,
                                maxrate: own ? e.maxrate : maxrate, bufsize: own ? e.bufsize : bufsize, preset: e.preset ?? preset,
                                rateDivisor: e.divisor)
    }

    /// Checks `--transition` and `--layout-at`: times 0 or more in
    /// increasing order, within the take's duration, each layout valid.
    func checkLayoutSchedule() throws(ConfigurationError) {
        if let t = layoutTransition, let e = t.validationError(field: "--transition") { throw e }
        if layoutSchedule.count > Self.maximumScheduledLayouts {
            throw ConfigurationError(field: "--layout-at", value: "\(layoutSchedule[Self.maximumScheduledLayouts].at)",
                                     reason: "at most \(Self.maximumScheduledLayouts) scheduled layout changes")
        }
        var previous = -Double.infinity
        for (i, c) in layoutSchedule.enumerated() {
            let text = "\(c.at)=\(c.layout.kind.rawValue)"
            if !(c.at >= 0 && c.at <= 1e7) {
                throw ConfigurationError(field: "--layout-at", value: text, reason: "time must be 0 or more seconds, at most 10000000")
            }
            if c.at <= previous {
                throw ConfigurationError(field: "--layout-at", value: text, reason: "times must increase (entry \(i) is not after the one before)")
            }
            previous = c.at
            if let d = duration, c.at >= d {
                throw ConfigurationError(field: "--layout-at", value: text, reason: "time is after the end of the take (--duration \(d))")
            }
            if let e = c.layout.validationError() { throw e }
            if let s = canvasSize, let e = c.layout.validationError(canvas: s) { throw e }
            if let t = c.transition, let e = t.validationError(field: "layoutSchedule[\(i)].transition") { throw e }
        }
    }

    /// Checks `--audio` and the gains: a gain within `gainRange`, for a
    /// stream the take hears; `secondary` and `mix` need a secondary.
    func checkAudio() throws(ConfigurationError) {
        for (role, gain) in [(StreamRole.primary, primaryGain), (.secondary, secondaryGain)] {
            let field = "--\(role.rawValue)-gain"
            if !(gain >= Self.gainRange.lowerBound && gain <= Self.gainRange.upperBound) {
                throw ConfigurationError(field: field, value: "\(gain)", reason: "must be \(Int(Self.gainRange.lowerBound)) to \(Int(Self.gainRange.upperBound)) dB")
            }
            if gain != 0 && !audio.roles.contains(role) {
                throw ConfigurationError(field: field, value: "\(gain)",
                                         reason: "the \(role.rawValue)'s audio is not heard with --audio \(audio.rawValue) (use --audio \(role.rawValue) or mix)")
            }
        }
        if audio == .secondary || audio == .mix, secondary == .none {
            throw ConfigurationError(field: "--audio", value: audio.rawValue, reason: "needs a secondary (--secondary)")
        }
    }

    /// Checks the source lists and their recovery: fallbacks are sources
    /// that can be opened again (not `none` or standard input), a secondary
    /// list needs a secondary, and a list needs a reconnect window to fail over in.
    func checkSources() throws(ConfigurationError) {
        if !(sourceReconnectWindow >= 0 && sourceReconnectWindow <= 3600) {
            throw ConfigurationError(field: "--source-reconnect-window", value: "\(sourceReconnectWindow)", reason: "must be 0 to 3600 seconds")
        }
        if !(sourceFailback > 0 && sourceFailback <= 3600) {
            throw ConfigurationError(field: "--source-failback", value: "\(sourceFailback)", reason: "must be a positive number of seconds, at most 3600")
        }
        for (role, head, fallbacks) in [(StreamRole.primary, primary, primaryFallbacks), (.secondary, secondary, secondaryFallbacks)] {
            let field = "--\(role.rawValue)-fallback"
            guard let first = fallbacks.first else { continue }
            if head == .none {
                throw ConfigurationError(field: field, value: first.description, reason: "needs --\(role.rawValue) (the source it stands in for)")
            }
            if head == .stdin {
                throw ConfigurationError(field: "--\(role.rawValue)", value: "-", reason: "standard input cannot head a source list (it cannot be opened again)")
            }
            if fallbacks.count + 1 > Self.maximumSources {
                throw ConfigurationError(field: field, value: fallbacks[Self.maximumSources - 1].description,
                                         reason: "a source list holds at most \(Self.maximumSources) sources")
            }
            for f in fallbacks where f == .none || f == .stdin {
                throw ConfigurationError(field: field, value: f.description, reason: "must be a file, URL or testsrc: pattern (not none or standard input)")
            }
            if sourceReconnectWindow == 0 {
                throw ConfigurationError(field: "--source-reconnect-window", value: "0",
                                         reason: "must be positive with a source list (\(field)): the window is how long a lost source is replaced")
            }
        }
    }

    /// Checks `--qp` (0-51), `--maxrate` and `--bufsize` (positive, at most
    /// `maximumBitrate`). A buffer needs a peak rate to drain at (a peak rate
    /// alone gets a one-second buffer), and a constant quantizer has no rate to cap.
    public static func checkRateControl(qp: Int?, maxrate: Int?, bufsize: Int?, encoder: EncoderChoice = .auto) throws(ConfigurationError) {
        if let qp, !(0...51).contains(qp) {
            throw ConfigurationError(field: "--qp", value: "\(qp)", reason: "must be 0 to 51")
        }
        for (field, v) in [("--maxrate", maxrate), ("--bufsize", bufsize)] {
            guard let v else { continue }
            if v <= 0 { throw ConfigurationError(field: field, value: "\(v)", reason: "must be positive") }
            if v > maximumBitrate { throw ConfigurationError(field: field, value: "\(v)", reason: "must be at most 1G (1000000000)") }
        }
        if let b = bufsize, maxrate == nil {
            throw ConfigurationError(field: "--bufsize", value: "\(b)", reason: "needs --maxrate (the peak rate the buffer drains at)")
        }
        if let m = maxrate, let qp {
            throw ConfigurationError(field: "--maxrate", value: "\(m)", reason: "cannot cap --qp \(qp) (a constant quantizer has no rate to cap)")
        }
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

    /// Largest canvas or frame side any part of Diptych accepts; the GPU in
    /// use may allow less (the session asks it before opening anything).
    public static let maximumDimension = 16384
    /// Whether two output names are one file however spelled (`./a.mp4`,
    /// `a.mp4`, `d//a.mp4`); URLs compare as written.
    static func samePath(_ a: String, _ b: String?) -> Bool {
        guard let b else { return false }
        func parts(_ p: String) -> [Substring] { p.split(separator: "/").filter { $0 != "." } }
        if a.contains("://") || b.contains("://") { return a == b }
        return a.hasPrefix("/") == b.hasPrefix("/") && parts(a) == parts(b)
    }

    /// `--also-out` outputs one take may have.
    public static let maximumExtraOutputs = 16
}

/// An output's encoding with the take's values filled in (`TakeConfiguration.resolvedEncoding`).
public struct ResolvedEncoding: Hashable, Sendable {
    public var codec: VideoCodec
    public var bitrate: Int
    /// The take's `--qp`, for an output without rate control of its own.
    public var qp: Int?
    public var maxrate: Int?
    public var bufsize: Int?
    public var preset: String
    public var rateDivisor: Int
}
