import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation
import Synchronization
import Testing
@testable import DiptychServer

/// Lines a registry logs, kept for the test to read.
private final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ l: String) { lines.withLock { $0.append(l) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Decode placement through the registry, in this process: real files, a
/// real shared context (llvmpipe) and real takes; NVDEC and the GPU
/// encoder's plan are the machine's facts, given here as a GPU server's
/// (this machine has neither), so what the server decides can be seen.
@Suite(.serialized) struct ServeDecodePlacementTests {
    init() { MediaLibraries.setLogLevel(.error) }

    /// An H.264 file of `size` at 30 fps, one second.
    private func clip(_ path: String, _ size: PixelSize) throws {
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: FrameRate(30), encoder: .x264, preset: "ultrafast"))
        for i in 0..<30 {
            var f = VideoFrame.allocate(width: size.width, height: size.height, format: .nv12, pts: MediaTime(value: Int64(i), timescale: 30))
            let y = UnsafeMutableRawPointer(mutating: f.planes[0].baseAddress).assumingMemoryBound(to: UInt8.self)
            for p in 0..<(f.planes[0].stride * size.height) { y[p] = UInt8(truncatingIfNeeded: p &+ 7 &* i) }
            f.pts = MediaTime(value: Int64(i), timescale: 30)
            try w.write(f)
        }
        try w.finish()
    }

    /// The first take encoding on the GPU fits the decode budget and is
    /// decoded on the CPU (charged its decode cores); the second would
    /// exceed it and keeps its own choice; a take at a preset the GPU
    /// encoder does not replace libx264 at is not the server's to place.
    @Test func takesFillTheDecodeBudgetThenKeepTheirChoice() throws {
        let dir = Scratch(); defer { dir.remove() }
        let (a, b) = (dir.path("a.mp4"), dir.path("b.mp4"))
        try clip(a, PixelSize(width: 320, height: 180))
        try clip(b, PixelSize(width: 160, height: 96))
        let pool = try CompositorPool(selection: GPUSelection(parsing: "software")!, contexts: 1, log: { _ in })
        defer { pool.shutdown() }
        // 320x180 + 160x96 at 30 fps: 2.2 Mpx/s, 0.022 decode cores at 0.01 s/Mpx; the budget holds one such take.
        let model = CostModel(cpuSecondsPerMegapixel: 0.001, gpuMsPerMegapixel: 0, decodeCPUSecondsPerMegapixel: 0.01, source: "test")
        var settings = TakeRegistry.Settings(maxTakes: 8, capacity: Capacity(cpuCores: 64, gpuMsPerSecond: .infinity), serverGPU: "software",
                                             outputRoot: nil, encoderCores: 1, encoderThreads: 1)
        settings.placement = DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 0.03)
        let lines = Lines()
        let registry = TakeRegistry(settings: settings, pool: pool, meter: CostMeter(calibration: model), store: nil,
                                    log: { lines.add($0) })
        defer { registry.shutdown(reason: "test over") }
        func post(_ name: String, preset: String) throws -> Take {
            let body = json(["primary": a, "secondary": b, "out": dir.path(name), "duration": 1, "preset": preset, "audio": "none"])
            return try registry.create(Data(body.utf8)).take
        }
        let first = try post("first.mp4", preset: "ultrafast")
        let second = try post("second.mp4", preset: "ultrafast")
        let slower = try post("slower.mp4", preset: "veryfast")
        for t in [first, second, slower] { t.waitUntilEnded() }

        #expect(first.configuration.decoder == .auto)
        #expect(first.decodePlacement?.cpu == true)
        #expect(abs(first.load.cpuDecodeMegapixelsPerSecond - (320 * 180 + 160 * 96) * 30 / 1e6) < 1e-9)
        #expect(abs(model.cpuCores(first.load) - (0.001 * 1.728 + 0.01 * 2.1888)) < 1e-9)
        #expect(second.configuration.decoder == .auto)
        #expect(second.decodePlacement?.cpu == false)
        #expect(second.decodePlacement?.reason.contains("exceed the CPU's decode budget, 0.02 of 0.03 decode cores") == true)
        #expect(second.load.cpuDecodeMegapixelsPerSecond == 0)
        #expect(slower.decodePlacement == nil && slower.configuration.decoder == .auto)
        // Each take ran, its streams decoded where it was placed; the view and the log say so.
        for t in [first, second, slower] {
            let s = t.snapshot()
            #expect(s.state == .finished, "\(t.id): \(s.error ?? "")")
            #expect(s.summary?.decoders.map(\.decoder) == ["cpu", "cpu"], "\(t.id)")
        }
        #expect(first.snapshot().summary?.decoders.map(\.reason) == Array(repeating: "the server decodes this take on the CPU (--decode-cores)", count: 2))
        #expect(second.snapshot().summary?.decoders.first?.reason.contains("--decode-cores") == false)
        // The placed take's clock counted its decoding; the others are not the server's to count.
        #expect(first.counters.cpuDecodeSeconds > 0 && first.counters.cpuDecodedMegapixels > 0)
        #expect(second.counters.cpuDecodeSeconds == 0 && slower.counters.cpuDecodeSeconds == 0)
        let view = try JSONSerialization.jsonObject(with: JSONEncoder().encode(TakeView(first.snapshot(), gpu: first.gpuTotals, model: model)))
        let cost = (view as? [String: Any])?["cost"] as? [String: Any]
        #expect((cost?["decodePlacement"] as? String)?.hasPrefix("cpu (encoded on the GPU") == true)
        #expect(lines.all.contains { $0.contains("take \(first.id): decoding: cpu (") })
    }
}
