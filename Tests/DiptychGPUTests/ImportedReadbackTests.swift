import CGLES
import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychGPU

/// Shared memory standing in for CUDA's exported allocations: an unlinked
/// file, mapped, that llvmpipe imports (GL_EXT_memory_object_fd) and maps
/// too, copied out with memcpy. Mesa imports only its own exports: the file
/// starts with the header its exports carry (total size, offset of the data,
/// the driver's id), the data one page in.
final class MemfdMemory: ExportedMemory, @unchecked Sendable {
    final class Ledger: @unchecked Sendable {
        let lock = NSLock()
        var live = 0, made = 0, copies = 0, descriptors = 0, copiesIn = 0, planesFromDevice = 0, planesToDevice = 0
        /// Copies out fail while set (a device error).
        var failCopies = false
        func note(_ f: (Ledger) -> Void) { lock.lock(); f(self); lock.unlock() }
    }
    let size: Int
    private let fd: Int32
    private let base: UnsafeMutableRawPointer
    private let ledger: Ledger

    static let page = 4096

    init(bytes: Int, ledger: Ledger) throws(GPUError) {
        size = (bytes + 4095) & ~4095
        self.ledger = ledger
        var template = Array((NSTemporaryDirectory() + "/diptych-readback-XXXXXX").utf8CString)
        fd = mkstemp(&template)
        if fd >= 0 { unlink(template) }
        var header = [Int(size + 2 * Self.page), Self.page].withUnsafeBytes { Array($0) } + Self.llvmpipeID
        guard fd >= 0, ftruncate(fd, off_t(size + 2 * Self.page)) == 0, pwrite(fd, &header, header.count, 0) == header.count,
              let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(Self.page)), p != MAP_FAILED else {
            throw .unsupported("a mapped file of \(bytes) bytes")
        }
        base = p
        ledger.note { $0.live += 1; $0.made += 1 }
    }

    func exportDescriptor() throws(GPUError) -> Int32 {
        ledger.note { $0.descriptors += 1 }
        return dup(fd)
    }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) {
        precondition(count <= size)
        var fail = false
        ledger.note { fail = $0.failCopies }
        if fail { throw .cudaInterop("copy out failed (test)") }
        dst.copyMemory(from: base, byteCount: count)
        ledger.note { $0.copies += 1 }
    }

    /// Host sources are read as they are; "device" addresses are host pointers here (the tests' CUDA frames).
    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) {
        for p in planes {
            let src: UnsafeRawPointer
            switch p.source {
            case .host(let h): src = h
            case .device(let a): src = UnsafeRawPointer(bitPattern: UInt(a))!; ledger.note { $0.planesFromDevice += 1 }
            }
            precondition(p.offset + p.dstPitch * (p.rows - 1) + p.rowBytes <= size)
            for y in 0..<p.rows { (base + p.offset + y * p.dstPitch).copyMemory(from: src + y * p.pitch, byteCount: p.rowBytes) }
        }
        ledger.note { $0.copiesIn += 1 }
    }

    /// "Device" destinations are host pointers here (the tests' CUDA frames).
    func copyOut(_ planes: [DevicePlaneCopy]) throws(GPUError) {
        for p in planes {
            precondition(p.offset + p.pitch * (p.rows - 1) + p.rowBytes <= size)
            let dst = UnsafeMutableRawPointer(bitPattern: UInt(p.destination))!
            for y in 0..<p.rows { (dst + y * p.dstPitch).copyMemory(from: base + p.offset + y * p.pitch, byteCount: p.rowBytes) }
        }
        ledger.note { $0.planesToDevice += planes.count }
    }

    deinit { munmap(base, size); close(fd); ledger.note { $0.live -= 1 } }

    /// Where its bytes are mapped here (the tests' stand-in for a device address).
    var address: UInt64 { UInt64(UInt(bitPattern: base)) }

    /// What llvmpipe's exports carry after the sizes: the first 16 bytes of
    /// the SHA-1 of its driver id, "llvmpipe" (Mesa's os_memory_fd).
    static let llvmpipeID: [UInt8] = [0x6c, 0xb9, 0xee, 0x07, 0x4a, 0x0b, 0xad, 0x7b, 0x01, 0x2e, 0x1b, 0xe9, 0x69, 0x7e, 0x53, 0x0f]

    static func source(_ ledger: Ledger, hostBlocks: Ledger? = nil) -> ExportedMemorySource {
        let host = hostBlocks.map { l in
            FrameBufferPool.Allocator(allocate: { n in l.note { $0.live += 1; $0.made += 1 }; return malloc(n) },
                                      free: { p in l.note { $0.live -= 1 }; free(p) })
        }
        return ExportedMemorySource(name: "test memory", allocate: { n throws(GPUError) in try MemfdMemory(bytes: n, ledger: ledger) },
                                    hostMemory: host)
    }
}

