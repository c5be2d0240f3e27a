import CFFmpeg
import DiptychCore
import DiptychCUDA

/// What `diptych probe` says about NVDEC: the driver (or why there is none),
/// each CUDA device's decode capabilities per codec, chroma layout and depth
/// (`cuvidGetDecoderCaps`), and which of those codecs this FFmpeg decodes through NVDEC.
public struct NVDECReport: Sendable, CustomStringConvertible {
    public struct Device: Sendable {
        public var label: String
        public var support: [NVDECCodecSupport]
        /// Why the device's capabilities could not be read, else nil.
        public var problem: String?
    }
    /// Why NVDEC cannot be used at all, else nil.
    public var problem: String?
    public var devices: [Device]
    /// The FFmpeg decoder with an NVDEC path, by codec (nil: none).
    public var ffmpegDecoders: [(codec: String, decoder: String?)]

    public static func current() -> NVDECReport {
        let ffmpeg = DecoderPolicy.nvdecCodecs.map { name -> (codec: String, decoder: String?) in
            let id = avcodec_descriptor_get_by_name(name)?.pointee.id ?? AV_CODEC_ID_NONE
            return (name, NVDECDecoder.ffmpegDecoder(for: id).map { String(cString: $0.pointee.name) })
        }
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): return NVDECReport(problem: e.reason, devices: [], ffmpegDecoders: ffmpeg)
        }
        let count = driver.deviceCount
        guard count > 0 else { return NVDECReport(problem: "the NVIDIA driver sees no CUDA device", devices: [], ffmpegDecoders: ffmpeg) }
        let devices = (0..<count).map { i -> Device in
            switch NVDECDevice.open(ordinal: i) {
            case .success(let d): return Device(label: d.label, support: d.capabilityTable(), problem: nil)
            case .failure(let e): return Device(label: "\(driver.deviceName(i)) (CUDA device \(i))", support: [], problem: e.reason)
            }
        }
        return NVDECReport(problem: nil, devices: devices, ffmpegDecoders: ffmpeg)
    }

    public var description: String {
        var lines = ["FFmpeg decoders through NVDEC: "
                     + ffmpegDecoders.map { "\($0.codec) \($0.decoder.map { "(\($0))" } ?? "none")" }.joined(separator: ", ")]
        if let problem { lines.append("NVDEC: \(problem)"); return lines.joined(separator: "\n") }
        for d in devices {
            if let p = d.problem { lines.append("NVDEC on \(d.label): \(p)"); continue }
            lines.append("NVDEC on \(d.label):")
            for s in d.support { lines.append("  \(s)") }
        }
        return lines.joined(separator: "\n")
    }
}
