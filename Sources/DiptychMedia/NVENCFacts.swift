import DiptychCore
import DiptychCUDA
import Foundation

/// Why NVENC cannot encode here, each case one thing that is missing
/// (docs/ARCHITECTURE.md, "Encoder paths"). `--encoder nvenc` refuses with
/// `description`, one line; `auto` logs it as the reason it passed NVENC over.
public enum NVENCAbsence: Error, Hashable, Sendable, CustomStringConvertible {
    /// This FFmpeg was built without the encoder (`h264_nvenc`, `hevc_nvenc`).
    case notBuilt(encoder: String)
    /// No NVIDIA driver, no CUDA device, or the compositor's GPU is not one
    /// CUDA runs (a software renderer, another vendor's GPU).
    case noCUDA(String)
    /// The driver's encode library (`libnvidia-encode.so.1`) is not installed.
    case noEncodeLibrary(String)
    /// The driver takes an older NVENC API than FFmpeg's encoders were built
    /// for (`it takes NVENC API 11.0, FFmpeg's encoders need 11.1`).
    case driverTooOld(String)
    /// The GPU has no NVENC engine (H100, H200, A100): a session does not open.
    case noEngine(gpu: String, detail: String)
    /// No more sessions: the driver's limit on concurrent sessions (consumer
    /// cards), or the engine's memory, is used up.
    case sessionLimit(gpu: String, detail: String)
    /// The engine does not encode this codec (or this size).
    case codecUnsupported(gpu: String, codec: VideoCodec, detail: String)
    /// FFmpeg's encoder did not open for another reason (its own words).
    case openFailed(String)
    /// Not looked at: the GPU is not open yet.
    case notExamined(String)

    public var description: String {
        switch self {
        case .notBuilt(let e): return "FFmpeg lacks the \(e) encoder"
        case .noCUDA(let why): return "no CUDA device for NVENC: \(why)"
        case .noEncodeLibrary(let why): return "no libnvidia-encode (the driver's NVENC library): \(why)"
        case .driverTooOld(let detail): return "NVIDIA driver too old for FFmpeg's NVENC encoders: \(detail)"
        case .noEngine(let gpu, let detail): return "no NVENC engine on this GPU (\(gpu): \(detail))"
        case .sessionLimit(let gpu, let detail):
            return "NVENC session limit reached on \(gpu) (\(detail)): too many encode sessions are open"
        case .codecUnsupported(let gpu, let codec, let detail):
            return "NVENC on \(gpu) does not encode \(codec == .h264 ? "H.264" : "HEVC") (\(detail))"
        case .openFailed(let why): return "NVENC did not open: \(why)"
        case .notExamined(let why): return why
        }
    }

    /// NvEncOpenEncodeSessionEx's status (`NVENCSTATUS`) as the reason, or
    /// nil for success. The engine-less data-centre GPUs answer "no encode
    /// device" or "unsupported device"; the consumer cards' session cap
    /// answers "out of memory" (or, on older drivers, "incompatible client key").
    public static func session(status: Int, gpu: String, codec: VideoCodec) -> NVENCAbsence? {
        let detail = "\(statusName(status)) (\(status))"
        switch status {
        case 0: return nil
        case 1, 2, 3, 4, 5: return .noEngine(gpu: gpu, detail: "its encode session does not open: \(detail)")
        case 10, 21: return .sessionLimit(gpu: gpu, detail: detail)
        case 15: return .driverTooOld("its encode session refuses the API version (\(detail))")
        case 12: return .codecUnsupported(gpu: gpu, codec: codec, detail: detail)
        default: return .openFailed("OpenEncodeSessionEx: \(detail)")
        }
    }