/// NV12 readbacks into imported memory (`DIPTYCH_GPU_READBACK=cuda` on an
/// NVIDIA GPU; here llvmpipe importing mapped files): the same frames as GL's own
/// buffers, on the compute and fragment paths and for frames assembled by
/// the direct-copy path; every import freed at shutdown.
extension GPU {
    @Suite struct ImportedReadback {
        static let canvas = PixelSize(width: 64, height: 48)

        private func frames(_ c: GPUCompositor, count: Int, plan: CompositionPlan) throws -> [[UInt8]] {
            let out = try c.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<count {
                let uploads = [(ComputePath.picture(64, 48, .nv12, seed: i), StreamRole.primary),
                               (ComputePath.picture(32, 24, .i420, seed: 7 + i), .secondary)]
                got += try c.composite(uploads: uploads, output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 30))
            }
            got += try c.flush()
            return got.map(GPU.CUDAUploads.nv12Bytes)
        }

        private func supported() throws -> Bool {
            let c = try makeCompositor()
            defer { c.shutdown() }
            return c.info.capabilities.memoryObjectFD
        }

        @Test(arguments: [GPUPass.compute, .fragment])
        func importedBuffersGiveTheFramesOfGLBuffers(_ pass: GPUPass) throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let plan = GPU.CUDAUploads.plan
            let gl = try makeCompositor(readbackDepth: 3, pass: pass)
            let expected = try frames(gl, count: 7, plan: plan)
            gl.shutdown()
            let ledger = MemfdMemory.Ledger(), host = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(ledger, hostBlocks: host)), request: .readbackOnly,
                                       readbackDepth: 3, pass: pass)
            #expect(c.plan.readback == .cudaImported && c.plan.staging == .mappedBuffers && c.plan.description.contains("readback=cuda-imported"),
                    "\(c.plan)")
            let got = try frames(c, count: 7, plan: plan)
            #expect(got.count == 7 && got == expected, "frames read back through imported memory differ from GL's")
            #expect(ledger.copies == 7 && ledger.made == 3 && ledger.descriptors == 3, "one import a slot, one copy a frame: \(ledger.made), \(ledger.copies)")
            #expect(host.made > 0, "frames delivered into the source's host memory")
            c.shutdown()
            #expect(ledger.live == 0, "every import freed at shutdown")
        }

        /// Every import is marked as a dedicated allocation (without it
        /// NVIDIA's GL may write compressed blocks the exporter cannot read).
        @Test func importsAreDedicated() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(MemfdMemory.Ledger())), request: .readbackOnly, readbackDepth: 2)
            defer { c.shutdown() }
            _ = try frames(c, count: 2, plan: GPU.CUDAUploads.plan)
            let flags = try c.withRenderer { r throws(GPUError) in
                let get = loadProc("glGetMemoryObjectParameterivEXT", as: PFNGLGETMEMORYOBJECTPARAMETERIVEXTPROC.self)!
                return r.readbacks.buffers.compactMap(\.imported).map { b in
                    var v: GLint = -1
                    get(b.object, GLenum(GL_DEDICATED_MEMORY_OBJECT_EXT), &v)
                    return v
                }
            }
            #expect(flags == [GLint(GL_TRUE), GLint(GL_TRUE)], "\(flags)")
        }

        /// A copy out that fails leaves its frame pending: the call fails, and
        /// once copies work again the frame comes out (nothing is lost).
        @Test func aFailedCopyOutLosesNoFrame() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let ledger = MemfdMemory.Ledger()
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(ledger)), request: .readbackOnly, readbackDepth: 2)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            try c.upload(ComputePath.picture(64, 48, .nv12, seed: 3), role: .primary)
            try c.upload(ComputePath.picture(32, 24, .nv12, seed: 4), role: .secondary)
            try c.render(output: out, plan: GPU.CUDAUploads.plan, pts: .zero)
            ledger.note { $0.failCopies = true }
            #expect(throws: GPUError.self) { _ = try c.nextNV12(wait: true) }
            #expect(throws: GPUError.self) { _ = try c.nextNV12(wait: true) }
            ledger.note { $0.failCopies = false }
            let f = try #require(try c.nextNV12(wait: true))
            #expect(f.pts == .zero && c.outstandingReadbacks == 0)
        }

        /// A buffer taken for a frame whose work then failed goes back: the
        /// next frame gets it, and the ring has no gap.
        @Test func anUnusedReadbackBufferGoesBack() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let c = try makeCompositor(hooks: GPUTestHooks(exportedMemory: MemfdMemory.source(MemfdMemory.Ledger())), request: .readbackOnly, readbackDepth: 3)
            defer { c.shutdown() }
            let (a, b, d) = try c.withRenderer { r throws(GPUError) in
                let a = try r.readbacks.bindNext(bytes: 4096, target: GL.shaderStorageBuffer, releaser: r.releaser)
                r.readbacks.unbind(a)
                let b = try r.readbacks.bindNext(bytes: 4096, target: GL.shaderStorageBuffer, releaser: r.releaser)
                r.readbacks.unbind(b)
                let d = try r.readbacks.bindNext(bytes: 4096, target: GL.shaderStorageBuffer, releaser: r.releaser)
                r.readbacks.unbind(d)
                glBindBuffer(GL.shaderStorageBuffer, 0)
                return (a, b, d)
            }
            #expect(a == b && b == d)
        }

        /// Direct-copy frames (the rendered region read back, the rest copied
        /// on the CPU) come through the slot's host copy.
        @Test func directCopyFramesThroughImportedMemory() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let plan = GPU.DirectCopy.pipPlan(mirrored: true)
            let canvas = GPU.DirectCopy.canvas
            func run(_ hooks: GPUTestHooks) throws -> ([[UInt8]], GPUStats) {
                let c = try GPUCompositor(selection: .software, directCopy: .on, pass: .fragment, request: GPURequest(), hooks: hooks)
                defer { c.shutdown() }
                let out = try c.addOutput(canvas: canvas)
                var got: [VideoFrame] = []
                for i in 0..<4 {
                    let uploads = [(GPU.DirectCopy.yuvFrame(128, 72, format: .nv12, seed: i), StreamRole.primary),
                                   (GPU.DirectCopy.yuvFrame(64, 48, format: .nv12, seed: 5 + i), .secondary)]
                    got += try c.composite(uploads: uploads, output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 30))
                }
                got += try c.flush()
                return (got.map(GPU.CUDAUploads.nv12Bytes), c.stats)
            }
            let (expected, _) = try run(GPUTestHooks())
            let ledger = MemfdMemory.Ledger()
            let (got, stats) = try run(GPUTestHooks(exportedMemory: MemfdMemory.source(ledger)))
            #expect(stats.framesDirect == 4, "every frame took the direct-copy path: \(stats.framesDirect)")
            #expect(got == expected, "direct-copy frames through imported memory differ from GL's")
            #expect(ledger.copies == 4 && ledger.live == 0)
        }

        /// Uploads staged in imported memory (`DIPTYCH_CUDA_UPLOADS=import`, pictures in textures):
        /// host frames (NV12, I420) and NV12 CUDA frames copied in by the
        /// memory's owner give GL's pictures, with no interop map; a P010 CUDA
        /// frame still goes through interop; every import freed.
        @Test func stagedUploadsThroughImportedMemory() throws {
            guard try supported() else { Issue.record("llvmpipe lacks GL_EXT_memory_object_fd"); return }
            let plan = GPU.CUDAUploads.plan
            let gl = try makeCompositor(readbackDepth: 2)
            let expected = try frames(gl, count: 5, plan: plan)
            gl.shutdown()
            let ledger = MemfdMemory.Ledger()
            let hooks = GPUTestHooks(exportedMemory: MemfdMemory.source(ledger))
            var staged = GPURequest.stagingOnly
            staged.pictures = .textures
            let c = try makeCompositor(hooks: hooks, request: staged, readbackDepth: 2)
            #expect(c.plan.staging == .cudaImported && c.plan.readback == .mappedBuffers && c.plan.pictures == .textures, "\(c.plan)")
            #expect(try frames(c, count: 5, plan: plan) == expected, "host frames staged in imported memory differ from GL's")
            #expect(ledger.copiesIn == 10 && ledger.planesFromDevice == 0)
            c.shutdown()
            #expect(ledger.live == 0, "every staging import freed")

            // NV12 CUDA frames: device to device into the staging, the holder let go at once.
            let interop = HostInterop(), released = HostCUDAFrame.Released()
            var both = hooks
            both.cudaCalls = { _ in interop }
            var textures = GPURequest()
            textures.pictures = .textures
            let k = try makeCompositor(hooks: both, request: textures, readbackDepth: 2)
            defer { k.shutdown() }
            #expect(k.plan.staging == .cudaImported && k.plan.readback == .cudaImported && k.plan.cudaFrames == .staged, "\(k.plan)")
            let out = try k.addOutput(canvas: Self.canvas)
            var got: [VideoFrame] = []
            for i in 0..<5 {
                let p = HostCUDAFrame(ComputePath.picture(64, 48, .nv12, seed: i), released: released)
                try k.upload(p.frame, holder: p, role: .primary)
                try k.upload(ComputePath.picture(32, 24, .i420, seed: 7 + i), role: .secondary)
                try k.render(output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 30))
                got += try k.nextNV12(wait: false).map { [$0] } ?? []
            }
            got += try k.flush()
            #expect(got.map(GPU.CUDAUploads.nv12Bytes) == expected, "CUDA frames staged in imported memory differ")
            #expect(released.count == 5 && interop.maps.isEmpty, "no interop map; holders let go once copied: \(interop.maps)")
            #expect(ledger.planesFromDevice == 10)
            let p10 = HostCUDAFrame(ComputePath.picture(64, 48, .nv12, seed: 1), p010: true, released: released)
            try k.upload(p10.frame, holder: p10, role: .primary)
            try k.render(output: out, plan: plan, pts: MediaTime(value: 9, timescale: 30))
            _ = try k.flush()
            #expect(interop.maps.count == 1, "a P010 frame through interop")
        }
    }
}
