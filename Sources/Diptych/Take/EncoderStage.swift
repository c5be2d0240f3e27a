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
/// queue (the render loop blocks when it is full: a file loses no frame)
/// and writes them to the output. The first failure is kept and later
/// frames are dropped; the take decides what a failure means.
final class EncoderStage: @unchecked Sendable {
    let key: Int
    let name: String
    let sink: any TakeOutput
    private let queue: BoundedQueue<VideoFrame>
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var _failure: MediaError?
    private var _written = 0
    private var finished = false

    init(key: Int, name: String, sink: any TakeOutput, depth: Int = 4) {
        self.key = key; self.name = name; self.sink = sink
        queue = BoundedQueue(capacity: depth)
        let t = Thread { [self] in
            defer { done.signal() }
            while let frame = queue.pop() {
                if failure != nil { continue }
                do throws(MediaError) {
                    try sink.write(frame)
                    lock.lock(); _written += 1; lock.unlock()
                } catch {
                    lock.lock(); if _failure == nil { _failure = error }; lock.unlock()
                }
            }
        }
        t.name = "diptych.encoder"
        t.start()
    }

    var failure: MediaError? { lock.lock(); defer { lock.unlock() }; return _failure }
    var written: Int { lock.lock(); defer { lock.unlock() }; return _written }

    /// Queues a frame, waiting while the encoder is behind.
    func push(_ frame: VideoFrame) { queue.push(frame) }

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
        do throws(MediaError) { try sink.finish() } catch { return error }
        return nil
    }
}
