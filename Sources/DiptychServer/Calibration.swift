import DiptychCore
import Foundation

/// The first-take default of the cost model: at start-up the server records
/// one short take through the same path its takes run (PiP of two synthetic
/// streams, libx264 at the default preset, into a scratch file) and divides
/// the process CPU time and the take compositor's GPU time by the output
/// megapixels. Start-up costs (encoder open, threads) are included, so the
/// estimate errs high.
enum Calibration {
    /// A common take size: costs are per megapixel, and a smaller canvas
    /// would weigh the per-frame overheads (render-thread hops, fences) too much.
    static let canvas = PixelSize(width: 1280, height: 720)
    static let frames = 45

    static func run(pool: CompositorPool, gpu: String, cores: Int, log: @escaping @Sendable (String) -> Void) throws(ServerError) -> CostModel {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("diptych-serve-calibration-\(getpid())-\(UUID().uuidString.prefix(8)).mp4").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var config = TakeConfiguration()
        config.primary = .testPattern(name: "smpte", size: canvas, rate: FrameRate(30))
        config.secondary = .testPattern(name: "counter", size: PixelSize(width: 640, height: 360), rate: FrameRate(30))
        config.output = scratch
        config.audio = .none
        config.duration = Double(frames) / 30
        config.gpu = gpu
        let load = TakeLoad(width: canvas.width, height: canvas.height, fps: 30)
        let take = Take(id: "calibration", configuration: config, load: load, encoderThreads: cores)
        let cpu0 = ProcessCPU.seconds()
        let t0 = ProcessInfo.processInfo.systemUptime
        take.run(pool: pool)
        // The take's GPU figures are its compositor's last, kept when it was shut down.
        take.waitUntilEnded()
        let gpu = take.gpuTotals
        let cpu = ProcessCPU.seconds() - cpu0
        let wall = ProcessInfo.processInfo.systemUptime - t0
        let s = take.snapshot()
        guard s.state == .finished, s.written > 0 else {
            throw .runtime("calibration take failed: \(s.error ?? "no frames written")")
        }
        let megapixels = Double(s.written) * Double(canvas.width * canvas.height) / 1e6
        let gpuMs = (gpu.msPerFrame ?? 0) * Double(s.written)
        let model = CostModel(cpuSecondsPerMegapixel: cpu / megapixels,
                              gpuMsPerMegapixel: gpuMs > 0 ? gpuMs / megapixels : 0,
                              source: "calibration (\(s.written) frames of \(canvas) PiP)")
        log(String(format: "calibration: %d frames of %@ PiP in %.2f s: %.1f ms CPU and %.1f ms GPU a frame "
                   + "(%.4f CPU s and %.2f GPU ms per megapixel)",
                   s.written, canvas.description, wall, cpu * 1000 / Double(s.written), gpuMs / Double(s.written),
                   model.cpuSecondsPerMegapixel, model.gpuMsPerMegapixel))
        return model
    }
}
