/// One frame of an input stream as it travels from a source through the
/// clock to the GPU: the picture (CPU memory or a dma-buf) and its
/// timestamp on the take's timeline.
public struct InputFrame: Sendable {
    public enum Payload: Sendable {
        /// Planes in CPU memory, uploaded as textures.
        case cpu(VideoFrame)
        /// A dma-buf, imported by the GPU without a copy; `owner` keeps its
        /// fds open while any copy of the frame exists.
        case dmaBuf(DmaBufFrame, owner: PayloadOwner?)
        /// Device memory of a CUDA decoder, copied into textures on the GPU;
        /// `holder` keeps it until that copy has completed.
        case cuda(CUDAFrame, holder: any CUDAFrameHolder)
    }
    public var payload: Payload
    /// Presentation time (the take's timeline once the input stage has rebased it).
    public var pts: MediaTime
    /// A layout that applies from this frame on (an embedding host's
    /// `setLayout`, tied to the next primary frame it pushes).
    public var layout: Layout?
    /// How `layout` animates in (nil: the take's `--transition`, if any).
    public var layoutTransition: LayoutTransition?

    public init(_ frame: VideoFrame) { payload = .cpu(frame); pts = frame.pts }
    public init(_ frame: DmaBufFrame, pts: MediaTime, owner: PayloadOwner? = nil) {
        payload = .dmaBuf(frame, owner: owner); self.pts = pts
    }

    public init(_ frame: CUDAFrame, pts: MediaTime, holder: any CUDAFrameHolder) {
        payload = .cuda(frame, holder: holder); self.pts = pts
    }

    /// Shape of the picture's pixels (dma-bufs are square).
    public var sampleAspect: SampleAspectRatio {
        switch payload {
        case .cpu(let f): f.sampleAspect
        case .cuda(let c, _): c.sampleAspect
        case .dmaBuf: .square
        }
    }

    /// Coded size of the picture (before rotation).
    public var size: PixelSize {
        switch payload {
        case .cpu(let f): f.size
        case .dmaBuf(let d, _): PixelSize(width: d.width, height: d.height)
        case .cuda(let c, _): PixelSize(width: c.width, height: c.height)
        }
    }
}

/// Keeps what a frame refers to (dma-buf fds, host memory) alive while any
/// copy of the frame exists: `release` runs when the last reference goes.
public final class PayloadOwner: Sendable {
    private let release: @Sendable () -> Void
    public init(release: @escaping @Sendable () -> Void) { self.release = release }
    deinit { release() }
}
