import Synchronization
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

extension GPU {
    @Suite struct Platforms {
        /// Renders a solid colour and reads it back: proves a working context.
        func provesWorking(_ c: GPUCompositor) throws {
            let out = try c.addOutput(canvas: PixelSize(width: 8, height: 4))
            try c.upload(solidFrame(8, 4, RGBA8(r: 10, g: 200, b: 30)), role: .primary)
            let p = CompositionPlan(canvas: PixelSize(width: 8, height: 4),
                                    draws: [DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 8, height: 4))])
            let img = try renderPreview(c, out, p)
            #expect(img.rgba(3, 2) == RGBA8(r: 10, g: 200, b: 30))
        }

        @Test func surfacelessPlatformWorks() throws {
            let lines = LogLines()
            let c = try GPUCompositor(selection: .platform(.surfaceless), log: lines.add)
            defer { c.shutdown() }
            #expect(c.info.platform == .surfaceless)
            #expect(c.info.version.contains("OpenGL ES 3"))
            #expect(lines.all.contains { $0.contains("platform surfaceless") && $0.contains("GL_RENDERER") })
            try provesWorking(c)
        }

        @Test func devicePlatformWorks() throws {
            let lines = LogLines()
            let c = try GPUCompositor(selection: GPUSelection(device: .software, platform: .device), log: lines.add)
            defer { c.shutdown() }
            #expect(c.info.platform == .device)
            #expect(c.info.isSoftware)
            #expect(c.info.device.contains("software"))
            #expect(lines.all.contains { $0.contains("platform device") && $0.contains(c.info.renderer) })
            try provesWorking(c)
        }

        /// Once a context exists, the driver's waits are set to sleep
        /// (`__GL_YIELD=USLEEP`), or the value the environment had is kept.
        @Test func driverWaitsSleep() throws {
            let had = ProcessInfo.processInfo.environment["__GL_YIELD"]
            let c = try GPUCompositor(selection: GPUSelection(device: .software, platform: .device))
            defer { c.shutdown() }
            #expect(getenv("__GL_YIELD").map { String(cString: $0) } == (had ?? "USLEEP"))
            DriverEnvironment.apply()   // a second call changes nothing
            #expect(getenv("__GL_YIELD").map { String(cString: $0) } == (had ?? "USLEEP"))
        }

        @Test func deviceByIndexWorks() throws {
            let c = try GPUCompositor(selection: GPUSelection(device: .index(0), platform: .device))
            defer { c.shutdown() }
            #expect(c.info.device.hasPrefix("EGL device 0"))
            try provesWorking(c)
        }

        @Test func autoTakesAWorkingRung() throws {
            let c = try GPUCompositor(selection: .auto)
            defer { c.shutdown() }
            try provesWorking(c)
        }

        @Test func capabilitiesOfThisContext() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let caps = c.info.capabilities
            // llvmpipe offers these; flags come from exact tokens.
            #expect(caps.timerQuery)
            #expect(caps.glRobustness)
            #expect(caps.createContextRobustness)
            #expect(caps.robustContext)
            #expect(caps.eglFenceSync)
            #expect(c.stats.timerQueries == caps.timerQuery)
            #expect(c.info.maxTextureSize >= 2048)
        }

        @Test func gbmWithoutRenderNodeFailsListingEveryRung() throws {
            try #require(drmRenderNodes().isEmpty, "this machine has /dev/dri render nodes")
            do {
                let c = try GPUCompositor(selection: .platform(.gbm))
                c.shutdown()
                Issue.record("GBM worked without /dev/dri")
            } catch {
                guard case .noDisplay(let attempts) = error else { Issue.record("\(error)"); return }
                #expect(attempts.count == 1)
                #expect(attempts.first?.platform == .gbm)
                #expect(attempts.first?.failure?.contains("/dev/dri") == true)
            }
        }

        /// A render node or a device index this machine does not have is
        /// named as such before any rung is tried (bad input, not a GPU failure).
        @Test func missingDeviceIsNamed() throws {
            for (selection, reason) in [(GPUSelection.renderNode("/dev/dri/renderD250"), "no such render node ("),
                                        (.index(99), "no EGL device 99 (this machine has ")] {
                do {
                    let c = try GPUCompositor(selection: selection)
                    c.shutdown()
                    Issue.record("\(selection) worked")
                } catch {
                    guard case .noSuchDevice(let named, let why) = error else { Issue.record("\(error)"); continue }
                    #expect(named == selection.description)
                    #expect(why.hasPrefix(reason), "\(why)")
                }
            }
            for text in ["auto", "software", "0", "device:0", "surfaceless:5"] {
                #expect(DisplayLadder.missingDevice(try #require(GPUSelection(parsing: text))) == nil, "\(text)")
            }
            let gbm = try #require(GPUSelection(parsing: "gbm:\(drmRenderNodes().count)"))
            #expect(DisplayLadder.missingDevice(gbm) != nil)
        }

        @Test func probeListsEveryRung() {
            let rungs = GPUCompositor.probeLadder(.auto)
            #expect(rungs.contains { $0.platform == .gbm })
            #expect(rungs.contains { $0.platform == .device && $0.succeeded && $0.renderer?.contains("llvmpipe") == true })
            #expect(rungs.contains { $0.platform == .surfaceless && $0.succeeded })
        }

        @Test func probeWhileACompositorRunsLeavesItWorking() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            _ = GPUCompositor.probeLadder(.software)
            try provesWorking(c)
        }

        @Test func twoCompositorsAtOnce() throws {
            let a = try makeCompositor()
            let b = try GPUCompositor(selection: .platform(.surfaceless))
            try provesWorking(a)
            try provesWorking(b)
            a.shutdown()
            try provesWorking(b)
            b.shutdown()
        }

        /// The render threads of two software contexts take turns
        /// (`SoftwareTurn`): while an item of one runs, an item of the other
        /// waits, so llvmpipe never maps in one context while the other's
        /// thread changes its pending work.
        @Test func softwareRenderThreadsTakeTurns() throws {
            let a = try makeCompositor()
            defer { a.shutdown() }
            let b = try makeCompositor()
            defer { b.shutdown() }
            try #require(a.info.isSoftware && b.info.isSoftware)
            let inside = DispatchSemaphore(value: 0)
            let aEnded = Mutex<UInt64>(0)
            let aFailed = Mutex<String?>(nil)
            let done = DispatchGroup()
            DispatchQueue.global().async(group: done) {
                do {
                    try a.withRenderer { _ in
                        inside.signal()
                        Thread.sleep(forTimeInterval: 0.3)
                        aEnded.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
                    }
                } catch {
                    aFailed.withLock { $0 = "\(error)" }
                    inside.signal()
                }
            }
            #expect(inside.wait(timeout: .now() + 30) == .success)
            let bStarted = try b.withRenderer { _ in DispatchTime.now().uptimeNanoseconds }
            #expect(done.wait(timeout: .now() + 30) == .success)
            #expect(aFailed.withLock { $0 } == nil)
            let ended = aEnded.withLock { $0 }
            #expect(ended > 0 && bStarted >= ended, "the second context's item ran \(Double(Int64(ended) - Int64(bStarted)) / 1e6) ms before the first's ended")
            try provesWorking(a)
            try provesWorking(b)
        }
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var add: @Sendable (String) -> Void { { [self] l in lock.lock(); lines.append(l); lock.unlock() } }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
