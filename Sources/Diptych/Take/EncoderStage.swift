import Foundation
import DiptychCore
import DiptychMedia

/// Where an output's NV12 frames go: a `MediaWriter` (file or stream), or an
/// embedding host's outputs (frames, packets and/or a file). Called by the
/// output's encoder thread only.
protocol TakeOutput: AnyObject, Sendable {
    var encoderName: String { get }
    var encoderReason: String { get }
    var encoderDescription: String { get }
    var audioDescription: String { get }
    func write(_ frame: VideoFrame) throws(MediaError)
    func finish() throws(MediaError)
}

extension MediaWriter: TakeOutput {}

/// One output's encoder: a thread that takes NV12 frames from a bounded
/// queue and writes them to the output. A file's queue blocks the render
/// loop when it is full (a file loses no frame); a live output's queue drops
/// the frame instead, counted, so a slow network never slows the take or
/// the other outputs. The first failure is kept and later frames are
/// dropped; the take decides what a failure means.
final class EncoderStage: @unchecked Sendable {
    let key: Int
    let name: String
    let sink: any TakeOutput
    /// A live destination (a stream, a socket, a pipe): drops rather than blocks.
    let live: Bool
    private let queue: BoundedQueue<VideoFrame>
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var _failure: MediaError?
    private var _written = 0
    private var finished = false

    private var _dropped = 0
    private var thread: JoinableThread?

    /// `onWritten` is told each frame's pts once the output has it (frame latency).
    init(key: Int, name: String, sink: any TakeOutput, live: Bool = false, depth: Int? = nil,
         onWritten: (@Sendable (MediaTime) -> Void)? = nil) {
        self.key = key; self.name = name; self.sink = sink; self.live = live
        // A live output's queue holds half a second at 60 fps: room for jitter, not for a backlog.
        queue = BoundedQueue(capacity: depth ?? (live ? 30 : 4))
        thread = JoinableThread { [self] in
            defer { done.signal() }
            while let frame = queue.pop() {
                if failure != nil { continue }
                do throws(MediaError) {
                    try sink.write(frame)
                    lock.lock(); _written += 1; lock.unlock()
                    onWritten?(frame.pts)
                } catch {
                    lock.lock(); if _failure == nil { _failure = error }; lock.unlock()
                }
            }
        }
    }

    var failure: MediaError? { lock.lock(); defer { lock.unlock() }; return _failure }
    var written: Int { lock.lock(); defer { lock.unlock() }; return _written }

    /// Frames a live output dropped because its queue was full.
    var dropped: Int { lock.lock(); defer { lock.unlock() }; return _dropped }

    /// Queues a frame: waits while a file's encoder is behind; a live
    /// output's frame is dropped then.
    func push(_ frame: VideoFrame) {
        if !live { queue.push(frame); return }
        if !queue.tryPush(frame) { lock.lock(); _dropped += 1; lock.unlock() }
    }

    /// Encodes what is queued, then ends the thread and completes the output
    /// (flush, trailer). Returns the error of the last step, if any.
    func finish() -> MediaError? {
        lock.lock()
        let again = finished
        finished = true
        lock.unlock()
        if again { return nil }
        queue.close()
        done.wait()
        thread?.join()
        do throws(MediaError) { try sink.finish() } catch { return error }
        return nil
    }
}
