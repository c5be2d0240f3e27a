/// A rational timestamp or duration: `value / timescale` seconds.
/// Comparisons are exact (cross-multiplied in 128-bit-safe arithmetic).
public struct MediaTime: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    public var value: Int64
    public var timescale: Int32
    public init(value: Int64, timescale: Int32) {
        precondition(timescale > 0, "MediaTime timescale must be positive")
        self.value = value; self.timescale = timescale
    }
    public static let zero = MediaTime(value: 0, timescale: 1)
    public init(seconds: Double, timescale: Int32 = 90_000) {
        self.init(value: Int64((seconds * Double(timescale)).rounded()), timescale: timescale)
    }
    public var seconds: Double { Double(value) / Double(timescale) }
    public var description: String { "\(value)/\(timescale)" }

    /// The same instant expressed in another timescale, rounding to nearest.
    public func converted(to scale: Int32) -> MediaTime {
        if scale == timescale { return self }
        let (hi, lo) = value.multipliedFullWidth(by: Int64(scale))
        let (q, r) = Int64(timescale).dividingFullWidth((hi, lo))
        var out = q
        if 2 * r.magnitude >= UInt64(timescale) { out += value >= 0 ? 1 : -1 }
        return MediaTime(value: out, timescale: scale)
    }

    public static func < (a: MediaTime, b: MediaTime) -> Bool {
        let l = a.value.multipliedFullWidth(by: Int64(b.timescale))
        let r = b.value.multipliedFullWidth(by: Int64(a.timescale))
        return l.high != r.high ? l.high < r.high : l.low < r.low
    }
    public static func == (a: MediaTime, b: MediaTime) -> Bool {
        let l = a.value.multipliedFullWidth(by: Int64(b.timescale))
        let r = b.value.multipliedFullWidth(by: Int64(a.timescale))
        return l.high == r.high && l.low == r.low
    }
    public func hash(into h: inout Hasher) { h.combine(seconds) }

    public static func + (a: MediaTime, b: MediaTime) -> MediaTime {
        if a.timescale == b.timescale { return MediaTime(value: a.value + b.value, timescale: a.timescale) }
        let s = max(a.timescale, b.timescale)
        return MediaTime(value: a.converted(to: s).value + b.converted(to: s).value, timescale: s)
    }
    public static func - (a: MediaTime, b: MediaTime) -> MediaTime {
        if a.timescale == b.timescale { return MediaTime(value: a.value - b.value, timescale: a.timescale) }
        let s = max(a.timescale, b.timescale)
        return MediaTime(value: a.converted(to: s).value - b.converted(to: s).value, timescale: s)
    }
}

/// A frame rate as a rational number of frames per second.
public struct FrameRate: Hashable, Sendable, Codable, CustomStringConvertible {
    public var numerator: Int32
    public var denominator: Int32
    public init(_ numerator: Int32, _ denominator: Int32 = 1) {
        precondition(numerator > 0 && denominator > 0, "FrameRate must be positive")
        self.numerator = numerator; self.denominator = denominator
    }
    public var fps: Double { Double(numerator) / Double(denominator) }
    /// Duration of one frame.
    public var frameDuration: MediaTime { MediaTime(value: Int64(denominator), timescale: numerator) }
    /// Timestamp of frame `index` when the first frame is at zero.
    public func time(ofFrame index: Int64) -> MediaTime {
        MediaTime(value: index * Int64(denominator), timescale: numerator)
    }
    public var description: String { denominator == 1 ? "\(numerator)" : "\(numerator)/\(denominator)" }
}
