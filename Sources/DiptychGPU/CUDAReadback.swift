import CGLES
import DiptychCUDA
import Foundation

/// NV12 readbacks into CUDA memory: the readback buffers are CUDA
/// allocations imported into the GL context, so the GPU's readback copy stays
/// in device memory (no bus transfer on GL's queue), and the caller's thread
/// copies each frame out with CUDA's copy engines into page-locked frame
/// memory once its fence has signalled (docs/ARCHITECTURE.md, "NV12 read back
/// through CUDA"). No cuGraphics map or unmap is involved.
final class CUDAReadbackMemory: ExportedMemory, @unchecked Sendable {
    let memory: CUDAExportableMemory
    /// Copies out (readbacks) and in (uploads), each on a stream of its own.
    let copier: CUDACopyOut, copierIn: CUDACopyOut
    var size: Int { memory.size }

    init(_ memory: CUDAExportableMemory, copier: CUDACopyOut, copierIn: CUDACopyOut) {
        self.memory = memory; self.copier = copier; self.copierIn = copierIn
    }

    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) {
        let base = memory.address
        do throws(CUDAError) {
            try copierIn.copy(planes.map { p in
                let s: CUDACopyOut.Plane.Source
                switch p.source {
                case .host(let h): s = .host(h)
                case .device(let a): s = .device(a)
                }
                return CUDACopyOut.Plane(source: s, pitch: p.pitch, rowBytes: p.rowBytes, rows: p.rows,
                                         destination: base + UInt64(p.offset), dstPitch: p.dstPitch)
            })
        } catch { throw .cudaInterop("uploading \(planes.count) planes: \(error)") }
    }

    func exportDescriptor() throws(GPUError) -> Int32 {
        do throws(CUDAError) { return try memory.exportDescriptor() } catch { throw .cudaInterop("readback memory: \(error)") }
    }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) {
        do throws(CUDAError) { try copier.copy(from: memory.address, count: count, to: dst) } catch {
            throw .cudaInterop("reading back \(count) bytes: \(error)")
        }
    }
}

extension ExportedMemorySource {
    /// Render thread, at a renderer's start: the test hooks' source; else
    /// CUDA's where the context can import memory and the driver can make it
    /// (else nil, logged: GL's own buffers). `asked` names the setting.
    /// `asked` nil: chosen by default (nothing logged where it cannot be had).
    static func choose(_ context: GLContext, hooks: GPUTestHooks, log: (String) -> Void, asked: String?)
        -> (source: ExportedMemorySource, procs: MemoryObjectProcs)? {
        if let s = hooks.exportedMemory { return MemoryObjectProcs.load(context.caps).map { (s, $0) } }
        func no(_ why: String) -> (source: ExportedMemorySource, procs: MemoryObjectProcs)? {
            if let asked { log("diptych-gpu: \(asked): \(why); transfers through GL") }
            return nil
        }
        if asked == nil, context.info.isSoftware || !context.info.vendor.lowercased().contains("nvidia") { return nil }
        guard let procs = MemoryObjectProcs.load(context.caps) else { return no("this GL context lacks GL_EXT_memory_object_fd") }
        var why = ""
        guard let s = cuda(why: &why) else { return no(why) }
        // One small import, made and deleted, to be sure this context takes the driver's memory.
        do throws(GPUError) {
            let trial = try ImportedBuffer(try s.allocate(65536), target: GL.pixelPackBuffer, procs: procs)
            glBindBuffer(GL.pixelPackBuffer, 0)
            trial.release(GLReleaser(timeline: FenceTimeline(ops: .gl), hooks: hooks, context: context), procs: procs)
        } catch { return no("\(error)") }
        return (s, procs)
    }

    /// `DIPTYCH_GPU_READBACK`: `cuda` (readbacks into CUDA memory, or a
    /// logged fall back to GL's buffers), `gl` (GL's buffers), anything else
    /// auto: CUDA's on an NVIDIA GL context where it works, silently GL's elsewhere.
    static let readbackSetting = ProcessInfo.processInfo.environment["DIPTYCH_GPU_READBACK"] ?? "auto"
    /// Uploads through imported CUDA memory: `DIPTYCH_CUDA_UPLOADS=import`.
    static let stagingRequested = ProcessInfo.processInfo.environment["DIPTYCH_CUDA_UPLOADS"] == "import"

    /// CUDA's, on the device that runs the GL context current on this thread
    /// (render thread); nil where there is no such device or the driver lacks
    /// the calls (the caller logs `why`).
    static func cuda(why: inout String) -> ExportedMemorySource? {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): why = e.reason; return nil
        }
        if case .failure(let e) = CUDAExportableMemory.calls { why = e.reason; return nil }
        guard let device = (try? driver.devicesOfCurrentGLContext())?.first ?? (driver.deviceCount == 1 ? 0 : nil) else {
            why = "no CUDA device runs this GL context"; return nil
        }
        let context: CUDAPrimaryContext, copier: CUDACopyOut, copierIn: CUDACopyOut
        do throws(CUDAError) {
            context = try driver.primaryContext(ordinal: device)
            copier = try CUDACopyOut(context: context)
            copierIn = try CUDACopyOut(context: context)
            _ = try CUDAExportableMemory(context: context, bytes: 1)   // the calls work here
        } catch { why = "\(error)"; return nil }
        let host = FrameBufferPool.Allocator(
            allocate: { bytes in
                guard (try? context.push()) != nil else { return nil }
                defer { context.pop() }
                return try? CUDAPinnedMemory.allocate(bytes: bytes)
            },
            free: { p in
                let current = (try? context.push()) != nil
                CUDAPinnedMemory.free(p)
                if current { context.pop() }
            })
        return ExportedMemorySource(name: "CUDA", device: device, allocate: { bytes throws(GPUError) in
            do throws(CUDAError) {
                return CUDAReadbackMemory(try CUDAExportableMemory(context: context, bytes: bytes), copier: copier, copierIn: copierIn)
            } catch { throw .cudaInterop("readback memory of \(bytes) bytes: \(error)") }
        }, hostMemory: host)
    }
}
