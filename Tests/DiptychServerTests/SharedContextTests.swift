import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation
import Testing
@testable import DiptychServer

/// Takes sharing one context through the compositor pool, in this process.
@Suite(.serialized) struct SharedContextTests {
    init() { MediaLibraries.setLogLevel(.error) }

    private func config(_ out: String) -> TakeConfiguration {
        var c = TakeConfiguration()
        c.primary = .testPattern(name: "counter", size: PixelSize(width: 320, height: 180), rate: FrameRate(30))
        c.secondary = .testPattern(name: "solid-0000ff", size: PixelSize(width: 160, height: 90), rate: FrameRate(30))
        c.output = out
        c.duration = 2
        c.audio = .none
        c.preset = "ultrafast"
        c.gpu = "software"
        return c
    }

    /// A take whose context is lost mid-take rebuilds through the pool (a new
    /// shared context, nothing old reused) and still writes every frame; the
    /// take beside it, in the old context, is untouched.
    @Test func contextLossRebuildsThroughThePool() throws {
        let dir = Scratch(); defer { dir.remove() }
        guard let pool = try? CompositorPool(selection: GPUSelection(parsing: "software")!, contexts: 1, log: { _ in }) else {
            Issue.record("no EGL context on this machine")
            return
        }
        defer { pool.shutdown() }
        let load = TakeLoad(width: 320, height: 180, fps: 30)
        let lossy = Take(id: "lossy", configuration: config(dir.path("lossy.mp4")), load: load, encoderThreads: 1)
        let steady = Take(id: "steady", configuration: config(dir.path("steady.mp4")), load: load, encoderThreads: 1)
        lossy.run(pool: pool, simulateContextLossAtFrames: [20])
        steady.run(pool: pool)
        lossy.waitUntilEnded()
        steady.waitUntilEnded()
        #expect(pool.generation == 1)
        for (take, rebuilds) in [(lossy, 1), (steady, 0)] {
            let s = take.snapshot()
            #expect(s.state == .finished, "\(take.id): \(s.error ?? "")")
            #expect(s.summary?.gpuRebuilds == rebuilds)
            let decoded = try decodeAll(take.configuration.output!)
            #expect(decoded.map { CounterPattern.decode(frame: $0) } == (0..<60).map { Optional($0) }, "\(take.id)")
        }
    }
}
