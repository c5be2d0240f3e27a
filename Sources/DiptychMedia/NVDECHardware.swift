import CFFmpeg
import DiptychCore
import DiptychCUDA
import Synchronization

/// Where a source's NVDEC decoders come from: the GPU's engines
/// (`NVDECHardware`), or a stand-in in tests (a decoder that fails on cue).
protocol NVDECBackend: Sendable {
    /// `NVIDIA H200 (CUDA device 0)`.
    var label: String { get }
    /// The engines' answer for a codec, chroma layout and depth (nil: not an NVDEC codec).
    func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport?
    /// Opens a decoder for `stream` with the FFmpeg decoder `codec`.
    func makeDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> any FrameDecoder
}

/// NVDEC on one CUDA device: its capabilities (DiptychCUDA's `NVDECDevice`)
/// and FFmpeg's CUDA device on the device's primary context (`primary_ctx`),
/// which every decoder of the process on that device shares, so their frames
/// and the compositor's interop live in one CUDA context. One per device (`open`).
final class NVDECHardware: NVDECBackend, @unchecked Sendable {   // FFmpeg's device context (AVBufferRef), kept for the process
    let device: NVDECDevice
    /// The `AVBufferRef` of FFmpeg's `AVHWDeviceContext` (kept for the process).
    let hardwareDevice: UnsafeMutablePointer<AVBufferRef>

    private init(device: NVDECDevice, hardwareDevice: UnsafeMutablePointer<AVBufferRef>) {
        self.device = device; self.hardwareDevice = hardwareDevice
    }

    var label: String { device.label }

    private static let opened = Mutex<[Int: NVDECHardware]>([:])

    /// NVDEC on CUDA device `ordinal`, or what is missing.
    static func open(ordinal: Int) -> Result<NVDECHardware, DecoderUnavailable> {
        opened.withLock { (all: inout [Int: NVDECHardware]) -> Result<NVDECHardware, DecoderUnavailable> in
            if let h = all[ordinal] { return .success(h) }
            let device: NVDECDevice
            switch NVDECDevice.open(ordinal: ordinal) {
            case .success(let d): device = d
            case .failure(let e): return .failure(DecoderUnavailable(e.reason))
            }
            let options = FFDictionary(["primary_ctx": "1"])
            var ref: UnsafeMutablePointer<AVBufferRef>?
            let r = av_hwdevice_ctx_create(&ref, AV_HWDEVICE_TYPE_CUDA, "\(ordinal)", options.raw, 0)
            guard r >= 0, let ref else {
                return .failure(DecoderUnavailable(r == averrorENOSYS
                    ? "this FFmpeg was built without CUDA" : "FFmpeg cannot open CUDA device \(ordinal): \(avErrorString(r))"))
            }
            let h = NVDECHardware(device: device, hardwareDevice: ref)
            all[ordinal] = h
            return .success(h)
        }
    }

    func support(codec: String, chroma: ChromaSubsampling, bitDepth: Int) -> NVDECCodecSupport? {
        device.support(codec: codec, chroma: chroma, bitDepth: bitDepth)
    }

    func makeDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> any FrameDecoder {
        try NVDECDecoder(stream: stream, codec: codec, hardwareDevice: hardwareDevice, cuda: device.context, path: path)
    }
}

/// How a source decodes its video (`--decoder`), and the NVDEC it may use.
public struct DecoderSettings: Sendable {
    public var choice: DecoderChoice
    /// NVDEC for this source, or why there is none.
    var nvdec: Result<any NVDECBackend, DecoderUnavailable>
    /// Told (on the source's reading thread) when a stream leaves NVDEC mid-take.
    public var onFallback: @Sendable (DecoderFallback) -> Void
    /// Where CPU decoding's time is counted (its decoders' threads and the
    /// reading thread while it decodes), when someone counts it.
    public var cpuClock: DecodeCPUClock?
    /// Asks the streams NVDEC decodes to go on on the CPU, when someone may ask.
    public var move: DecoderMove?
    /// Frame threads of each CPU decoder; nil for one a core, at most 16
    /// (a server decoding many streams gives each a share, `Admission.decoderThreads`).
    public var cpuThreads: Int?
    /// The nice value of each CPU decoder's threads (`CodecThreads.yield`);
    /// nil for the process's (a server lowers them, `diptych serve --decode-nice`).
    public var cpuNice: Int?

