import CCUDA
import DiptychCore
import Synchronization

/// What NVENC answered on one CUDA device: the library, its API version
/// against the one FFmpeg's encoders were built for (the ffnvcodec headers),
/// and whether an encode session opens on the device's primary context (the
/// compositor's), with the codecs it lists and their limits. Asked once per
/// device per process (`examine`); the session is closed before it returns.
public struct NVENCDeviceReport: Hashable, Sendable {
    /// `NVIDIA H200 (CUDA device 0)`.
    public var label: String
    public var ordinal: Int
    /// The highest NVENC API the driver takes, and the one FFmpeg needs (`12.0`, `11.1`).
    public var driverAPI: String
    public var builtAPI: String
    /// The driver takes the API FFmpeg was built for.
    public var driverNewEnough: Bool
    /// NvEncOpenEncodeSessionEx's status (`NVENCSTATUS`, 0: opened); nil when it was not tried.
    public var sessionStatus: Int?
    /// The codecs the session lists, with their limits (empty unless it opened).
    public var codecs: [NVENCCodecLimits]

    public init(label: String, ordinal: Int, driverAPI: String, builtAPI: String, driverNewEnough: Bool,
                sessionStatus: Int?, codecs: [NVENCCodecLimits]) {
        self.label = label; self.ordinal = ordinal; self.driverAPI = driverAPI; self.builtAPI = builtAPI
        self.driverNewEnough = driverNewEnough; self.sessionStatus = sessionStatus; self.codecs = codecs
    }
}

/// One codec an NVENC engine encodes, and its limits (`nvEncGetEncodeCaps`).
public struct NVENCCodecLimits: Hashable, Sendable, CustomStringConvertible {
    public var codec: VideoCodec
    public var maxWidth: Int
    public var maxHeight: Int
    public var maxBFrames: Int
    public var tenBit: Bool

    public init(codec: VideoCodec, maxWidth: Int, maxHeight: Int, maxBFrames: Int, tenBit: Bool) {
        self.codec = codec; self.maxWidth = maxWidth; self.maxHeight = maxHeight; self.maxBFrames = maxBFrames; self.tenBit = tenBit
    }

    public var description: String {
        "\(codec.rawValue) up to \(maxWidth)x\(maxHeight), \(maxBFrames) B-frames\(tenBit ? ", 10-bit" : "")"
    }
}

/// NVENC's library and one look at each CUDA device's engine.
public enum NVENCDevice {
    private nonisolated(unsafe) static let library: Result<UnsafeMutablePointer<NvencFunctions>, CUDAUnavailable> = {
        var functions: UnsafeMutablePointer<NvencFunctions>?
        var why = [CChar](repeating: 0, count: 256)
        guard diptych_nvenc_load(&functions, &why) == 0, let f = functions else {
            return .failure(CUDAUnavailable("no NVENC library (libnvidia-encode.so.1): \(text(why))"))
        }
        return .success(f)
    }()

    /// Whether libnvidia-encode.so.1 loads, or why not.
    public static var libraryLoads: Result<Void, CUDAUnavailable> { library.map { _ in () } }

    private static let reports = Mutex<[Int: Result<NVENCDeviceReport, CUDAUnavailable>]>([:])

    /// Device `ordinal`'s NVENC: the driver's API version and a session
    /// opened and closed on its primary context; or what is missing before
    /// a session can be tried (driver, library, device). Kept per device.
    public static func examine(ordinal: Int) -> Result<NVENCDeviceReport, CUDAUnavailable> {
        reports.withLock { (all: inout [Int: Result<NVENCDeviceReport, CUDAUnavailable>]) in
            if let r = all[ordinal] { return r }
            let r = look(ordinal: ordinal)
            all[ordinal] = r
            return r
        }
    }

    private static func look(ordinal: Int) -> Result<NVENCDeviceReport, CUDAUnavailable> {
        let driver: CUDADriver
        switch CUDADriver.seeing(ordinal: ordinal) {
        case .success(let d): driver = d
        case .failure(let e): return .failure(e)
        }
        let nvenc: UnsafeMutablePointer<NvencFunctions>
        switch library {
        case .success(let l): nvenc = l
        case .failure(let e): return .failure(e)
        }
        let context: CUDAPrimaryContext
        do throws(CUDAError) { context = try driver.primaryContext(ordinal: ordinal) } catch {
            return .failure(CUDAUnavailable("CUDA device \(ordinal): \(error)"))
        }
        var report = diptych_nvenc_report()
        diptych_nvenc_examine(nvenc, context.raw, &report)
        let codecs: [NVENCCodecLimits] = withUnsafeBytes(of: report.codecs) { raw in
            Array(raw.bindMemory(to: diptych_nvenc_codec_caps.self).prefix(Int(report.codec_count)))
        }.map { c in
            NVENCCodecLimits(codec: c.h264 != 0 ? .h264 : .hevc, maxWidth: Int(c.max_width), maxHeight: Int(c.max_height),
                             maxBFrames: Int(c.b_frames), tenBit: c.ten_bit != 0)
        }
        func version(_ v: UInt32) -> String { "\(v >> 4).\(v & 15)" }
        return .success(NVENCDeviceReport(
            label: "\(driver.deviceName(ordinal)) (CUDA device \(ordinal))", ordinal: ordinal,
            driverAPI: report.driver_version == 0 ? "unknown" : version(report.driver_version), builtAPI: version(report.built_version),
            driverNewEnough: report.driver_version >= report.built_version,
            sessionStatus: report.status < 0 ? nil : Int(report.status), codecs: codecs))
    }
}
