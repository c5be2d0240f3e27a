import Foundation
import Synchronization
import DiptychCore
import DiptychMedia

/// A live output that survives its receiver going away (docs/ARCHITECTURE.md,
/// "Live outputs"): when a write fails, the output is closed and reopened
/// with exponential backoff (1 s doubling to 30 s) for up to `window`
/// seconds, on the output's own encoder thread, so the take and the other
/// outputs never wait for it. Frames that come while it is down are
/// dropped; a reopened stream starts with a keyframe (a new encoder) and
/// the take's own timestamps. After the window the error is passed on and
/// the take closes the output. Each attempt is logged; outages, and the
/// frames lost to them, are kept for the summary. Once the take is ending
/// (`stopReconnecting`, from any thread), an attempt in progress is stopped
/// and no other is made. `lost` and `back` are told each loss (with the
/// error) and each return (with the seconds it was down), on the encoder
/// thread. A writer whose NVENC session failed went on with the software
/// encoder (`encoderFallback`); a reopen after that asks for it again
/// (`open`'s `after`), not for NVENC. Used by the output's encoder thread.
final class ReconnectingOutput: TakeOutput, Sendable {
    private let name: String
    private let window: Double
    private let log: @Sendable (String) -> Void
    private let lost: @Sendable (String) -> Void
    private let back: @Sendable (Double) -> Void
    private let open: @Sendable (_ again: Bool, _ cancel: OpenCancel?, _ after: EncoderFallback?) throws(MediaError) -> any TakeOutput
    private let first: any TakeOutput
    /// The link: the writer open now, the outage under way and the backoff.
    /// The encoder thread's (then `finish`'s): each call works on a copy and puts it back.
    private struct Link {
        var current: (any TakeOutput)?
        var down: (since: UInt64, at: Double, error: MediaError)?
        var nextAttempt: UInt64 = 0
        var backoff = 1.0
        var attempts = 0
    }
    private let link = Mutex(Link())
    private struct Shared {
        var outages: [OutputOutage] = []
        var lost = 0
        /// Set by `stopReconnecting`; `attempt` stops the reopen in progress.
        var stopping = false
        var attempt: OpenCancel?
        /// The writer CUDA frames are lent from (`current`, read on the take's thread).
        var lender: (any TakeOutput)?
        /// A writer's encoder fell back (as of its last write), kept for every writer after it.
        var fallback: EncoderFallback?
    }
    private let shared = Mutex(Shared())

    /// A CUDA frame lent by `writer`: once the writer is replaced, the frame
    /// is no frame of the new one's and is dropped.
    private final class Lent {
        let writer: any TakeOutput
        let target: CUDAFrameTarget
        init(writer: any TakeOutput, target: CUDAFrameTarget) { self.writer = writer; self.target = target }
    }

    init(name: String, window: Double, log: @escaping @Sendable (String) -> Void,
         lost: @escaping @Sendable (String) -> Void = { _ in }, back: @escaping @Sendable (Double) -> Void = { _ in },
         open: @escaping @Sendable (_ again: Bool, _ cancel: OpenCancel?, _ after: EncoderFallback?) throws(MediaError) -> any TakeOutput) throws(MediaError) {
        self.name = name; self.window = window; self.log = log; self.lost = lost; self.back = back; self.open = open
        first = try open(false, nil, nil)
        link.withLock { $0.current = first }
        shared.withLock { $0.lender = first }
    }

    var encoderName: String { first.encoderName }
    var encoderReason: String { first.encoderReason }
    var encoderDescription: String { first.encoderDescription }
    var audioDescription: String { first.audioDescription }
    var outages: [OutputOutage] { shared.withLock { $0.outages } }
    var encoderFallback: EncoderFallback? { shared.withLock { $0.fallback } }
    /// Frames that did not reach the receiver: the write that failed and every frame while it was down.
    var framesLost: Int { shared.withLock { $0.lost } }

    var takesDmaBuf: Bool { first.takesDmaBuf }

    func write(_ frame: VideoFrame) throws(MediaError) {
        try deliver(at: frame.pts, { (o: any TakeOutput) throws(MediaError) in try o.write(frame) })
    }

