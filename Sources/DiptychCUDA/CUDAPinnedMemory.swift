import CCUDA
import DiptychCore
import Glibc

/// Page-locked host memory (`cuMemHostAlloc`, `cuMemFreeHost`), which CUDA's
/// copy engines read at bus speed and asynchronously; ordinary memory goes
/// through the driver's bounce buffers. The ffnvcodec loader does not load
/// these two calls, so they are looked up in the same `libcuda.so.1`.
public enum CUDAPinnedMemory {
    typealias Alloc = @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>, Int, UInt32) -> Int32
    typealias Free = @convention(c) (UnsafeMutableRawPointer?) -> Int32

    static let functions: (alloc: Alloc, free: Free)? = {
        guard let lib = dlopen("libcuda.so.1", RTLD_NOW), let a = dlsym(lib, "cuMemHostAlloc"), let f = dlsym(lib, "cuMemFreeHost") else {
            return nil
        }
        return (unsafeBitCast(a, to: Alloc.self), unsafeBitCast(f, to: Free.self))
    }()

    /// `bytes` of pinned memory, made with the context current on this
    /// thread and pinned for every context (`CU_MEMHOSTALLOC_PORTABLE`: a
    /// frame delivered on one GPU may be uploaded to another).
    public static func allocate(bytes: Int) throws(CUDAError) -> UnsafeMutableRawPointer {
        guard let fns = functions else { throw CUDAError(call: "cuMemHostAlloc", code: -1, name: "missing from libcuda.so.1") }
        var p: UnsafeMutableRawPointer?
        let r = fns.alloc(&p, bytes, 0x01)
        guard r == 0, let p else { throw CUDAError(call: "cuMemHostAlloc(\(bytes))", code: Int(r), name: "CUDA error \(r)") }
        return p
    }

    public static func free(_ p: UnsafeMutableRawPointer) { _ = functions?.free(p) }

    /// Copies `count` bytes into page-locked memory that a copy engine reads
    /// next: with streaming stores on x86-64 (the destination's cache lines
    /// neither read first nor kept), a plain copy elsewhere or without `streaming`.
    public static func copy(_ dst: UnsafeMutableRawPointer, from src: UnsafeRawPointer, count: Int, streaming: Bool = true) {
        if streaming { diptych_stream_copy(dst, src, count) } else { dst.copyMemory(from: src, byteCount: count) }
    }
}
