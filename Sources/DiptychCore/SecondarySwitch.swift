/// A scheduled hot swap of the secondary stream (`--switch-secondary SECONDS=SRC`,
/// docs/ARCHITECTURE.md, "Hot swap"): at `time` seconds of output the secondary becomes `source`.
public struct SecondarySwitch: Hashable, Sendable {
    /// Output time in seconds (on the primary's timeline).
    public var time: Double
    /// The new secondary (`none` removes it: primary-only from then on).
    public var source: SourceSpec
    public init(time: Double, source: SourceSpec) { self.time = time; self.source = source }

    /// Parses `SECONDS=SRC` (split at the first `=`, so SRC may contain `=`).
    public static func parse(_ text: String, field: String = "--switch-secondary") throws(ConfigurationError) -> SecondarySwitch {
        guard let eq = text.firstIndex(of: "=") else {
            throw ConfigurationError(field: field, value: text, reason: "expected SECONDS=SRC, e.g. 5=testsrc:smpte")
        }
        guard let t = Double(text[..<eq]), t.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "time before '=' must be a number of seconds")
        }
        let src = String(text[text.index(after: eq)...])
        return SecondarySwitch(time: t, source: try SourceSpec.parse(src, field: field))
    }
}

extension SecondarySwitch: Codable {
    private enum Keys: String, CodingKey { case at, source }
    /// JSON: `{"at": 5, "source": "testsrc:smpte"}`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let time = try c.decode(Double.self, forKey: .at)
        let text = try c.decode(String.self, forKey: .source)
        do { self.init(time: time, source: try SourceSpec.parse(text, field: "source")) } catch {
            throw DecodingError.dataCorruptedError(forKey: .source, in: c, debugDescription: "'\(error.value)': \(error.reason)")
        }
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(time, forKey: .at)
        try c.encode(source.description, forKey: .source)
    }
}
