import DiptychCore
import DiptychCUDA

extension GPUCompositor {
    /// The CUDA device this compositor's GL context runs on (`cuGLGetDevices`
    /// on the render thread; the only device where that call fails and the
    /// driver sees one), so NVDEC decodes where the textures are; or why CUDA
    /// frames cannot reach its textures (no driver, another GPU).
    public func cudaDevice() -> Result<Int, CUDAUnavailable> {
        let driver: CUDADriver
        switch CUDADriver.shared {
        case .success(let d): driver = d
        case .failure(let e): return .failure(e)
        }
        guard !info.isSoftware, info.vendor.lowercased().contains("nvidia") else {
            return .failure(CUDAUnavailable("the compositor runs on \(info.renderer) (\(info.vendor)), not on an NVIDIA GPU"))
        }
        let found: Result<[Int], CUDAError>
        do {
            found = try withRenderer { _ in
                do throws(CUDAError) { return .success(try driver.devicesOfCurrentGLContext()) } catch { return .failure(error) }
            }
        } catch {
            return .failure(CUDAUnavailable("the GPU context is gone: \(error)"))
        }
        switch found {
        case .failure(let e):
            // A driver that cannot list the GL context's devices (some virtualized
            // ones) with one GPU: that GPU runs the context.
            if driver.deviceCount == 1 { return .success(0) }
            return .failure(CUDAUnavailable("CUDA cannot reach the compositor's GL context: \(e)"))
        case .success(let devices):
            guard let first = devices.first else {
                return .failure(CUDAUnavailable("no CUDA device runs the compositor's GL context (\(info.renderer))"))
            }
            return .success(first)
        }
    }
}
