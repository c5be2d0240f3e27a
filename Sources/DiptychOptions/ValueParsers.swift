import DiptychCore

/// Value parsers the option table uses (each error names the field it is given).
extension TakeConfiguration {
    /// Parses `WxH`, distinguishing malformed from out-of-range values.
    public static func parseSize(_ text: String, field: String = "--size") throws(ConfigurationError) -> PixelSize {
        if let s = PixelSize(parsing: text) { return s }
        let p = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        if p.count == 2, let w = Int(p[0]), let h = Int(p[1]) {
            if w <= 0 || h <= 0 { throw ConfigurationError(field: field, value: text, reason: "width and height must be positive") }
            throw ConfigurationError(field: field, value: text, reason: "width and height must be at most \(TakeConfiguration.maximumDimension)")
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

    /// Parses a number of bits (`--bufsize`): `20M`, `2500k`, `8000000`.
    public static func parseBits(_ text: String, field: String) throws(ConfigurationError) -> Int {
        do { return try parseBitrate(text, field: field) } catch {
            throw ConfigurationError(field: field, value: text, reason: "expected bits such as 20M, 2500k or 8000000")
        }
    }

    /// Parses `--qp`: a whole number 0 to 51.
    public static func parseQP(_ text: String, field: String = "--qp") throws(ConfigurationError) -> Int {
        guard let n = Int(text), (0...51).contains(n) else {
            throw ConfigurationError(field: field, value: text, reason: "expected a quantizer 0 to 51 (lower is better quality)")
        }
        return n
    }

    /// Parses `--format` (`mp4`, `matroska` or its alias `mkv`, `mpegts` or its alias `ts`, `hls`, `rtmp`, `srt`).
    public static func parseFormat(_ text: String, field: String = "--format") throws(ConfigurationError) -> ContainerFormat {
        let t = text.lowercased()
        if t == "ts" { return .mpegts }
        if t == "mkv" { return .matroska }
        guard let f = ContainerFormat(rawValue: t) else {
            throw ConfigurationError(field: field, value: text, reason: "expected mp4, mkv, mpegts, hls, rtmp or srt")
        }
        return f
    }
}
