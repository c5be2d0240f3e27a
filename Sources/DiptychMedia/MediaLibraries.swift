import CFFmpeg
import Foundation
import DiptychCore

/// Versions of the FFmpeg libraries Diptych runs against, and process-wide settings.
public enum MediaLibraries {
    private static func format(_ v: UInt32) -> String { "\(v >> 16).\((v >> 8) & 0xff).\(v & 0xff)" }
    public static var versions: [(name: String, version: String)] {
        [("libavformat", format(avformat_version())),
         ("libavcodec", format(avcodec_version())),
         ("libavutil", format(avutil_version())),
         ("libswscale", format(swscale_version())),
         ("libavfilter", format(avfilter_version()))]
    }

    public enum LogLevel: Sendable {
        case quiet, error, warning, info, verbose
        var av: Int32 {
            switch self {
            case .quiet: AV_LOG_QUIET
            case .error: AV_LOG_ERROR
            case .warning: AV_LOG_WARNING
            case .info: AV_LOG_INFO
            case .verbose: AV_LOG_VERBOSE
            }
        }
    }
    /// The level `DIPTYCH_FFMPEG_LOG` names (quiet, error, warning, info, verbose), if any.
    public static var levelFromEnvironment: LogLevel? {
        switch ProcessInfo.processInfo.environment["DIPTYCH_FFMPEG_LOG"]?.lowercased() {
        case "quiet"?: .quiet
        case "error"?: .error
        case "warning"?: .warning
        case "info"?: .info
        case "verbose"?: .verbose
        default: nil
        }
    }

    /// FFmpeg's log level (process-wide; FFmpeg's default is `.info`, which
    /// prints an encoder summary per take).
    public static func setLogLevel(_ level: LogLevel) { av_log_set_level(level.av) }
}

/// What `diptych probe` prints about media: library versions, the encoders
/// considered for each codec and why, the VA-API devices (or why none), and
/// NVDEC's decode capabilities per codec (or why there is no NVDEC).
public struct MediaProbeReport: Sendable, CustomStringConvertible {
    public var libraries: [String]
    public var encoders: [VideoCodec: [EncoderCandidate]]
    /// Which encoder `--encoder auto` picks per codec, or why none can run.
    public var autoChoice: [VideoCodec: String]
    public var vaapi: VAAPIReport
    public var nvdec: NVDECReport

    public static func current(driDirectory: String = EncoderProbe.defaultDRIDirectory) -> MediaProbeReport {
        var encoders: [VideoCodec: [EncoderCandidate]] = [:]
        var auto: [VideoCodec: String] = [:]
        for codec in VideoCodec.allCases {
            encoders[codec] = EncoderProbe.candidates(codec: codec, driDirectory: driDirectory)
            do { auto[codec] = try EncoderProbe.choose(codec: codec, choice: .auto, driDirectory: driDirectory).description }
            catch { auto[codec] = "none: \(error)" }
        }
        return MediaProbeReport(libraries: MediaLibraries.versions.map { "\($0.name) \($0.version)" },
                                encoders: encoders, autoChoice: auto, vaapi: EncoderProbe.vaapi(directory: driDirectory),
                                nvdec: NVDECReport.current())
    }

    public var description: String {
        var lines = ["FFmpeg: " + libraries.joined(separator: ", ")]
        for codec in VideoCodec.allCases {
            lines.append("Encoders for \(codec.rawValue) (auto: \(autoChoice[codec] ?? "?")):")
            for c in encoders[codec] ?? [] { lines.append("  \(c)") }
        }
        lines.append(vaapi.description)
        lines.append(nvdec.description)
        return lines.joined(separator: "\n")
    }
}
