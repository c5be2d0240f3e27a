import CCUDA
import DiptychCore
import Synchronization

/// One CUDA device's NVDEC engines: what they decode (`cuvidGetDecoderCaps`
/// of libnvcuvid.so.1, asked once per codec, chroma and depth and kept),
/// on the device's primary context. One per device per process (`open`).
public final class NVDECDevice: @unchecked Sendable {   // CUDA context and decoder caps; the driver's calls are thread-safe
    public let context: CUDAPrimaryContext
    /// `NVIDIA H200`.
    public let name: String
    public var ordinal: Int { context.ordinal }
    private let cuvid: UnsafeMutablePointer<CuvidFunctions>
    private let cache = Mutex<[String: NVDECCodecSupport]>([:])

    private init(context: CUDAPrimaryContext, cuvid: UnsafeMutablePointer<CuvidFunctions>) {
        self.context = context
        self.cuvid = cuvid
        name = context.driver.deviceName(context.ordinal)
    }

    /// `NVIDIA H200 (CUDA device 0)`.
    public var label: String { "\(name) (CUDA device \(ordinal))" }

    private static let devices = Mutex<[Int: NVDECDevice]>([:])
    private nonisolated(unsafe) static let library: Result<UnsafeMutablePointer<CuvidFunctions>, CUDAUnavailable> = {
        var functions: UnsafeMutablePointer<CuvidFunctions>?
        var why = [CChar](repeating: 0, count: 256)
        guard diptych_cuvid_load(&functions, &why) == 0, let f = functions else {
            return .failure(CUDAUnavailable("no NVDEC library: \(text(why))"))
        }
        guard f.pointee.cuvidGetDecoderCaps != nil else {
            return .failure(CUDAUnavailable("libnvcuvid.so.1 has no cuvidGetDecoderCaps (driver too old)"))
        }
        return .success(f)
    }()

    /// Device `ordinal`'s NVDEC, or what is missing (driver, library, device).
    public static func open(ordinal: Int) -> Result<NVDECDevice, CUDAUnavailable> {
        let driver: CUDADriver
        switch CUDADriver.seeing(ordinal: ordinal) {
        case .success(let d): driver = d
        case .failure(let e): return .failure(e)
        }
        let cuvid: UnsafeMutablePointer<CuvidFunctions>
        switch library {
        case .success(let l): cuvid = l
        case .failure(let e): return .failure(e)
        }
        return devices.withLock { (all: inout [Int: NVDECDevice]) -> Result<NVDECDevice, CUDAUnavailable> in
            if let d = all[ordinal] { return .success(d) }
            do throws(CUDAError) {
                let d = NVDECDevice(context: try driver.primaryContext(ordinal: ordinal), cuvid: cuvid)
                all[ordinal] = d
                return .success(d)
            } catch {
                return .failure(CUDAUnavailable("CUDA device \(ordinal): \(error)"))
            }
        }
    }

    /// The `cudaVideoCodec` of an FFmpeg codec name NVDEC decodes into the compositor.
    static func codecType(_ codec: String) -> cudaVideoCodec? {
        switch codec {
        case "h264": return cudaVideoCodec_H264
        case "hevc": return cudaVideoCodec_HEVC
        case "av1": return cudaVideoCodec_AV1
        case "vp9": return cudaVideoCodec_VP9
        default: return nil
        }
    }

    /// What the engines decode for `codec` (an FFmpeg name) in `chroma` at
    /// `bitDepth`; nil for a codec NVDEC is not used for. A failed query
    /// reads as unsupported.
    public func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport? {
        guard let type = NVDECDevice.codecType(codec) else { return nil }
        let key = "\(codec) \(chroma.rawValue) \(bitDepth)"
        if let s = cache.withLock({ $0[key] }) { return s }
        var caps = CUVIDDECODECAPS()
        caps.eCodecType = type
        switch chroma {
        case .yuv420: caps.eChromaFormat = cudaVideoChromaFormat_420
        case .yuv422: caps.eChromaFormat = cudaVideoChromaFormat_422
        case .yuv444: caps.eChromaFormat = cudaVideoChromaFormat_444
        case .monochrome: caps.eChromaFormat = cudaVideoChromaFormat_Monochrome
        case .other: return NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: bitDepth, supported: false)
        }
        caps.nBitDepthMinus8 = UInt32(max(0, bitDepth - 8))
        var ok = false
        if (try? context.push()) != nil {
            ok = cuvid.pointee.cuvidGetDecoderCaps(&caps) == CUDA_SUCCESS
            context.pop()
        }
        let s = NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: bitDepth, supported: ok && caps.bIsSupported != 0,
                                  engines: Int(caps.nNumNVDECs),
                                  maxSize: PixelSize(width: Int(caps.nMaxWidth), height: Int(caps.nMaxHeight)),
                                  minSize: PixelSize(width: Int(caps.nMinWidth), height: Int(caps.nMinHeight)),
                                  maxMacroblocks: Int(caps.nMaxMBCount))
        cache.withLock { $0[key] = s }
        return s
    }

    /// Every codec, chroma layout and depth `diptych probe` lists.
    public func capabilityTable() -> [NVDECCodecSupport] {
        var rows: [NVDECCodecSupport] = []
        for codec in DecoderPolicy.nvdecCodecs {
            for (chroma, depths) in [(ChromaSubsampling.yuv420, [8, 10, 12]), (.yuv444, [8, 10])] {
                for d in depths { if let s = support(codec: codec, chroma: chroma, bitDepth: d) { rows.append(s) } }
            }
        }
        return rows
    }
}
