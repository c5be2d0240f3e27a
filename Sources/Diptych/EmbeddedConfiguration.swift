import DiptychCore
import DiptychOptions

/// How an embedded session composites and encodes: a take's configuration
/// (`take`, the same settings as `diptych record`) minus the inputs, which
/// the host pushes, plus what no source can tell: the nominal frame rate.
/// The canvas is `take.canvasSize` and is required.
public struct EmbeddedConfiguration: Hashable, Sendable {
    /// The settings of the take the session runs. Its inputs, duration,
    /// preview, audio and thermal fields are not used.
    public var take: TakeConfiguration
    /// Nominal output rate, for the encoder's rate control and GOP length.
    /// Output timestamps are the primary's own (variable rate is kept).
    public var frameRate: FrameRate
    /// Whether a secondary stream will be pushed. Without one every output
    /// frame shows the primary alone and nothing waits for a secondary.
    public var hasSecondary = true
    /// Frames each push queue holds before `push` blocks (or says `.wouldBlock`).
    public var queueCapacity = 4

    public init(canvas: PixelSize, frameRate: FrameRate) {
        take = TakeConfiguration()
        take.canvasSize = canvas
        self.frameRate = frameRate
    }

    /// Output size (even width and height).
    public var canvas: PixelSize {
        get { take.canvasSize ?? .hd1080 }
        set { take.canvasSize = newValue }
    }
    public var layout: Layout { get { take.layout } set { take.layout = newValue } }
    public var primaryOrientation: Orientation { get { take.primaryOrientation } set { take.primaryOrientation = newValue } }
    public var secondaryOrientation: Orientation { get { take.secondaryOrientation } set { take.secondaryOrientation = newValue } }
    public var codec: VideoCodec { get { take.codec } set { take.codec = newValue } }
    public var encoder: EncoderChoice { get { take.encoder } set { take.encoder = newValue } }
    public var bitrate: Int { get { take.bitrate } set { take.bitrate = newValue } }
    public var preset: String { get { take.preset } set { take.preset = newValue } }
    /// `--qp`: constant quantizer 0-51; nil: rate controlled by `bitrate`.
    public var qp: Int? { get { take.qp } set { take.qp = newValue } }
    /// `--maxrate`, `--bufsize`: the VBV peak rate and buffer, in bits.
    public var maxrate: Int? { get { take.maxrate } set { take.maxrate = newValue } }
    public var bufsize: Int? { get { take.bufsize } set { take.bufsize = newValue } }
    public var keyframeInterval: Double { get { take.keyframeInterval } set { take.keyframeInterval = newValue } }
    /// `--slices`: slices a picture of each H.264 output (whole macroblock rows each); nil: one.
    public var slices: Int? { get { take.slices } set { take.slices = newValue } }
    public var secondaryTimeout: Double { get { take.secondaryTimeout } set { take.secondaryTimeout = newValue } }
    public var gpu: String { get { take.gpu } set { take.gpu = newValue } }

    /// The stand-in for a pushed stream in the take's configuration.
    static let pushed = SourceSpec.url("push:stream")

    /// Builds a configuration from the option table's embedding options
    /// (`OptionScope.embedded`: `--size`, layout, orientation and encoder
    /// flags, `--config FILE`, `--secondary none`, `--fps RATE` (required),
    /// `--queue N`). `--out`/`--format` name an optional file output
    /// (returned separately). Options about inputs or whole takes are errors.
    public static func parse(arguments: [String]) throws(EmbeddingError) -> (EmbeddedConfiguration, file: String?, format: ContainerFormat?) {
        var start = OptionValues()
        start.take.secondary = pushed
        let v: OptionValues
        do { v = try OptionParser.parse(arguments: arguments, scope: .embedded, into: start) } catch {
            throw EmbeddingError(.invalidArgument, "\(refusal(error))")
        }
        if v.take.secondary != .none && v.take.secondary != pushed {
            throw EmbeddingError(.invalidArgument, "--secondary '\(v.take.secondary)': frames come from the host; only --secondary none is an embedding option")
        }
        guard let size = v.take.canvasSize else { throw EmbeddingError(.invalidArgument, "--size: required (the output size, e.g. 1280x720)") }
        guard let fps = v.fps else { throw EmbeddingError(.invalidArgument, "--fps: required (the nominal output rate, e.g. 30)") }
        var c = EmbeddedConfiguration(canvas: size, frameRate: fps)
        c.take = v.take
        c.take.secondary = .none
        c.hasSecondary = v.take.secondary != .none
        c.queueCapacity = v.queue
        return (c, v.take.output, v.take.format)
    }

    /// Parses a layout from the layout flags (`--layout`, `--pip-corner`,
    /// `--pip-size`, `--pip-margin`, `--swap-roles`, `--content-mode`,
    /// `--background`, `--zoom-*`); flags not named take their defaults.
    public static func parseLayout(arguments: [String]) throws(EmbeddingError) -> Layout {
        try parseLayoutChange(arguments: arguments).layout
    }

    /// A layout change: the layout flags, and `--transition MS[:EASING]`
    /// for how it animates (absent: the session's `--transition`).
    public static func parseLayoutChange(arguments: [String]) throws(EmbeddingError) -> LayoutChange {
        let flags = OptionParser.options(.embedded).filter { $0.key?.first == "layout" || $0.flag == "--transition" }.compactMap(\.flag)
        let reader = ArgumentReader(flags.map { f in (f, OptionParser.options(.embedded).first { $0.flag == f }!.takesValue) })
        do {
            _ = try reader.read(arguments)
            let v = try OptionParser.parse(arguments: arguments, scope: .embedded)
            return LayoutChange(layout: v.take.layout, transition: v.take.layoutTransition)
        } catch {
            throw EmbeddingError(.invalidArgument, "\(error.field == "option" ? ConfigurationError(field: error.field, value: error.value, reason: "not a layout option (use \(flags.joined(separator: ", ")))") : error)")
        }
    }

    /// An unknown-option error for a flag `diptych record` knows says why it is refused here.
    private static func refusal(_ e: ConfigurationError) -> ConfigurationError {
        guard e.field == "option", OptionParser.options(.record).contains(where: { $0.flag == e.value }) else { return e }
        return ConfigurationError(field: e.value, value: "", reason: "not an embedding option (frames come from the host)")
    }

    /// The take configuration the session runs (push sources stand in for the inputs).
    func takeConfiguration(file: String?, format: ContainerFormat?) -> TakeConfiguration {
        var t = take
        t.primary = Self.pushed
        t.secondary = hasSecondary ? Self.pushed : .none
        t.audio = .none
        t.duration = nil
        t.preview = nil
        t.thermalState = nil
        t.secondarySwitches = []
        t.extraOutputs = []
        // The host ends its streams explicitly; a pause in its pushes is not an interruption.
        t.primaryTimeout = 3600
        if let file { t.output = file; t.format = format } else { t.output = "(embedded)"; t.format = .mpegts }
        return t
    }
}
