/// The shape of one stored pixel, width:height (FFmpeg's sample aspect
/// ratio): 1:1 for square pixels, 128:117 for 352×288 PAL CIF shown at 4:3,
/// 8:9 for 720×480 NTSC shown at 4:3. Kept in lowest terms; a ratio that is
/// unknown or not positive is square.
public struct SampleAspectRatio: Hashable, Sendable, Codable, CustomStringConvertible {
    public let width: Int
    public let height: Int

    public init(width: Int, height: Int) {
        guard width > 0, height > 0 else { self.width = 1; self.height = 1; return }
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let g = gcd(width, height)
        self.width = width / g; self.height = height / g
    }
    public static let square = SampleAspectRatio(width: 1, height: 1)
    public var isSquare: Bool { width == height }
    public var description: String { "\(width):\(height)" }

    /// The size `stored` pixels cover once each is shown `width:height`:
    /// wide pixels stretch the width, tall ones the height (never shrinking
    /// the picture, as players do), rounded to whole pixels.
    public func displaySize(of stored: PixelSize) -> PixelSize {
        if width > height {
            return PixelSize(width: (stored.width * width + height / 2) / height, height: stored.height)
        } else if height > width {
            return PixelSize(width: stored.width, height: (stored.height * height + width / 2) / width)
        }
        return stored
    }
}

/// What a layout needs to know about one stream: the size of its sensor
/// (decoded) image, the shape of its pixels and how that image is turned upright.
public struct StreamGeometry: Hashable, Sendable, Codable {
    /// Size of the decoded frame, as stored (before rotation).
    public var sensorSize: PixelSize
    /// Rotation and mirror that turn the sensor image upright.
    public var orientation: Orientation
    /// The shape of the stored pixels (square for nearly every camera; not
    /// for anamorphic SD video, see `SampleAspectRatio`).
    public var sampleAspect: SampleAspectRatio

    public init(sensorSize: PixelSize, orientation: Orientation = .identity, sampleAspect: SampleAspectRatio = .square) {
        self.sensorSize = sensorSize; self.orientation = orientation; self.sampleAspect = sampleAspect
    }
    public init(width: Int, height: Int, rotation: Rotation = .r0, mirrored: Bool = false,
                sampleAspect: SampleAspectRatio = .square) {
        self.init(sensorSize: PixelSize(width: width, height: height),
                  orientation: Orientation(rotation: rotation, mirrored: mirrored), sampleAspect: sampleAspect)
    }

    /// Size of the upright picture as it is meant to be seen: the stored
    /// size with the pixel shape applied (`SampleAspectRatio.displaySize`),
    /// width and height swapped for 90° and 270°. A canvas sized from the
    /// primary uses this size.
    public var uprightSize: PixelSize { sampleAspect.displaySize(of: sensorSize).rotated(orientation.rotation) }

    /// The exact proportions of the upright picture, as integers
    /// (stored width × SAR width : stored height × SAR height, rotated): not
    /// a pixel size. Layouts use it, so an inset's aspect and the
    /// aspect-fill crop follow the picture as shown, and the crop arithmetic
    /// stays exact in integers (equal to `uprightSize` for square pixels).
    public var uprightAspect: PixelSize {
        PixelSize(width: sensorSize.width * sampleAspect.width, height: sensorSize.height * sampleAspect.height)
            .rotated(orientation.rotation)
    }

    private enum Keys: String, CodingKey { case sensorSize, orientation, sampleAspect }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(sensorSize: try c.decode(PixelSize.self, forKey: .sensorSize),
                  orientation: try c.decodeIfPresent(Orientation.self, forKey: .orientation) ?? .identity,
                  sampleAspect: try c.decodeIfPresent(SampleAspectRatio.self, forKey: .sampleAspect) ?? .square)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(sensorSize, forKey: .sensorSize)
        try c.encode(orientation, forKey: .orientation)
        try c.encode(sampleAspect, forKey: .sampleAspect)
    }
}

/// How a stream's upright picture fills a layout cell whose aspect differs.
public enum ContentMode: String, Hashable, Sendable, Codable, CaseIterable {
    /// Fill the whole cell and crop the overflow equally on both sides
    /// (docs/ARCHITECTURE.md, "Crop arithmetic": a 720×1280 stream in a 540×1920 column shows the
    /// middle half of its width, losing 25 % on each side). The default.
    case aspectFill = "fill"
    /// Show the whole picture, centred, and leave the rest of the cell to the
    /// background colour (letterbox / pillarbox).
    case aspectFit = "fit"

    /// The centred part of a `content`-sized upright picture that has the
    /// aspect of `destination`: the crop aspect-fill uses. `.unit` when the
    /// aspects are equal. Computed from integer cross products, so simple
    /// ratios are exact (720×1280 into 540×1920 → x 0.25, width 0.5).
    public static func aspectFillCrop(content: PixelSize, destination: PixelSize) -> NormalizedRect {
        guard !content.isEmpty, !destination.isEmpty else { return .unit }
        // Compare content.w/content.h with dest.w/dest.h without division.
        let contentCross = content.width * destination.height
        let destCross = destination.width * content.height
        if contentCross > destCross {
            // Content is wider: keep full height, crop width.
            let w = Double(destCross) / Double(contentCross)
            return NormalizedRect(x: (1 - w) / 2, y: 0, width: w, height: 1)
        } else if contentCross < destCross {
            let h = Double(contentCross) / Double(destCross)
            return NormalizedRect(x: 0, y: (1 - h) / 2, width: 1, height: h)
        }
        return .unit
    }

    /// Where a `content`-sized upright picture goes inside `cell`, and which
    /// part of it is shown.
    /// - aspectFill: destination is `cell`; crop is `aspectFillCrop`.
    /// - aspectFit: destination is the largest centred rectangle of the
    ///   content's aspect inside `cell`, edges rounded to even pixels; the
    ///   crop then absorbs the (sub-pixel) rounding so pixels stay square, and
    ///   is `.unit` whenever the fitted size is exact.
    public func place(content: PixelSize, in cell: PixelRect) -> (destination: PixelRect, crop: NormalizedRect) {
        guard !content.isEmpty, !cell.isEmpty else { return (cell, .unit) }
        switch self {
        case .aspectFill:
            return (cell, ContentMode.aspectFillCrop(content: content, destination: cell.size))
        case .aspectFit:
            let contentCross = content.width * cell.height
            let cellCross = cell.width * content.height
            var x0 = Double(cell.x), y0 = Double(cell.y)
            var x1 = Double(cell.maxX), y1 = Double(cell.maxY)
            if contentCross > cellCross {
                // Wider than the cell: full width, letterbox top and bottom.
                let h = Double(cell.width) * Double(content.height) / Double(content.width)
                y0 = Double(cell.y) + (Double(cell.height) - h) / 2
                y1 = y0 + h
            } else if contentCross < cellCross {
                let w = Double(cell.height) * Double(content.width) / Double(content.height)
                x0 = Double(cell.x) + (Double(cell.width) - w) / 2
                x1 = x0 + w
            }
            var dest = PixelRect(evenEdgesMinX: x0, minY: y0, maxX: x1, maxY: y1)
            if dest.isEmpty { dest = PixelRect(x: PixelRect.evenEdge(x0), y: PixelRect.evenEdge(y0), width: 2, height: 2) }
            dest = dest.clamped(to: cell)
            return (dest, ContentMode.aspectFillCrop(content: content, destination: dest.size))
        }
    }
}
