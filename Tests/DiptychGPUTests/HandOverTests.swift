import CGLES
import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychGPU

/// Semaphores handing readback buffers over, recorded. llvmpipe has no
/// GL_EXT_semaphore_fd, so GL's semaphore calls are stand-ins that record
/// into the recorder in use (`current`): the names they hand out, which
/// semaphore each name imports, and the buffer each signal names. The copies
/// out of `MemfdMemory` record the semaphore they waited for.
final class RecordedSemaphores: @unchecked Sendable {
    final class Waiter: HandOverSemaphore, @unchecked Sendable {
        let id: Int
        init(_ id: Int) { self.id = id }
    }
    private let lock = NSLock()
    private var log: [String] = []
    private var made = 0
    private var byDescriptor: [Int32: Int] = [:]
    private var byName: [GLuint: Int] = [:]
    nonisolated(unsafe) static var current: RecordedSemaphores?
    nonisolated(unsafe) static var lastName: GLuint = 900

    var events: [String] { lock.lock(); defer { lock.unlock() }; return log }
    var count: Int { lock.lock(); defer { lock.unlock() }; return made }

    func note(_ e: String) { lock.lock(); log.append(e); lock.unlock() }

    /// The source's `makeSemaphore`: semaphore `id` (1, 2, …) with a descriptor GL's import takes.
    func make() throws(GPUError) -> SemaphoreExport {
        let fd = open("/dev/null", O_RDONLY)
        lock.lock(); made += 1; let id = made; byDescriptor[fd] = id; lock.unlock()
        return SemaphoreExport(glDescriptor: fd, waiter: Waiter(id))
    }

    private func id(_ name: GLuint) -> Int { lock.lock(); defer { lock.unlock() }; return byName[name] ?? -1 }

    static let procs = SemaphoreProcs(
        generate: { n, names in
            for i in 0..<Int(n) { RecordedSemaphores.lastName += 1; names?[i] = RecordedSemaphores.lastName }
        },
        delete: { n, names in
            guard let r = RecordedSemaphores.current, let names else { return }
            for i in 0..<Int(n) { r.note("delete \(r.id(names[i]))") }
        },
        importFD: { name, _, fd in
            guard let r = RecordedSemaphores.current else { return }
            r.lock.lock(); r.byName[name] = r.byDescriptor.removeValue(forKey: fd) ?? -1; r.lock.unlock()
            close(fd)
            r.note("import \(r.id(name))")
        },
        signal: { name, count, buffers, _, _, _ in
            guard let r = RecordedSemaphores.current else { return }
            r.note("signal \(r.id(name)) buffer \(count == 1 ? Int(buffers?[0] ?? 0) : -1)")
        })

    /// Each semaphore's signals and waits alternate, signal first, with no
    /// wait left over; every semaphore imported is deleted once. Nil when so,
    /// else what breaks it.
    func pairingProblem() -> String? {
        var signalled: [Int: Bool] = [:]
        var live = Set<Int>()
        for e in events {
            let words = e.split(separator: " ")
            guard let id = Int(words[1]) else { continue }
            switch words[0] {
            case "import": live.insert(id)
            case "delete": if live.remove(id) == nil { return "\(e): not imported, or deleted twice" }
            case "signal":
                if signalled[id] == true { return "\(e): signalled twice without a wait" }
                signalled[id] = true
            case "wait":
                guard id >= 0 else { continue }   // a copy with nothing to wait for
                if signalled[id] != true { return "\(e): a wait with no signal" }
                signalled[id] = false
            default: break
            }
        }
        if !live.isEmpty { return "semaphores never deleted: \(live.sorted())" }
        return nil
    }

    var signals: Int { events.filter { $0.hasPrefix("signal") }.count }
    var waits: Int { events.filter { $0.hasPrefix("wait") && !$0.hasPrefix("wait -1") }.count }
}

/// GL hands each frame written into imported memory over to the copy out
/// with a semaphore naming the buffer (on the H200, a fence alone let
/// through frames that differ): one signal per frame after its GL work, one
/// wait per copy of it, a semaphore whose wait was lost (a failed copy,
/// dropped frames) replaced before its buffer is written again.
extension GPU {
    @Suite struct HandOver {
        static let canvas = PixelSize(width: 64, height: 48)

