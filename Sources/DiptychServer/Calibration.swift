import DiptychCore
import DiptychMedia
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
        let decode = try decodeCost()
        let model = CostModel(cpuSecondsPerMegapixel: cpu / megapixels,
                              gpuMsPerMegapixel: gpuMs > 0 ? gpuMs / megapixels : 0,
                              decodeCPUSecondsPerMegapixel: decode,
                              source: "calibration (\(s.written) frames of \(canvas) PiP)")
        log(String(format: "calibration: %d frames of %@ PiP in %.2f s: %.1f ms CPU and %.1f ms GPU a frame "
                   + "(%.4f CPU s and %.2f GPU ms per megapixel); decoding H.264 on the CPU %.4f CPU s per megapixel",
                   s.written, canvas.description, wall, cpu * 1000 / Double(s.written), gpuMs / Double(s.written),
                   model.cpuSecondsPerMegapixel, model.gpuMsPerMegapixel, decode))
        return model
    }

    /// The decode figure: a clip of `canvas` at 30 fps whose textured
    /// picture pans and carries fresh grain every frame (motion and residual
    /// as a camera's, not a static pattern's), encoded by libx264 at the
    /// take default (veryfast) at `decodeBitrate`, then decoded by libavcodec
    /// on the CPU as a take's file source decodes it (its frame threads
    /// included): process CPU seconds per decoded megapixel. Encoding is not counted.
    static let decodeFrames = 60
    static let decodeBitrate = 4_000_000

    static func decodeCost() throws(ServerError) -> Double {
        let clip = FileManager.default.temporaryDirectory
            .appendingPathComponent("diptych-serve-decode-\(getpid())-\(UUID().uuidString.prefix(8)).mp4").path
        defer { try? FileManager.default.removeItem(atPath: clip) }
        let rate = FrameRate(30)
        let cpu: Double, frames: Int
        do throws(MediaError) {
            let writer = try MediaWriter(url: clip, video: VideoEncoderSettings(size: canvas, frameRate: rate, encoder: .x264,
                                                                                bitrate: decodeBitrate))
            for i in 0..<decodeFrames { try writer.write(panning(i, pts: MediaTime(value: Int64(i), timescale: 30))) }
            try writer.finish()
            let cpu0 = ProcessCPU.seconds()
            let source = try FileSource(url: clip)
            var n = 0
            while try source.nextFrame() != nil { n += 1 }
            (cpu, frames) = (ProcessCPU.seconds() - cpu0, n)
        } catch {
            throw .runtime("calibration: the decode clip: \(error)")
        }
        guard frames > 0 else { throw .runtime("calibration: the decode clip gave no frames") }
        return cpu / (Double(frames) * Double(canvas.width * canvas.height) / 1e6)
    }

    /// Frame `i` of the decode clip: a texture moved by (3i, 2i) pixels, with grain that changes every frame.
    private static func panning(_ i: Int, pts: MediaTime) -> VideoFrame {
        let f = VideoFrame.allocate(width: canvas.width, height: canvas.height, format: .nv12, pts: pts)
        let (w, h) = (canvas.width, canvas.height)
        let y = UnsafeMutableRawPointer(mutating: f.planes[0].baseAddress).assumingMemoryBound(to: UInt8.self)
        let uv = UnsafeMutableRawPointer(mutating: f.planes[1].baseAddress).assumingMemoryBound(to: UInt8.self)
        let (dx, dy) = (Double(3 * i), Double(2 * i))
        var seed = UInt32(truncatingIfNeeded: i &* 2_654_435_761) | 1
        for r in 0..<h {
            let v = Double(r) + dy
            for c in 0..<w {
                let u = Double(c) + dx
                seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5
                let texture = 40 * sin(u * 0.05 + 3 * sin(v * 0.021)) + 30 * sin(v * 0.07 + u * 0.013) + 12 * sin((u + v) * 0.31)
                let grain = Double(Int(seed & 7)) - 3.5
                y[r * f.planes[0].stride + c] = UInt8(clamping: Int(128 + texture + grain))
            }
        }
        for r in 0..<(h / 2) {
            for c in 0..<(w / 2) {
                let (u, v) = (Double(c) + dx / 2, Double(r) + dy / 2)
                uv[r * f.planes[1].stride + 2 * c] = UInt8(clamping: Int(128 + 30 * sin(u * 0.03)))
                uv[r * f.planes[1].stride + 2 * c + 1] = UInt8(clamping: Int(128 + 30 * cos(v * 0.04)))
            }
        }
        return f
    }
}
