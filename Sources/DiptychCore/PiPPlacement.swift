#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A corner of the canvas.
public enum PiPCorner: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case topLeft = "top-left", topRight = "top-right", bottomLeft = "bottom-left", bottomRight = "bottom-right"

    public var isLeft: Bool { self == .topLeft || self == .bottomLeft }
    public var isTop: Bool { self == .topLeft || self == .topRight }
    public init(left: Bool, top: Bool) {
        switch (left, top) {
        case (true, true): self = .topLeft
        case (false, true): self = .topRight
        case (true, false): self = .bottomLeft
        case (false, false): self = .bottomRight
        }
    }
    /// Parses the command-line name (`top-left`, `top-right`, `bottom-left`, `bottom-right`).
    public static func parse(_ text: String, field: String = "--pip-corner") throws(ConfigurationError) -> PiPCorner {
        guard let c = PiPCorner(rawValue: text.lowercased()) else {
            throw ConfigurationError(field: field, value: text,
                                     reason: "expected one of top-left, top-right, bottom-left, bottom-right")
        }
        return c
    }
    public var description: String { rawValue }
}

/// The gap between the inset and the canvas edges.
public enum PiPMargin: Hashable, Sendable, CustomStringConvertible {
    /// A fixed number of canvas pixels.
    case pixels(Int)
    /// A fraction of the canvas's shorter side (0.03 of 1080 → 32.4 → 32 px).
    case fraction(Double)

    /// The margin in pixels for `canvas`, rounded to an even number.
    public func pixels(for canvas: PixelSize) -> Int {
        switch self {
        case .pixels(let p): return PixelRect.evenEdge(Double(p))
        case .fraction(let f): return PixelRect.evenEdge(f * Double(canvas.shorterSide))
        }
    }

    /// Parses `24` or `24px` (pixels), `0.03` (a fraction, must contain a
    /// decimal point) or `3%` (a percentage of the shorter side).
    public static func parse(_ text: String, field: String = "--pip-margin") throws(ConfigurationError) -> PiPMargin {
        let t = text.lowercased()
        if t.hasSuffix("%"), let v = Double(t.dropLast()), v.isFinite { return .fraction(v / 100) }
        if t.hasSuffix("px"), let v = Int(t.dropLast(2)) { return .pixels(v) }
        if let v = Int(t) { return .pixels(v) }
        if let v = Double(t), v.isFinite { return .fraction(v) }
        throw ConfigurationError(field: field, value: text,
                                 reason: "expected pixels (24 or 24px), a fraction of the shorter side (0.03) or a percentage (3%)")
    }

    /// Nil when valid, else the reason: pixels must be 0...4096, a fraction 0..<0.5.
    public var invalidReason: String? {
        switch self {
        case .pixels(let p): return (0...4096).contains(p) ? nil : "pixels must be between 0 and 4096"
        case .fraction(let f): return (f >= 0 && f < 0.5) ? nil : "fraction must be at least 0 and below 0.5"
        }
    }

    public var description: String {
        switch self {
        case .pixels(let p): return "\(p)px"
        case .fraction(let f): return "\(f)"
        }
    }
}

extension PiPMargin: Codable {
    private enum Keys: String, CodingKey { case pixels, fraction }
    /// JSON: `{"pixels": 24}` or `{"fraction": 0.03}`; a bare number is read
    /// like the command line (integer → pixels, decimal → fraction).
    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer() {
            if let i = try? single.decode(Int.self) { self = .pixels(i); return }
            if let d = try? single.decode(Double.self) { self = .fraction(d); return }
            if let s = try? single.decode(String.self) {
                do { self = try PiPMargin.parse(s) } catch {
                    throw DecodingError.dataCorruptedError(in: single, debugDescription: error.description)
                }
                return
            }
        }
        let c = try decoder.container(keyedBy: Keys.self)
        if let p = try c.decodeIfPresent(Int.self, forKey: .pixels) { self = .pixels(p); return }
        self = .fraction(try c.decode(Double.self, forKey: .fraction))
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .pixels(let p): try c.encode(p, forKey: .pixels)
        case .fraction(let f): try c.encode(f, forKey: .fraction)
        }
    }
}

/// Where the picture-in-picture inset sits (docs/ARCHITECTURE.md, "PiP snapping"): a corner, a
/// size and a margin. Snaps to the nearest corner after a drag; can be saved
/// as JSON and loaded for the next take.
///
/// **Size** is a fraction of the canvas's *shorter side*, applied to the
/// inset's *shorter side*: on a 1920×1080 or a 1080×1920 canvas, size 0.3
/// makes the inset's shorter side 324 px, so a 16:9 stream becomes 576×324
/// and a 9:16 stream 324×576. The longer side follows the stream's upright
/// aspect. If the inset would not fit inside the canvas minus the margins it
/// is scaled down (keeping its aspect) until it does.
public struct PiPPlacement: Hashable, Sendable {
    public var corner: PiPCorner
    /// Fraction of the canvas's shorter side given to the inset's shorter
    /// side; valid range `PiPPlacement.sizeRange` (0.05...1).
    public var size: Double
    public var margin: PiPMargin

    public static let sizeRange: ClosedRange<Double> = 0.05...1.0
    public static let defaultSize = 0.3
    public static let defaultMargin = PiPMargin.fraction(0.03)