        private func hooks(_ ledger: MemfdMemory.Ledger) -> GPUTestHooks {
            RecordedSemaphores.current = ledger.handOvers
            var h = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger, semaphores: true))
            h.semaphoreProcs = RecordedSemaphores.procs
            return h
        }

        private func render(_ c: GPUCompositor, _ out: OutputID, _ i: Int) throws -> [VideoFrame] {
            let uploads = [(ComputePath.picture(64, 48, .nv12, seed: i), StreamRole.primary),
                           (ComputePath.picture(32, 24, .i420, seed: 7 + i), .secondary)]
            return try c.composite(uploads: uploads, output: out, plan: GPU.CUDAUploads.plan, pts: MediaTime(value: Int64(i), timescale: 30))
        }

        /// A frame rendered, its readback left pending.
        private func submit(_ c: GPUCompositor, _ out: OutputID, _ i: Int) throws {
            try c.upload(ComputePath.picture(64, 48, .nv12, seed: i), role: .primary)
            try c.upload(ComputePath.picture(32, 24, .i420, seed: 7 + i), role: .secondary)
            try c.render(output: out, plan: GPU.CUDAUploads.plan, pts: MediaTime(value: Int64(i), timescale: 30))
        }

        private func supported() throws -> Bool {
            let c = try makeCompositor()
            defer { c.shutdown() }
            return c.info.capabilities.memoryObjectFD
        }

        @Test(arguments: [GPUPass.compute, .fragment])
        func everyFrameIsSignalledOnceAndWaitedForOnce(_ pass: GPUPass) throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let gl = try makeCompositor(readbackDepth: 3, pass: pass)
            let glOut = try gl.addOutput(canvas: Self.canvas)
            var expected: [VideoFrame] = []
            for i in 0..<7 { expected += try render(gl, glOut, i) }
            expected += try gl.flush()
            gl.shutdown()
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: hooks(ledger), readbackDepth: 3, pass: pass)
            let out = try c.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<7 { got += try render(c, out, i) }
            got += try c.flush()
            c.shutdown()
            let r = ledger.handOvers
            #expect(got.map(GPU.CUDAUploads.nv12Bytes) == expected.map(GPU.CUDAUploads.nv12Bytes))
            #expect(r.count == 3, "one semaphore a readback buffer: \(r.count)")
            #expect(r.signals == 7 && r.waits == 7, "\(r.events)")
            #expect(r.pairingProblem() == nil, "\(r.pairingProblem() ?? "")")
            // Each signal names the buffer the next wait on that semaphore copies out of.
            let signalled = r.events.filter { $0.hasPrefix("signal") }
            #expect(Set(signalled.map { $0.split(separator: " ")[3] }).count == 3, "three buffers: \(signalled)")
        }

        /// A failed copy took the semaphore's wait (whether it ran is unknown):
        /// the frame still comes out, and its buffer gets a new semaphore
        /// before it is written again.
        @Test func aFailedCopySpendsItsSemaphore() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: hooks(ledger), readbackDepth: 2)
            let out = try c.addOutput(canvas: Self.canvas)
            try submit(c, out, 0)
            ledger.note { $0.failCopies = true }
            #expect(throws: GPUError.self) { _ = try c.nextNV12(wait: true) }
            #expect(throws: GPUError.self) { _ = try c.nextNV12(wait: true) }
            ledger.note { $0.failCopies = false }
            let first = try #require(try c.nextNV12(wait: true))
            #expect(first.pts == MediaTime(value: 0, timescale: 30))
            var got: [VideoFrame] = []
            for i in 1..<5 { got += try render(c, out, i) }
            got += try c.flush()
            c.shutdown()
            let r = ledger.handOvers
            #expect(got.count == 4)
            #expect(r.events.filter { $0.hasPrefix("wait") }.prefix(3) == ["wait 1 copy fails", "wait -1 copy fails", "wait -1 copy done"],
                    "the retries do not wait again: \(r.events)")
            #expect(r.count == 3, "the spent semaphore replaced: \(r.events)")
            #expect(r.pairingProblem() == nil, "\(r.pairingProblem() ?? "")")
        }

        /// Frames dropped with their semaphores signalled (context loss):
        /// the buffers get new semaphores.
        @Test func droppedFramesSpendTheirSemaphores() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: hooks(ledger), readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try submit(c, out, 0)
            try submit(c, out, 1)
            try c.withRenderer { r throws(GPUError) in
                r.timeline.drain()
                r.readbacks.dropAll()
            }
            var got: [VideoFrame] = []
            for i in 2..<4 { got += try render(c, out, i) }
            got += try c.flush()
            #expect(got.map(\.pts) == [MediaTime(value: 2, timescale: 30), MediaTime(value: 3, timescale: 30)])
            #expect(ledger.handOvers.count == 4, "both signalled semaphores replaced: \(ledger.handOvers.events)")
        }

        /// The direct-copy path's region readback is handed over too.
        @Test func directCopyFramesAreHandedOver() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let ledger = MemfdMemory.Ledger()
            let c = try GPUCompositor(selection: .software, directCopy: .on, pass: .fragment, hooks: hooks(ledger))
            let out = try c.addOutput(canvas: GPU.DirectCopy.canvas)
            for i in 0..<4 {
                let uploads = [(GPU.DirectCopy.yuvFrame(128, 72, format: .nv12, seed: i), StreamRole.primary),
                               (GPU.DirectCopy.yuvFrame(64, 48, format: .nv12, seed: 5 + i), .secondary)]
                _ = try c.composite(uploads: uploads, output: out, plan: GPU.DirectCopy.pipPlan(mirrored: true),
                                    pts: MediaTime(value: Int64(i), timescale: 30))
            }
            _ = try c.flush()
            #expect(c.stats.framesDirect == 4)
            c.shutdown()
            let r = ledger.handOvers
            #expect(r.signals == 4 && r.waits == 4 && r.pairingProblem() == nil, "\(r.events)")
        }
    }
}
