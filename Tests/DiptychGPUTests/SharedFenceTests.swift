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
        for j in jobs { #expect(j.waitUntilDone(timeout: 0)) }
        for t in timelines { t.poll() }
        #expect(log.all.isEmpty, "released before the fence signalled")
        fakes.signalAll()
        timelines[0].poll(); timelines[1].poll()
        #expect(log.all.sorted() == ["released 0", "released 1"])
        #expect(fakes.deletedFences == 0, "deleted while a timeline still holds it")
        timelines[2].poll()
        #expect(log.all.sorted() == ["released 0", "released 1", "released 2"])
        #expect(fakes.deletedFences == 1, "the shared fence is deleted once, by the last timeline")
    }

    /// No waiter is released before the batch's fence exists, a frame whose
    /// finish fails is released after it too (with its error), and fences of
    /// another kind get a fence of their own.
    @Test func waitersAreReleasedAfterTheFence() throws {
        let c = try makeCompositor()
        defer { c.shutdown() }
        /// Read and written on the render thread only, while the test waits.
        final class Seen: @unchecked Sendable { var jobs: [FrameJob] = []; var releasedEarly: [Int] = [] }
        let seen = Seen()
        let fakes = FakeFences(finishGL: false), other = FakeFences(finishGL: false)
        var ops = fakes.ops
        let insert = ops.insert
        ops.insert = {
            for (k, j) in seen.jobs.enumerated() where j.waitUntilDone(timeout: 0) {
                seen.releasedEarly.append(k)
            }
            return insert()
        }
        let a = FenceTimeline(ops: ops), b = FenceTimeline(ops: ops), x = FenceTimeline(ops: other.ops)
        seen.jobs = [
            FrameJob(begin: { true }, dispatch: {}, finish: { a.submit() }),
            FrameJob(begin: { true }, dispatch: {}, finish: { () throws(GPUError) in b.submit(); throw .badCanvas("b") }),
            FrameJob(begin: { true }, dispatch: {}, finish: { x.submit() })]
        let jobs = seen.jobs
        try c.withRenderer { _ in FrameJob.run(jobs) }
        #expect(seen.releasedEarly.isEmpty, "released before their fence: \(seen.releasedEarly)")
        #expect(fakes.issued == 1 && other.issued == 1, "one fence of each kind: \(fakes.issued), \(other.issued)")
        #expect(jobs.map(\.error) == [nil, .badCanvas("b"), nil])
        for j in jobs { #expect(j.waitUntilDone(timeout: 0), "every waiter released") }
        fakes.signalAll()
        #expect(a.isComplete(1) && b.isComplete(1) && !x.isComplete(1))
    }

    /// Several threads query, wait for and let go of one fence at once: it
    /// is waited for at most once per thread, deleted exactly once, after the last.
    @Test func manyThreadsShareOneFence() {
        final class Counts: @unchecked Sendable {
            let lock = NSLock()
            var signalled = false, deletes = 0, waits = 0
        }
        let counts = Counts()
        let ops = FenceOps(insert: { OpaquePointer(bitPattern: 1) },
                           isSignalled: { _ in counts.lock.withLock { counts.signalled } },
                           wait: { _ in counts.lock.withLock { counts.waits += 1; counts.signalled = true } },
                           delete: { _ in counts.lock.withLock { counts.deletes += 1 } }, anyThread: true, kind: "threads")
        let f = SharedFence(ops: ops)
        let n = 16
        for _ in 0..<n { f.retain() }
        f.seal()
        DispatchQueue.concurrentPerform(iterations: n) { k in
            if k % 2 == 0 { f.wait() } else { while !f.isSignalled { f.wait() } }
            #expect(f.isSignalled)
            f.release()
        }
        #expect(counts.deletes == 1)
        #expect(counts.waits >= 1 && counts.waits <= n)
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
        // Every user gone before the seal: the seal deletes what it made,
        // and the fence counts as signalled without touching it again.
        let b = SharedFence(ops: fakes.ops)
        b.retain(); b.release(); b.seal()
        #expect(fakes.issued == 2 && fakes.deletedFences == 2)
        #expect(b.isSignalled)
        b.seal()
        #expect(fakes.issued == 2, "sealed once")
    }
}
