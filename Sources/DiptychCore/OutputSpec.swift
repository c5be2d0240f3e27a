/// One more output of a take (`--also-out`, the server's added outputs):
/// where it goes, the layout it is drawn with and its encoding. It shares
/// the take's uploaded stream textures; its canvas (`encoding.size`, else
/// the take's), render target and encoder are its own.
public struct OutputSpec: Hashable, Sendable {
    /// A file or URL (`.mp4`, `.mkv`, `.ts`, `rtmp://`, `srt://`).
    public var out: String
    /// nil: inferred from `out`.
    public var format: ContainerFormat?
    /// nil: the take's own layout (and its changes).
    public var layout: Layout?
    /// `--segment-time SECONDS` (`alsoOut`'s `segmentTime`,
    /// `--also-segment-time`): the file is split into `SegmentNaming`'s
    /// files of about this length; nil: one file. HLS: the segment length
    /// (nil: `HLSNaming.defaultSegmentTime`).
    public var segmentTime: Double?
    /// `--hls-list-size N` (`alsoOut`'s `hlsListSize`, `--also-hls-list-size`;
    /// an HLS output only): segments the live playlist lists; nil or 0: all.
    public var hlsListSize: Int?
    /// Images drawn over this output's streams (JSON `overlays` of an `alsoOut` entry).
    public var overlays: [ImageOverlay] = []
    /// Texts drawn over this output's streams (JSON `texts` of an `alsoOut` entry).
    public var texts: [TextOverlay] = []
    /// Its own size, codec, rate control, preset and rate (a rung of a
    /// ladder); what it leaves out is the take's.
    public var encoding = OutputEncoding()

    public init(out: String, format: ContainerFormat? = nil, layout: Layout? = nil, segmentTime: Double? = nil, hlsListSize: Int? = nil,
                overlays: [ImageOverlay] = [], texts: [TextOverlay] = [], encoding: OutputEncoding = OutputEncoding()) {
        self.out = out; self.format = format; self.layout = layout; self.segmentTime = segmentTime; self.hlsListSize = hlsListSize
        self.overlays = overlays; self.texts = texts; self.encoding = encoding
    }

    /// The container: `format` when given, else inferred from `out`.
    public var container: ContainerFormat? { format ?? ContainerFormat.infer(from: out) }

    /// Whether the output is a split recording (`segmentTime` on an MP4 or
    /// Matroska file: `SegmentNaming`'s files, not `out` itself).
    public var splits: Bool { segmentTime != nil && (container == .mp4 || container == .matroska) }

    /// Why `segmentTime` and `hlsListSize` do not fit this output (nil when
    /// they do): a length of 0 to 10000000 s on an MP4, Matroska or HLS
    /// file; a list size of 0 to 1000000 on HLS. The error names
    /// `fields` (`--segment-time`, `alsoOut[1].segmentTime`); `named` is
    /// what the output is called in it (`--out`).
    public func segmentsError(fields: (segmentTime: String, hlsListSize: String), named: String) -> ConfigurationError? {
        if let t = segmentTime {
            let text = t.isFinite && t == t.rounded() && abs(t) < 1e15 ? String(Int(t)) : "\(t)"
            if !(t > 0 && t <= 1e7) {
                return ConfigurationError(field: fields.segmentTime, value: text, reason: "must be a positive number of seconds, at most 10000000")
            }
            let file = !ContainerFormat.isLive(out) && (!out.contains("://") || out.lowercased().hasPrefix("file:"))
            if !file || !(container == .mp4 || container == .matroska || container == .hls) {
                return ConfigurationError(field: fields.segmentTime, value: text,
                                          reason: "splits MP4 and Matroska files and sets the segment length of HLS only, not '\(out)'")
            }
        }
        if let n = hlsListSize {
            if !(0...1_000_000).contains(n) {
                return ConfigurationError(field: fields.hlsListSize, value: String(n), reason: "must be a whole number of segments, 0 to 1000000")
            }
            if container != .hls {
                return ConfigurationError(field: fields.hlsListSize, value: String(n), reason: "applies to an HLS \(named) (.m3u8) only, not '\(out)'")
            }
        }
        return nil
    }
}

/// An output's own encoding (`alsoOut`'s `size`, `codec`, `bitrate`,
/// `maxrate`, `bufsize`, `preset`, `rateDivisor`; `--also-size` ...): the
/// output is drawn into a render target of its own size from the same
/// uploaded pictures (a ladder from one take, no scaler after the fact) and
/// encoded with its own settings. A field left nil is the take's.
///
/// Rate control: an output that sets none of `bitrate`, `maxrate` and
/// `bufsize` has the take's (`--bitrate`, `--maxrate`, `--bufsize`, `--qp`);
/// one that sets any has its own: its bit rate (else the take's, at most its
/// `maxrate`) and a peak rate only if it sets `maxrate` (a buffer of one
/// second of it unless it sets `bufsize`).
public struct OutputEncoding: Hashable, Sendable {
    /// The output's canvas (even); nil: the take's.
    public var size: PixelSize?
    public var codec: VideoCodec?
    /// Bits per second.
    public var bitrate: Int?
    /// The VBV's peak rate in bits per second.
    public var maxrate: Int?
    /// The VBV's buffer in bits (needs `maxrate`).
    public var bufsize: Int?
    /// x264/x265 preset name.
    public var preset: String?
    /// The output takes every Nth frame of the take's clock (the first, the
    /// N+1th, ...): its rate is the take's divided by N, its frames keep the
    /// take's times. nil or 1: every frame.
    public var rateDivisor: Int?

