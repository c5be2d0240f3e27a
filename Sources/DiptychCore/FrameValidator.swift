/// A frame that does not match its own description; `reason` names the field.
public struct FrameError: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The one check of a frame's description, for every way a frame arrives
/// (decoded, pushed through the Swift or C API, imported as dma-buf): size
/// within `maxDimension`, even sizes for 4:2:0, plane count, strides and,
/// where the bytes are known, enough of them. Pure.
public enum FrameValidator {
    public static func checkSize(width: Int, height: Int, format: PixelFormat,
                                 maxDimension: Int = TakeConfiguration.maximumDimension) throws(FrameError) {
        guard width > 0, height > 0 else { throw FrameError("zero size \(width)x\(height) (\(format.rawValue))") }
        guard width <= maxDimension, height <= maxDimension else {
            throw FrameError("size \(width)x\(height) exceeds the maximum texture size \(maxDimension)")
        }
        if format.isYUV && (width % 2 != 0 || height % 2 != 0) {
            throw FrameError("odd dimensions \(width)x\(height) for \(format.rawValue) (must be even)")
        }
    }

    /// Plane `i`: stride at least the minimum, offset not negative, and —
    /// when `available` (bytes from the plane's start) is known — every row there.
    public static func checkPlane(_ i: Int, format: PixelFormat, width: Int, height: Int,
                                  stride: Int, offset: Int = 0, available: Int?) throws(FrameError) {
        let minimum = format.minimumStride(plane: i, width: width)
        guard stride >= minimum else {
            throw FrameError("plane \(i) stride \(stride) < minimum \(minimum) for \(format.rawValue) width \(width)")
        }
        guard offset >= 0 else { throw FrameError("plane \(i) offset \(offset) is negative") }
        guard let available else { return }
        let rows = format.planeHeight(plane: i, height: height)
        let needed = stride * (rows - 1) + minimum
        guard available >= needed else {
            throw FrameError("plane \(i) too small: \(rows) rows of stride \(stride) need \(needed) bytes, there are \(max(available, 0))")
        }
    }

    /// A CPU frame, bytes included.
    public static func check(_ frame: VideoFrame, maxDimension: Int = TakeConfiguration.maximumDimension) throws(FrameError) {
        let f = frame.format
        try checkSize(width: frame.width, height: frame.height, format: f, maxDimension: maxDimension)
        guard frame.planes.count == f.planeCount else {
            throw FrameError("\(f.rawValue) needs \(f.planeCount) plane(s), frame has \(frame.planes.count)")
        }
        for (i, p) in frame.planes.enumerated() {
            try checkPlane(i, format: f, width: frame.width, height: frame.height, stride: p.stride, offset: p.offset,
                           available: p.availableBytes)
        }
    }

    /// A dma-buf of `format` (its bytes are not visible here).
    public static func check(_ d: DmaBufFrame, format: PixelFormat, maxDimension: Int = TakeConfiguration.maximumDimension) throws(FrameError) {
        try checkSize(width: d.width, height: d.height, format: format, maxDimension: maxDimension)
        guard d.planes.count == format.planeCount else {
            throw FrameError("\(DmaBufFrame.fourccName(d.fourcc)) needs \(format.planeCount) plane(s), got \(d.planes.count)")
        }
        for (i, p) in d.planes.enumerated() {
            guard p.fd >= 0 else { throw FrameError("plane \(i) fd \(p.fd) is invalid") }
            try checkPlane(i, format: format, width: d.width, height: d.height, stride: p.stride, offset: p.offset, available: nil)
        }
    }

    /// The pixel format a dma-buf fourcc stands for, if Diptych takes it.
    public static func format(ofFourcc fourcc: UInt32) -> PixelFormat? {
        switch fourcc {
        case DmaBufFrame.nv12: .nv12
        case DmaBufFrame.abgr8888: .rgba
        case DmaBufFrame.argb8888: .bgra
        case DmaBufFrame.yuv420: .i420
        default: nil
        }
    }
}
