import Foundation
import Synchronization
import DiptychCore
import DiptychMedia

/// Where an output's NV12 frames go: a `MediaWriter` (file or stream), or an
/// embedding host's outputs (frames, packets and/or a file). Called by the
/// output's encoder thread only. An output opened for the GPU encoder
/// (`takesEncoded`) takes its H.264 access units (`write(_: EncodedVideoPacket)`)
/// instead of frames.
protocol TakeOutput: AnyObject, Sendable {
    var encoderName: String { get }
    var encoderReason: String { get }
    var encoderDescription: String { get }
    var audioDescription: String { get }
    /// Whether `write(_:pts:release:)` takes NV12 dma-bufs (an encoder that
    /// reads them in place: docs/ARCHITECTURE.md, "Encoder paths").
    var takesDmaBuf: Bool { get }
    func write(_ frame: VideoFrame) throws(MediaError)
    /// Encodes an NV12 dma-buf; `release` runs exactly once, when the buffer is no longer read.
    func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?) throws(MediaError)
    /// Whether `write(_: EncodedVideoPacket)` takes pictures the GPU encoded
    /// (the output was opened for pre-encoded H.264).
    var takesEncoded: Bool { get }
    /// Writes one H.264 access unit (Annex B) encoded before it came here.
    func write(_ packet: EncodedVideoPacket) throws(MediaError)
    /// Whether the output lends CUDA frames for the compositor to fill
    /// (`lendCUDAFrame`): an NVENC encoder, fed device to device.
    var takesCUDA: Bool { get }
    /// A CUDA frame of the output's encoder to fill with the next frame of
    /// `size`, or nil (the frame then comes in host memory). Any thread.
    func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget?
    /// Encodes a frame `lendCUDAFrame` lent, filled.
    func write(_ frame: CUDAFrameTarget, pts: MediaTime) throws(MediaError)
    func finish() throws(MediaError)
    /// A split file output's files (`--segment-time`); empty otherwise.
    var segments: [WrittenSegment] { get }
    /// A split output of pictures encoded before they come here: its file
    /// has lasted its length and waits for a keyframe to begin the next.
    /// Asked on the encoder's thread, after a write.
    var awaitsCut: Bool { get }
    /// The output's encoder failed mid-take and another went on from there
    /// (NVENC to software: `MediaWriter.encoderFallback`). Asked on the encoder's thread, after a write.
    var encoderFallback: EncoderFallback? { get }
}

extension TakeOutput {
    var takesDmaBuf: Bool { false }
    func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?) throws(MediaError) {
        release?()
        throw .invalidFrame(reason: "\(encoderName) takes frames in host memory, not dma-bufs")
    }
    var takesEncoded: Bool { false }
    var segments: [WrittenSegment] { [] }
    var awaitsCut: Bool { false }
    var encoderFallback: EncoderFallback? { nil }
    func write(_ packet: EncodedVideoPacket) throws(MediaError) {
        throw .invalidFrame(reason: "\(encoderName) encodes frames itself; it takes no encoded pictures")
    }
    var takesCUDA: Bool { false }
    func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget? { nil }
    func write(_ frame: CUDAFrameTarget, pts: MediaTime) throws(MediaError) {
        throw .invalidFrame(reason: "\(encoderName) takes frames in host memory, not CUDA frames")
    }
}

extension MediaWriter: TakeOutput {
    var takesEncoded: Bool { isPreEncoded }
}

/// A frame for an output's encoder: NV12 in host memory (read back), or an
/// NV12 dma-buf the encoder reads in place, with the release that gives the
/// buffer back to its ring, or a picture the GPU encoded already (H.264,
/// Annex B) for an output that takes them (`TakeOutput.takesEncoded`), or a
/// CUDA frame the output's encoder lent, filled device to device (`TakeOutput.takesCUDA`).
enum EncoderInput: Sendable {
    case frame(VideoFrame)
    case dmaBuf(DmaBufFrame, pts: MediaTime, release: EncoderRelease)
    case encoded(EncodedVideoPacket)
    case cuda(CUDAFrameTarget, pts: MediaTime)

    var pts: MediaTime {
        switch self {
        case .frame(let f): f.pts
        case .dmaBuf(_, let pts, _), .cuda(_, let pts): pts
        case .encoded(let p): p.pts
        }
    }

    /// A frame that will not be encoded gives its buffer back.
    func drop() { if case .dmaBuf(_, _, let release) = self { release() } }

    func write(to sink: any TakeOutput) throws(MediaError) {
        switch self {
        case .frame(let f): try sink.write(f)
        case .dmaBuf(let d, let pts, let release): try sink.write(d, pts: pts, release: { release() })
        case .encoded(let p): try sink.write(p)
        case .cuda(let f, let pts): try sink.write(f, pts: pts)
        }
    }
}

