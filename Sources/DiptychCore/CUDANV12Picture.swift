/// An NV12 picture in CUDA memory: two planes at device addresses
/// (`CUdeviceptr`), `pitch` bytes a row each. NVENC reads it where it is
/// (docs/ARCHITECTURE.md, "Encoder paths").
public struct CUDANV12Picture: Hashable, Sendable {
    /// Device addresses of the luma and interleaved chroma planes.
    public var luma: UInt64
    public var chroma: UInt64
    public var pitch: Int
    public var width: Int
    public var height: Int

    public init(luma: UInt64, chroma: UInt64, pitch: Int, width: Int, height: Int) {
        self.luma = luma; self.chroma = chroma; self.pitch = pitch; self.width = width; self.height = height
    }
}

/// A CUDA picture an encoder lent to be filled (a frame of its own pool),
/// and what owns it: the encoder takes `owner` back with the filled picture.
public struct CUDAFrameTarget: @unchecked Sendable {   // `owner` is the encoder's frame, handed back to it alone
    public var picture: CUDANV12Picture
    public var owner: AnyObject
    public init(picture: CUDANV12Picture, owner: AnyObject) { self.picture = picture; self.owner = owner }
}

/// Lends a CUDA picture of `size` for the next frame of an output, or nil
/// (none free: the frame comes back in host memory instead).
public typealias CUDAFrameProvider = @Sendable (_ size: PixelSize) -> CUDAFrameTarget?
