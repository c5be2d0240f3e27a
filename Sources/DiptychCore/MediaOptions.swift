/// Where a stream comes from, as written on the command line:
/// a media file or URL, `testsrc:NAME[:WxH[@FPS]]`, `-` (Y4M on stdin) or `none`.
public enum SourceSpec: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A media file or URL libavformat opens.
    case url(String)
    /// A synthetic pattern (`smpte`, `gradient`, `counter`, `solid-RRGGBB`, ...).
    case testPattern(name: String, size: PixelSize, rate: FrameRate)
    /// A Y4M stream on standard input.
    case stdin
    /// No stream (single-stream recording).
    case none

    public static let defaultTestSize = PixelSize.hd1080
    public static let defaultTestRate = FrameRate(30)

    /// Parses the command-line form. Throws `ConfigurationError` naming `field`.
    public static func parse(_ text: String, field: String) throws(ConfigurationError) -> SourceSpec {
        if text == "-" { return .stdin }
        if text == "none" { return .none }
        if text.isEmpty { throw ConfigurationError(field: field, value: text, reason: "is empty") }
        guard text.hasPrefix("testsrc:") else { return .url(text) }
        let parts = text.dropFirst("testsrc:".count).split(separator: ":", omittingEmptySubsequences: false)
        guard let name = parts.first, !name.isEmpty, parts.count <= 2 else {
            throw ConfigurationError(field: field, value: text, reason: "expected testsrc:NAME[:WxH[@FPS]]")
        }
        var size = defaultTestSize
        var rate = defaultTestRate
        if parts.count == 2 {
            let geo = parts[1].split(separator: "@", omittingEmptySubsequences: false)
            guard geo.count <= 2, let s = PixelSize(parsing: String(geo[0])) else {
                throw ConfigurationError(field: field, value: text, reason: "expected testsrc:NAME[:WxH[@FPS]]")
            }
            size = s
            if geo.count == 2 {
                guard let r = FrameRate(parsing: String(geo[1])) else {
                    throw ConfigurationError(field: field, value: text, reason: "frame rate must be a positive number such as 30, 29.97 or 30000/1001")
                }
                rate = r
            }
        }
        return .testPattern(name: String(name), size: size, rate: rate)
    }

    public var description: String {
        switch self {
        case .url(let u): return u
        case .testPattern(let n, let s, let r): return "testsrc:\(n):\(s)@\(r)"
        case .stdin: return "-"
        case .none: return "none"
        }
    }
}

/// Which encoder implementation to use.
public enum EncoderChoice: String, Hashable, Sendable, Codable, CaseIterable {
    /// VA-API from the render target where it can run, else NVENC where the
    /// GPU has an engine, else VA-API from uploaded frames, else software
    /// (docs/ARCHITECTURE.md, "Encoder paths").
    case auto
    /// Hardware through VA-API; fails when unavailable.
    case vaapi
    /// NVIDIA's encoder engine through FFmpeg's h264_nvenc/hevc_nvenc, fed
    /// the composite's NV12 in CUDA memory; fails (bad input) where the GPU
    /// has no engine, the driver is too old or no session can be opened.
    case nvenc
    /// Software: libx264 for H.264, libx265 for HEVC.
    case x264
    /// The compositor's GPU encodes H.264 itself (GLES 3.1 compute passes,
    /// Constrained Baseline); fails when its context cannot run them. H.264 only.
    case gpu

    /// The codecs this encoder writes.
    public func encodes(_ codec: VideoCodec) -> Bool { self != .gpu || codec == .h264 }
}

/// Where input streams are decoded (`--decoder`).
public enum DecoderChoice: String, Hashable, Sendable, Codable, CaseIterable {
    /// NVDEC where the driver, the compositor's GPU and the stream allow it, else the CPU.
    case auto
    /// libavcodec on the CPU.
    case cpu
    /// NVDEC into the compositor's textures; a take that cannot use it does not start.
    case nvdec
}

public enum VideoCodec: String, Hashable, Sendable, Codable, CaseIterable {
    case h264, hevc
}

/// Output container, chosen from the output's extension or URL scheme.
public enum ContainerFormat: String, Hashable, Sendable, Codable, CaseIterable {
    /// Fragmented MP4 (crash-safe).
    case mp4
    /// MPEG transport stream.
    case mpegts
    /// Matroska (`.mkv`): clusters of about a second, each begun at a
    /// keyframe and flushed whole, so a killed take keeps every finished one
    /// (read without the index a clean finish writes).
    case matroska
    /// HLS: a playlist (`.m3u8`) of MPEG-TS segments beside it, cut at
    /// keyframes, the playlist rewritten after each (a killed take keeps
    /// every segment listed).
    case hls
    /// FLV over RTMP.
    case rtmp
    /// MPEG-TS over SRT.
    case srt

    /// Whether `output` is a live destination (a stream, a socket, a pipe):
    /// real time matters, frames may be dropped, the connection may be reopened.
    public static func isLive(_ output: String) -> Bool {
        let lower = output.lowercased()
        return ["rtmp://", "rtmps://", "srt://", "udp://", "tcp://", "pipe:"].contains { lower.hasPrefix($0) }
    }