/// One output's encoder: a thread that takes NV12 frames from a bounded
/// queue and writes them to the output. A file's queue blocks the render
/// loop when it is full (a file loses no frame); a live output's queue drops
/// the frame instead, counted, so a slow network never slows the take or
/// the other outputs. The first failure is kept and later frames are
/// dropped; the take decides what a failure means.
final class EncoderStage: Sendable {
    let key: Int
    let name: String
    let sink: any TakeOutput
    /// A live destination (a stream, a socket, a pipe): drops rather than blocks.
    let live: Bool
    private let queue: BoundedQueue<EncoderInput>
    private struct State {
        var failure: MediaError?
        var written = 0
        var finished = false
        var dropped = 0
        /// An encoded picture was dropped: its successors up to the next
        /// keyframe are dropped too (they refer to it).
        var awaitingKeyframe = false
        /// A split output waits for a keyframe to cut its file at (`TakeOutput.awaitsCut`), set on the encoder's thread.
        var awaitingCut = false
        /// A split output's files as of its last write (`TakeOutput.segments`), set on the encoder's thread.
        var segments: [WrittenSegment] = []
        /// The output's encoder fell back (`TakeOutput.encoderFallback`), set on the encoder's thread.
        var fallback: EncoderFallback?
    }
    private let state = Mutex(State())
    /// The encoder's thread, set once it is started (at the end of `init`).
    private let thread = Mutex<JoinableThread?>(nil)

    /// `onWritten` is told each frame's pts once the output has it (frame
    /// latency); `onFallback`, once, that the output's encoder fell back.
    init(key: Int, name: String, sink: any TakeOutput, live: Bool = false, depth: Int? = nil,
         onWritten: (@Sendable (MediaTime) -> Void)? = nil, onFallback: (@Sendable (EncoderFallback) -> Void)? = nil) {
        self.key = key; self.name = name; self.sink = sink; self.live = live
        // A live output's queue holds half a second at 60 fps: room for jitter, not for a backlog.
        // A file's queue holds three frames (each 3 MB at 1080p): enough to keep
        // its encoder busy while the render loop waits for the next input frame.
        queue = BoundedQueue(capacity: depth ?? (live ? 30 : 3))
        let t = JoinableThread { [self] in
            StageClock.name(.encode)
            defer { StageClock.sample() }
            while let frame = queue.pop() {
                if failure != nil { frame.drop(); continue }
                do throws(MediaError) {
                    try frame.write(to: sink)
                    let cut = sink.awaitsCut, segments = sink.segments, fallback = sink.encoderFallback
                    let fellBack = state.withLock { s in
                        s.written += 1; s.awaitingCut = cut; s.segments = segments
                        defer { s.fallback = fallback }
                        return s.fallback == nil ? fallback : nil
                    }
                    if let fellBack { onFallback?(fellBack) }
                    onWritten?(frame.pts)
                } catch {
                    state.withLock { if $0.failure == nil { $0.failure = error } }
                }
            }
        }
        thread.withLock { $0 = t }
    }

    var failure: MediaError? { state.withLock { $0.failure } }
    var written: Int { state.withLock { $0.written } }
    /// A split output's files so far (the last one still being written); empty for an output written whole.
    var segments: [WrittenSegment] { state.withLock { $0.segments } }
    /// The output's encoder fell back mid-take, as of its last write.
    var encoderFallback: EncoderFallback? { state.withLock { $0.fallback } }

    /// Frames a live output dropped because its queue was full.
    var dropped: Int { state.withLock { $0.dropped } }

    /// Queues a frame: waits while a file's encoder is behind; a live
    /// output's frame is dropped then.
    func push(_ frame: VideoFrame) { push(.frame(frame)) }

    /// Queues a picture the GPU encoded, as a frame is queued (a live
    /// output's dropped picture is counted; its writer waits for the next
    /// keyframe only if nothing was written yet).
    func push(_ packet: EncodedVideoPacket) { push(.encoded(packet)) }

    func push(_ frame: EncoderInput) {
        if case .encoded(let p) = frame {
            let skip = state.withLock { s in
                let skip = s.awaitingKeyframe && !p.isKeyframe
                if skip { s.dropped += 1 } else { s.awaitingKeyframe = false }
                return skip
            }
            if skip { return }
        }
        if !live {
            if !queue.push(frame) { frame.drop() }
            return
        }
        if !queue.tryPush(frame) {
            frame.drop()
            let encoded = if case .encoded = frame { true } else { false }
            state.withLock { s in
                s.dropped += 1
                if encoded { s.awaitingKeyframe = true }
            }
        }
    }

    /// A live output dropped an encoded picture: the pictures after it are
    /// dropped until a keyframe comes; or a split file waits for one to
    /// begin its next file at. The GPU encoder may make its next picture one
    /// (an IDR) to end the gap or cut the file sooner.
    var needsKeyframe: Bool { state.withLock { $0.awaitingKeyframe || $0.awaitingCut } }

    /// Frames the queue holds at most (the ring of an output read in place is sized by it).
    var queueDepth: Int { queue.capacity }

    /// Encodes what is queued, then ends the thread and completes the output
    /// (flush, trailer). Returns the error of the last step, if any.
    func finish() -> MediaError? {
        let again = state.withLock { s in defer { s.finished = true }; return s.finished }
        if again { return nil }
        // A stream down and reconnecting makes no more attempts: its queued frames are dropped at once.
        (sink as? ReconnectingOutput)?.stopReconnecting()
        queue.close()
        // The thread has encoded what was queued once it has ended.
        thread.withLock { $0 }?.join()
        do throws(MediaError) { try sink.finish() } catch { return error }
        return nil
    }
}