    init(choice: DecoderChoice, nvdec: Result<any NVDECBackend, DecoderUnavailable>,
         onFallback: @escaping @Sendable (DecoderFallback) -> Void = { _ in }) {
        self.choice = choice; self.nvdec = nvdec; self.onFallback = onFallback
    }

    /// Decoding on the CPU (`--decoder cpu`).
    public static let cpu = DecoderSettings(choice: .cpu, nvdec: .failure(DecoderUnavailable("--decoder cpu")))

    /// `choice` with NVDEC on CUDA device `device` (the GPU the compositor
    /// runs on), or without NVDEC for the reason given.
    public static func with(_ choice: DecoderChoice, cudaDevice device: Result<Int, DecoderUnavailable>,
                            onFallback: @escaping @Sendable (DecoderFallback) -> Void = { _ in }) -> DecoderSettings {
        guard choice != .cpu else { return DecoderSettings(choice: .cpu, nvdec: cpu.nvdec, onFallback: onFallback) }
        let nvdec = device.flatMap { NVDECHardware.open(ordinal: $0).map { $0 as any NVDECBackend } }
        return DecoderSettings(choice: choice, nvdec: nvdec, onFallback: onFallback)
    }

    /// These settings decoding on the CPU under `auto` for `reason` (a
    /// server's decode placement): the stream's decision says why.
    public func onCPU(because reason: String) -> DecoderSettings {
        var settings = DecoderSettings(choice: .auto, nvdec: .failure(DecoderUnavailable(reason)), onFallback: onFallback)
        settings.cpuClock = cpuClock
        settings.cpuThreads = cpuThreads
        settings.cpuNice = cpuNice
        return settings
    }

    /// A CPU decoder for `stream` under these settings (its clock, threads and nice value).
    func cpuDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String) throws(MediaError) -> VideoDecoder {
        try VideoDecoder(stream: stream, codec: codec, path: path, clock: cpuClock, threads: cpuThreads, nice: cpuNice)
    }

    /// Why this source has no NVDEC, or nil when it has.
    public var nvdecUnavailable: String? {
        if case .failure(let e) = nvdec { return e.reason }
        return nil
    }

    /// What the policy is told about NVDEC for `stream`.
    func status(for stream: StreamDecodeTraits) -> NVDECStatus {
        switch nvdec {
        case .failure(let e): return .unavailable(e.reason)
        case .success(let b):
            return .available(device: b.label, support: b.support(codec: stream.codec, chroma: stream.chroma, bitDepth: stream.bitDepth))
        }
    }
}

extension StreamDecodeTraits {
    /// The traits of `stream` as its parameters state them.
    init(stream: UnsafeMutablePointer<AVStream>) {
        let par = stream.pointee.codecpar!
        let id = par.pointee.codec_id
        let format = AVPixelFormat(rawValue: par.pointee.format)
        var depth = Int(par.pointee.bits_per_raw_sample)
        var chroma = ChromaSubsampling.other
        if let d = av_pix_fmt_desc_get(format) {
            depth = Int(d.pointee.comp.0.depth)
            let rgb = d.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
            switch (rgb, d.pointee.nb_components, d.pointee.log2_chroma_w, d.pointee.log2_chroma_h) {
            case (false, 1, _, _): chroma = .monochrome
            case (false, 3...4, 1, 1): chroma = .yuv420
            case (false, 3...4, 1, 0): chroma = .yuv422
            case (false, 3...4, 0, 0): chroma = .yuv444
            default: chroma = .other
            }
        }
        if depth <= 0 { depth = 8 }
        let profile = avcodec_profile_name(id, par.pointee.profile).map { String(cString: $0) }
        let order = par.pointee.field_order
        self.init(codec: String(cString: avcodec_get_name(id)), profile: profile, bitDepth: depth, chroma: chroma,
                  size: PixelSize(width: Int(par.pointee.width), height: Int(par.pointee.height)),
                  interlaced: order != AV_FIELD_PROGRESSIVE && order != AV_FIELD_UNKNOWN,
                  nvdecDecoder: NVDECDecoder.ffmpegDecoder(for: id).map { String(cString: $0.pointee.name) })
    }
}
