import DiptychCore

/// A blocking FIFO with a fixed capacity: `push` waits while it is full
/// (backpressure), `pop` waits while it is empty. `close()` wakes every waiter;
/// after it, `push` drops its element and `pop` drains what is left, then
/// returns nil. Safe to use from any thread.
///
/// A ring of `capacity` slots: a popped element's slot is cleared at once, so
/// the queue never keeps a frame (and the decoder or pool buffer behind it)
/// alive after its consumer has taken it.
final class BoundedQueue<Element: Sendable>: Sendable {
    private struct Ring {
        var slots: [Element?]
        var head = 0
        var count = 0
        var isClosed = false

        var isFull: Bool { count >= slots.count }

        mutating func append(_ element: Element) {
            slots[(head + count) % slots.count] = element
            count += 1
        }

        /// Takes the oldest element, clearing its slot.
        mutating func removeFirst() -> Element? {
            guard count > 0 else { return nil }
            let element = slots[head]
            slots[head] = nil
            head = (head + 1) % slots.count
            count -= 1
            return element
        }
    }
    private let ring: Condition<Ring>
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0, "BoundedQueue capacity must be positive")
        self.capacity = capacity
        ring = Condition(Ring(slots: Array(repeating: nil, count: capacity)))
    }

    var isClosed: Bool { ring.withLock { $0.isClosed } }

    /// Appends `element`, waiting while the queue is full. Returns false if
    /// the queue was closed (the element is dropped).
    @discardableResult
    func push(_ element: Element) -> Bool {
        ring.wait(until: { !$0.isFull || $0.isClosed }, waking: true) { r, _ -> Bool in
            if r.isClosed { return false }
            r.append(element)
            return true
        }
    }

    /// Appends `element` only if there is room now. False when full or closed
    /// (the element is dropped).
    func tryPush(_ element: Element) -> Bool {
        ring.update { r in
            if r.isClosed || r.isFull { return false }
            r.append(element)
            return true
        }
    }

    /// Removes the oldest element, waiting while the queue is empty and open.
    /// Returns nil once the queue is closed and drained, or when `timeout`
    /// (seconds) passes with nothing to take.
    func pop(timeout: Double? = nil) -> Element? {
        ring.wait(until: { $0.count > 0 || $0.isClosed }, timeout: timeout, waking: true) { r, _ in r.removeFirst() }
    }

    /// Waits until the queue holds an element or is closed, or `timeout`
    /// (seconds) passes, without taking anything. True when an element is
    /// there or the queue is closed.
    @discardableResult
    func waitForElement(timeout: Double) -> Bool {
        ring.wait(until: { $0.count > 0 || $0.isClosed }, timeout: timeout)
    }

    /// Removes the oldest element if there is one, without waiting.
    func tryPop() -> Element? {
        ring.update { $0.removeFirst() }
    }

    /// Closes the queue: pending and future pushes fail, pops drain then return nil.
    func close() {
        ring.update { $0.isClosed = true }
    }

    /// Closes the queue and discards everything still in it.
    func closeAndDiscard() {
        let dropped = ring.update { r -> [Element?] in
            r.isClosed = true
            defer { r.slots = Array(repeating: nil, count: r.slots.count); r.head = 0; r.count = 0 }
            return r.slots
        }
        _ = dropped   // released here, outside the lock
    }
}
