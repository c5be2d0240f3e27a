import Foundation

/// A blocking FIFO with a fixed capacity: `push` waits while it is full
/// (backpressure), `pop` waits while it is empty. `close()` wakes every waiter;
/// after it, `push` drops its element and `pop` drains what is left, then
/// returns nil. Safe to use from any thread.
///
/// A ring of `capacity` slots: a popped element's slot is cleared at once, so
/// the queue never keeps a frame (and the decoder or pool buffer behind it)
/// alive after its consumer has taken it.
final class BoundedQueue<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    private var slots: [Element?]
    private var head = 0
    private var count = 0
    private(set) var isClosed = false
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0, "BoundedQueue capacity must be positive")
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
    }

    private func appendLocked(_ element: Element) {
        slots[(head + count) % capacity] = element
        count += 1
        condition.broadcast()
    }

    /// Appends `element`, waiting while the queue is full. Returns false if
    /// the queue was closed (the element is dropped).
    @discardableResult
    func push(_ element: Element) -> Bool {
        condition.lock(); defer { condition.unlock() }
        while count >= capacity && !isClosed { condition.wait() }
        if isClosed { return false }
        appendLocked(element)
        return true
    }

    /// Appends `element` only if there is room now. False when full or closed
    /// (the element is dropped).
    func tryPush(_ element: Element) -> Bool {
        condition.lock(); defer { condition.unlock() }
        if isClosed || count >= capacity { return false }
        appendLocked(element)
        return true
    }

    /// Removes the oldest element, waiting while the queue is empty and open.
    /// Returns nil once the queue is closed and drained, or when `timeout`
    /// (seconds) passes with nothing to take.
    func pop(timeout: Double? = nil) -> Element? {
        condition.lock(); defer { condition.unlock() }
        let deadline = timeout.map { Date(timeIntervalSinceNow: $0) }
        while count == 0 && !isClosed {
            if let deadline {
                if !condition.wait(until: deadline) && count == 0 { return nil }
            } else {
                condition.wait()
            }
        }
        return removeFirstLocked()
    }

    /// Waits until the queue holds an element or is closed, or `timeout`
    /// (seconds) passes, without taking anything. True when an element is
    /// there or the queue is closed.
    @discardableResult
    func waitForElement(timeout: Double) -> Bool {
        condition.lock(); defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while count == 0 && !isClosed {
            if !condition.wait(until: deadline) { break }
        }
        return count > 0 || isClosed
    }

    /// Removes the oldest element if there is one, without waiting.
    func tryPop() -> Element? {
        condition.lock(); defer { condition.unlock() }
        return removeFirstLocked()
    }

    /// Takes the oldest element while the lock is held, clearing its slot.
    private func removeFirstLocked() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head]
        slots[head] = nil
        head = (head + 1) % capacity
        count -= 1
        condition.broadcast()
        return element
    }

    /// Closes the queue: pending and future pushes fail, pops drain then return nil.
    func close() {
        condition.lock(); isClosed = true; condition.broadcast(); condition.unlock()
    }

    /// Closes the queue and discards everything still in it.
    func closeAndDiscard() {
        condition.lock()
        isClosed = true
        let dropped = slots
        slots = Array(repeating: nil, count: capacity)
        head = 0; count = 0
        condition.broadcast()
        condition.unlock()
        _ = dropped   // released here, outside the lock
    }
}
