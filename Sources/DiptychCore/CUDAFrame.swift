/// A decoded picture in CUDA device memory, as NVDEC leaves it: 4:2:0 with
/// a luma plane and one plane of interleaved chroma, 8 bits a sample (NV12)
/// or 10 bits in the high bits of 16 (P010). The compositor copies the planes
/// into its stream textures on the GPU (CUDA–GL interop); no host memory is
/// touched. The memory belongs to the frame's `CUDAFrameHolder`.
public struct CUDAFrame: Hashable, Sendable {
    public enum Format: String, Hashable, Sendable, CaseIterable {
        /// 8-bit Y, then interleaved 8-bit U, V at half width and height.
        case nv12
        /// 16-bit Y, then interleaved 16-bit U, V, each sample's 10 bits in the high bits.
        case p010

        public var bytesPerSample: Int { self == .nv12 ? 1 : 2 }
    }

    public struct Plane: Hashable, Sendable {
        /// The plane's `CUdeviceptr`.
        public var address: UInt64
        /// Bytes from one row to the next.
        public var pitch: Int
        public init(address: UInt64, pitch: Int) { self.address = address; self.pitch = pitch }
    }

    public var width: Int
    public var height: Int
    public var format: Format
    /// Luma, then interleaved chroma.
    public var planes: [Plane]
    /// The CUDA device (ordinal) whose memory holds the planes.
    public var device: Int
    public var matrix: ColorMatrix
    public var range: ColorRange
    public var sampleAspect: SampleAspectRatio

    public init(width: Int, height: Int, format: Format, planes: [Plane], device: Int,
                matrix: ColorMatrix = .bt709, range: ColorRange = .limited, sampleAspect: SampleAspectRatio = .square) {
        self.width = width; self.height = height; self.format = format; self.planes = planes
        self.device = device; self.matrix = matrix; self.range = range; self.sampleAspect = sampleAspect
    }

    /// Bytes of plane `i`'s rows that hold pixels.
    public func rowBytes(plane i: Int) -> Int {
        (i == 0 ? width : ((width + 1) / 2) * 2) * format.bytesPerSample
    }

    /// Rows of plane `i`.
    public func rows(plane i: Int) -> Int { i == 0 ? height : (height + 1) / 2 }
}

/// Owns the device memory of `CUDAFrame`s (a decoder's frame, returned to its
/// pool when the last reference goes): whoever reads the planes keeps the
/// holder until the GPU work that read them has completed
/// (docs/ARCHITECTURE.md, "Lifetimes end at fence completion").
public protocol CUDAFrameHolder: AnyObject, Sendable {
    /// The picture copied to host memory, for a GPU that cannot take it
    /// through interop; nil when the copy fails.
    func download() -> VideoFrame?
}
