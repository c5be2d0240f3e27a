/// Pixel layouts the GPU side uploads directly.
public enum PixelFormat: String, Hashable, Sendable, Codable, CaseIterable {
    /// 8-bit R, G, B, A per pixel, one plane.
    case rgba
    /// 8-bit B, G, R, A per pixel, one plane.
    case bgra
    /// 8-bit Y plane, then one plane of interleaved U, V at half width and height.
    case nv12
    /// 8-bit Y, U and V planes; U and V at half width and height.
    case i420

    public var planeCount: Int {
        switch self { case .rgba, .bgra: 1; case .nv12: 2; case .i420: 3 }
    }
    public var isYUV: Bool { self == .nv12 || self == .i420 }

    /// Bytes per row needed for plane `plane` of a `width`-pixel-wide frame.
    public func minimumStride(plane: Int, width: Int) -> Int {
        switch (self, plane) {
        case (.rgba, 0), (.bgra, 0): return width * 4
        case (.nv12, 0), (.i420, 0): return width
        case (.nv12, 1): return ((width + 1) / 2) * 2
        case (.i420, _): return (width + 1) / 2
        default: return 0
        }
    }
    /// Rows in plane `plane` of a `height`-row frame.
    public func planeHeight(plane: Int, height: Int) -> Int {
        plane == 0 ? height : (height + 1) / 2
    }
}

/// YUV matrix coefficients.
public enum ColorMatrix: String, Hashable, Sendable, Codable, CaseIterable {
    case bt601, bt709
}

/// YUV quantization range.
public enum ColorRange: String, Hashable, Sendable, Codable, CaseIterable {
    /// Y 16...235, UV 16...240 ("TV" range).
    case limited
    /// 0...255 ("PC" range).
    case full
}

/// Owner of the bytes a frame's planes point into. `release` runs when the
/// last frame referring to it is gone (it may free an FFmpeg AVFrame, say).
public final class FrameStorage: @unchecked Sendable {   // raw pointer to bytes not written once shared, freed when the last frame goes
    public let base: UnsafeRawPointer
    public let count: Int
    /// The bytes are page-locked (pinned) host memory that a GPU's copy
    /// engines read directly: uploads then skip the copy into staging memory.
    public let pageLocked: Bool
    private let release: (@Sendable () -> Void)?
    private let ownsBase: Bool

    public init(base: UnsafeRawPointer, count: Int, pageLocked: Bool = false, release: (@Sendable () -> Void)?) {
        self.base = base; self.count = count; self.pageLocked = pageLocked; self.release = release; self.ownsBase = false
    }
    private init(owning base: UnsafeMutableRawPointer, count: Int) {
        self.base = UnsafeRawPointer(base); self.count = count; self.pageLocked = false; self.release = nil; self.ownsBase = true
    }
    /// Copies `bytes` into new storage owned by Swift.
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        let p = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 64)
        if let b = bytes.baseAddress, bytes.count > 0 { p.copyMemory(from: b, byteCount: bytes.count) }
        self.init(owning: p, count: bytes.count)
    }
    /// Zero-filled storage owned by Swift; fill it through `mutableBase` before sharing it.
    public convenience init(zeroedCount count: Int) {
        let p = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64)
        p.initializeMemory(as: UInt8.self, repeating: 0, count: max(count, 1))
        self.init(owning: p, count: count)
    }
    public var mutableBase: UnsafeMutableRawPointer { UnsafeMutableRawPointer(mutating: base) }
    deinit {
        if ownsBase { UnsafeMutableRawPointer(mutating: base).deallocate() } else { release?() }
    }
}

/// One plane of a frame: `stride` bytes per row, starting `offset` bytes into `storage`.
public struct FramePlane: Sendable {
    public var storage: FrameStorage
    public var offset: Int
    public var stride: Int
    public init(storage: FrameStorage, offset: Int = 0, stride: Int) {
        self.storage = storage; self.offset = offset; self.stride = stride
    }
    public var baseAddress: UnsafeRawPointer { storage.base + offset }
    /// Bytes available from `offset` to the end of the storage.
    public var availableBytes: Int { storage.count - offset }
}

/// A video frame in CPU memory.
public struct VideoFrame: Sendable {
    public var width: Int
    public var height: Int
    public var format: PixelFormat
    public var planes: [FramePlane]
    /// Presentation timestamp.
    public var pts: MediaTime
    public var matrix: ColorMatrix
    public var range: ColorRange
    /// The shape of the stored pixels (square unless the stream says otherwise).
    public var sampleAspect: SampleAspectRatio

    public init(width: Int, height: Int, format: PixelFormat, planes: [FramePlane], pts: MediaTime,
                matrix: ColorMatrix = .bt709, range: ColorRange = .limited, sampleAspect: SampleAspectRatio = .square) {
        self.width = width; self.height = height; self.format = format; self.planes = planes
        self.pts = pts; self.matrix = matrix; self.range = range; self.sampleAspect = sampleAspect
    }
    public var size: PixelSize { PixelSize(width: width, height: height) }

    /// A tightly packed, zero-filled frame (strides are the minimum).
    public static func allocate(width: Int, height: Int, format: PixelFormat, pts: MediaTime = .zero,
                                matrix: ColorMatrix = .bt709, range: ColorRange = .limited) -> VideoFrame {
        var offsets: [Int] = []
        var total = 0
        for p in 0..<format.planeCount {
            offsets.append(total)
            total += format.minimumStride(plane: p, width: width) * format.planeHeight(plane: p, height: height)
        }
        let storage = FrameStorage(zeroedCount: total)
        let planes = (0..<format.planeCount).map {
            FramePlane(storage: storage, offset: offsets[$0], stride: format.minimumStride(plane: $0, width: width))
        }
        return VideoFrame(width: width, height: height, format: format, planes: planes, pts: pts,
                          matrix: matrix, range: range)
    }
}
