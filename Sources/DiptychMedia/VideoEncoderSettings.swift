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
    /// The VA-API device to take when it can encode (the GPU's own render
    /// node, whose buffers the encoder reads in place); nil: the first that can.
    public var preferredRenderNode: String?
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
