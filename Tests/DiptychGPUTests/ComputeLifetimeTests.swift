import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Fence lifetimes on the compute path: nothing a dispatch, an upload or a
/// readback may still use is deleted, reused or delivered before its fence;
/// callers wait and copy on their own threads; the fallbacks give the same frames.
extension GPU {
    @Suite struct ComputeLifetimes {
        static let canvas = PixelSize(width: 32, height: 16)
        static let plan = CompositionPlan(canvas: canvas, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
            DrawDescription(role: .secondary, destination: PixelRect(x: 16, y: 4, width: 12, height: 8), cornerRadius: 3, zIndex: 1)])

        static func fakeCompositor(_ fences: FakeFences, _ deletions: DeletionLog, uploadDepth: Int? = nil) throws -> GPUCompositor {
            try makeCompositor(hooks: GPUTestHooks(fenceOps: fences.ops, onDelete: deletions.hook), readbackDepth: 2, uploadDepth: uploadDepth)
        }

        @Test func outputTargetsOutliveTheirLastDispatch() throws {
            let fences = FakeFences(finishGL: true), deletions = DeletionLog()
            let c = try Self.fakeCompositor(fences, deletions)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(solidFrame(32, 16, RGBA8(r: 9, g: 9, b: 9)), role: .primary)
            try c.render(output: out, plan: Self.plan, pts: .zero)
            #expect(c.stats.framesCompute == 1)
            let (nv12, rgba) = try c.withRenderer { r in (r.outputs[out]!.nv12Buffer!.buffer, r.outputs[out]!.target.texture) }
            // The readback is not delivered before its fence.
            #expect(try c.nextNV12(wait: false) == nil)
            c.removeOutput(out)
            #expect(!deletions.buffers.contains(nv12) && !deletions.textures.contains(rgba), "deleted while the dispatch may run")
            #expect(try c.withRenderer { _ in glIsBuffer(nv12) != 0 })
            fences.signalAll()
            try c.withRenderer { r in r.timeline.poll() }
            #expect(deletions.buffers.contains(nv12) && deletions.textures.contains(rgba))
            // The frame rendered before the removal still arrives.
            let f = try #require(try c.nextNV12(wait: false))
            #expect(abs(Int(f.byte(plane: 0, 2, 2)) - 24) <= 1)   // BT.709 limited Y of (9, 9, 9)
        }

        @Test func texturesSampledByADispatchOutliveIt() throws {
            let fences = FakeFences(finishGL: true), deletions = DeletionLog()
            let c = try Self.fakeCompositor(fences, deletions)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(solidFrame(32, 16, RGBA8(r: 1, g: 2, b: 3)), role: .secondary)
            try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
            let a = try c.withRenderer { r in r.streams[.secondary]!.current!.textures }
            // Another size replaces the set the dispatch sampled.
            try c.upload(solidFrame(8, 8, RGBA8(r: 4, g: 5, b: 6)), role: .secondary)
            _ = try c.withRenderer { r in r.streams[.secondary]!.current!.textures }
            #expect(deletions.textures.isDisjoint(with: a), "deleted before the dispatch's fence")
            fences.signalAll()
            try c.withRenderer { r in r.timeline.poll() }
            #expect(deletions.textures.isSuperset(of: a))
        }

