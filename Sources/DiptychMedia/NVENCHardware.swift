import CFFmpeg
import DiptychCore
import DiptychCUDA
import Synchronization

/// What opens an encoder and moves its frames and packets: FFmpeg's own
/// `avcodec_*` calls, or in tests a recording stand-in for NVENC (no engine
/// exists on the machines the tests run on).
protocol EncoderSession: AnyObject {
    /// `avcodec_open2`; options the encoder took are removed from `options`.
    func open(_ options: FFDictionary) throws(FFmpegError)
    /// `avcodec_send_frame`: the encoder takes a new reference to `frame` (nil: drain).
    func send(_ frame: UnsafeMutablePointer<AVFrame>?) -> Int32
    /// `avcodec_receive_packet`.
    func receive(_ packet: FFPacket) -> Int32
}

/// FFmpeg's encoder on `context`.
final class FFmpegEncoderSession: EncoderSession {
    let context: FFCodecContext
    init(_ context: FFCodecContext) { self.context = context }
    func open(_ options: FFDictionary) throws(FFmpegError) { try context.open(options) }
    func send(_ frame: UnsafeMutablePointer<AVFrame>?) -> Int32 { context.send(frame) }
    func receive(_ packet: FFPacket) -> Int32 { context.receive(packet) }
}

/// Where an NVENC encoder's device and session come from: FFmpeg's
/// `h264_nvenc`/`hevc_nvenc` on a CUDA device (`NVENCHardware`), or a stand-in
/// in tests that records what the encoder is given.
protocol NVENCBackend: Sendable {
    /// What NVENC offers for `codec` here.
    func facts(codec: VideoCodec) -> NVENCFacts
    /// A reference to FFmpeg's CUDA device (`AVHWDeviceContext`) the frames context is made on.
    func hardwareDevice() throws(MediaError) -> FFBufferRef
    /// `av_hwframe_ctx_init` on the encoder's frames context (CUDA, NV12).
    func initialize(frames: FFBufferRef) throws(FFmpegError)
    /// The session that opens `context` and encodes with it.
    func session(for context: FFCodecContext) -> any EncoderSession
    /// A frame of `frames` (the encoder's CUDA pool) holding `frame`, a frame in host memory.
    func upload(_ frame: FFFrame, into frames: FFBufferRef) throws(FFmpegError) -> FFFrame
}

/// NVENC on one CUDA device: FFmpeg's CUDA device on the device's primary
/// context (`primary_ctx`, the context the compositor's readback memory and
/// NVDEC live in), and what NVENC offers there, examined once per device and
/// codec: the engine (`NVENCDevice`: library, API version, a session opened
/// and closed) and then FFmpeg's own encoder opened on a tiny picture and
/// closed. One per device (`open`).
final class NVENCHardware: NVENCBackend, @unchecked Sendable {   // FFmpeg's device context, kept for the process; facts behind a Mutex
    let ordinal: Int
    /// The `AVBufferRef` of FFmpeg's `AVHWDeviceContext`, or why it could not be made.
    private let device: Result<FFBufferRef, NVENCAbsence>
    private let known = Mutex<[VideoCodec: NVENCFacts]>([:])

    private init(ordinal: Int) {
        self.ordinal = ordinal
        let options = FFDictionary(["primary_ctx": "1"])
        var ref: UnsafeMutablePointer<AVBufferRef>?
        let r = av_hwdevice_ctx_create(&ref, AV_HWDEVICE_TYPE_CUDA, "\(ordinal)", options.raw, 0)
        if r >= 0, let ref {
            device = .success(FFBufferRef(taking: ref))
        } else {
            device = .failure(r == averrorENOSYS ? .notBuilt(encoder: "CUDA device support")
                              : .noCUDA("FFmpeg cannot open CUDA device \(ordinal): \(avErrorString(r))"))
        }
    }

    private static let opened = Mutex<[Int: NVENCHardware]>([:])

    /// NVENC on CUDA device `ordinal` (made once; its facts are examined on first use).
    static func open(ordinal: Int) -> NVENCHardware {
        opened.withLock { all in
            if let h = all[ordinal] { return h }
            let h = NVENCHardware(ordinal: ordinal)
            all[ordinal] = h
            return h
        }
    }

    func hardwareDevice() throws(MediaError) -> FFBufferRef {
        switch device {
        case .success(let d):
            guard let r = d.newReference() else { throw .encoderFailed(encoder: "nvenc", detail: "av_buffer_ref: out of memory") }
            return FFBufferRef(taking: r)
        case .failure(let why): throw .encoderUnavailable(encoder: "nvenc", reason: why.description)
        }
    }

