import DiptychCore
import DiptychCUDA

extension GPUCompositor {
    /// The CUDA device this compositor's GL context runs on, so NVDEC decodes
    /// where the textures are; or why CUDA frames cannot reach its textures
    /// (no driver, a software renderer, another GPU). The renderer's probe
    /// decided it once, for the plan (`cuda`); this reads it.
    public func cudaDevice() -> Result<Int, CUDAUnavailable> {
        switch cuda.device {
        case .sameAsGL(let device): .success(device)
        case .absent(let why), .other(let why): .failure(CUDAUnavailable(why))
        }
    }
}
