import Foundation
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
final class SourceReader: @unchecked Sendable {
    let spec: SourceSpec
    let queue: BoundedQueue<ReaderEvent>
    private let lock = NSLock()
    private var source: (any TakeInput)?
    private var _info: SourceInfo?
    private let opened = DispatchSemaphore(value: 0)
    private var thread: JoinableThread?
    private let done = DispatchSemaphore(value: 0)

    /// Starts a reader over an already opened source.
    init(spec: SourceSpec, source: any TakeInput, capacity: Int = 4) {
        self.spec = spec
        self.queue = BoundedQueue(capacity: capacity)
        self.source = source
        self._info = source.info
        start(openFirst: nil)
    }

    /// Starts a reader that opens `spec` with `open` on its own thread first.
    /// `open` is given the reader's `OpenCancel`, which `stop` flips, so a
    /// stop never waits for an open in progress.
    init(opening spec: SourceSpec, duration: Double?, capacity: Int = 4,
         open: @escaping @Sendable (SourceSpec, Double?, OpenCancel) throws(MediaError) -> any TakeInput) {
        self.spec = spec
        self.queue = BoundedQueue(capacity: capacity)
        self.opener = open
        start(openFirst: duration)
    }
    private var opener: (@Sendable (SourceSpec, Double?, OpenCancel) throws(MediaError) -> any TakeInput)?
    /// Stops an open in progress (`stop`).
    private let cancel = OpenCancel()

    /// The source's description once it is open, else nil.
    var info: SourceInfo? { lock.lock(); defer { lock.unlock() }; return _info }
    /// The source's audio once it is open (nil without an audio stream).
    var audioTrack: AudioTrack? { lock.lock(); defer { lock.unlock() }; return source?.audioTrack }

    private func start(openFirst duration: Double??) {
        thread = JoinableThread { [self] in
            StageClock.name(.decode)
            defer { StageClock.sample(); done.signal() }
            if case .some(let d) = duration, let opener {
                do throws(MediaError) {
                    let s = try opener(spec, d, cancel)
                    lock.lock(); source = s; _info = s.info; lock.unlock()
                    // Stopped while it opened: the loop below ends at once, and `stop` closes it.
                } catch {
                    queue.push(.failed(error))
                    queue.close()
                    return
                }
            }
            lock.lock(); let s = source; lock.unlock()
            guard let s else { return }
            while !queue.isClosed {
                do throws(MediaError) {
                    guard let f = try s.next() else { queue.push(.end); break }
                    if !queue.push(.frame(f)) { break }
                } catch {
                    queue.push(.failed(error))
                    break
                }
            }
            queue.close()
        }
    }

    /// Stops the thread and closes the source. Blocks until the thread has
    /// left the source (a blocked read on a pipe ends when the source closes).
    /// A thread blocked in a read that never returns (a silent pipe) is left
    /// behind after two seconds together with its source, rather than closing
    /// the source under it.
    func stop() {
        cancel.cancel()
        lock.lock(); let open = source; lock.unlock()
        // A network read blocked on a silent source returns now (FFmpeg's interrupt check).
        open?.interrupt()
        queue.closeAndDiscard()
        guard done.wait(timeout: .now() + 2) == .success else { thread?.detach(); return }
        done.signal()
        thread?.join()
        lock.lock(); let s = source; source = nil; lock.unlock()
        s?.close()
    }
}
