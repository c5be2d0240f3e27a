import Foundation
import Testing
@testable import Diptych
import DiptychMedia

/// The queue between a reader and the render loop and between the render
/// loop and an encoder: order, backpressure, and that a popped frame is not
/// kept alive by the queue (a frame pins a decoder buffer or a pool buffer).
@Suite struct BoundedQueueTests {
    final class Payload: @unchecked Sendable {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    @Test func firstInFirstOutAcrossManyWrapArounds() {
        let q = BoundedQueue<Int>(capacity: 3)
        var next = 0, expected = 0
        for round in 0..<200 {
            for _ in 0..<(1 + round % 3) where q.tryPush(next) { next += 1 }
            while let v = q.tryPop() {
                #expect(v == expected)
                expected += 1
            }
        }
        #expect(expected == next)
        #expect(next > 300)
    }

    @Test func aPoppedElementIsReleasedAtOnce() {
        let q = BoundedQueue<Payload>(capacity: 4)
        weak var watched: Payload?
        do {
            let p = Payload(1)
            watched = p
            #expect(q.push(p))
        }
        #expect(watched != nil)
        do {
            let popped = q.pop(timeout: 0)
            #expect(popped?.n == 1)
        }
        // Only the consumer held it: gone once its last reference is.
        #expect(watched == nil)
        // Nothing popped stays behind however many go through.
        var released = 0
        for i in 0..<100 {
            weak var w: Payload?
            do { let p = Payload(i); w = p; q.push(p) }
            do { _ = q.pop(timeout: 0) }
            if w == nil { released += 1 }
        }
        #expect(released == 100)
    }

    /// Waiting for an element wakes on a push or a close, not a poll, and leaves the element there.
    @Test func waitForElementWakesOnPushAndCloseWithoutTaking() {
        let q = BoundedQueue<Int>(capacity: 2)
        #expect(!q.waitForElement(timeout: 0.01))
        let pusher = Thread { Thread.sleep(forTimeInterval: 0.05); q.push(7) }
        pusher.start()
        #expect(q.waitForElement(timeout: 10))
        #expect(q.tryPop() == 7)
        let closer = Thread { Thread.sleep(forTimeInterval: 0.05); q.close() }
        closer.start()
        #expect(q.waitForElement(timeout: 10))
        #expect(q.isClosed && q.tryPop() == nil)
    }

    @Test func fullQueueRefusesTryPushAndCloseDrainsThenEnds() {
        let q = BoundedQueue<Int>(capacity: 2)
        #expect(q.tryPush(1))
        #expect(q.tryPush(2))
        #expect(!q.tryPush(3))
        q.close()
        #expect(!q.push(4))
        #expect(q.pop() == 1)
        #expect(q.pop() == 2)
        #expect(q.pop() == nil)
    }

    @Test func closeAndDiscardReleasesWhatWasQueued() {
        let q = BoundedQueue<Payload>(capacity: 3)
        weak var watched: Payload?
        do { let p = Payload(7); watched = p; q.push(p) }
        q.closeAndDiscard()
        #expect(watched == nil)
        #expect(q.pop() == nil)
    }

    @Test func aBlockedPushResumesWhenTheConsumerPops() {
        let q = BoundedQueue<Int>(capacity: 1)
        q.push(0)
        let pushed = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { q.push(1); pushed.signal() }
        #expect(pushed.wait(timeout: .now() + 0.1) == .timedOut)
        #expect(q.pop() == 0)
        #expect(pushed.wait(timeout: .now() + 5) == .success)
        #expect(q.pop() == 1)
    }

    /// A `WakeSignal` wakes its waiter at the ring, and a ring made after
    /// the waiter read `rings` (while it looked at what it waits for) still does.
    @Test func aWakeSignalWakesAtTheRingAndKeepsAnEarlierOne() {
        let w = WakeSignal()
        let seen = w.rings
        #expect(!w.wait(after: seen, timeout: 0.01))
        w.ring()
        #expect(w.wait(after: seen, timeout: 0))
        let now = w.rings
        let start = Date()
        let ringer = Thread { Thread.sleep(forTimeInterval: 0.05); w.ring() }
        ringer.start()
        #expect(w.wait(after: now, timeout: 10))
        #expect(Date().timeIntervalSince(start) < 5)
    }

    /// A reader made with a `WakeSignal` rings it when it queues an event and when it closes its queue.
    @Test func aReaderRingsItsWakeSignal() {
        let w = WakeSignal()
        let seen = w.rings
        let r = SourceReader(opening: .url("nowhere.mp4"), duration: nil, wake: w) { spec, _, _ throws(MediaError) in
            throw .fileNotFound(path: spec.description)
        }
        defer { r.stop() }
        #expect(w.wait(after: seen, timeout: 10))
        #expect(r.queue.waitForElement(timeout: 10))
        guard case .failed(.fileNotFound)? = r.queue.tryPop() else { Issue.record("no failure queued"); return }
        // It rang twice: the event and the close.
        var rings = w.rings
        while rings - seen < 2, w.wait(after: rings, timeout: 10) { rings = w.rings }
        #expect(rings - seen == 2)
    }
}
