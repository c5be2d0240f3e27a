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

    /// `measureDecode`: whether to measure the decode figure too (only decode placement uses it).
    static func run(pool: CompositorPool, gpu: String, cores: Int, measureDecode: Bool,
                    log: @escaping @Sendable (String) -> Void) throws(ServerError) -> CostModel {
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
        let decode = measureDecode ? try decodeCost() : 0
        let model = CostModel(cpuSecondsPerMegapixel: cpu / megapixels,
                              gpuMsPerMegapixel: gpuMs > 0 ? gpuMs / megapixels : 0,
                              decodeCPUSecondsPerMegapixel: decode,
                              source: "calibration (\(s.written) frames of \(canvas) PiP)")
        log(String(format: "calibration: %d frames of %@ PiP in %.2f s: %.1f ms CPU and %.1f ms GPU a frame "
                   + "(%.4f CPU s and %.2f GPU ms per megapixel)%@",
                   s.written, canvas.description, wall, cpu * 1000 / Double(s.written), gpuMs / Double(s.written),
                   model.cpuSecondsPerMegapixel, model.gpuMsPerMegapixel,
                   measureDecode ? String(format: "; decoding H.264 on the CPU %.4f CPU s per megapixel", decode) : ""))
        return model
    }

    /// The decode figure: a clip of `canvas` at 30 fps whose textured
    /// picture pans and carries fresh grain every frame (motion and residual
    /// as a camera's, not a static pattern's), encoded by libx264 at the
    /// take default (veryfast) at `decodeBitrate`, then decoded by libavcodec
    /// on the CPU as a busy server's take decodes it (its frame threads,
    /// `Admission.fewestDecoderThreads`, included): process CPU
    /// seconds per decoded megapixel. Encoding is not counted.
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
            let texture = Texture(frames: decodeFrames)
            var seed: UInt32 = 0x9e37_79b9
            let grain = (0..<(canvas.width * canvas.height + 1 << 16)).map { _ -> UInt8 in
                seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5
                return UInt8(seed & 7)
            }
            for i in 0..<decodeFrames {
                try writer.write(panning(i, texture: texture, grain: grain, pts: MediaTime(value: Int64(i), timescale: 30)))
            }
            try writer.finish()
            let cpu0 = ProcessCPU.seconds()
            var decoding = DecoderSettings.cpu
            decoding.cpuThreads = Admission.fewestDecoderThreads
            let source = try FileSource(url: clip, decoding: decoding)
            var n = 0
            while try source.nextFrame() != nil { n += 1 }
            (cpu, frames) = (ProcessCPU.seconds() - cpu0, n)
        } catch {
            throw .runtime("calibration: the decode clip: \(error)")
        }
        guard frames > 0 else { throw .runtime("calibration: the decode clip gave no frames") }
        return cpu / (Double(frames) * Double(canvas.width * canvas.height) / 1e6)
    }

    /// Frame `i` of the decode clip: `texture` moved by (3i, 2i) pixels,
    /// plus grain that changes every frame (read from `grain` at an offset of the frame's own).
    private static func panning(_ i: Int, texture: Texture, grain: [UInt8], pts: MediaTime) -> VideoFrame {
        let f = VideoFrame.allocate(width: canvas.width, height: canvas.height, format: .nv12, pts: pts)
        let (w, h) = (canvas.width, canvas.height)
        let y = UnsafeMutableRawPointer(mutating: f.planes[0].baseAddress).assumingMemoryBound(to: UInt8.self)
        let uv = UnsafeMutableRawPointer(mutating: f.planes[1].baseAddress).assumingMemoryBound(to: UInt8.self)
        let shift = (i &* 7919) % (grain.count - w * h)
        texture.luma.withUnsafeBufferPointer { t in
            grain.withUnsafeBufferPointer { g in
                for r in 0..<h {
                    let row = (r + 2 * i) * texture.width + 3 * i, out = r * f.planes[0].stride, noise = shift + r * w
                    for c in 0..<w { y[out + c] = t[row + c] &+ g[noise + c] }
                }
            }
        }
        texture.chroma.withUnsafeBufferPointer { t in
            for r in 0..<(h / 2) {
                let row = (r + i) * texture.width + 2 * ((3 * i) / 2), out = r * f.planes[1].stride
                for c in 0..<w { uv[out + c] = t[row + c] }
            }
        }
        return f
    }

    /// The clip's picture before it moves: luma with room to pan `decodeFrames`
    /// frames, and interleaved chroma at half its height.
    private struct Texture {
        var width: Int
        var luma: [UInt8]
        var chroma: [UInt8]

        init(frames: Int) {
            width = canvas.width + 3 * frames + 2
            let height = canvas.height + 2 * frames
            let w = width
            var luma = [UInt8](repeating: 0, count: w * height)
            for r in 0..<height {
                let v = Double(r)
                for c in 0..<w {
                    let u = Double(c)
                    let t = 40 * sin(u * 0.05 + 3 * sin(v * 0.021)) + 30 * sin(v * 0.07 + u * 0.013) + 12 * sin((u + v) * 0.31)
                    luma[r * w + c] = UInt8(clamping: Int(124 + t))
                }
            }
            var chroma = [UInt8](repeating: 128, count: w * (height / 2 + 1))
            for r in 0..<(height / 2 + 1) {
                for c in stride(from: 0, to: w - 1, by: 2) {
                    chroma[r * w + c] = UInt8(clamping: Int(128 + 30 * sin(Double(c / 2) * 0.03)))
                    chroma[r * w + c + 1] = UInt8(clamping: Int(128 + 30 * cos(Double(r) * 0.04)))
                }
            }
            self.luma = luma; self.chroma = chroma
        }
    }
}
