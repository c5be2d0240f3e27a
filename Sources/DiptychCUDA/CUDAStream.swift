import CCUDA

/// One CUDA stream of a primary context (`cuStreamCreate` with flags 0: it
/// waits for the legacy default stream, where NVDEC finishes its pictures).
/// Synchronized and destroyed with the context current when it goes.
final class CUDAStream {
    let context: CUDAPrimaryContext
    let handle: CUstream?

    /// Creates the stream; the context must be current.
    init(context: CUDAPrimaryContext) throws(CUDAError) {
        self.context = context
        var s: CUstream?
        try context.driver.check(context.driver.api.pointee.cuStreamCreate(&s, 0), "cuStreamCreate")
        handle = s
    }

    /// Waits for everything queued on the stream; the raw result.
    @discardableResult
    func synchronize() -> CUresult { context.driver.api.pointee.cuStreamSynchronize(handle) }

    deinit {
        guard let s = handle, (try? context.push()) != nil else { return }
        _ = context.driver.api.pointee.cuStreamSynchronize(s)
        _ = context.driver.api.pointee.cuStreamDestroy(s)
        context.pop()
    }
}
