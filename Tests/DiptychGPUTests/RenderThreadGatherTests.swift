import Foundation
import Synchronization
import Testing
@testable import DiptychGPU

/// While the GPU is behind on encoded pictures, a batch waits for frames to
/// join it (`RenderThread.gather`); while it keeps up, frames never wait.
/// The frames here do no GL work (each says at once it is complete).
@Suite struct RenderThreadGatherTests {
    /// Calls made from threads of their own, waited for, their errors kept.
    final class Background: Sendable {
        private let group = DispatchGroup()
        private let failures = Mutex<[String]>([])
        /// Runs `body` on a thread of its own after `delay` seconds.
        func after(_ delay: Double, _ body: @escaping @Sendable () throws -> Void) {
            group.enter()
            Thread { [self] in
                Thread.sleep(forTimeInterval: delay)
                do { try body() } catch { failures.withLock { $0.append("\(error)") } }
                group.leave()
            }.start()
        }
        /// Waits for every call; their errors.
        func errors() -> [String] { group.wait(); return failures.withLock { $0 } }
    }

    /// One frame submitted at once and `later` frames from their own threads 2 ms after; the load once all have run.
    func submit(_ t: RenderThread, later: Int) throws -> RenderThreadLoad {
        let others = Background()
        for _ in 0..<later { others.after(0.002) { try t.syncFrame(FrameJob(begin: { false }, dispatch: {}, finish: {})) } }
        try t.syncFrame(FrameJob(begin: { false }, dispatch: {}, finish: {}))
        #expect(others.errors() == [])
        // The load is counted just after the frames are released.
        while t.load.snapshot.items < later + 1 { Thread.sleep(forTimeInterval: 0.001) }
        return t.load.snapshot
    }

    /// Limits long enough that only a full batch, the GPU catching up or work for the thread ends a wait.
    static let long: UInt64 = 60_000_000_000

    @Test func framesJoinABatchWhileTheGPUIsBehind() throws {
        let t = RenderThread(name: "gather-test", maxBatch: 4, behind: { true }, gatherLimit: Self.long)
        defer { t.stop() }
        let load = try submit(t, later: 3)
        #expect(load.items == 4 && load.wakeups == 1, "one batch of four: \(load.items) items, \(load.wakeups) wake-ups")
        #expect((load.phaseSeconds["gather"] ?? 0) > 0.001)
    }

    @Test func aFrameDoesNotWaitWhileTheGPUKeepsUp() throws {
        let t = RenderThread(name: "gather-test", maxBatch: 4, behind: { false }, gatherLimit: Self.long)
        defer { t.stop() }
        let start = DispatchTime.now().uptimeNanoseconds
        try t.syncFrame(FrameJob(begin: { false }, dispatch: {}, finish: {}))
        let waited = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        #expect(waited < 30 && t.load.snapshot.phaseSeconds["gather"] == nil, "\(waited) s")
    }

    /// Work queued for the thread (a call waiting on it) ends the wait at once.
    @Test func workEndsTheWait() throws {
        let t = RenderThread(name: "gather-test", maxBatch: 4, behind: { true }, gatherLimit: Self.long)
        defer { t.stop() }
        let start = DispatchTime.now().uptimeNanoseconds
        let call = Background()
        call.after(0.01) { try t.sync { () throws(GPUError) in } }
        try t.syncFrame(FrameJob(begin: { false }, dispatch: {}, finish: {}))
        let waited = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        #expect(waited < 30, "the frame waited \(waited) s of a 60 s limit")
        #expect(call.errors() == [], "the call ran")
    }

    /// With no frame to join it, a frame waits `gatherLimit` at most.
    @Test func aFrameWaitsAtMostTheLimit() throws {
        let t = RenderThread(name: "gather-test", maxBatch: 4, behind: { true })
        defer { t.stop() }
        let start = DispatchTime.now().uptimeNanoseconds
        try t.syncFrame(FrameJob(begin: { false }, dispatch: {}, finish: {}))
        let waited = DispatchTime.now().uptimeNanoseconds - start
        #expect(waited >= RenderThread.gatherLimit && waited < 60 * RenderThread.gatherLimit, "\(Double(waited) / 1e6) ms")
    }
}
