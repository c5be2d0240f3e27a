import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// The frames of a render-thread batch share one fence, inserted after the
/// batch's last readback; each timeline still completes and releases in order.
@Suite struct SharedFenceRules {
    @Test func aBatchInsertsOneFenceForEveryCompositor() throws {
        let c = try makeCompositor()
        defer { c.shutdown() }
        let fakes = FakeFences(finishGL: false)
        let timelines = (0..<3).map { _ in FenceTimeline(ops: fakes.ops) }
        let log = LogLines()
        var issuedAtFinish: [Int] = []
        let jobs = timelines.enumerated().map { k, t in
            FrameJob(begin: { true }, dispatch: {}, finish: {
                issuedAtFinish.append(fakes.issued)
                let serial = t.pendingSerial
                t.retire(lastUse: serial) { log.add("released \(k)") }
                t.submit()
            })
        }
        try c.withRenderer { _ in FrameJob.run(jobs) }
        #expect(issuedAtFinish == [0, 0, 0], "no fence before the batch's last readback")
        #expect(fakes.issued == 1, "one fence for the batch: \(fakes.issued)")
        for j in jobs { #expect(j.done.wait(timeout: .now()) == .success) }
        for t in timelines { t.poll() }
        #expect(log.all.isEmpty, "released before the fence signalled")
        fakes.signalAll()
        for t in timelines { t.poll() }
        #expect(log.all.sorted() == ["released 0", "released 1", "released 2"])
        #expect(fakes.deletedFences == 1, "the shared fence is deleted once, after the last timeline")
    }

    /// A wait on the render thread inside the batch seals the fence there;
    /// the batch's later submissions get a fence inserted after them.
    @Test func aWaitInsideTheBatchSealsItEarly() throws {
        let c = try makeCompositor()
        defer { c.shutdown() }
        let fakes = FakeFences(finishGL: false)
        let a = FenceTimeline(ops: fakes.ops), b = FenceTimeline(ops: fakes.ops)
        var issued: [Int] = []
        let jobs = [
            FrameJob(begin: { true }, dispatch: {}, finish: { a.submit(); a.wait(for: a.submitted); issued.append(fakes.issued) }),
            FrameJob(begin: { true }, dispatch: {}, finish: { b.submit() })]
        try c.withRenderer { _ in FrameJob.run(jobs) }
        #expect(issued == [1] && fakes.waits == [1], "the wait sealed the first fence and waited for it")
        #expect(fakes.issued == 2, "the second submission came after that fence: its own")
        #expect(a.isComplete(1) && !b.isComplete(1))
        fakes.signalAll()
        #expect(b.isComplete(1))
        #expect(fakes.deletedFences == 2)
    }

    @Test func outsideABatchEverySubmissionHasItsOwnFence() {
        let fakes = FakeFences(finishGL: false)
        let t = FenceTimeline(ops: fakes.ops)
        t.submit(); t.submit()
        #expect(fakes.issued == 2)
        t.wait(for: 2)
        #expect(fakes.deletedFences == 2)
    }

    @Test func aFenceIsDeletedByWhoeverLetsGoLast() {
        let fakes = FakeFences(finishGL: false)
        let a = SharedFence(ops: fakes.ops)
        a.retain(); a.retain()
        #expect(!a.isSignalled, "an unsealed fence has not signalled")
        a.seal()
        a.release()
        #expect(fakes.deletedFences == 0)
        #expect(!a.isSignalled)
        a.wait()
        #expect(a.isSignalled && fakes.waits == [1])
        a.release()
        #expect(fakes.deletedFences == 1)
        // Every user gone before the seal: the seal deletes what it made.
        let b = SharedFence(ops: fakes.ops)
        b.retain(); b.release(); b.seal()
        #expect(fakes.issued == 2 && fakes.deletedFences == 2)
    }
}
