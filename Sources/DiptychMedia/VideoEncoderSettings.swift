import DiptychCore

/// How the video of a take is encoded.
public struct VideoEncoderSettings: Hashable, Sendable {
    public var size: PixelSize
    public var frameRate: FrameRate
    public var codec: VideoCodec
    public var encoder: EncoderChoice
    /// Target bit rate in bits per second (default 10 Mbit/s); unused with `qp`.
    public var bitrate: Int
    /// Constant quantizer (0-51) instead of a bit rate (libx264/libx265 `qp`,
    /// VA-API CQP, the GPU encoder's QP); nil: rate controlled.
    public var qp: Int?
    /// The VBV's peak rate in bits per second (libx264/libx265 `maxrate`,
    /// VA-API's maximum rate); nil: the encoder's default.
    public var maxrate: Int?
    /// The VBV's buffer in bits (`bufsize`); nil with `maxrate`: one second of it.
    public var bufsize: Int?
    /// x264/x265 preset (`ultrafast` ... `veryslow`).
    public var preset: String
    /// x264/x265 tune (`zerolatency`, `film`, ...), nil for none.
    public var tune: String?
    /// Frames between keyframes; nil = one second.
    public var gop: Int?
    /// Maximum consecutive B-frames; nil = none in MP4/FLV (see `MediaWriter`),
    /// the preset's default in MPEG-TS.
    public var maxBFrames: Int?
    /// Slices a picture (H.264; whole macroblock rows each); nil: the encoder's default.
    public var slices: Int?
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
    /// NVENC: the CUDA device it encodes on (the compositor's); nil: device 0.
    public var cudaDevice: Int?

    public init(size: PixelSize, frameRate: FrameRate, codec: VideoCodec = .h264, encoder: EncoderChoice = .auto,
                bitrate: Int = 10_000_000, preset: String = "veryfast", tune: String? = nil, gop: Int? = nil,
                maxBFrames: Int? = nil, matrix: ColorMatrix = .bt709, range: ColorRange = .limited,
                driDirectory: String = EncoderProbe.defaultDRIDirectory) {
        self.size = size; self.frameRate = frameRate; self.codec = codec; self.encoder = encoder
        self.bitrate = bitrate; self.preset = preset; self.tune = tune; self.gop = gop; self.maxBFrames = maxBFrames
        self.matrix = matrix; self.range = range; self.driDirectory = driDirectory
    }

    /// The VBV buffer in bits when a peak rate is set: `bufsize`, else one second of `maxrate`.
    public var vbvBuffer: Int? { maxrate.map { bufsize ?? $0 } }

    /// Keyframe interval in frames (one second unless `gop` is set).
    public var keyframeInterval: Int { gop ?? max(1, Int(frameRate.fps.rounded())) }

    /// The settings of the software encoder (libx264, libx265) that takes
    /// over from NVENC mid-take (docs/ARCHITECTURE.md, "Encoder paths"): the
    /// same but the encoder, and without B-frames where the stream goes on
    /// (its decode times must not step back past the last packet's).
    public func takenOverBySoftware(streamGoesOn: Bool) -> VideoEncoderSettings {
        var s = self
        s.encoder = .x264
        if streamGoesOn { s.maxBFrames = 0 }
        return s
    }
}