    /// The reason in what FFmpeg's nvenc encoder logged while it failed to
    /// open (`avcodec_open2`'s error `error`, FFmpeg's words `log`).
    /// FFmpeg 5.1 says "Cannot load libnvidia-encode.so.1", "Driver does not
    /// support the required nvenc API version", "OpenEncodeSessionEx failed:
    /// <status> (<code>)", "No capable devices found", "Codec not supported",
    /// "<size> exceeds <limit>".
    public static func ffmpegOpen(log: String, error: String, gpu: String, codec: VideoCodec) -> NVENCAbsence {
        let lines = log.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let said = lines.isEmpty ? error : lines.joined(separator: "; ")
        // "OpenEncodeSessionEx failed: unsupported device (2): (no details)": the status is the first number in brackets.
        if let l = lines.first(where: { $0.contains("OpenEncodeSessionEx failed") }),
           let m = l.firstMatch(of: /\((\d+)\)/), let code = Int(m.1) {
            return session(status: code, gpu: gpu, codec: codec) ?? .openFailed(said)
        }
        if log.contains("Cannot load libnvidia-encode") || log.contains("Cannot load libcuda") {
            return .noEncodeLibrary(said)
        }
        if log.contains("required nvenc API version") || log.contains("nvenc API version") {
            return .driverTooOld(said)
        }
        if log.contains("No capable devices found") || log.contains("No NVENC capable devices found") {
            return .noEngine(gpu: gpu, detail: said)
        }
        if log.contains("Codec not supported") || log.contains("exceeds") || log.contains("not supported") {
            return .codecUnsupported(gpu: gpu, codec: codec, detail: said)
        }
        return .openFailed(said)
    }

    /// NVENCSTATUS names as FFmpeg prints them (`nvenc_errors`).
    static func statusName(_ s: Int) -> String {
        let names = ["success", "no encode device", "unsupported device", "invalid encoder device", "invalid device",
                     "device does not exist", "invalid ptr", "invalid event", "invalid param", "invalid call",
                     "out of memory", "encoder not initialized", "unsupported param", "lock busy", "not enough buffer",
                     "invalid version", "map failed", "need more input", "encoder busy", "event not registered",
                     "generic error", "incompatible client key", "unimplemented", "resource register failed",
                     "resource not registered", "resource not mapped"]
        return names.indices.contains(s) ? names[s] : "status \(s)"
    }
}

/// What this machine's NVENC offers the compositor's GPU, or why it is absent.
public enum NVENCFacts: Hashable, Sendable {
    /// A session opened on `device` (the compositor's CUDA device) through
    /// FFmpeg's encoder; `limits` as the engine lists them.
    case available(device: String, cudaDevice: Int, driverAPI: String, limits: [NVENCCodecLimits])
    case unavailable(NVENCAbsence)

    /// The encoders' names in plans and summaries.
    public static func encoderName(_ codec: VideoCodec) -> String { codec == .h264 ? "h264_nvenc" : "hevc_nvenc" }

    /// What `diptych probe` says for `codec`: `present on NVIDIA L4 (CUDA
    /// device 0), NVENC API 12.1; h264 up to 4096x4096, 4 B-frames`, or
    /// `absent: <reason>`.
    public func probeLine(codec: VideoCodec) -> String {
        switch self {
        case .available(let device, _, let api, let limits):
            let mine = limits.filter { $0.codec == codec }
            guard !mine.isEmpty else {
                return "absent: " + NVENCAbsence.codecUnsupported(gpu: device, codec: codec,
                                                                   detail: "the engine lists \(limits.map(\.codec.rawValue).joined(separator: ", "))").description
            }
            return "present on \(device), NVENC API \(api); " + mine.map(\.description).joined(separator: "; ")
        case .unavailable(let a): return "absent: \(a)"
        }
    }

    /// `diptych probe`'s lines, one a codec (`h264_nvenc: …`), or one line
    /// (`absent: <reason>`) where every codec is absent for one reason.
    public static func probeLines(_ facts: [(VideoCodec, NVENCFacts)]) -> [String] {
        let lines = facts.map { ($0.0, $0.1.probeLine(codec: $0.0)) }
        if lines.allSatisfy({ $0.1.hasPrefix("absent: ") }), Set(lines.map(\.1)).count == 1, let one = lines.first { return [one.1] }
        return lines.map { "\(encoderName($0.0)): \($0.1)" }
    }
}