    public init(corner: PiPCorner = .bottomRight, size: Double = PiPPlacement.defaultSize,
                margin: PiPMargin = PiPPlacement.defaultMargin) {
        self.corner = corner; self.size = size; self.margin = margin
    }

    /// The inset's destination on `canvas` for a picture of upright size
    /// `content`. Width, height, x and y are even; the rectangle lies inside
    /// the canvas at `margin` from the two edges of `corner`.
    public func insetRect(canvas: PixelSize, content: PixelSize) -> PixelRect {
        // The margin may not leave less than 2 px for the inset.
        let largestMargin = max(0, (canvas.shorterSide - 2) / 4 * 2)
        let m = min(max(0, margin.pixels(for: canvas)), largestMargin)
        let shorter = size * Double(canvas.shorterSide)
        var w: Double, h: Double
        if content.isEmpty {
            (w, h) = (shorter, shorter)
        } else if content.width >= content.height {
            h = shorter; w = shorter * Double(content.width) / Double(content.height)
        } else {
            w = shorter; h = shorter * Double(content.height) / Double(content.width)
        }
        let maxW = Double(canvas.width - 2 * m), maxH = Double(canvas.height - 2 * m)
        if w > maxW { h *= maxW / w; w = maxW }
        if h > maxH { w *= maxH / h; h = maxH }
        let iw = max(2, PixelRect.evenEdge(w)), ih = max(2, PixelRect.evenEdge(h))
        let x = corner.isLeft ? m : canvas.width - m - iw
        let y = corner.isTop ? m : canvas.height - m - ih
        return PixelRect(x: x, y: y, width: iw, height: ih)
    }

    /// The corner nearest to where a drag left the inset's centre
    /// (normalized canvas point), keeping size and margin. The canvas is
    /// split at its middle; a centre exactly on a middle line keeps the
    /// current corner's side, so snapping is stable.
    public func snap(draggedCenter: NormalizedPoint, canvas: PixelSize) -> PiPPlacement {
        let px = draggedCenter.x * Double(canvas.width), py = draggedCenter.y * Double(canvas.height)
        let midX = Double(canvas.width) / 2, midY = Double(canvas.height) / 2
        let left = px == midX ? corner.isLeft : px < midX
        let top = py == midY ? corner.isTop : py < midY
        var out = self
        out.corner = PiPCorner(left: left, top: top)
        return out
    }

    /// Nil when valid, else a `ConfigurationError` naming the command-line flag.
    public func validationError() -> ConfigurationError? {
        if !size.isFinite || !PiPPlacement.sizeRange.contains(size) {
            return ConfigurationError(field: "--pip-size", value: "\(size)",
                                      reason: "must be between 0.05 and 1 (fraction of the canvas's shorter side)")
        }
        if let r = margin.invalidReason {
            return ConfigurationError(field: "--pip-margin", value: margin.description, reason: r)
        }
        return nil
    }

    /// Parses `--pip-size`: a fraction (`0.3`) or a percentage (`30%`).
    public static func parseSize(_ text: String, field: String = "--pip-size") throws(ConfigurationError) -> Double {
        let v: Double?
        if text.hasSuffix("%") { v = Double(text.dropLast()).map { $0 / 100 } } else { v = Double(text) }
        guard let s = v, s.isFinite else {
            throw ConfigurationError(field: field, value: text, reason: "expected a fraction such as 0.3 or a percentage such as 30%")
        }
        return s
    }
}

extension PiPPlacement: Codable {
    private enum Keys: String, CodingKey { case corner, size, margin }
    /// JSON: `{"corner": "top-right", "size": 0.3, "margin": {"fraction": 0.03}}`;
    /// missing keys take the defaults.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(corner: try c.decodeIfPresent(PiPCorner.self, forKey: .corner) ?? .bottomRight,
                  size: try c.decodeIfPresent(Double.self, forKey: .size) ?? PiPPlacement.defaultSize,
                  margin: try c.decodeIfPresent(PiPMargin.self, forKey: .margin) ?? PiPPlacement.defaultMargin)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(corner, forKey: .corner)
        try c.encode(size, forKey: .size)
        try c.encode(margin, forKey: .margin)
    }

    /// The placement as JSON (sorted keys, so the bytes are stable).
    public func jsonData() -> Data {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted]
        // Encoding plain enums, numbers and strings cannot fail.
        return (try? e.encode(self)) ?? Data()
    }

    /// Decodes a placement saved with `jsonData()`; the error names `source`.
    public init(jsonData data: Data, source: String = "placement") throws(ConfigurationError) {
        do { self = try JSONDecoder().decode(PiPPlacement.self, from: data) } catch {
            throw ConfigurationError(field: source, value: String(decoding: data.prefix(80), as: UTF8.self),
                                     reason: "not a valid PiP placement: \(JSONFile.describe(error))")
        }
    }

    /// Writes the placement as JSON to `path` (atomically).
    public func save(toPath path: String) throws(ConfigurationError) {
        try JSONFile.write(jsonData(), toPath: path)
    }

    /// Loads a placement saved with `save(toPath:)`; errors name the file.
    public static func load(fromPath path: String) throws(ConfigurationError) -> PiPPlacement {
        let data = try JSONFile.read(path: path, field: "pip placement")
        do { return try JSONDecoder().decode(PiPPlacement.self, from: data) } catch {
            throw ConfigurationError(field: "pip placement", value: path, reason: "invalid JSON: \(JSONFile.describe(error))")
        }
    }
}
