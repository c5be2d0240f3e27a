import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Watched fences (docs/ARCHITECTURE.md, "The render thread's waits"): GL
/// sync objects the render thread polls, setting the flags that callers on
/// any thread read and wait on. On llvmpipe.
@Suite struct WatchedFenceRules {
    /// The render thread's wait for a fence retires it and every older one
    /// (one context's fences signal in order), flags set and syncs deleted.
    @Test func aWaitRetiresEveryOlderFence() throws {
        let c = try makeCompositor()
        defer { c.shutdown() }
        let (done, pendingBefore, pendingAfter) = try c.withRenderer { _ -> ([Bool], Int, Int) in
            let watch = RenderThread.currentWatch
            let fences = (0..<3).compactMap { _ in watch.insert() }
            let before = watch.inFlight
            watch.wait(for: fences[2])
            return (fences.map(\.isDone), before, watch.inFlight)
        }
        #expect(done == [true, true, true])
        #expect(pendingBefore >= 3 && pendingAfter == 0, "\(pendingBefore) pending before the wait, \(pendingAfter) after")
    }

    /// A caller on another thread learns of a watched fence through its flag
    /// alone: it queries and waits without a hop, and the render thread's
    /// polls, idle or between items, set the flag.
    @Test func callersElsewhereWaitOnTheFlag() throws {
        let c = try makeCompositor()
        defer { c.shutdown() }
        let ops = FenceOps.watched
        let hops = c.renderThreadHops
        let handles = try c.withRenderer { _ -> [UInt] in
            (0..<4).compactMap { _ in ops.insert().map { UInt(bitPattern: $0) } }
        }
        #expect(c.renderThreadHops - hops == 1)
        let waited = DispatchGroup()
        DispatchQueue.global().async(group: waited) {
            for h in handles { ops.wait(OpaquePointer(bitPattern: h)!) }
        }
        #expect(waited.wait(timeout: .now() + 30) == .success, "a caller's wait never ended")
        for h in handles {
            let p = OpaquePointer(bitPattern: h)!
            #expect(ops.isSignalled(p))
            ops.delete(p)
        }
        #expect(c.renderThreadHops - hops == 1, "waiting made a hop")
    }
}
