/// How a stream's samples are laid out in chroma.
public enum ChromaSubsampling: String, Hashable, Sendable, Codable, CaseIterable {
    case yuv420 = "4:2:0"
    case yuv422 = "4:2:2"
    case yuv444 = "4:4:4"
    case monochrome = "4:0:0"
    /// RGB, or a layout none of the above describes.
    case other
}

/// What decides where a video stream can be decoded, as its demuxer and
/// FFmpeg describe it before the first frame.
public struct StreamDecodeTraits: Hashable, Sendable {
    /// FFmpeg's codec name (`h264`, `hevc`, `av1`, `prores`, ...).
    public var codec: String
    /// FFmpeg's profile name (`High`, `Main 10`), when known.
    public var profile: String?
    public var bitDepth: Int
    public var chroma: ChromaSubsampling
    /// Coded picture size.
    public var size: PixelSize
    public var interlaced: Bool
    /// The FFmpeg decoder here that decodes this codec through NVDEC (its
    /// CUDA hardware configuration), nil when FFmpeg has none.
    public var nvdecDecoder: String?

    public init(codec: String, profile: String? = nil, bitDepth: Int = 8, chroma: ChromaSubsampling = .yuv420,
                size: PixelSize, interlaced: Bool = false, nvdecDecoder: String? = nil) {
        self.codec = codec; self.profile = profile; self.bitDepth = bitDepth; self.chroma = chroma
        self.size = size; self.interlaced = interlaced; self.nvdecDecoder = nvdecDecoder
    }

    /// `h264 High 4:2:0 8-bit 1920x1080`.
    public var summary: String {
        [codec, profile, chroma == .other ? nil : chroma.rawValue, "\(bitDepth)-bit", size.description]
            .compactMap { $0 }.joined(separator: " ")
    }
}

/// What one GPU's NVDEC engines decode for a codec, chroma layout and bit
/// depth (`cuvidGetDecoderCaps`).
public struct NVDECCodecSupport: Hashable, Sendable, Codable, CustomStringConvertible {
    public var codec: String
    public var chroma: ChromaSubsampling
    public var bitDepth: Int
    public var supported: Bool
    /// NVDEC engines that decode it.
    public var engines: Int
    public var maxSize: PixelSize
    public var minSize: PixelSize
    /// Most 16×16 macroblocks in a picture.
    public var maxMacroblocks: Int

    public init(codec: String, chroma: ChromaSubsampling, bitDepth: Int, supported: Bool, engines: Int = 0,
                maxSize: PixelSize = PixelSize(width: 0, height: 0), minSize: PixelSize = PixelSize(width: 0, height: 0),
                maxMacroblocks: Int = 0) {
        self.codec = codec; self.chroma = chroma; self.bitDepth = bitDepth; self.supported = supported
        self.engines = engines; self.maxSize = maxSize; self.minSize = minSize; self.maxMacroblocks = maxMacroblocks
    }

    public var description: String {
        let what = "\(codec) \(chroma.rawValue) \(bitDepth)-bit"
        guard supported else { return "\(what): no" }
        return "\(what): \(minSize) to \(maxSize), at most \(maxMacroblocks) macroblocks, \(engines) engine\(engines == 1 ? "" : "s")"
    }
}

/// Whether NVDEC can be used at all for a take, and if so what its engines
/// say about one stream's codec.
public enum NVDECStatus: Hashable, Sendable {
    /// No NVDEC for this take, and why (no driver, no device, the compositor
    /// runs on another GPU, ...).
    case unavailable(String)
    /// NVDEC on `device` (a name such as `NVIDIA H200 (CUDA device 0)`);
    /// `support` is the engines' answer for the stream's codec, chroma and
    /// depth, nil when the codec has no NVDEC form.
    case available(device: String, support: NVDECCodecSupport?)
}

/// Which decoder a stream got.
public enum DecoderKind: String, Hashable, Sendable, Codable {
    case cpu
    case nvdec
}

/// The decoder chosen for a stream, and why (shown in the log and the summary).
public struct DecoderDecision: Hashable, Sendable, Codable, CustomStringConvertible {
    public var decoder: DecoderKind
    public var reason: String
    public init(_ decoder: DecoderKind, reason: String) { self.decoder = decoder; self.reason = reason }
    public var description: String { "\(decoder.rawValue) (\(reason))" }
}

/// `--decoder nvdec` where NVDEC cannot decode the stream: what is missing.
public struct DecoderUnavailable: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Chooses each stream's decoder (`--decoder`): NVDEC where the driver, the
/// compositor's GPU, FFmpeg and the engines allow the stream, else the CPU.
/// A pure function of what was probed, so every rule has a table test.
public enum DecoderPolicy {
    /// Codecs decoded through NVDEC into the compositor (4:2:0 output).
    public static let nvdecCodecs = ["h264", "hevc", "av1", "vp9"]

    /// Why NVDEC cannot decode `stream`, or nil when it can.
    public static func obstacle(stream: StreamDecodeTraits, nvdec: NVDECStatus) -> String? {
        guard case .available(_, let support) = nvdec else {
            if case .unavailable(let why) = nvdec { return why }
            return nil
        }
        guard nvdecCodecs.contains(stream.codec) else {
            return "\(stream.codec) is decoded on the CPU (NVDEC is used for H.264, HEVC, AV1 and VP9)"
        }
        guard stream.nvdecDecoder != nil else { return "this FFmpeg has no NVDEC decoder for \(stream.codec)" }
        if stream.interlaced { return "interlaced video is deinterlaced on the CPU" }
        guard stream.chroma == .yuv420 else {
            return "\(stream.chroma == .other ? "its pixel layout" : stream.chroma.rawValue) video: NVDEC frames reach the compositor as 4:2:0 only"
        }
        guard stream.bitDepth == 8 || stream.bitDepth == 10 else {
            return "\(stream.bitDepth)-bit video: NVDEC frames reach the compositor as 8 or 10 bits only"
        }
        guard let s = support, s.supported else {
            return "this GPU's NVDEC does not decode \(stream.codec) \(stream.chroma.rawValue) \(stream.bitDepth)-bit"
        }
        let w = stream.size.width, h = stream.size.height
        let macroblocks = ((w + 15) / 16) * ((h + 15) / 16)
        if w > s.maxSize.width || h > s.maxSize.height || (s.maxMacroblocks > 0 && macroblocks > s.maxMacroblocks) {
            return "\(stream.size) exceeds this GPU's NVDEC limit for \(stream.codec) (\(s.maxSize), \(s.maxMacroblocks) macroblocks)"
        }
        if w < s.minSize.width || h < s.minSize.height {
            return "\(stream.size) is below this GPU's NVDEC minimum for \(stream.codec) (\(s.minSize))"
        }
        return nil
    }

    /// The decoder for `stream` under `choice`. `.nvdec` throws what is
    /// missing where NVDEC cannot decode it; `.auto` falls back to the CPU
    /// and says why.
    public static func decide(_ choice: DecoderChoice, stream: StreamDecodeTraits,
                              nvdec: NVDECStatus) throws(DecoderUnavailable) -> DecoderDecision {
        if choice == .cpu { return DecoderDecision(.cpu, reason: "--decoder cpu") }
        if let why = obstacle(stream: stream, nvdec: nvdec) {
            if choice == .nvdec { throw DecoderUnavailable(why) }
            return DecoderDecision(.cpu, reason: why)
        }
        guard case .available(let device, _) = nvdec else { return DecoderDecision(.cpu, reason: "NVDEC unavailable") }
        return DecoderDecision(.nvdec, reason: "NVDEC on \(device): \(stream.summary)")
    }
}
