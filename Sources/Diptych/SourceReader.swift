import Foundation
import Synchronization
import DiptychCore
import DiptychMedia

/// What a reader thread delivers.
enum ReaderEvent: Sendable {
    case frame(InputFrame)
    case end
    case failed(MediaError)
}

/// Pulls frames from one source on its own thread into a small bounded queue
/// (backpressure: the thread blocks when the session falls behind, so memory
/// stays flat). The source may be opened on that thread too, so a hot swap
/// never stalls the render loop while a file or device opens.
final class SourceReader: Sendable {
    let spec: SourceSpec
    let queue: BoundedQueue<ReaderEvent>
    /// The source once it is open (nil after `stop` closed it), and its
    /// description (kept after the close).
    private struct Opened {
        var source: (any TakeInput)?
        var info: SourceInfo?
    }
    private let opened: Mutex<Opened>
    /// The reading thread, set once it started.
    private let thread = Mutex<JoinableThread?>(nil)
    /// Whether the reading thread has left the source (`stop` waits for it).
    private let done = Condition(false)
    /// Opens the source on the reading thread (nil: it came open).
    private let opener: (@Sendable (SourceSpec, Double?, OpenCancel) throws(MediaError) -> any TakeInput)?
    /// Stops an open in progress (`stop`).
    private let cancel = OpenCancel()
    /// Rung after each event the reading thread queues and when it closes
    /// the queue (the primary's readers and probes wake the input stage this way).
    private let wake: WakeSignal?

    /// Starts a reader over an already opened source; `wake`, if given, is
    /// rung after each event queued and when the queue closes.
    init(spec: SourceSpec, source: any TakeInput, capacity: Int = 4, wake: WakeSignal? = nil) {
        self.spec = spec
        self.queue = BoundedQueue(capacity: capacity)
        self.opened = Mutex(Opened(source: source, info: source.info))
        self.opener = nil
        self.wake = wake
        start(openFirst: nil)
    }

    /// Starts a reader that opens `spec` with `open` on its own thread first.
    /// `open` is given the reader's `OpenCancel`, which `stop` flips, so a
    /// stop never waits for an open in progress. `wake`, if given, is rung
    /// after each event queued and when the queue closes.
    init(opening spec: SourceSpec, duration: Double?, capacity: Int = 4, wake: WakeSignal? = nil,
         open: @escaping @Sendable (SourceSpec, Double?, OpenCancel) throws(MediaError) -> any TakeInput) {
        self.spec = spec
        self.queue = BoundedQueue(capacity: capacity)
        self.opened = Mutex(Opened())
        self.opener = open
        self.wake = wake
        start(openFirst: duration)
    }

    /// The source's description once it is open, else nil.
    var info: SourceInfo? { opened.withLock { $0.info } }
    /// The source's audio once it is open (nil without an audio stream).
    var audioTrack: AudioTrack? { opened.withLock { $0.source?.audioTrack } }

    private func start(openFirst duration: Double??) {
        let t = JoinableThread { [self] in
            StageClock.name(.decode)
            defer { StageClock.sample(); done.update { $0 = true } }
            if case .some(let d) = duration, let opener {
                do throws(MediaError) {
                    let s = try opener(spec, d, cancel)
                    opened.withLock { $0 = Opened(source: s, info: s.info) }
                    // Stopped while it opened: the loop below ends at once, and `stop` closes it.
                } catch {
                    deliver(.failed(error))
                    finish()
                    return
                }
            }
            guard let s = opened.withLock({ $0.source }) else { return }
            while !queue.isClosed {
                do throws(MediaError) {
                    guard let f = try s.next() else { deliver(.end); break }
                    if !deliver(.frame(f)) { break }
                } catch {
                    deliver(.failed(error))
                    break
                }
            }
            finish()
        }
        thread.withLock { $0 = t }
    }

    /// Queues `event` (waiting while the queue is full), then rings `wake`;
    /// false when the queue was closed.
    @discardableResult
    private func deliver(_ event: ReaderEvent) -> Bool {
        defer { wake?.ring() }
        return queue.push(event)
    }

    /// Closes the queue, then rings `wake`.
    private func finish() {
        queue.close()
        wake?.ring()
    }

    /// Stops the thread and closes the source. Blocks until the thread has
    /// left the source (a blocked read on a pipe ends when the source closes).
    /// A thread blocked in a read that never returns (a silent pipe) is left
    /// behind after two seconds together with its source, rather than closing
    /// the source under it.
    func stop() {
        cancel.cancel()
        // A network read blocked on a silent source returns now (FFmpeg's interrupt check).
        opened.withLock { $0.source }?.interrupt()
        queue.closeAndDiscard()
        let t = thread.withLock { $0 }
        guard done.wait(until: { $0 }, timeout: 2) else { t?.detach(); return }
        t?.join()
        opened.withLock { o in defer { o.source = nil }; return o.source }?.close()
    }
}