    /// The FFmpeg muxer that writes it.
    public var muxer: String {
        switch self {
        case .mp4: return "mp4"
        case .mpegts, .srt: return "mpegts"
        case .matroska: return "matroska"
        case .hls: return "hls"
        case .rtmp: return "flv"
        }
    }

    /// The container for an output path or URL, or nil when it cannot be told.
    public static func infer(from output: String) -> ContainerFormat? {
        let lower = output.lowercased()
        if lower.hasPrefix("rtmp://") || lower.hasPrefix("rtmps://") { return .rtmp }
        if lower.hasPrefix("srt://") { return .srt }
        if lower.hasPrefix("udp://") || lower.hasPrefix("pipe:") { return .mpegts }
        if lower.hasSuffix(".mp4") || lower.hasSuffix(".m4v") || lower.hasSuffix(".mov") { return .mp4 }
        if lower.hasSuffix(".ts") || lower.hasSuffix(".m2ts") { return .mpegts }
        if lower.hasSuffix(".mkv") { return .matroska }
        if lower.hasSuffix(".m3u8") { return .hls }
        return nil
    }
}

/// Whether frames leave at the primary's real-time rate (`--realtime`).
public enum RealtimeMode: String, Hashable, Sendable, Codable, CaseIterable {
    /// When an output is live and the sources are files or patterns.
    case auto
    case on
    case off
}

/// What a take does when the cost trial finds its canvas over budget
/// (docs/ARCHITECTURE.md, "Cost budget and rollback").
public enum OverBudget: String, Hashable, Sendable, Codable, CaseIterable {
    /// Roll back to the largest smaller canvas that fits (the default without `--size`).
    case reduce
    /// Keep the canvas, say so, and let frames be late (the default with `--size`).
    case keep
    /// Do not start.
    case refuse
}

/// Whether the take has an audio track, and whose audio it carries.
/// Frozen when the take starts. The audio follows the role, not a source: a
/// hot swap, reconnect or failover brings the new source's audio with it
/// (docs/ARCHITECTURE.md, "Take audio").
public enum AudioMode: String, Hashable, Sendable, Codable, CaseIterable {
    /// The primary's audio (at `--primary-gain`).
    case primary
    /// The secondary's audio (at `--secondary-gain`).
    case secondary
    /// Both streams' audio summed, each at its gain.
    case mix
    /// No audio track at all (not a silent one).
    case none

    /// The roles heard, in the mix's input order.
    public var roles: [StreamRole] {
        switch self {
        case .primary: return [.primary]
        case .secondary: return [.secondary]
        case .mix: return [.primary, .secondary]
        case .none: return []
        }
    }
}

/// A bad configuration value: which field, which value, what is wrong.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var field: String
    public var value: String
    public var reason: String
    public init(field: String, value: String, reason: String) {
        self.field = field; self.value = value; self.reason = reason
    }
    /// One line, e.g. `--size '12x0': width and height must be positive`.
    /// A long value is shortened and line breaks are escaped, so the line
    /// stays short whatever the input.
    public var description: String { "\(field) '\(ConfigurationError.quoted(value))': \(reason)" }

    /// `value` as it may be echoed: at most 120 characters, one line.
    public static func quoted(_ value: String) -> String {
        var s = value.utf8.count <= 120 ? value : String(value.prefix(117)) + "..."
        if s.contains(where: \.isNewline) { s = s.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).joined(separator: "\\n") }
        return s
    }
}

extension PixelSize {
    /// Parses `WxH` (positive integers). Returns nil when malformed.
    public init?(parsing text: String) {
        let p = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w > 0, h > 0, w <= TakeConfiguration.maximumDimension, h <= TakeConfiguration.maximumDimension else { return nil }
        self.init(width: w, height: h)
    }
}

extension FrameRate {
    /// Parses `30`, `29.97` or `30000/1001`. Returns nil when malformed or not positive.
    public init?(parsing text: String) {
        if let slash = text.firstIndex(of: "/") {
            guard let n = Int32(text[..<slash]), let d = Int32(text[text.index(after: slash)...]), n > 0, d > 0,
                  Double(n) / Double(d) >= 0.01, Double(n) / Double(d) <= 1000 else { return nil }
            self.init(n, d)
            return
        }
        if let n = Int32(text), n > 0, n <= 1000 { self.init(n); return }
        // At least one frame in 100 s, at most 1000 a second (also for n/d above).
        guard let v = Double(text), v >= 0.01, v <= 1000 else { return nil }
        // 29.97 → 30000/1001, 59.94 → 60000/1001; otherwise milli-precision.
        let ntsc = (v * 1001).rounded()
        if abs(ntsc / 1001 - v) < 0.005, Int(ntsc) % 1000 == 0 { self.init(Int32(ntsc), 1001); return }
        self.init(Int32((v * 1000).rounded()), 1000)
    }
}