        @Test func stagingSlotReusedOnlyAfterItsUploadCompleted() throws {
            let fences = FakeFences(finishGL: true), deletions = DeletionLog()
            let c = try Self.fakeCompositor(fences, deletions, uploadDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(solidFrame(32, 16, RGBA8(r: 1, g: 1, b: 1)), role: .primary)
            try c.upload(solidFrame(32, 16, RGBA8(r: 2, g: 2, b: 2)), role: .secondary)
            try c.render(output: out, plan: Self.plan, pts: .zero, readback: false)
            let read = try c.withRenderer { r in r.staging.slots.map(\.lastUse) }
            #expect(read.allSatisfy { $0 > 0 }, "both slots read by the submission: \(read)")
            #expect(fences.waits.isEmpty)
            // A third upload reuses the first slot: only after the submission that read it.
            try c.upload(solidFrame(32, 16, RGBA8(r: 3, g: 3, b: 3)), role: .primary)
            #expect(fences.waits.contains(Int(read[0])), "waited for \(read[0]): \(fences.waits)")
            let img = try renderPreview(c, out, Self.plan)
            #expect(img.rgba(2, 2) == RGBA8(r: 3, g: 3, b: 3))
            #expect(img.rgba(20, 8) == RGBA8(r: 2, g: 2, b: 2))
        }

        /// A staging slot whose last read a hop recorded and nothing fenced
        /// yet: the next upload's hop fences it, and the caller waits for it on
        /// its own thread (watched fences), not the render thread.
        @Test func aSlotReadOutsideAFrameIsFencedThenWaitedForByTheCaller() throws {
            let c = try makeCompositor(readbackDepth: 2, uploadDepth: 2)
            defer { c.shutdown() }
            #expect(c.plan.staging == .mappedBuffers && c.plan.fences == .watched, "\(c.plan)")
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(solidFrame(32, 16, RGBA8(r: 1, g: 1, b: 1)), role: .primary)
            try c.upload(solidFrame(32, 16, RGBA8(r: 2, g: 2, b: 2)), role: .secondary)
            _ = c.stats   // a hop: both staged pictures become textures there, read by work not yet fenced
            let (read, submitted) = try c.withRenderer { r in (r.staging.slots.map(\.lastUse), r.timeline.submitted) }
            #expect(read.allSatisfy { $0 > submitted }, "read by \(read), fenced up to \(submitted)")
            let hops = c.renderThreadHops
            try c.upload(solidFrame(32, 16, RGBA8(r: 3, g: 3, b: 3)), role: .primary)
            #expect(c.renderThreadHops - hops == 1, "\(c.renderThreadHops - hops) hops: one to fence the slot's read")
            #expect(try c.withRenderer { r in r.timeline.submitted } >= read[0])
            let img = try renderPreview(c, out, Self.plan)
            #expect(img.rgba(2, 2) == RGBA8(r: 3, g: 3, b: 3))
            #expect(img.rgba(20, 8) == RGBA8(r: 2, g: 2, b: 2))
        }

        /// With EGL fences and persistently mapped buffers, a steady stream of
        /// `composite` calls makes one render-thread hop a frame (the render);
        /// uploads, fence waits and deliveries happen on the caller's thread.
        @Test func oneHopPerFrameOnTheCallersPath() throws {
            let c = try makeCompositor(readbackDepth: 3)
            defer { c.shutdown() }
            #expect(c.plan.staging == .mappedBuffers && c.plan.readback == .mappedBuffers && c.plan.fences == .watched, "\(c.plan)")
            let out = try c.addOutput(canvas: Self.canvas, range: .full)
            var got: [VideoFrame] = []
            func frame(_ i: Int) throws {
                let g = UInt8(i * 20)
                got += try c.composite(uploads: [(solidFrame(32, 16, RGBA8(r: g, g: g, b: g)), .primary),
                                                 (solidFrame(12, 8, RGBA8(r: 255, g: 0, b: 0)), .secondary)],
                                       output: out, plan: Self.plan, pts: MediaTime(value: Int64(i), timescale: 30))
            }
            for i in 0..<4 { try frame(i) }   // staging and readback buffers made
            let hops = c.renderThreadHops, load0 = c.renderThreadLoad
            for i in 4..<10 { try frame(i) }
            #expect(c.renderThreadHops - hops == 6, "\(c.renderThreadHops - hops) hops for 6 frames")
            // The statistics as the last frame left them come without a hop (a server's take views read them so).
            let polled = c.lastPolledStats
            #expect(c.renderThreadHops - hops == 6 && polled.framesRendered == 10, "\(c.renderThreadHops - hops) hops; \(polled.framesRendered) frames")
            // The render thread's load counts those six frames, the time it ran them and its CPU time
            // (an item is counted once it has run: the next hop makes sure the last frame's has).
            _ = c.stats
            let load = c.renderThreadLoad - load0
            #expect(load.items >= 6 && load.wakeups >= 1 && load.wakeups <= load.items, "\(load)")
            #expect(load.busySeconds > 0 && load.cpuSeconds > 0 && load0.cpuSeconds > 0, "\(load)")
            // llvmpipe has timer queries: the frames' batches are timed on the GPU as their timestamps arrive
            // (the six here, and those before them whose timestamps came late).
            #expect(load.gpuBatches >= 1 && load.gpuBatchSeconds > 0 && load.gpuIdleSeconds >= 0, "\(load)")
            #expect(load.gpuEncoderSeconds == 0 && load.gpuEncodedPictures == 0, "no GPU encoder here: \(load)")
            #expect(load.gpuUploadSeconds >= 0 && load.gpuUploadSeconds <= load.gpuBatchSeconds, "\(load)")
            let before = c.renderThreadHops
            while let f = try c.nextNV12(wait: true) { got.append(f) }
            #expect(c.renderThreadHops == before, "waiting for and delivering readbacks made a hop")
            #expect(got.map(\.pts.value) == Array(0..<10))
            for (i, f) in got.enumerated() { #expect(abs(Int(f.byte(plane: 0, 1, 1)) - i * 20) <= 1, "frame \(i)") }
        }

        /// Host-memory staging with mapped readbacks (no GL_EXT_buffer_storage),
        /// GL fences waited for on the render thread (no EGL_KHR_fence_sync)
        /// and GL fences the render thread polls for the callers' threads
        /// give exactly the frames of the default path.
        @Test func fallbacksGiveTheSameFrames() throws {
            let primary = ComputePath.picture(32, 16, .nv12, seed: 3), secondary = ComputePath.picture(24, 16, .i420, seed: 4)
            var results: [[VideoFrame]] = []
            let probe = try makeCompositor(readbackDepth: 2)
            let planned = probe.plan
            probe.shutdown()
            let kinds: [(Bool, GPUTuning.Fences)] = [(true, .egl), (false, .egl), (true, .gl), (false, .gl), (true, .watched), (false, .watched)]
            for (persistent, fences) in kinds {
                var p = planned
                p.staging = persistent ? .mappedBuffers : .clientMemory
                p.readback = persistent ? .mappedBuffers : .mapOnRenderThread
                p.fences = fences
                let c = try makeCompositor(plan: p, readbackDepth: 2)
                defer { c.shutdown() }
                #expect(c.plan == p)
                let lanes = try c.withRenderer { r in (r.staging.persistent, r.readbacks.persistent, r.timeline.canWaitOffThread) }
                #expect(lanes == (persistent, persistent, fences != .gl), "\(lanes)")
                let out = try c.addOutput(canvas: Self.canvas)
                var frames: [VideoFrame] = []
                for i in 0..<5 {
                    frames += try c.composite(uploads: [(primary, .primary), (secondary, .secondary)], output: out,
                                              plan: Self.plan, pts: MediaTime(value: Int64(i), timescale: 30))
                }
                frames += try c.flush()
                #expect(frames.count == 5)
                results.append(frames)
            }
            for k in 1..<results.count {
                for (a, b) in zip(results[0], results[k]) {
                    #expect(ComputePath.nv12Difference(a, b).0 == 0, "configuration \(k) differs")
                }
            }
        }

        /// A batch of frames runs phase by phase: every begin, then the dispatches
        /// of the frames that continue, then their finishes; a failure ends only its frame.
        @Test func frameBatchRunsPhaseByPhase() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let log = LogLines()
            func job(_ name: String, continues: Bool = true, failIn: String? = nil) -> FrameJob {
                FrameJob(begin: { () throws(GPUError) -> Bool in
                    log.add("\(name).begin")
                    if failIn == "begin" { throw .badCanvas(name) }
                    return continues
                }, dispatch: { () throws(GPUError) in
                    log.add("\(name).dispatch")
                    if failIn == "dispatch" { throw .badCanvas(name) }
                }, finish: { () throws(GPUError) in log.add("\(name).finish") })
            }
            let jobs = [job("a"), job("b", continues: false), job("c", failIn: "begin"), job("d", failIn: "dispatch"), job("e")]
            try c.withRenderer { _ in FrameJob.run(jobs) }
            #expect(log.all == ["a.begin", "b.begin", "c.begin", "d.begin", "e.begin", "a.dispatch", "d.dispatch", "e.dispatch",
                                "a.finish", "e.finish"])
            #expect(jobs.map { $0.error } == [nil, nil, .badCanvas("c"), .badCanvas("d"), nil])
            for j in jobs { #expect(j.waitUntilDone(timeout: 0), "every waiter released") }
        }

