import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Records every deletion the renderer makes.
final class DeletionLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(GLResourceKind, [UInt32])] = []
    var hook: @Sendable (GLResourceKind, [UInt32]) -> Void { { [self] k, ids in lock.lock(); entries.append((k, ids)); lock.unlock() } }
    var textures: Set<UInt32> { ids(.texture) }
    var buffers: Set<UInt32> { ids(.buffer) }
    func ids(_ kind: GLResourceKind) -> Set<UInt32> { lock.lock(); defer { lock.unlock() }; return Set(entries.filter { $0.0 == kind }.flatMap(\.1)) }
}

extension GPU {
    @Suite struct Lifetimes {
        @Test func textureReleasedInFlightOutlivesItsFence() throws {
            let fences = FakeFences(finishGL: true)
            let deletions = DeletionLog()
            // readbackDepth 1: three texture sets per role (staging deep enough never to wait).
            let c = try makeCompositor(hooks: GPUTestHooks(fenceOps: fences.ops, onDelete: deletions.hook), readbackDepth: 1, uploadDepth: 8)
            defer { c.shutdown() }
            #expect(try c.withRenderer { $0.maxSetsPerRole } == 3)
            let canvas = PixelSize(width: 32, height: 32)
            let out = try c.addOutput(canvas: canvas)
            let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])
            func current() throws -> (textures: [UInt32], lastUse: UInt64) {
                try c.withRenderer { r in (r.streams[.primary]!.current!.textures, r.streams[.primary]!.current!.lastUse) }
            }
            func isTexture(_ t: UInt32) throws -> Bool { try c.withRenderer { _ in glIsTexture(t) != 0 } }

            // A is drawn by a submitted frame whose fence has not signalled.
            try c.upload(solidFrame(32, 32, RGBA8(r: 1, g: 2, b: 3)), role: .primary)
            try c.render(output: out, plan: plan, pts: .zero, readback: false)
            let a = try current()
            // B (another size) replaces A: A is released while in flight.
            try c.upload(solidFrame(16, 16, RGBA8(r: 4, g: 5, b: 6)), role: .primary)
            let b = try current()
            #expect(Set(a.textures).isDisjoint(with: b.textures))
            #expect(deletions.textures.isDisjoint(with: a.textures), "deleted before its fence")
            #expect(try isTexture(a.textures[0]))
            // The fence signals: the next poll deletes A, and only A.
            fences.signalAll()
            try c.withRenderer { r in r.timeline.poll() }
            #expect(deletions.textures == Set(a.textures))

