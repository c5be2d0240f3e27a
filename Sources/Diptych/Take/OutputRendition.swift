import DiptychCore
import DiptychMedia

/// What one output of a take is drawn and encoded at (docs/ARCHITECTURE.md,
/// "Several outputs"): its canvas, the frames of the take's clock it takes,
/// and its encoder's settings. The main output's is the take's own; an
/// output with an encoding of its own (`OutputEncoding`) is a rung of a
/// ladder, drawn into a render target of its size from the same uploaded
/// pictures.
struct OutputRendition: Sendable {
    var canvas: PixelSize
    /// The output takes every `rateDivisor`th frame (its `video.frameRate` is the take's divided by it).
    var rateDivisor: Int
    var video: VideoEncoderSettings

    /// The take's own: every frame, at the take's settings.
    init(take video: VideoEncoderSettings) {
        canvas = video.size; rateDivisor = 1; self.video = video
    }

    /// Output `spec`'s, from the take's settings `take` (canvas, rate,
    /// encoder path, threads): its own size, rate, codec, rate control and
    /// preset where it sets them, a keyframe every `--keyframe-interval`
    /// seconds at its rate.
    init(_ spec: OutputSpec, take: VideoEncoderSettings, config: TakeConfiguration) {
        let e = spec.encoding
        var v = take
        if !e.isEmpty {
            let r = config.resolvedEncoding(e)
            v.size = e.size ?? take.size
            v.frameRate = e.frameRate(take: take.frameRate)
            v.gop = max(1, Int((config.keyframeInterval * v.frameRate.fps).rounded()))
            v.codec = r.codec
            v.bitrate = r.bitrate
            v.qp = r.qp
            v.maxrate = r.maxrate
            v.bufsize = r.bufsize
            v.preset = r.preset
        }
        canvas = v.size; rateDivisor = e.divisor; video = v
    }

    /// `640x360 at 15 fps, h264 800000 b/s, preset veryfast` (`qp 23` for a constant quantizer).
    var description: String {
        let rate = video.qp.map { "qp \($0)" } ?? "\(video.bitrate) b/s" + (video.maxrate.map { " (peak \($0))" } ?? "")
        return "\(canvas) at \(video.frameRate) fps, \(video.codec.rawValue) \(rate), preset \(video.preset)"
    }

    /// Whether the output takes frame `index` of the take's clock.
    func takes(_ index: Int) -> Bool { index % rateDivisor == 0 }

    /// Checks, before anything opens, what the encoder would refuse of
    /// output `spec` (`field`, e.g. `alsoOut[1]`): its preset for its codec,
    /// its bit rate for the encoder; a one-line configuration error naming the field.
    static func check(_ spec: OutputSpec, config: TakeConfiguration, field: String) throws(SessionError) {
        let e = spec.encoding
        guard !e.isEmpty else { return }
        do { try config.checkEncoding(e, field: field) } catch { throw .configuration(error) }
        let r = config.resolvedEncoding(e)
        do {
            try VideoEncoderSettings.validate(codec: r.codec, encoder: config.encoder, preset: r.preset, tune: nil, bitrate: r.bitrate)
        } catch {
            guard case .invalidSetting(let setting, let value, let reason) = error else { throw .encoder(error) }
            // The setting the output gave, or the take's it inherits.
            let own = setting == .preset ? e.preset != nil : setting == .bitrate ? e.bitrate != nil : false
            throw .configuration(ConfigurationError(field: own ? "\(field).\(setting.rawValue)" : "--\(setting.rawValue)", value: value,
                                                    reason: own ? reason : "\(reason) (for \(field), codec \(r.codec.rawValue))"))
        }
    }
}
