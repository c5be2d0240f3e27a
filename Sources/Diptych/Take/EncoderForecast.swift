import DiptychCore
import DiptychGPU
import DiptychMedia

/// What a take will get on a GPU, told before any take opens there (a
/// server's decode placement, docs/ARCHITECTURE.md "Where a server decodes"):
/// the same plans `TakeSetup` makes once the take's GPU is open.
public enum EncoderForecast {
    /// Whether `--encoder auto` encodes H.264 on the GPU encoder on `gpu`
    /// for settings it is as good as (libx264 ultrafast): no VA-API device
    /// comes first, and the GPU runs its compute passes.
    public static func autoEncodesOnGPU(gpu: GPUInfo) -> Bool {
        let plan = try? EncoderProbe.plan(codec: .h264, choice: .auto,
                                          report: ZeroCopySetup.vaapiReport(codec: .h264, choice: .auto, override: nil),
                                          target: nil, gpu: ZeroCopySetup.gpuEncoderFacts(gpu),
                                          baseline: SoftwareBaseline(preset: "ultrafast"))
        return plan?.path == .gpu
    }

    /// Why NVDEC cannot decode on `gpu`'s CUDA device, or nil when it can.
    public static func nvdecUnavailable(gpu: GPUCompositor) -> String? {
        let device = gpu.cudaDevice().mapError { DecoderUnavailable($0.reason) }
        return DecoderSettings.with(.auto, cudaDevice: device).nvdecUnavailable
    }
}
