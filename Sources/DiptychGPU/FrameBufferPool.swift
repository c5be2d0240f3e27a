import DiptychCore
import Foundation

/// Reusable CPU buffers for delivered frames, so a steady stream of NV12
/// readbacks does not allocate (and page-fault) megabytes per frame.
/// Thread-safe: a frame's storage goes back to the pool from whichever thread
/// drops the last reference.
final class FrameBufferPool: @unchecked Sendable {
    private let lock = NSLock()
    private var free: [Int: [UnsafeMutableRawPointer]] = [:]
    private var held = 0
    /// Free buffers kept per size.
    let keep: Int

    init(keep: Int = 8) { self.keep = keep }

    /// Storage of `count` bytes filled by `fill`; its memory returns to the pool on release.
    func storage(count: Int, fill: (UnsafeMutableRawPointer) -> Void) -> FrameStorage {
        lock.lock()
        let p = free[count]?.popLast()
        lock.unlock()
        let base = p ?? UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64)
        fill(base)
        let address = UInt(bitPattern: base)
        return FrameStorage(base: UnsafeRawPointer(base), count: count,
                            release: { [self] in give(UnsafeMutableRawPointer(bitPattern: address)!, count) })
    }

    private func give(_ p: UnsafeMutableRawPointer, _ count: Int) {
        lock.lock()
        if free[count, default: []].count < keep {
            free[count, default: []].append(p)
            lock.unlock()
        } else {
            lock.unlock()
            p.deallocate()
        }
    }

    deinit { for list in free.values { for p in list { p.deallocate() } } }
}
