import DiptychCore

/// What a source delivers, known once it is open.
public struct SourceInfo: Hashable, Sendable, CustomStringConvertible {
    /// The input as named by the user (path, URL, `testsrc:...`, `-`).
    public var name: String
    /// Coded picture size of the frames delivered (before rotation).
    public var size: PixelSize
    /// Nominal frame rate (the real timestamps may vary: see `VideoFrame.pts`).
    public var frameRate: FrameRate
    /// How to turn the frames upright (from the container's display matrix).
    public var orientation: Orientation
    public var matrix: ColorMatrix
    public var range: ColorRange
    /// The pixel format frames arrive in.
    public var pixelFormat: PixelFormat
    /// The decoder's own format name (`yuv420p`, `yuv422p10le`, ...) or `generated`.
    public var nativeFormat: String
    /// Whether the input carries an audio stream (see `VideoSource.audioTrack`).
    public var hasAudio: Bool
    /// Length in seconds when known (files), nil for endless or live sources.
    public var duration: Double?
    /// Codec name (`h264`, `hevc`, `rawvideo`, ...) or `generated`.
    public var codec: String
    /// The shape of the stored pixels (the stream's sample aspect ratio;
    /// frames carry their own in `VideoFrame.sampleAspect`).
    public var sampleAspect: SampleAspectRatio
    /// The input's field order when it is interlaced, nil when progressive.
    public var interlaced: FieldOrder?
    /// The filter that deinterlaces the frames before they are delivered
    /// (`bwdif`), nil when frames are delivered as decoded.
    public var deinterlacer: String?
    /// Where the frames are decoded and why (nil for sources that do not decode).
    public var decoder: DecoderDecision?
    /// For a camera: the device, the mode it captures and why that mode
    /// (`CameraModeChoice`); nil for other sources.
    public var capture: String?

    public init(name: String, size: PixelSize, frameRate: FrameRate, orientation: Orientation = .identity,
                matrix: ColorMatrix = .bt709, range: ColorRange = .limited, pixelFormat: PixelFormat = .nv12,
                nativeFormat: String = "generated", hasAudio: Bool = false, duration: Double? = nil,
                codec: String = "generated", sampleAspect: SampleAspectRatio = .square) {
        self.name = name; self.size = size; self.frameRate = frameRate; self.orientation = orientation
        self.matrix = matrix; self.range = range; self.pixelFormat = pixelFormat; self.nativeFormat = nativeFormat
        self.hasAudio = hasAudio; self.duration = duration; self.codec = codec; self.sampleAspect = sampleAspect
    }

    /// What the log should say about how the input is processed, one line each.
    public var notices: [String] {
        var lines: [String] = []
        if let capture { lines.append(capture) }
        if let interlaced {
            lines.append("interlaced (\(interlaced.rawValue)), " + (deinterlacer.map { "deinterlaced with \($0) before compositing" } ?? "not deinterlaced"))
        }
        if !sampleAspect.isSquare { lines.append("pixels \(sampleAspect) (SAR), shown as \(sampleAspect.displaySize(of: size))") }
        return lines
    }

    /// What layouts see of this stream, turned upright by `orientation`.
    public func geometry(orientation: Orientation) -> StreamGeometry {
        StreamGeometry(sensorSize: size, orientation: orientation, sampleAspect: sampleAspect)
    }

    public var description: String {
        var s = "\(name): \(codec) \(size) @ \(frameRate) fps, \(nativeFormat)→\(pixelFormat.rawValue), \(matrix.rawValue)/\(range.rawValue)"
        if !sampleAspect.isSquare { s += ", SAR \(sampleAspect) (shown \(sampleAspect.displaySize(of: size)))" }
        if let interlaced { s += ", interlaced (\(interlaced.rawValue))" + (deinterlacer.map { ", deinterlaced with \($0)" } ?? "") }
        if orientation.rotation != .r0 { s += ", rotate \(orientation.rotation.rawValue)°" }
        if let duration { s += ", \(duration) s" }
        if hasAudio { s += ", audio" }
        return s
    }
}

/// A stream of video frames: a decoded file or URL, a Y4M pipe, a synthetic pattern.
///
/// Not thread-safe: call from one thread at a time (it may be handed to
/// another thread between calls, hence `Sendable`).
public protocol VideoSource: AnyObject, Sendable {
    var info: SourceInfo { get }
    /// The next frame in presentation order, or nil at the end of the stream.
    /// Timestamps start near zero (the input's start time is subtracted) and
    /// keep the input's spacing (variable frame rate is preserved).
    func nextFrame() throws(MediaError) -> VideoFrame?
    /// The next frame as the GPU takes it (in CUDA memory when NVDEC decoded
    /// it), or nil at the end of the stream.
    func nextInput() throws(MediaError) -> InputFrame?
    /// The input's audio, for passthrough into a `MediaWriter` (nil when none).
    var audioTrack: AudioTrack? { get }
    /// Releases decoders and files. Idempotent; `nextFrame` returns nil afterwards.
    func close()
}

extension VideoSource {
    public var audioTrack: AudioTrack? { nil }
    public func nextInput() throws(MediaError) -> InputFrame? { try nextFrame().map { InputFrame($0) } }
}

/// Opens sources from their command-line spec.
public enum MediaSources {
    /// Opens `spec`. `duration` (seconds) ends the stream after that much
    /// time (frames with pts ≥ duration are not delivered); synthetic
    /// sources are endless without it.
    /// `decoding` says where a file's or URL's video is decoded (the CPU by default).
    /// `opening` says what a file or URL may read and how long opening it may block.
    public static func open(_ spec: SourceSpec, duration: Double? = nil, decoding: DecoderSettings = .cpu,
                            opening: SourceOpening = .commandLine) throws(MediaError) -> any VideoSource {
        switch spec {
        case .url(let url):
            return try FileSource(url: url, duration: duration, decoding: decoding, opening: opening)
        case .testPattern(let name, let size, let rate):
            return try TestPatternSource(name: name, size: size, rate: rate, duration: duration)
        case .stdin:
            return try openY4M(pipe: 0, duration: duration)
        case .none:
            throw .invalidSource(spec: "none", reason: "no source to open")
        }
    }

    /// Checks `spec` against `policy` without opening it (files are looked
    /// up, hosts resolved): `refused` or `fileNotFound` naming it when it may
    /// not be read. Returns a file source's resolved path (nil for others).
    @discardableResult
    public static func checkAllowed(_ spec: SourceSpec, policy: SourcePolicy) throws(MediaError) -> String? {
        guard case .url(let url) = spec else { return nil }
        return try SourceGuard(policy: policy, name: url).check(url).path
    }

    /// Frames smaller than this are refused at open (the GPU path and 4:2:0 need 2x2).
    public static let smallestSize = PixelSize(width: 2, height: 2)

    /// Why frames of `size` cannot be composited, nil when they can.
    public static func sizeProblem(_ size: PixelSize) -> String? {
        size.width < smallestSize.width || size.height < smallestSize.height
            ? "its \(size) frames are smaller than \(smallestSize), the smallest picture it can composite" : nil
    }

    /// Reads a Y4M (yuv4mpegpipe) stream from file descriptor `fd`
    /// (0 = standard input). The descriptor is not closed.
    public static func openY4M(pipe fd: Int32, duration: Double? = nil) throws(MediaError) -> any VideoSource {
        try FileSource(url: "pipe:\(fd)", duration: duration, forcedFormat: "yuv4mpegpipe", decoding: .cpu,
                       displayName: fd == 0 ? "-" : "pipe:\(fd)")
    }
}