    /// A dma-buf frame that finds the output down is dropped: its buffer goes
    /// back when `once` goes, unless an output took it (it releases it then).
    func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?) throws(MediaError) {
        let once = EncoderRelease { release?() }
        try deliver(at: pts, { (o: any TakeOutput) throws(MediaError) in try o.write(frame, pts: pts, release: { once() }) })
    }

    var takesCUDA: Bool { first.takesCUDA }

    /// A CUDA frame of the writer now open (nil while the output is down:
    /// the frame then comes in host memory). Any thread.
    func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget? {
        guard let w = shared.withLock({ $0.lender }), let t = w.lendCUDAFrame(size) else { return nil }
        return CUDAFrameTarget(picture: t.picture, owner: Lent(writer: w, target: t))
    }

    /// A CUDA frame that finds the output down, or a writer other than the
    /// one that lent it (reopened since), is dropped.
    func write(_ frame: CUDAFrameTarget, pts: MediaTime) throws(MediaError) {
        guard let lent = frame.owner as? Lent else { throw .invalidFrame(reason: "a CUDA frame output \(name) did not lend") }
        try deliver(at: pts, { (o: any TakeOutput) throws(MediaError) in
            guard lent.writer === o else { lose(); return }
            try o.write(lent.target, pts: pts)
        })
    }

    var takesEncoded: Bool { first.takesEncoded }

    /// An encoded picture that finds the output down is dropped; a reopened
    /// writer drops what comes before the next keyframe.
    func write(_ packet: EncodedVideoPacket) throws(MediaError) {
        try deliver(at: packet.pts, { (o: any TakeOutput) throws(MediaError) in try o.write(packet) })
    }

    private func deliver(at pts: MediaTime, _ write: (any TakeOutput) throws(MediaError) -> Void) throws(MediaError) {
        var l = link.withLock { $0 }
        defer { link.withLock { [l] in $0 = l } }
        if let c = l.current {
            do throws(MediaError) {
                try write(c)
                if let f = c.encoderFallback { shared.withLock { $0.fallback = f } }
                return
            } catch {
                guard window > 0, !error.isStorageFull else { throw error }
                try? c.finish()
                l.current = nil
                shared.withLock { $0.lender = nil }
                lose()
                let now = LiveTiming.now()
                l.down = (now, pts.seconds, error)
                l.backoff = 1
                l.attempts = 0
                l.nextAttempt = now + 1_000_000_000
                log("output \(name) lost at \(String(format: "%.3f", pts.seconds)) s (\(error)); reconnecting for up to \(Int(window)) s")
                lost("\(error)")
                return
            }
        }
        guard let d = l.down else { return }
        let now = LiveTiming.now()
        let outage = Double(now - d.since) / 1e9
        if outage > window {
            record(OutputOutage(at: d.at, seconds: outage, recovered: false))
            l.down = nil
            throw .writeFailed(path: name, detail: "gave up reconnecting after \(Int(window)) s (\(d.error))")
        }
        guard now >= l.nextAttempt else { lose(); return }   // still down: this frame is dropped
        let cancel = OpenCancel()
        guard shared.withLock({ s -> Bool in s.attempt = cancel; return !s.stopping }) else { lose(); return }
        defer { shared.withLock { $0.attempt = nil } }
        l.attempts += 1
        do throws(MediaError) {
            let after = shared.withLock { $0.fallback }
            let c = try open(true, cancel, after)
            try write(c)
            l.current = c
            shared.withLock { $0.lender = c }
            l.down = nil
            record(OutputOutage(at: d.at, seconds: outage, recovered: true))
            log("output \(name) reconnected after \(String(format: "%.1f", outage)) s (attempt \(l.attempts))")
            back(outage)
        } catch {
            lose()
            l.backoff = min(l.backoff * 2, 30)
            l.nextAttempt = LiveTiming.now() + UInt64(l.backoff * 1e9)
            log("output \(name): reconnect attempt \(l.attempts) failed (\(error)); next in \(Int(l.backoff)) s")
        }
    }

    /// The take is ending: a reopen in progress is stopped, and no other is
    /// made (frames while down are dropped). Any thread.
    func stopReconnecting() {
        shared.withLock { $0.stopping = true; $0.attempt?.cancel() }
    }

    func finish() throws(MediaError) {
        var l = link.withLock { $0 }
        defer { link.withLock { [l] in $0 = l } }
        if let d = l.down {
            record(OutputOutage(at: d.at, seconds: Double(LiveTiming.now() - d.since) / 1e9, recovered: false))
            l.down = nil
        }
        shared.withLock { $0.lender = nil }
        try l.current?.finish()
        l.current = nil
    }

    private func record(_ o: OutputOutage) { shared.withLock { $0.outages.append(o) } }
    private func lose() { shared.withLock { $0.lost += 1 } }
}
