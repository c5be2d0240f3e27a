/// Geometry shared by every layer. Conventions, used everywhere in Diptych:
/// - Pixel and normalized coordinates have their origin at the **top-left**,
///   x to the right, y down. Memory row 0 of every frame is the top row.
/// - Normalized coordinates run from 0 to 1 across the whole canvas or image.

/// A size in pixels.
public struct PixelSize: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) { self.width = width; self.height = height }
    public var description: String { "\(width)x\(height)" }
    public var aspect: Double { height == 0 ? 0 : Double(width) / Double(height) }
    public var isEmpty: Bool { width <= 0 || height <= 0 }
    /// The size as it appears after rotating by `rotation`.
    public func rotated(_ rotation: Rotation) -> PixelSize {
        rotation.swapsAxes ? PixelSize(width: height, height: width) : self
    }
    public static let hd720 = PixelSize(width: 1280, height: 720)
    public static let hd1080 = PixelSize(width: 1920, height: 1080)
    public static let uhd2160 = PixelSize(width: 3840, height: 2160)
}

/// A rectangle in integer pixels (origin top-left).
public struct PixelRect: Hashable, Sendable, Codable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
    public init(size: PixelSize) { self.init(x: 0, y: 0, width: size.width, height: size.height) }
    public var size: PixelSize { PixelSize(width: width, height: height) }
    public var maxX: Int { x + width }
    public var maxY: Int { y + height }
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
    public func contains(x px: Double, y py: Double) -> Bool {
        px >= Double(x) && px < Double(maxX) && py >= Double(y) && py < Double(maxY)
    }
}

/// A rectangle in normalized coordinates (origin top-left, 0...1).
public struct NormalizedRect: Hashable, Sendable, Codable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double
    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
    public static let unit = NormalizedRect(x: 0, y: 0, width: 1, height: 1)
    public var maxX: Double { x + width }
    public var maxY: Double { y + height }
    public var description: String { "(\(x), \(y), \(width)x\(height))" }
    /// The centred 1/`factor` of this rectangle (factor ≤ 1 leaves it as it is).
    public func zoomed(by factor: Double) -> NormalizedRect {
        guard factor > 1 else { return self }
        let w = width / factor, h = height / factor
        return NormalizedRect(x: x + (width - w) / 2, y: y + (height - h) / 2, width: w, height: h)
    }
}

/// A normalized point (origin top-left, 0...1).
public struct NormalizedPoint: Hashable, Sendable, Codable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
    public var description: String { "(\(x), \(y))" }
}

/// Straight (non-premultiplied) RGBA colour, components 0...1.
public struct RGBAColor: Hashable, Sendable, Codable {
    public var r: Double, g: Double, b: Double, a: Double
    public init(r: Double, g: Double, b: Double, a: Double = 1) { self.r = r; self.g = g; self.b = b; self.a = a }
    public static let black = RGBAColor(r: 0, g: 0, b: 0)
    public static let white = RGBAColor(r: 1, g: 1, b: 1)
}

/// Clockwise rotation that turns a stream's sensor image upright.
public enum Rotation: Int, Hashable, Sendable, Codable, CaseIterable {
    case r0 = 0, r90 = 90, r180 = 180, r270 = 270
    public var swapsAxes: Bool { self == .r90 || self == .r270 }
    public init?(degrees: Int) {
        let d = ((degrees % 360) + 360) % 360
        self.init(rawValue: d)
    }
}

/// How a stream's sensor image is turned upright: rotate clockwise by
/// `rotation`, then mirror horizontally if `mirrored` (a selfie camera).
///
/// `sensorPoint(fromUpright:)` is the mapping every renderer uses: for a point
/// of the upright picture it gives the sensor (texture) point shown there.
/// Examples (docs/ARCHITECTURE.md, "Explicit orientation"): rotation 90 maps upright (x, y) to sensor
/// (y, 1 − x); rotation 90 mirrored maps it to (y, x).
public struct Orientation: Hashable, Sendable, Codable {
    public var rotation: Rotation
    public var mirrored: Bool
    public init(rotation: Rotation = .r0, mirrored: Bool = false) { self.rotation = rotation; self.mirrored = mirrored }
    public static let identity = Orientation()

    /// Upright picture point → sensor point.
    public func sensorPoint(fromUpright p: NormalizedPoint) -> NormalizedPoint {
        let x = mirrored ? 1 - p.x : p.x
        let y = p.y
        switch rotation {
        case .r0: return NormalizedPoint(x: x, y: y)
        case .r90: return NormalizedPoint(x: y, y: 1 - x)
        case .r180: return NormalizedPoint(x: 1 - x, y: 1 - y)
        case .r270: return NormalizedPoint(x: 1 - y, y: x)
        }
    }

    /// Sensor point → upright picture point (inverse of `sensorPoint(fromUpright:)`).
    public func uprightPoint(fromSensor s: NormalizedPoint) -> NormalizedPoint {
        var x: Double, y: Double
        switch rotation {
        case .r0: (x, y) = (s.x, s.y)
        case .r90: (x, y) = (1 - s.y, s.x)
        case .r180: (x, y) = (1 - s.x, 1 - s.y)
        case .r270: (x, y) = (s.y, 1 - s.x)
        }
        if mirrored { x = 1 - x }
        return NormalizedPoint(x: x, y: y)
    }
}

/// Which of the two streams.
public enum StreamRole: String, Hashable, Sendable, Codable, CaseIterable {
    case primary, secondary
    public var other: StreamRole { self == .primary ? .secondary : .primary }
}
