import CFFmpeg
import DiptychCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What went wrong in media I/O, naming the input or output it concerns.
/// `description` is one line suitable for a command-line error.
public enum MediaError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The input path does not exist.
    case fileNotFound(path: String)
    /// The input file exists but holds no bytes.
    case emptyFile(path: String)
    /// No demuxer recognises the input (a text file named `.mp4`, say).
    case unrecognizedFormat(path: String, detail: String)
    /// The input is recognised but damaged (truncated, corrupted headers).
    case corrupt(path: String, detail: String)
    /// The input's stream header is malformed (a Y4M header with `W0`, say).
    case invalidHeader(path: String, format: String, detail: String)
    /// The input has no video stream (an audio-only file, say).
    case noVideoStream(path: String)
    /// The input's codec or pixel format cannot be decoded or converted.
    case unsupportedFormat(path: String, detail: String)
    /// Opening or reading the input failed for another reason (network, permissions, ...).
    case openFailed(path: String, detail: String)
    /// Reading or decoding failed mid-stream.
    case readFailed(path: String, detail: String)
    /// A network input or output did not answer in time, or a FIFO had no
    /// writer before the source's open timeout.
    case timedOut(path: String)
    /// The source policy does not allow this input (`SourcePolicy`).
    case refused(path: String, reason: String)
    /// A network source could not be opened; `detail` (why) is for the
    /// operator's log, not for the client that named it.
    case unreachable(path: String, detail: String)
    /// A `testsrc:` or other source spec that cannot be opened.
    case invalidSource(spec: String, reason: String)
    /// `--decoder nvdec` cannot decode the input here, and what is missing.
    case decoderUnavailable(path: String, reason: String)
    /// The requested encoder cannot be used here, and why.
    case encoderUnavailable(encoder: String, reason: String)
    /// The encoder rejected its settings or a frame.
    case encoderFailed(encoder: String, detail: String)
    /// An encoder setting the encoder would refuse, found before anything is
    /// opened (`VideoEncoderSettings.validate()`). `value` is cut to a short prefix.
    case invalidSetting(EncoderSetting, value: String, reason: String)
    /// A frame given to the writer does not fit its settings (size, format).
    case invalidFrame(reason: String)
    /// Opening, writing or finalizing the output failed.
    case writeFailed(path: String, detail: String)
    /// The output's storage is full (ENOSPC). What was written before stays
    /// playable (fragmented MP4); finalize the take.
    case storageFull(path: String)

    public var description: String {
        switch self {
        case .fileNotFound(let p): return "\(p): no such file"
        case .emptyFile(let p): return "\(p): file is empty (0 bytes)"
        case .unrecognizedFormat(let p, let d): return "\(p): not a media file FFmpeg recognises (\(d))"
        case .corrupt(let p, let d): return "\(p): file is truncated or corrupted (\(d))"
        case .invalidHeader(let p, let f, let d): return "\(p): invalid \(f) header: \(d)"
        case .noVideoStream(let p): return "\(p): has no video stream"
        case .unsupportedFormat(let p, let d): return "\(p): unsupported format: \(d)"
        case .openFailed(let p, let d): return "\(p): cannot open: \(d)"
        case .readFailed(let p, let d): return "\(p): read failed: \(d)"
        case .timedOut(let p): return "\(p): timed out"
        case .refused(let p, let r): return "\(p): not allowed: \(r)"
        case .unreachable(let p, _): return "\(p): could not be opened"
        case .invalidSource(let s, let r): return "\(s): \(r)"
        case .decoderUnavailable(let p, let r): return "\(p): --decoder nvdec cannot decode it here: \(r)"
        case .encoderUnavailable(let e, let r): return "encoder \(e) unavailable: \(r)"
        case .encoderFailed(let e, let d): return "encoder \(e) failed: \(d)"
        case .invalidSetting(let s, let v, let r): return "\(s.rawValue) '\(v)': \(r)"
        case .invalidFrame(let r): return "invalid frame: \(r)"
        case .writeFailed(let p, let d): return "\(p): write failed: \(d)"
        case .storageFull(let p): return "\(p): storage full (no space left on device)"
        }
    }
}

extension MediaError {
    /// Whether this is a full disk (ENOSPC).
    public var isStorageFull: Bool { if case .storageFull = self { return true }; return false }
}

extension AVRational {
    /// `value` in this time base as a `MediaTime`.
    func mediaTime(_ value: Int64) -> MediaTime {
        MediaTime(value: value * Int64(num), timescale: den)
    }
}

/// Deadline checked by libavformat's interrupt callback, so a stalled network
/// read or write ends with `AVERROR_EXIT` instead of hanging.
final class InterruptDeadline: @unchecked Sendable {   // handed to FFmpeg as a raw pointer; the deadline is the thread's that runs the FFmpeg call, `cancelled` is atomic
    /// Seconds each blocking operation may take; 0 disables the deadline.
    var timeout: Double
    private var deadline: Double = .infinity
    var fired = false
    /// Set from any thread by `interrupt()`.
    private let cancelled = Atomic<Bool>(false)
    /// Another party's switch (a take being stopped while it opens its inputs).
    private let cancel: OpenCancel?
    func interrupt() { cancelled.store(true, ordering: .relaxed) }
    var interrupted: Bool { cancelled.load(ordering: .relaxed) || cancel?.isCancelled == true }
    init(timeout: Double, cancel: OpenCancel? = nil) { self.timeout = timeout; self.cancel = cancel }
    /// Seconds each check waits before it answers (0: none): set while
    /// FFmpeg's stream analysis retries a non-blocking capture device that
    /// has no frame yet, so its retries do not spin a core.
    var idlePause: Double = 0
    /// Whether the operation should stop now (interrupted, or past its
    /// deadline, which sets `fired`).
    func shouldStop() -> Bool {
        if idlePause > 0 { usleep(useconds_t(idlePause * 1_000_000)) }   // FFmpeg calls this between retries and offers nothing to wait on
        if interrupted { return true }
        if InterruptDeadline.now() > deadline { fired = true; return true }
        return false
    }
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    /// Starts a new blocking operation's allowance.
    func arm() { deadline = timeout > 0 ? InterruptDeadline.now() + timeout : .infinity; fired = false }
    func disarm() { deadline = .infinity }
    var callback: AVIOInterruptCB {
        AVIOInterruptCB(callback: { opaque in
            guard let opaque else { return 0 }
            return Unmanaged<InterruptDeadline>.fromOpaque(opaque).takeUnretainedValue().shouldStop() ? 1 : 0
        }, opaque: Unmanaged.passUnretained(self).toOpaque())
    }
}

/// Whether `path` names a network URL or protocol rather than a plain file.
func isURL(_ path: String) -> Bool {
    path.contains("://") || path.hasPrefix("pipe:") || path.hasPrefix("fd:")
}
