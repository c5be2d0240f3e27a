import DiptychCore

/// How the video of a take is encoded.
public struct VideoEncoderSettings: Hashable, Sendable {
    public var size: PixelSize
    public var frameRate: FrameRate
    public var codec: VideoCodec
    public var encoder: EncoderChoice
    /// Target bit rate in bits per second (default 10 Mbit/s).
    public var bitrate: Int
    /// x264/x265 preset (`ultrafast` ... `veryslow`).
    public var preset: String
    /// x264/x265 tune (`zerolatency`, `film`, ...), nil for none.
    public var tune: String?
    /// Frames between keyframes; nil = one second.
    public var gop: Int?
    /// Maximum consecutive B-frames; nil = none in MP4/FLV (see `MediaWriter`),
    /// the preset's default in MPEG-TS.
    public var maxBFrames: Int?
    /// Colour signalled in the stream (the frames' YUV encoding).
    public var matrix: ColorMatrix
    public var range: ColorRange
    /// Where VA-API render nodes are looked for.
    public var driDirectory: String
    /// Encoder threads; 0 lets FFmpeg choose.
    public var threads = 0

    public init(size: PixelSize, frameRate: FrameRate, codec: VideoCodec = .h264, encoder: EncoderChoice = .auto,
                bitrate: Int = 10_000_000, preset: String = "veryfast", tune: String? = nil, gop: Int? = nil,
                maxBFrames: Int? = nil, matrix: ColorMatrix = .bt709, range: ColorRange = .limited,
                driDirectory: String = EncoderProbe.defaultDRIDirectory) {
        self.size = size; self.frameRate = frameRate; self.codec = codec; self.encoder = encoder
        self.bitrate = bitrate; self.preset = preset; self.tune = tune; self.gop = gop; self.maxBFrames = maxBFrames
        self.matrix = matrix; self.range = range; self.driDirectory = driDirectory
    }

    /// Keyframe interval in frames (one second unless `gop` is set).
    public var keyframeInterval: Int { gop ?? max(1, Int(frameRate.fps.rounded())) }
}

/// A GPU image shared as a dma-buf (DRM PRIME), for the zero-copy VA-API path.
/// All planes live in the one buffer `fd`. `release` runs when the encoder
/// no longer needs the buffer (the caller may then reuse it or close `fd`).
public struct DMABufFrame: Sendable {
    public var fd: Int32
    /// DRM fourcc (`NV12` = 0x3231564E).
    public var fourcc: UInt32
    /// DRM format modifier (0 = linear).
    public var modifier: UInt64
    public var width: Int
    public var height: Int
    /// Total size of the buffer in bytes.
    public var size: Int
    public var offsets: [Int]
    public var pitches: [Int]
    public var pts: MediaTime
    public var release: (@Sendable () -> Void)?

    public static let fourccNV12: UInt32 = 0x3231_564E

    public init(fd: Int32, fourcc: UInt32 = DMABufFrame.fourccNV12, modifier: UInt64 = 0, width: Int, height: Int,
                size: Int, offsets: [Int], pitches: [Int], pts: MediaTime, release: (@Sendable () -> Void)? = nil) {
        self.fd = fd; self.fourcc = fourcc; self.modifier = modifier; self.width = width; self.height = height
        self.size = size; self.offsets = offsets; self.pitches = pitches; self.pts = pts; self.release = release
    }
}
