import Foundation
import DiptychCore
import DiptychMedia

/// A take input that a host program pushes frames into (the embedding
/// API's sources). A bounded FIFO: `push` waits while it is full, or returns
/// `.wouldBlock` when asked not to wait; `nextFrame` (the session's reader
/// thread) waits while it is empty.
///
/// Two ways it ends: `endStream()` (the host has no more frames: what is
/// queued is still delivered, then `next` returns nil) and `close()`
/// (the take is over: everything queued is dropped, pushes fail with
/// `.closed`, blocked pushes wake up).
///
/// Timestamps must increase strictly; `push` checks this under the same lock
/// that queues the frame, so the order the session sees is the order checked.
/// Safe to use from any thread.
final class PushSource: TakeInput, @unchecked Sendable {
    enum Outcome: Equatable {
        case accepted
        case wouldBlock
        /// The take is over (`close()`), or the host ended the stream.
        case closed
        /// `pts` is not after the previous frame's.
        case outOfOrder(previous: MediaTime)
        /// A blocking push found the queue full of frames later than the
        /// leader's last one (`leaderLast`, nil before its first), and the
        /// leader pushed nothing for `patience` seconds: only the leader's
        /// frames can make room, and a host that pushes both streams from
        /// one thread would wait forever.
        case aheadOfLeader(leaderLast: MediaTime?)
    }

    /// For the secondary: the primary, whose frames the take waits for
    /// before it takes later secondary frames.
    var leader: PushSource?
    /// How long a blocking push waits on a queue ahead of `leader` that
    /// `leader` does not move (seconds).
    var patience = 2.0

    let info: SourceInfo
    let capacity: Int
    private let condition = NSCondition()
    private var items: [InputFrame] = []
    private var head = 0
    private var ended = false
    private var closed = false
    private var lastPTS: MediaTime?
    private var _firstPTS: MediaTime?
    private var _accepted = 0

    init(name: String, size: PixelSize, frameRate: FrameRate, capacity: Int) {
        precondition(capacity > 0, "PushSource capacity must be positive")
        info = SourceInfo(name: name, size: size, frameRate: frameRate, pixelFormat: .rgba,
                          nativeFormat: "pushed", codec: "pushed")
        self.capacity = capacity
    }

    private var count: Int { items.count - head }

    /// The first accepted frame's timestamp (the take's zero).
    var firstPTS: MediaTime? { condition.lock(); defer { condition.unlock() }; return _firstPTS }
    /// The last accepted frame's timestamp.
    var lastAcceptedPTS: MediaTime? { condition.lock(); defer { condition.unlock() }; return lastPTS }
    var acceptedCount: Int { condition.lock(); defer { condition.unlock() }; return _accepted }
    var isOpen: Bool { condition.lock(); defer { condition.unlock() }; return !ended && !closed }
    /// Whether a push now would find the queue full (a hint: another thread may take or add a frame).
    var isFull: Bool { condition.lock(); defer { condition.unlock() }; return count >= capacity && !ended && !closed }

    /// Queues `frame`. With `wait`, blocks while the queue is full (until a
    /// frame is taken or the source closes).
    func push(_ frame: InputFrame, wait: Bool) -> Outcome {
        condition.lock(); defer { condition.unlock() }
        if closed || ended { return .closed }
        if let last = lastPTS, frame.pts <= last { return .outOfOrder(previous: last) }
        var leaderSeen = leader?.acceptedCount, since = Date()
        while count >= capacity && !closed && !ended {
            if !wait { return .wouldBlock }
            guard let leader else { condition.wait(); continue }
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.05))
            let (accepted, last) = (leader.acceptedCount, leader.lastAcceptedPTS)
            if accepted != leaderSeen { leaderSeen = accepted; since = Date(); continue }
            let oldest = count > 0 ? items[head].pts : nil
            if let oldest, last.map({ oldest > $0 }) ?? true, Date().timeIntervalSince(since) >= patience, count >= capacity {
                return .aheadOfLeader(leaderLast: last)
            }
        }
        // A push still waiting when the stream ends (finish) is refused, not queued.
        if closed || ended { return .closed }
        // Checked again: another thread may have pushed while this one waited.
        if let last = lastPTS, frame.pts <= last { return .outOfOrder(previous: last) }
        items.append(frame)
        lastPTS = frame.pts
        if _firstPTS == nil { _firstPTS = frame.pts }
        _accepted += 1
        condition.broadcast()
        return .accepted
    }

    /// The host has no more frames for this stream.
    func endStream() {
        condition.lock(); ended = true; condition.broadcast(); condition.unlock()
    }

    var audioTrack: AudioTrack? { nil }

    func next() throws(MediaError) -> InputFrame? {
        condition.lock(); defer { condition.unlock() }
        while count == 0 && !ended && !closed { condition.wait() }
        guard !closed, count > 0 else { return nil }
        let f = items[head]
        head += 1
        if head > 64 && head * 2 > items.count { items.removeFirst(head); head = 0 }
        condition.broadcast()
        return f
    }

    /// The take is over: drops what is queued and fails every push. Idempotent.
    func close() {
        condition.lock()
        closed = true
        items.removeAll(); head = 0
        condition.broadcast()
        condition.unlock()
    }
}
