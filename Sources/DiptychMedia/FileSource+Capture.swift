import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// A capture device through the same demuxing and decoding as files and
/// URLs (docs/ARCHITECTURE.md, "Cameras"): libavdevice's input opens it
/// with the chosen mode as its options, non-blocking, so that neither the
/// open nor a read waits past the source's deadline on a camera that
/// delivers nothing (a blocking V4L2 read would wait for a frame forever).
extension FileSource {
    /// How long a read waits before asking a non-blocking device again.
    static let capturePause = 0.002

    /// Opens `capture` with libavdevice's input and reads its stream
    /// information, within `deadline`. The context may use that input alone.
    static func openCapture(_ capture: DeviceCapture, name: String, deadline: InterruptDeadline,
                            guardian: SourceGuard) throws(MediaError) -> FFInputContext {
        let format: UnsafePointer<AVInputFormat>
        do { format = try CaptureDevices.inputFormat(capture.format) } catch { throw .openFailed(path: name, detail: error.reason) }
        guardian.captureFormat = String(cString: format.pointee.name)
        let options = FFDictionary()
        for (key, value) in capture.options { options.set(key, value) }
        deadline.arm()
        let ctx: FFInputContext
        do {
            ctx = try FFInputContext(url: capture.device, format: format, options: options, interrupt: deadline.callback,
                                     flags: AVFMT_FLAG_NONBLOCK, sourceGuard: guardian)
        } catch {
            if deadline.interrupted { throw .openFailed(path: name, detail: "interrupted") }
            if deadline.fired || error.code == averrorETIMEDOUT { throw .timedOut(path: name) }
            throw .openFailed(path: name, detail: "\(capture.device): \(error.message)")
        }
        // FFmpeg's stream analysis asks a non-blocking device again at once
        // while it has no frame, checking the interrupt callback each time:
        // the check pauses, so waiting for a camera's first frames does not
        // spin a core (frames come tens of milliseconds apart).
        deadline.arm()
        deadline.idlePause = capturePause
        defer { deadline.idlePause = 0 }
        do { try ctx.findStreamInfo() } catch {
            if deadline.interrupted { throw .openFailed(path: name, detail: "interrupted") }
            if deadline.fired || error.code == averrorETIMEDOUT { throw .timedOut(path: name) }
            throw .openFailed(path: name, detail: "\(capture.device): \(error.message)")
        }
        return ctx
    }

    /// `av_read_frame` into `packet`. With `waiting` (a non-blocking device),
    /// "no frame yet" (EAGAIN) is asked again every `waiting` seconds until
    /// a frame comes or `deadline` stops it (then `AVERROR_EXIT`: the
    /// deadline says whether it fired or was interrupted).
    static func read(_ input: FFInputContext, into packet: FFPacket, waiting: Double?, deadline: InterruptDeadline) -> Int32 {
        waitingRead(pause: waiting, deadline: deadline) { input.read(packet) }
    }

    /// The waiting of `read`, over any read (tested on its own).
    static func waitingRead(pause: Double?, deadline: InterruptDeadline, _ read: () -> Int32) -> Int32 {
        while true {
            let r = read()
            guard r == averrorEAGAIN, let pause else { return r }
            if deadline.shouldStop() { return averrorExit }
            usleep(useconds_t(pause * 1_000_000))   // a non-blocking device signals nothing when a frame comes: ask again after the pause
        }
    }
}
