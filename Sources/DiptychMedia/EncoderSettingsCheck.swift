import CX26x
import DiptychCore

/// A setting of `VideoEncoderSettings` that `validate()` can refuse.
public enum EncoderSetting: String, Hashable, Sendable, CaseIterable {
    case preset, tune, bitrate
}

/// Checking encoder settings up front: what libx264/libx265 (or VA-API)
/// would refuse when the encoder opens, said in one line naming the
/// setting, with nothing opened and nothing printed.
extension VideoEncoderSettings {
    /// The preset names the software encoder for `codec` knows (from
    /// x264.h / x265.h), fastest first.
    public static func presetNames(codec: VideoCodec) -> [String] {
        names(codec == .h264 ? diptych_x264_preset_names() : diptych_x265_preset_names())
    }

    /// The tune names the software encoder for `codec` knows.
    public static func tuneNames(codec: VideoCodec) -> [String] {
        names(codec == .h264 ? diptych_x264_tune_names() : diptych_x265_tune_names())
    }

    private static func names(_ list: UnsafePointer<UnsafePointer<CChar>?>?) -> [String] {
        guard let list else { return [] }
        var out: [String] = []
        var i = 0
        while let p = list[i] { out.append(String(cString: p)); i += 1 }
        return out
    }

    /// The bit rates (bits per second) the encoder takes: libx264 and
    /// libx265 count whole kbit/s in an `int` (below 1000 is 0, which
    /// libx264 refuses and libx265 ignores); VA-API counts bits per second in
    /// 32 bits, as NVENC does (`averageBitRate`). `.auto` may end up with
    /// any, so it takes what all accept.
    public static func bitrateRange(encoder: EncoderChoice) -> ClosedRange<Int> {
        let software = 1000...(Int(Int32.max) * 1000)
        let vaapi = 1...Int(UInt32.max)
        switch encoder {
        case .x264: return software
        case .gpu: return 1...Int.max   // the GPU encoder keeps a quantizer; the rate is not used
        case .vaapi, .nvenc: return vaapi
        case .auto: return max(software.lowerBound, vaapi.lowerBound)...min(software.upperBound, vaapi.upperBound)
        }
    }

    /// Throws `.invalidSetting` for a preset or tune the software encoder for
    /// `codec` does not know (VA-API ignores both, but `.auto` may fall back
    /// to software) or a bit rate outside `bitrateRange(encoder:)`.
    public func validate() throws(MediaError) {
        try VideoEncoderSettings.validate(codec: codec, encoder: encoder, preset: preset, tune: tune, bitrate: bitrate)
    }

    public static func validate(codec: VideoCodec, encoder: EncoderChoice, preset: String, tune: String?,
                                bitrate: Int) throws(MediaError) {
        let software = EncoderProbe.encoderNames(codec: codec).software
        let presets = presetNames(codec: codec)
        if !presets.contains(preset) {
            throw .invalidSetting(.preset, value: shown(preset), reason: "not a \(software) preset (one of \(presets.joined(separator: ", ")))")
        }
        if let tune {
            // x264/x265 take several tunes joined with , . / - or + ("film,fastdecode").
            let tunes = tuneNames(codec: codec)
            let parts = tune.utf8.count > 256 ? [] : tune.split(whereSeparator: { ",./-+".contains($0) }).map(String.init)
            if parts.isEmpty || !parts.allSatisfy(tunes.contains) {
                throw .invalidSetting(.tune, value: shown(tune), reason: "not a \(software) tune (one of \(tunes.joined(separator: ", ")))")
            }
        }
        let range = bitrateRange(encoder: encoder)
        if !range.contains(bitrate) {
            let who = encoder == .vaapi ? "VA-API takes" : encoder == .nvenc ? "NVENC takes"
                : encoder == .x264 ? "\(software) takes" : "\(software) and VA-API take"
            throw .invalidSetting(.bitrate, value: "\(bitrate)", reason: "\(who) \(range.lowerBound)...\(range.upperBound) bits per second")
        }
    }

    /// A user's value as an error shows it: at most 40 characters (a huge
    /// value is never echoed).
    static func shown(_ value: String) -> String {
        value.utf8.count <= 40 ? value : String(value.prefix(40)) + "…"
    }
}
