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
    let copier: CUDACopyOut
    var size: Int { memory.size }

    init(_ memory: CUDAExportableMemory, copier: CUDACopyOut) { self.memory = memory; self.copier = copier }

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
    /// CUDA's where `DIPTYCH_GPU_READBACK=cuda` asks for it, the context can
    /// import memory and the driver can make it (else GL's buffers, logged).
    static func choose(_ context: GLContext, hooks: GPUTestHooks, log: (String) -> Void)
        -> (source: ExportedMemorySource, procs: MemoryObjectProcs)? {
        if let s = hooks.exportedMemory { return MemoryObjectProcs.load(context.caps).map { (s, $0) } }
        guard requested == "cuda" else { return nil }
        guard let procs = MemoryObjectProcs.load(context.caps) else {
            log("diptych-gpu: DIPTYCH_GPU_READBACK=cuda: this GL context lacks GL_EXT_memory_object_fd; reading back through GL")
            return nil
        }
        var why = ""
        guard let s = cuda(why: &why) else {
            log("diptych-gpu: DIPTYCH_GPU_READBACK=cuda: \(why); reading back through GL")
            return nil
        }
        return (s, procs)
    }

    /// Which readback path `DIPTYCH_GPU_READBACK` asks for: `cuda`, `gl`, or
    /// nil (the default: GL's).
    static let requested: String? = ProcessInfo.processInfo.environment["DIPTYCH_GPU_READBACK"]

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
        let context: CUDAPrimaryContext, copier: CUDACopyOut
        do throws(CUDAError) {
            context = try driver.primaryContext(ordinal: device)
            copier = try CUDACopyOut(context: context)
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
        return ExportedMemorySource(name: "CUDA", allocate: { bytes throws(GPUError) in
            do throws(CUDAError) {
                return CUDAReadbackMemory(try CUDAExportableMemory(context: context, bytes: bytes), copier: copier)
            } catch { throw .cudaInterop("readback memory of \(bytes) bytes: \(error)") }
        }, hostMemory: host)
    }
}