        /// Compositors sharing one context, driven from their own threads at
        /// once: every frame comes back to its own compositor, in order, with
        /// its own pixels, whichever fences the context's render thread keeps.
        @Test(arguments: GPUTuning.Fences.allCases)
        func sharedCompositorsOnManyThreads(fences: GPUTuning.Fences) throws {
            let probe = try makeCompositor(readbackDepth: 3)
            var p = probe.plan
            probe.shutdown()
            p.fences = fences
            p.tuning.fences = fences
            let root = try makeCompositor(plan: p, readbackDepth: 3)
            let others = try (0..<3).map { _ in try GPUCompositor(sharingContextOf: root, readbackDepth: 3, pass: .compute) }
            let all = [root] + others
            defer { for c in others { c.shutdown() }; root.shutdown() }
            let errors = LogLines()
            DispatchQueue.concurrentPerform(iterations: all.count) { k in
                let c = all[k]
                do {
                    let out = try c.addOutput(canvas: Self.canvas, range: .full)
                    var got: [VideoFrame] = []
                    for i in 0..<12 {
                        let v = UInt8(k * 60 + i)
                        got += try c.composite(uploads: [(solidFrame(32, 16, RGBA8(r: v, g: v, b: v)), .primary)], output: out,
                                               plan: CompositionPlan(canvas: Self.canvas, draws: [Self.plan.draws[0]]),
                                               pts: MediaTime(value: Int64(i), timescale: 30))
                    }
                    got += try c.flush()
                    if got.map(\.pts.value) != Array(0..<12) { errors.add("compositor \(k): order \(got.map(\.pts.value))") }
                    for (i, f) in got.enumerated() where abs(Int(f.byte(plane: 0, 5, 5)) - (k * 60 + i)) > 1 {
                        errors.add("compositor \(k) frame \(i): Y \(f.byte(plane: 0, 5, 5))")
                    }
                } catch { errors.add("compositor \(k): \(error)") }
            }
            #expect(errors.all == [])
        }
    }
}
