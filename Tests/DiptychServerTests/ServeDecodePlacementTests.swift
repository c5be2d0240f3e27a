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

    /// An H.264 file of `size` at 30 fps, `frames` long (one second by default).
    private func clip(_ path: String, _ size: PixelSize, frames: Int = 30) throws {
        let w = try MediaWriter(url: path, video: VideoEncoderSettings(size: size, frameRate: FrameRate(30), encoder: .x264, preset: "ultrafast"))
        for i in 0..<frames {
            var f = VideoFrame.allocate(width: size.width, height: size.height, format: .nv12, pts: MediaTime(value: Int64(i), timescale: 30))
            let y = UnsafeMutableRawPointer(mutating: f.planes[0].baseAddress).assumingMemoryBound(to: UInt8.self)
            for p in 0..<(f.planes[0].stride * size.height) { y[p] = UInt8(truncatingIfNeeded: p &+ 7 &* i) }
            f.pts = MediaTime(value: Int64(i), timescale: 30)
            try w.write(f)
        }
        try w.finish()
    }

    /// 320x180 + 160x96 at 30 fps: 2.19 Mpx/s a take, 0.022 decode cores at 0.01 s/Mpx.
    static let model = CostModel(cpuSecondsPerMegapixel: 0.001, gpuMsPerMegapixel: 0, decodeCPUSecondsPerMegapixel: 0.01, source: "test")

    /// A registry on `pool` placing decoding as a 16-core GPU server with
    /// NVDEC would, with a decode budget of 0.03 cores: one take at `model`'s figure.
    private func placingRegistry(pool: CompositorPool, meter: CostMeter, lines: Lines) -> TakeRegistry {
        var settings = TakeRegistry.Settings(maxTakes: 8, capacity: Capacity(cpuCores: 64, gpuMsPerSecond: .infinity), serverGPU: "software",
                                             outputRoot: nil, encoderCores: 16, encoderThreads: 1)
        settings.placement = DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 0.03)
        return TakeRegistry(settings: settings, pool: pool, meter: meter, store: nil, log: { lines.add($0) })
    }

    /// The first take encoding on the GPU fits the decode budget and is
    /// decoded on the CPU (charged its decode cores); the second would
    /// exceed it and keeps its own choice; a take at a preset the GPU
    /// encoder does not replace libx264 at is not the server's to place.
    @Test func takesFillTheDecodeBudgetThenKeepTheirChoice() throws {
        let dir = Scratch(); defer { dir.remove() }
        let (a, b) = (dir.path("a.mp4"), dir.path("b.mp4"))
        // Two seconds a take at the primary's pace, so all three run at once when the last joins (the shares below).
        try clip(a, PixelSize(width: 320, height: 180), frames: 60)
        try clip(b, PixelSize(width: 160, height: 96), frames: 60)
        let pool = try CompositorPool(selection: GPUSelection(parsing: "software")!, contexts: 1, log: { _ in })
        defer { pool.shutdown() }
        let (model, lines) = (Self.model, Lines())
        let registry = placingRegistry(pool: pool, meter: CostMeter(calibration: model), lines: lines)
        defer { registry.shutdown(reason: "test over") }
        func post(_ name: String, preset: String) throws -> Take {
            let body = json(["primary": a, "secondary": b, "out": dir.path(name), "duration": 2, "realtime": "on", "preset": preset,
                             "audio": "none"])
            return try registry.create(Data(body.utf8)).take
        }
        let first = try post("first.mp4", preset: "ultrafast")
        let second = try post("second.mp4", preset: "ultrafast")
        let slower = try post("slower.mp4", preset: "veryfast")
        for t in [first, second, slower] { t.waitUntilEnded() }

        #expect(first.configuration.decoder == .auto)
        #expect(first.decoding.admitted?.cpu == true)
        #expect(abs(first.load.cpuDecodeMegapixelsPerSecond - (320 * 180 + 160 * 96) * 30 / 1e6) < 1e-9)
        #expect(abs(model.cpuCores(first.load) - (0.001 * 1.728 + 0.01 * 2.1888)) < 1e-9)
        #expect(second.configuration.decoder == .auto)
        #expect(second.decoding.admitted?.cpu == false)
        #expect(second.decoding.admitted?.reason.contains("exceed the CPU's decode budget, 0.02 of 0.03 decode cores") == true)
        #expect(second.load.cpuDecodeMegapixelsPerSecond == 0)
        #expect(slower.decoding.admitted == nil && slower.configuration.decoder == .auto)
        // Each take's decoders got a share of the 16 cores when it joined, and opened with it (two streams of 8 frame threads).
        #expect([first, second, slower].map(\.decoding.threads) == [8, 4, 2])
        #expect(first.decoding.clock.threads == 16)
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

    /// A burst of takes placed by the calibration's figure: once the placed
    /// take has measured a lower one, the server moves the running take it
    /// left to NVDEC to the CPU while the budget holds it, says so in its
    /// log and view, and charges its decoding from then.
    @Test func aMeasuredFigureMovesRunningTakesToTheCPU() throws {
        let dir = Scratch(); defer { dir.remove() }
        let (a, b) = (dir.path("a.mp4"), dir.path("b.mp4"))
        try clip(a, PixelSize(width: 320, height: 180), frames: 150)
        try clip(b, PixelSize(width: 160, height: 96), frames: 150)
        let pool = try CompositorPool(selection: GPUSelection(parsing: "software")!, contexts: 1, log: { _ in })
        defer { pool.shutdown() }
        // The budget holds one take at the calibration's figure.
        let (model, lines) = (Self.model, Lines())
        let meter = CostMeter(calibration: model, window: 10, minMegapixels: 1, minDecodedMegapixels: 1)
        let registry = placingRegistry(pool: pool, meter: meter, lines: lines)
        defer { registry.shutdown(reason: "test over") }
        func post(_ name: String) throws -> Take {
            let body = json(["primary": a, "secondary": b, "out": dir.path(name), "duration": 5, "preset": "ultrafast", "audio": "none"])
            return try registry.create(Data(body.utf8)).take
        }
        let first = try post("first.mp4"), second = try post("second.mp4")
        #expect(first.decoding.admitted?.cpu == true && second.decoding.admitted?.cpu == false)
        #expect(second.decoding.inputMegapixelsPerSecond > 2.1 && second.admissionLoad.cpuDecodeMegapixelsPerSecond == 0)
        // Nothing measured yet: nothing moves.
        registry.moveDecodingWhereCoresHaveRoom()
        #expect(second.decoding.current?.cpu == false)
        // The placed take measures 0.004 s a megapixel: both fit 0.03 cores now (0.0088 each).
        meter.sample(time: 0, cpu: 1, takes: [.init(id: first.id, megapixels: 0, gpuMs: 0)])
        meter.sample(time: 1, cpu: 2, takes: [.init(id: first.id, megapixels: 10, gpuMs: 0, cpuDecodedMegapixels: 100, cpuDecodeSeconds: 0.4)])
        #expect(meter.learnedDecodeFigure == 0.004)
        let deadline = Date().addingTimeInterval(20)
        while second.state != .recording && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        registry.moveDecodingWhereCoresHaveRoom()
        #expect(second.decoding.current?.cpu == true)
        #expect(second.decoding.current?.reason.contains("moved from NVDEC to the CPU once the placed takes measured their decoding: about 0.01 cores, 0.01 of 0.03") == true)
        #expect(second.decoding.admitted?.cpu == false, "what admission decided stays the take's record")
        #expect(second.admissionLoad.cpuDecodeMegapixelsPerSecond == second.decoding.inputMegapixelsPerSecond)
        #expect(!second.decodingMovable)
        #expect(lines.all.contains { $0.contains("take \(second.id): decoding: cpu (encoded on the GPU, moved from NVDEC") })
        let view = try JSONSerialization.jsonObject(with: JSONEncoder().encode(TakeView(second.snapshot(), gpu: second.gpuTotals, model: model)))
        #expect(((view as? [String: Any])?["cost"] as? [String: Any])?["decodePlacement"] as? String == second.decoding.current?.description)
        // Moved once only; the next sample moves nothing more.
        registry.moveDecodingWhereCoresHaveRoom()
        #expect(lines.all.filter { $0.contains("moved from NVDEC") }.count == 1)
        for t in [first, second] { t.waitUntilEnded() }
        #expect(second.snapshot().state == .finished, "\(second.snapshot().error ?? "")")
    }
}