    public init(size: PixelSize? = nil, codec: VideoCodec? = nil, bitrate: Int? = nil, maxrate: Int? = nil, bufsize: Int? = nil,
                preset: String? = nil, rateDivisor: Int? = nil) {
        self.size = size; self.codec = codec; self.bitrate = bitrate; self.maxrate = maxrate; self.bufsize = bufsize
        self.preset = preset; self.rateDivisor = rateDivisor
    }

    /// Rate divisors an output may have.
    public static let rateDivisors = 1...120

    /// Whether the output sets any field (else it is encoded as the main output is).
    public var isEmpty: Bool { self == OutputEncoding() }

    /// Whether the output has rate control of its own (it sets `bitrate`, `maxrate` or `bufsize`).
    public var ownsRateControl: Bool { bitrate != nil || maxrate != nil || bufsize != nil }

    /// The divisor in force (1 when not set).
    public var divisor: Int { rateDivisor ?? 1 }

    /// The output's rate for a take at `rate`: the take's divided by `divisor`, in lowest terms.
    public func frameRate(take rate: FrameRate) -> FrameRate {
        let d = Int64(rate.denominator) * Int64(divisor), n = Int64(rate.numerator)
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        let g = gcd(n, d)
        guard d / g <= Int64(Int32.max) else { return FrameRate(rate.numerator, Int32(clamping: d)) }
        return FrameRate(Int32(n / g), Int32(d / g))
    }

    /// The checks that need no take: a size positive, at most
    /// `maximumDimension` and even; rates positive and at most 1G; a buffer
    /// with a peak rate; a preset a name; a divisor in `rateDivisors`. The
    /// error names `field.size`, `field.bitrate`, ... (`alsoOut[1].size`).
    public func validationError(field: String) -> ConfigurationError? {
        if let s = size {
            let f = "\(field).size"
            if s.width <= 0 || s.height <= 0 { return ConfigurationError(field: f, value: s.description, reason: "width and height must be positive") }
            if s.width > TakeConfiguration.maximumDimension || s.height > TakeConfiguration.maximumDimension {
                return ConfigurationError(field: f, value: s.description, reason: "width and height must be at most \(TakeConfiguration.maximumDimension)")
            }
            if !s.isEven { return ConfigurationError(field: f, value: s.description, reason: "width and height must be even (4:2:0 output)") }
        }
        for (name, v) in [("bitrate", bitrate), ("maxrate", maxrate), ("bufsize", bufsize)] {
            guard let v else { continue }
            if v <= 0 { return ConfigurationError(field: "\(field).\(name)", value: "\(v)", reason: "must be positive") }
            if v > TakeConfiguration.maximumBitrate {
                return ConfigurationError(field: "\(field).\(name)", value: "\(v)", reason: "must be at most 1G (1000000000)")
            }
        }
        if let b = bufsize, maxrate == nil {
            return ConfigurationError(field: "\(field).bufsize", value: "\(b)", reason: "needs \(field).maxrate (the peak rate the buffer drains at)")
        }
        if let p = preset, p.isEmpty || p.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
            return ConfigurationError(field: "\(field).preset", value: p, reason: "must be a preset name such as veryfast")
        }
        if let d = rateDivisor, !Self.rateDivisors.contains(d) {
            return ConfigurationError(field: "\(field).rateDivisor", value: "\(d)",
                                      reason: "must be a whole number \(Self.rateDivisors.lowerBound) to \(Self.rateDivisors.upperBound) (the output takes every Nth frame)")
        }
        return nil
    }
}

/// One file of a split output: its path, its frames, and where it lies on
/// the take's timeline (each file's own timestamps start at 0).
public struct WrittenSegment: Sendable, Codable, Hashable {
    public var path: String
    public var frames: Int
    /// Seconds from the take's start to the file's first frame.
    public var start: Double
    /// Seconds of video the file holds.
    public var duration: Double

    public init(path: String, frames: Int, start: Double, duration: Double) {
        self.path = path; self.frames = frames; self.start = start; self.duration = duration
    }
}

/// The names of a split recording's files (`--segment-time`): `take.mp4`
/// gives `take-0001.mp4`, `take-0002.mp4`, … (four digits at least, more
/// past 9999); a name without an extension gets the number at its end.
public enum SegmentNaming {
    /// The file of segment `index` (from 1) of output `out`.
    public static func path(_ out: String, index: Int) -> String {
        let number = index < 10_000 ? String("000\(index)".suffix(4)) : String(index)
        let (stem, ext) = split(out)
        return "\(stem)-\(number)\(ext)"
    }

    /// Whether `file` (a name in the folder of `out`, without the folder) is
    /// a segment of `out` of any number: what a split take would write over.
    public static func isSegment(_ file: String, of out: String) -> Bool {
        let (stem, ext) = split(lastComponent(out))
        guard file.hasPrefix(stem + "-"), file.hasSuffix(ext), file.count > stem.count + 1 + ext.count else { return false }
        let digits = file.dropFirst(stem.count + 1).dropLast(ext.count)
        return digits.count >= 4 && digits.allSatisfy { $0 >= "0" && $0 <= "9" }
    }

    /// The last component of a path (`/a/b/take.mp4` → `take.mp4`).
    public static func lastComponent(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? path
    }

    /// `take.mp4` → (`take`, `.mp4`); `dir.v2/take` → (`dir.v2/take`, ``).
    private static func split(_ out: String) -> (stem: String, ext: String) {
        let name = lastComponent(out)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (out, "") }
        let ext = String(name[dot...])
        return (String(out.dropLast(ext.count)), ext)
    }
}