    func initialize(frames: FFBufferRef) throws(FFmpegError) {
        try ffCheck(av_hwframe_ctx_init(frames.raw), "av_hwframe_ctx_init")
    }

    func session(for context: FFCodecContext) -> any EncoderSession { FFmpegEncoderSession(context) }

    func upload(_ frame: FFFrame, into frames: FFBufferRef) throws(FFmpegError) -> FFFrame {
        try VideoEncoder.upload(frame, into: frames)
    }

    func facts(codec: VideoCodec) -> NVENCFacts {
        known.withLock { all in
            if let f = all[codec] { return f }
            let f = examine(codec: codec)
            all[codec] = f
            return f
        }
    }

    /// The engine first (its answer names what is missing exactly), then
    /// FFmpeg's encoder opened for real on a tiny picture, its log kept to
    /// say why where it does not open.
    private func examine(codec: VideoCodec) -> NVENCFacts {
        let name = NVENCFacts.encoderName(codec)
        guard avcodec_find_encoder_by_name(name) != nil else { return .unavailable(.notBuilt(encoder: name)) }
        let report: NVENCDeviceReport
        switch NVENCDevice.examine(ordinal: ordinal) {
        case .success(let r): report = r
        case .failure(let e):
            if case .failure = NVENCDevice.libraryLoads, case .success = CUDADriver.shared { return .unavailable(.noEncodeLibrary(e.reason)) }
            return .unavailable(.noCUDA(e.reason))
        }
        if let absence = NVENCProbe.absence(in: report, codec: codec) { return .unavailable(absence) }
        if let absence = NVENCProbe.tryOpen(codec: codec, backend: self, gpu: report.label) { return .unavailable(absence) }
        return .available(device: report.label, cudaDevice: ordinal, driverAPI: report.driverAPI, limits: report.codecs)
    }
}

/// Looking for NVENC where the compositor runs (docs/ARCHITECTURE.md,
/// "Encoder paths"): the reasons are pure functions of what was found, so
/// every row of a machine is tested without one.
public enum NVENCProbe {
    /// What NVENC offers for `codec` on the compositor's CUDA device (or why
    /// there is none: `device`'s failure, say a software renderer). Examined
    /// once per device and codec in a process.
    public static func facts(codec: VideoCodec, cudaDevice device: Result<Int, CUDAUnavailable>) -> NVENCFacts {
        let name = NVENCFacts.encoderName(codec)
        guard avcodec_find_encoder_by_name(name) != nil else { return .unavailable(.notBuilt(encoder: name)) }
        switch device {
        case .failure(let e): return .unavailable(.noCUDA(e.reason))
        case .success(let ordinal): return NVENCHardware.open(ordinal: ordinal).facts(codec: codec)
        }
    }

    /// Why the engine's answer rules NVENC out for `codec`, or nil where it does not.
    public static func absence(in report: NVENCDeviceReport, codec: VideoCodec) -> NVENCAbsence? {
        guard report.driverNewEnough else {
            return .driverTooOld("it takes NVENC API \(report.driverAPI), FFmpeg's encoders need \(report.builtAPI)")
        }
        guard let status = report.sessionStatus else { return .openFailed("no encode session was tried on \(report.label)") }
        if let absence = NVENCAbsence.session(status: status, gpu: report.label, codec: codec) { return absence }
        guard report.codecs.contains(where: { $0.codec == codec }) else {
            return .codecUnsupported(gpu: report.label, codec: codec,
                                     detail: "the engine lists \(report.codecs.map(\.codec.rawValue).joined(separator: ", "))")
        }
        return nil
    }

    /// A tiny picture's session: FFmpeg's encoder opened on the backend's
    /// CUDA device with a CUDA frames context, as a take opens it, then
    /// closed. Nil where it opened; else the reason, from what FFmpeg logged.
    static func tryOpen(codec: VideoCodec, backend: any NVENCBackend, gpu: String) -> NVENCAbsence? {
        let name = NVENCFacts.encoderName(codec)
        var settings = VideoEncoderSettings(size: PixelSize(width: 256, height: 144), frameRate: FrameRate(30), codec: codec, encoder: .nvenc)
        settings.preset = "ultrafast"
        let log = Mutex<String>("")
        do {
            _ = try VideoEncoder(settings: settings, globalHeader: false, nvenc: backend, probing: true, openLog: { text in log.withLock { $0 = text } })
            return nil
        } catch {
            let said = log.withLock { $0 }
            switch error {
            case .encoderFailed(_, let detail), .encoderUnavailable(_, let detail):
                return NVENCAbsence.ffmpegOpen(log: said, error: detail, gpu: gpu, codec: codec)
            default:
                return .openFailed("\(name): \(error)")
            }
        }
    }
}