            // Reuse: while B's frame is in flight, new uploads of the same size
            // get fresh textures; once the pool is full the oldest set is reused
            // only after waiting for its fence.
            try c.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16))]), pts: .zero, readback: false)
            let bUse = try current().lastUse
            let waitsBefore = fences.waits.count
            try c.upload(solidFrame(16, 16, RGBA8(r: 7, g: 7, b: 7)), role: .primary)
            let cSet = try current()
            try c.upload(solidFrame(16, 16, RGBA8(r: 8, g: 8, b: 8)), role: .primary)
            let dSet = try current()
            #expect(Set([b.textures[0], cSet.textures[0], dSet.textures[0]]).count == 3)
            #expect(fences.waits.count == waitsBefore, "no wait while the pool had room")
            try c.upload(solidFrame(16, 16, RGBA8(r: 9, g: 9, b: 9)), role: .primary)
            let eSet = try current()
            #expect(eSet.textures == b.textures, "the oldest set (B) is reused")
            #expect(fences.waits.contains(Int(bUse)), "B was reused only after waiting for its fence \(bUse): \(fences.waits)")
            #expect(deletions.textures == Set(a.textures), "pool sets are reused, not deleted")
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16))]))
            #expect(img.rgba(3, 3) == RGBA8(r: 9, g: 9, b: 9))
        }

        @Test func hotSwapChangesSizeAndFormatWithoutStalling() throws {
            // The secondary is replaced mid-take by streams of other sizes and
            // formats; every primary frame still yields exactly one output frame.
            let c = try makeCompositor(readbackDepth: 2)
            defer { c.shutdown() }
            let canvas = PixelSize(width: 32, height: 32)
            let out = try c.addOutput(canvas: canvas, range: .full)
            let pip = PixelRect(x: 16, y: 16, width: 16, height: 16)
            var delivered: [VideoFrame] = []
            let secondaries: [VideoFrame] = [
                solidFrame(32, 16, RGBA8(r: 255, g: 0, b: 0)),
                yuvFrame(16, 32, format: .nv12, matrix: .bt709, range: .full) { _, _ in (255, 128, 128) },
                yuvFrame(24, 24, format: .i420, matrix: .bt601, range: .limited) { _, _ in (16, 128, 128) },
                rgbaFrame(8, 8, format: .bgra) { _, _ in RGBA8(r: 0, g: 0, b: 255) },
            ]
            let expected = [RGBA8(r: 255, g: 0, b: 0), RGBA8(r: 255, g: 255, b: 255), RGBA8(r: 0, g: 0, b: 0), RGBA8(r: 0, g: 0, b: 255)]
            for i in 0..<16 {
                try c.upload(solidFrame(32, 32, RGBA8(r: 0, g: 128, b: 0)), role: .primary)
                if i % 4 == 0 { try c.upload(secondaries[i / 4], role: .secondary) }
                let s = secondaries[i / 4]
                let plan = CompositionPlan(canvas: canvas, draws: [
                    DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                    DrawDescription(role: .secondary, destination: pip,
                                    crop: aspectFillCrop(picture: s.size, destination: pip.size), zIndex: 1)])
                try c.render(output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 60))
                #expect(try c.previewRGBA(output: out).rgba(24, 24).close(to: expected[i / 4], within: 1), "frame \(i)")
                while let f = try c.nextNV12(wait: false) { delivered.append(f) }
            }
            delivered += try c.flush()
            #expect(delivered.map(\.pts.value) == Array(0..<16))
        }

        @Test func shutdownDrainsAndDeletesEverything() throws {
            let deletions = DeletionLog()
            let c = try makeCompositor(hooks: GPUTestHooks(onDelete: deletions.hook))
            let out = try c.addOutput(canvas: PixelSize(width: 16, height: 16))
            try c.upload(solidFrame(16, 16, RGBA8(r: 1, g: 1, b: 1)), role: .primary)
            try c.upload(solidFrame(16, 16, RGBA8(r: 1, g: 1, b: 1)), role: .secondary)
            try c.render(output: out, plan: CompositionPlan(canvas: PixelSize(width: 16, height: 16), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16))]), pts: .zero)
            let (live, buffers): (Set<UInt32>, Set<UInt32>) = try c.withRenderer { r in
                var textures: [UInt32] = StreamRole.allCases.flatMap { r.streams[$0]!.pool.flatMap(\.textures) }
                var buffers: [UInt32] = r.readbacks.buffers.map(\.buffer)
                for o in r.outputs.values {
                    textures.append(o.target.texture)
                    if let t = o.nv12 { textures.append(t.texture) }
                    if let b = o.nv12Buffer { buffers.append(b.buffer) }
                }
                buffers += r.staging.slots.map(\.buffer).filter { $0 != 0 }
                return (Set(textures), Set(buffers))
            }
            c.shutdown()
            #expect(live.isSubset(of: deletions.textures))
            #expect(!buffers.isEmpty && buffers.isSubset(of: deletions.buffers), "buffers \(buffers) deleted \(deletions.buffers)")
            #expect(throws: GPUError.shutDown) { try c.upload(solidFrame(4, 4, RGBA8(r: 0, g: 0, b: 0)), role: .primary) }
            c.shutdown()   // idempotent
        }

        @Test func contextLossIsTypedAndFinal() throws {
            let c = try makeCompositor()
            let out = try c.addOutput(canvas: PixelSize(width: 16, height: 16))
            let plan = CompositionPlan(canvas: PixelSize(width: 16, height: 16), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16))])
            try c.upload(solidFrame(16, 16, RGBA8(r: 1, g: 1, b: 1)), role: .primary)
            try c.render(output: out, plan: plan, pts: .zero)
            c.simulateContextLoss()
            #expect(throws: GPUError.contextLost) { try c.render(output: out, plan: plan, pts: .zero) }
            // Everything after a loss reports it; nothing old is reused.
            #expect(throws: GPUError.contextLost) { try c.upload(solidFrame(16, 16, RGBA8(r: 1, g: 1, b: 1)), role: .primary) }
            #expect(throws: GPUError.contextLost) { try c.nextNV12(wait: true) }
            #expect(throws: GPUError.contextLost) { try c.flush() }
            #expect(throws: GPUError.contextLost) { try c.previewRGBA(output: out) }
            #expect(throws: GPUError.contextLost) { try c.addOutput(canvas: PixelSize(width: 8, height: 8)) }
            c.shutdown()
            // The session rebuilds everything: a new compositor works.
            let fresh = try makeCompositor()
            defer { fresh.shutdown() }
            let o2 = try fresh.addOutput(canvas: PixelSize(width: 16, height: 16))
            try fresh.upload(solidFrame(16, 16, RGBA8(r: 5, g: 6, b: 7)), role: .primary)
            #expect(try renderPreview(fresh, o2, plan).rgba(8, 8) == RGBA8(r: 5, g: 6, b: 7))
        }

        @Test func contextLossDuringUploadIsReported() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            c.simulateContextLoss()
            #expect(throws: GPUError.contextLost) { try c.upload(solidFrame(8, 8, RGBA8(r: 1, g: 1, b: 1)), role: .primary) }
        }

        static func badFrames() -> [(String, VideoFrame)] {
            let s = FrameStorage(zeroedCount: 64 * 64 * 4)
            func f(_ w: Int, _ h: Int, _ fmt: PixelFormat, _ strides: [Int], offsets: [Int]? = nil) -> VideoFrame {
                VideoFrame(width: w, height: h, format: fmt,
                           planes: strides.enumerated().map { FramePlane(storage: s, offset: offsets?[$0.offset] ?? 0, stride: $0.element) }, pts: .zero)
            }
            return [
                ("zero size", f(0, 0, .rgba, [0])),
                ("plane(s)", f(16, 16, .nv12, [16])),
                ("plane(s)", f(16, 16, .i420, [16, 8])),
                ("minimum", f(16, 16, .rgba, [63])),
                ("minimum", f(16, 16, .i420, [16, 7, 8])),
                ("too small", f(64, 64, .rgba, [256], offsets: [4])),
                ("too small", f(64, 64, .nv12, [64, 64], offsets: [0, 64 * 64 * 4 - 100])),
                ("odd dimensions", f(15, 16, .nv12, [16, 16])),
                ("odd dimensions", f(16, 15, .i420, [16, 8, 8])),
                ("maximum texture size", f(100_000, 1, .i420, [100_000, 50_000, 50_000])),
            ]
        }

        @Test func badFramesThrowTypedErrorsAndLeaveGLClean() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: PixelSize(width: 16, height: 16))
            try c.upload(solidFrame(16, 16, RGBA8(r: 3, g: 3, b: 3)), role: .primary)
            for (reason, frame) in Self.badFrames() {
                do {
                    try c.upload(frame, role: .primary)
                    Issue.record("accepted: \(reason)")
                } catch {
                    guard case .badFrame(let r) = error else { Issue.record("\(reason): \(error)"); continue }
                    #expect(r.contains(reason), "\(r)")
                }
                #expect(try glErrorNow(c) == 0, "GL error left after \(reason)")
            }
            // The previous picture is still current and the compositor still works.
            let img = try renderPreview(c, out, CompositionPlan(canvas: PixelSize(width: 16, height: 16), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 16, height: 16))]))
            #expect(img.rgba(1, 1) == RGBA8(r: 3, g: 3, b: 3))
            #expect(throws: GPUError.badCanvas("canvas 15x16 must have even width and height for NV12")) {
                try c.addOutput(canvas: PixelSize(width: 15, height: 16))
            }
            #expect(try glErrorNow(c) == 0)
        }

        @Test func callableFromManyThreads() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 32, height: 16)
            let out = try c.addOutput(canvas: canvas)
            let plan = CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 0, width: 8, height: 8), zIndex: 1)])
            let errors = LogLines()
            DispatchQueue.concurrentPerform(iterations: 4) { t in
                do {
                    for i in 0..<5 {
                        try c.upload(solidFrame(32, 16, RGBA8(r: UInt8(t * 40), g: UInt8(i), b: 0)), role: t % 2 == 0 ? .primary : .secondary)
                        try c.render(output: out, plan: plan, pts: MediaTime(value: Int64(t * 100 + i), timescale: 1000))
                        _ = try c.nextNV12(wait: false)
                    }
                } catch { errors.add("\(error)") }
            }
            #expect(errors.all == [])
            _ = try c.flush()
            #expect(c.stats.framesRendered == 20 && c.stats.framesDelivered == 20)
        }

        @Test func releaseFromAnotherThreadIsQueuedToTheRenderThread() throws {
            // The last reference dropped on a background thread: deinit shuts down
            // through the render thread.
            let deletions = DeletionLog()
            var c: GPUCompositor? = try makeCompositor(hooks: GPUTestHooks(onDelete: deletions.hook))
            try c!.upload(solidFrame(8, 8, RGBA8(r: 1, g: 1, b: 1)), role: .primary)
            let t: [UInt32] = try c!.withRenderer { r in r.streams[.primary]!.current!.textures }
            let kept = c!
            c = nil
            let done = DispatchSemaphore(value: 0)
            Thread { _ = kept; done.signal() }.start()
            done.wait()
            kept.shutdown()
            #expect(deletions.textures.isSuperset(of: t))
        }
    }
}
