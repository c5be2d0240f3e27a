import Foundation
import DiptychCore
import DiptychMedia
import Synchronization

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
final class PushSource: TakeInput, Sendable {
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
    /// before it takes later secondary frames. Each frame it accepts wakes
    /// this source's blocked pushes (`wakeOnAccept`).
    let leader: PushSource?
    /// How long a blocking push waits on a queue ahead of `leader` that
    /// `leader` does not move (seconds).
    let patience: Double

    let info: SourceInfo
    let capacity: Int
    private struct Queue {
        var items: [InputFrame] = []
        var head = 0
        var ended = false
        var closed = false
        var lastPTS: MediaTime?
        var firstPTS: MediaTime?
        var accepted = 0
        var count: Int { items.count - head }
    }
    private let queue = Condition(Queue())
    /// Told after each frame this source accepts (its follower's wake-up).
    private let onAccept = Mutex<(@Sendable () -> Void)?>(nil)

    init(name: String, size: PixelSize, frameRate: FrameRate, capacity: Int, leader: PushSource? = nil, patience: Double = 2.0) {
        precondition(capacity > 0, "PushSource capacity must be positive")
        info = SourceInfo(name: name, size: size, frameRate: frameRate, pixelFormat: .rgba,
                          nativeFormat: "pushed", codec: "pushed")
        self.capacity = capacity
        self.leader = leader
        self.patience = patience
        leader?.onAccept.withLock { $0 = { [weak self] in self?.queue.update { _ in } } }
    }

    /// The first accepted frame's timestamp (the take's zero).
    var firstPTS: MediaTime? { queue.withLock { $0.firstPTS } }
    /// The last accepted frame's timestamp.
    var lastAcceptedPTS: MediaTime? { queue.withLock { $0.lastPTS } }
    var acceptedCount: Int { queue.withLock { $0.accepted } }
    var isOpen: Bool { queue.withLock { !$0.ended && !$0.closed } }
    /// Whether a push now would find the queue full (a hint: another thread may take or add a frame).
    var isFull: Bool { queue.withLock { [capacity] in $0.count >= capacity && !$0.ended && !$0.closed } }

    private enum Step { case done(Outcome), leaderMoved(Int), again }

    /// Queues `frame`. With `wait`, blocks while the queue is full (until a
    /// frame is taken or the source closes); behind a `leader`, also woken
    /// by each frame the leader accepts.
    func push(_ frame: InputFrame, wait: Bool) -> Outcome {
        let (capacity, leader, patience) = (self.capacity, self.leader, self.patience)
        var leaderSeen = leader?.acceptedCount
        var since = ProcessInfo.processInfo.systemUptime
        while true {
            // Behind a leader, the wait also ends when the leader moves, or once when its patience
            // runs out; after that only a taken frame or the leader's next one can change the verdict.
            let remaining = patience - (ProcessInfo.processInfo.systemUptime - since)
            let timeout = leader != nil && remaining > 0 ? remaining : nil
            let step = queue.wait(until: { q in
                q.closed || q.ended || q.count < capacity || !wait || (leader.map { $0.acceptedCount != leaderSeen } ?? false)
            }, timeout: timeout, waking: true) { q, _ -> Step in
                // A push still waiting when the stream ends (finish) is refused, not queued.
                if q.closed || q.ended { return .done(.closed) }
                // Checked again after a wait: another thread may have pushed meanwhile.
                if let last = q.lastPTS, frame.pts <= last { return .done(.outOfOrder(previous: last)) }
                if q.count < capacity {
                    q.items.append(frame)
                    q.lastPTS = frame.pts
                    if q.firstPTS == nil { q.firstPTS = frame.pts }
                    q.accepted += 1
                    return .done(.accepted)
                }
                if !wait { return .done(.wouldBlock) }
                guard let leader else { return .again }
                let (accepted, last) = (leader.acceptedCount, leader.lastAcceptedPTS)
                if accepted != leaderSeen { return .leaderMoved(accepted) }
                let oldest = q.items[q.head].pts
                if last.map({ oldest > $0 }) ?? true, ProcessInfo.processInfo.systemUptime - since >= patience {
                    return .done(.aheadOfLeader(leaderLast: last))
                }
                return .again
            }
            switch step {
            case .done(let outcome):
                if outcome == .accepted { onAccept.withLock { $0 }?() }
                return outcome
            case .leaderMoved(let accepted):
                leaderSeen = accepted
                since = ProcessInfo.processInfo.systemUptime
            case .again:
                continue
            }
        }
    }

    /// The host has no more frames for this stream.
    func endStream() {
        queue.update { $0.ended = true }
    }

    var audioTrack: AudioTrack? { nil }

    func next() throws(MediaError) -> InputFrame? {
        queue.wait(until: { $0.count > 0 || $0.ended || $0.closed }, waking: true) { q, _ -> InputFrame? in
            guard !q.closed, q.count > 0 else { return nil }
            let f = q.items[q.head]
            q.head += 1
            if q.head > 64 && q.head * 2 > q.items.count { q.items.removeFirst(q.head); q.head = 0 }
            return f
        }
    }

    /// The take is over: drops what is queued and fails every push. Idempotent.
    func close() {
        queue.update { q in
            q.closed = true
            q.items.removeAll(); q.head = 0
        }
    }
}
