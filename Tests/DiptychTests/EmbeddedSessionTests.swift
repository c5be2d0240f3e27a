import Foundation
import Testing
@testable import Diptych
import DiptychGPU
import DiptychMedia

/// Collects what an embedded session's callbacks deliver (they run on the session's threads).
final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var _rgba: [VideoFrame] = []
    private var _nv12: [VideoFrame] = []
    private var _packets: [EncodedVideoPacket] = []
    var rgba: [VideoFrame] { lock.lock(); defer { lock.unlock() }; return _rgba }
    var nv12: [VideoFrame] { lock.lock(); defer { lock.unlock() }; return _nv12 }
    var packets: [EncodedVideoPacket] { lock.lock(); defer { lock.unlock() }; return _packets }
    func add(rgba f: VideoFrame) { lock.lock(); _rgba.append(f); lock.unlock() }
    func add(nv12 f: VideoFrame) { lock.lock(); _nv12.append(f); lock.unlock() }
    func add(packet p: EncodedVideoPacket) { lock.lock(); _packets.append(p); lock.unlock() }
}

/// A solid RGBA frame with `padding` extra bytes per row.
func solidFrame(_ w: Int, _ h: Int, _ rgb: (UInt8, UInt8, UInt8), pts: MediaTime, padding: Int = 0) -> VideoFrame {
    let stride = w * 4 + padding
    let storage = FrameStorage(zeroedCount: stride * h)
    let p = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
    for y in 0..<h {
        for x in 0..<w {
            let o = y * stride + x * 4
            p[o] = rgb.0; p[o + 1] = rgb.1; p[o + 2] = rgb.2; p[o + 3] = 255
        }
    }
    return VideoFrame(width: w, height: h, format: .rgba, planes: [FramePlane(storage: storage, stride: stride)], pts: pts)
}

func pixel(_ f: VideoFrame, _ x: Int, _ y: Int) -> (Int, Int, Int) {
    let p = f.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self) + y * f.planes[0].stride + x * 4
    return (Int(p[0]), Int(p[1]), Int(p[2]))
}

func near(_ a: (Int, Int, Int), _ b: (Int, Int, Int), _ t: Int = 12) -> Bool {
    abs(a.0 - b.0) <= t && abs(a.1 - b.1) <= t && abs(a.2 - b.2) <= t
}

let red = (255, 0, 0), blue = (0, 0, 255)

/// Embedded sessions share the one software GPU: one at a time.
@Suite(.serialized) struct EmbeddedSessionTests {
    func config(_ w: Int = 320, _ h: Int = 180) -> EmbeddedConfiguration {
        var c = EmbeddedConfiguration(canvas: PixelSize(width: w, height: h), frameRate: FrameRate(30))
        c.gpu = "software"
        c.preset = "ultrafast"
        return c
    }

    @Test func pushFramesChangeLayoutAndReadPixels() throws {
        let got = Collected()
        let s = try EmbeddedSession(configuration: config(),
                                    outputs: EmbeddedOutputs(onRGBA: { got.add(rgba: $0) }, onNV12: { got.add(nv12: $0) }))
        // Host timestamps in microseconds, starting far from zero.
        let base: Int64 = 5_000_000
        for i in 0..<12 {
            let pts = MediaTime(value: base + Int64(i) * 33_333, timescale: 1_000_000)
            if i == 6 { try s.setLayout(.sideBySide) }
            try s.push(solidFrame(320, 180, (0, 0, 255), pts: pts), to: .secondary)
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts, padding: 64), to: .primary)
        }
        let summary = try s.finish()
        #expect(summary.frames == 12)
        let rgba = got.rgba, nv12 = got.nv12
        #expect(rgba.count == 12)
        #expect(nv12.count == 12)
        for (i, f) in rgba.enumerated() {
            #expect(f.pts == MediaTime(value: base + Int64(i) * 33_333, timescale: 1_000_000))
            #expect(f.pts.timescale == 1_000_000)
            if i < 6 {
                #expect(near(pixel(f, 10, 10), red), "frame \(i) top-left \(pixel(f, 10, 10))")
                #expect(near(pixel(f, 288, 160), blue), "frame \(i) PiP \(pixel(f, 288, 160))")
            } else {
                #expect(near(pixel(f, 80, 90), red), "frame \(i) left \(pixel(f, 80, 90))")
                #expect(near(pixel(f, 240, 90), blue), "frame \(i) right \(pixel(f, 240, 90))")
            }
        }
        #expect(nv12.map(\.pts) == rgba.map(\.pts))
        #expect(nv12.allSatisfy { $0.format == .nv12 && $0.width == 320 && $0.height == 180 })
    }

    /// docs/ARCHITECTURE.md, "Layout transitions": 200 ms at 30 fps is six
    /// frames of the pushed timestamps, the first the old picture, the sixth
    /// the new, the inset moving one way in between.
    /// The same from the take's schedule (`--layout-at`, `layoutSchedule`) with `--transition`.
    @Test(arguments: [false, true]) func aLayoutTransitionMovesTheInsetOverItsFrames(scheduled: Bool) throws {
        let got = Collected()
        var c = config()
        if scheduled {
            c.take.layoutSchedule = [ScheduledLayout(at: 4.0 / 30, layout: .pip(PiPPlacement(corner: .bottomLeft)))]
            c.take.layoutTransition = LayoutTransition(milliseconds: 200, easing: .linear)
        }
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { got.add(rgba: $0) }))
        for i in 0..<16 {
            let pts = MediaTime(value: Int64(i) * 1001, timescale: 30_030)
            if i == 4 && !scheduled {
                let change = try EmbeddedConfiguration.parseLayoutChange(arguments: ["--layout", "pip", "--pip-corner", "bottom-left",
                                                                                     "--transition", "200:linear"])
                #expect(change.transition == LayoutTransition(milliseconds: 200, easing: .linear))
                try s.setLayout(change.layout, transition: change.transition)
            }
            try s.push(solidFrame(320, 180, (0, 0, 255), pts: pts), to: .secondary)
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts), to: .primary)
        }
        _ = try s.finish()
        let frames = got.rgba
        #expect(frames.count == 16)
        // The inset's left edge on row 150.
        let left = frames.map { f in (0..<320).first { near(pixel(f, $0, 150), blue, 40) } ?? -1 }
        let start = left[0], end = left[15]
        #expect(start > 200 && end < 20, "\(left)")
        #expect(left[0...4].allSatisfy { $0 == start }, "\(left)")
        #expect(left[9...].allSatisfy { $0 == end }, "\(left)")
        #expect(left[5...8].allSatisfy { $0 < start && $0 > end }, "\(left)")
        #expect(zip(left.dropFirst(), left).allSatisfy { $0 <= $1 }, "\(left)")
    }

    /// An image overlay (`--overlay`, JSON `overlays`): a PNG read once with
    /// its alpha, drawn over the streams at its rectangle, premultiplied;
    /// beneath them with z bottom; a missing file is refused naming it.
    @Test func imageOverlaysAreDrawnWithTheirAlpha() throws {
        let png = FileManager.default.temporaryDirectory.appendingPathComponent("overlay-\(UUID().uuidString).png").path
        defer { try? FileManager.default.removeItem(atPath: png) }
        // 32×32: the left half opaque green, the right half red at alpha 128.
        let storage = FrameStorage(zeroedCount: 32 * 32 * 4)
        let p = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        for y in 0..<32 { for x in 0..<32 { let o = (y * 32 + x) * 4; if x < 16 { p[o + 1] = 255; p[o + 3] = 255 } else { p[o] = 255; p[o + 3] = 128 } } }
        try PNGWriter.write(VideoFrame(width: 32, height: 32, format: .rgba, planes: [FramePlane(storage: storage, stride: 128)], pts: .zero), to: png)

        var c = config()
        c.take.layout = .sideBySide
        c.take.overlays = [ImageOverlay(image: png, rect: NormalizedRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5)),
                           ImageOverlay(image: png, rect: NormalizedRect(x: 0, y: 0, width: 1, height: 1), opacity: 0.5, layer: .bottom)]
        let got = Collected()
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { got.add(rgba: $0) }))
        for i in 0..<3 {
            let pts = MediaTime(value: Int64(i) * 1001, timescale: 30_030)
            try s.push(solidFrame(320, 180, (0, 0, 255), pts: pts), to: .secondary)
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts), to: .primary)
        }
        _ = try s.finish()
        let f = try #require(got.rgba.last)
        // The overlay's left half (x 80...160) over the primary: opaque green.
        #expect(near(pixel(f, 100, 90), (0, 255, 0), 1), "\(pixel(f, 100, 90))")
        // Its right half over the secondary (blue): red at alpha 128 premultiplied: 128 + 0, 0, 255 × 127/255.
        #expect(near(pixel(f, 200, 90), (128, 0, 127), 1), "\(pixel(f, 200, 90))")
        // Outside the top overlay: the streams cover the bottom one.
        #expect(near(pixel(f, 10, 10), red, 1) && near(pixel(f, 310, 170), blue, 1))

        var missing = config()
        missing.take.overlays = [ImageOverlay(image: "/no/such/logo.png", rect: NormalizedRect(x: 0, y: 0, width: 0.5, height: 0.5))]
        do {
            let m = try EmbeddedSession(configuration: missing, outputs: EmbeddedOutputs(onRGBA: { _ in }))
            _ = try? m.push(solidFrame(320, 180, (255, 0, 0), pts: .zero), to: .primary)
            _ = try m.finish()
            Issue.record("a missing overlay image was accepted")
        } catch {
            #expect("\(error)".contains("--overlay") && "\(error)".contains("/no/such/logo.png"), "\(error)")
        }
    }

    @Test func streamsShareOneClockWhenTheSecondaryStartsLate() throws {
        let got = Collected()
        let s = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs(onRGBA: { got.add(rgba: $0) }))
        for i in 0..<12 {
            let pts = MediaTime(value: 300 + Int64(i), timescale: 30)
            // The secondary starts five frames after the primary, in 90 kHz ticks.
            if i >= 5 { try s.push(solidFrame(320, 180, (0, 0, 255), pts: pts.converted(to: 90_000)), to: .secondary) }
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts), to: .primary)
        }
        try s.finish()
        let rgba = got.rgba
        #expect(rgba.count == 12)
        for (i, f) in rgba.enumerated() {
            let corner = pixel(f, 288, 160)
            #expect(near(corner, i < 5 ? red : blue), "frame \(i) PiP corner \(corner)")
        }
    }

    @Test func packetsAreAnnexBWithHostTimestamps() throws {
        let got = Collected()
        var c = config()
        c.hasSecondary = false
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onPacket: { got.add(packet: $0) }))
        for i in 0..<20 {
            try s.push(solidFrame(320, 180, (UInt8(i * 10), 128, 0), pts: MediaTime(value: 1000 + Int64(i), timescale: 30)), to: .primary)
        }
        let summary = try s.finish()
        #expect(summary.frames == 20)
        #expect(summary.encoder == "libx264")
        let p = got.packets
        #expect(p.count == 20)
        #expect(p.first?.isKeyframe == true)
        #expect(p.first.map { Array($0.data.prefix(4)) == [0, 0, 0, 1] || Array($0.data.prefix(3)) == [0, 0, 1] } == true)
        #expect(p.map(\.pts) == (0..<20).map { MediaTime(value: 1000 + Int64($0), timescale: 30) })
        #expect(p.allSatisfy { $0.dts == $0.pts })
        do { try s.push(solidFrame(320, 180, (0, 0, 255), pts: MediaTime(value: 2000, timescale: 30)), to: .secondary); Issue.record("secondary accepted") }
        catch { #expect(error.code == .state) }
    }

    @Test func fileOutputIsPlayable() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("embedded-\(UUID().uuidString).mp4").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let s = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs(file: path))
        for i in 0..<15 {
            let pts = MediaTime(value: Int64(i), timescale: 30)
            try s.push(solidFrame(160, 90, (0, 200, 0), pts: pts), to: .secondary)
            try s.push(solidFrame(320, 180, (200, 0, 0), pts: pts), to: .primary)
        }
        let summary = try s.finish()
        #expect(summary.frames == 15)
        let source = try MediaSources.open(.url(path))
        defer { source.close() }
        var n = 0
        while try source.nextFrame() != nil { n += 1 }
        #expect(n == 15)
    }

    @Test func badUseGivesErrorsNotCrashes() throws {
        let s = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs())
        let t0 = MediaTime(value: 10, timescale: 30)
        // Stride below the minimum.
        var bad = solidFrame(320, 180, (1, 2, 3), pts: t0)
        bad.planes[0].stride = 100
        do { try s.push(bad, to: .primary); Issue.record("accepted a bad stride") } catch { #expect(error.code == .badFrame) }
        // Storage too small for the rows claimed.
        var short = solidFrame(320, 10, (1, 2, 3), pts: t0)
        short.height = 180
        do { try s.push(short, to: .primary); Issue.record("accepted a short frame") } catch { #expect(error.code == .badFrame) }
        // Zero size, odd NV12.
        var zero = solidFrame(2, 2, (1, 2, 3), pts: t0); zero.width = 0
        do { try s.push(zero, to: .primary); Issue.record("accepted zero width") } catch { #expect(error.code == .badFrame) }
        let odd = VideoFrame.allocate(width: 33, height: 20, format: .nv12, pts: t0)
        do { try s.push(odd, to: .primary); Issue.record("accepted odd NV12") } catch { #expect(error.code == .badFrame) }
        // Out-of-order timestamps.
        try s.push(solidFrame(320, 180, (0, 0, 255), pts: t0), to: .secondary)
        try s.push(solidFrame(320, 180, (255, 0, 0), pts: t0), to: .primary)
        do { try s.push(solidFrame(320, 180, (255, 0, 0), pts: t0), to: .primary); Issue.record("accepted a repeated pts") }
        catch { #expect(error.code == .timestamp); #expect(error.message.contains("not after")) }
        do { try s.push(solidFrame(320, 180, (255, 0, 0), pts: MediaTime(value: 9, timescale: 30)), to: .primary); Issue.record("accepted an earlier pts") }
        catch { #expect(error.code == .timestamp) }
        // A bad layout.
        var l = Layout.pip(); l.pip.size = 7
        do { try s.setLayout(l); Issue.record("accepted PiP size 7") } catch { #expect(error.code == .invalidArgument) }
        // dma-buf on a GPU without import: a clear error.
        if !s.gpu.capabilities.dmaBufImport {
            let d = DmaBufFrame(width: 320, height: 180, fourcc: DmaBufFrame.abgr8888, planes: [.init(fd: 0, stride: 1280)])
            do { try s.push(d, pts: MediaTime(value: 11, timescale: 30), to: .primary); Issue.record("dma-buf accepted") }
            catch { #expect(error.code == .unsupported); #expect(error.message.contains("EGL_EXT_image_dma_buf_import")) }
        }
        let summary = try s.finish()
        #expect(summary.frames == 1)
        // After finish.
        do { try s.push(solidFrame(320, 180, (255, 0, 0), pts: MediaTime(value: 20, timescale: 30)), to: .primary); Issue.record("accepted after finish") }
        catch { #expect(error.code == .state) }
        do { try s.finish(); Issue.record("finished twice") } catch { #expect(error.code == .state) }
    }

    @Test func badConfigurationsAreRefused() {
        #expect(throws: EmbeddingError.self) { try EmbeddedSession(configuration: config(321, 180)) }
        var c = config(); c.queueCapacity = 0
        #expect(throws: EmbeddingError.self) { try EmbeddedSession(configuration: c) }
        c = config(); c.gpu = "nonsense-gpu"
        #expect(throws: EmbeddingError.self) { try EmbeddedSession(configuration: c) }
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parse(arguments: ["--size", "320x180"]) }
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parse(arguments: ["--fps", "30"]) }
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parse(arguments: ["--size", "320x180", "--fps", "30", "--primary", "x.mp4"]) }
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parseLayout(arguments: ["--layout", "diagonal"]) }
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parseLayout(arguments: ["--bitrate", "5M"]) }
    }

    @Test func hostileNumbersAreErrorsNotTraps() throws {
        for args in [["--keyframe-interval", "1e300"], ["--secondary-timeout", "1e300"], ["--fps", "1000000"],
                     ["--bitrate", "99999999999999999999"], ["--pip-size", "1e308"], ["--pip-margin", "99999999999px"],
                     ["--size", "99999999x2"], ["--size", "-2x2"], ["--queue", "-1"]] {
            var all = ["--size", "320x180", "--fps", "30", "--gpu", "software"]
            all += args
            #expect(throws: EmbeddingError.self, "\(args)") {
                let (c, _, _) = try EmbeddedConfiguration.parse(arguments: all)
                _ = try EmbeddedSession(configuration: c)
            }
        }
        let s = try EmbeddedSession(configuration: config())
        for (value, scale) in [(Int64.max, Int32(1)), (Int64.min, 1), (Int64.max, Int32.max), (Int64(1) << 62, 90_000)] {
            let f = solidFrame(16, 16, (1, 2, 3), pts: MediaTime(value: value, timescale: scale))
            do { try s.push(f, to: .primary); Issue.record("accepted pts \(value)/\(scale)") } catch { #expect(error.code == .timestamp) }
        }
        // Near the bound on both streams, in different timescales: fine.
        let t = MediaTime(value: 2_000_000_000 * 90_000, timescale: 90_000)
        try s.push(solidFrame(16, 16, (0, 0, 255), pts: t.converted(to: Int32.max)), to: .secondary)
        try s.push(solidFrame(16, 16, (255, 0, 0), pts: t), to: .primary)
        s.endStream(.secondary)
        #expect(try s.finish().frames == 1)
    }

    /// Nominal for the first `nominalReads` reads, then critical.
    final class OverheatingMonitor: ThermalMonitor, @unchecked Sendable {
        private let lock = NSLock()
        private var reads = 0
        let nominalReads: Int
        init(nominalReads: Int) { self.nominalReads = nominalReads }
        func read() -> (state: ThermalState, source: String) {
            lock.lock(); defer { lock.unlock() }
            reads += 1
            return (reads > nominalReads ? .critical : .nominal, "test sensor")
        }
    }

    /// A pushed secondary that goes quiet for longer than `secondaryTimeout`
    /// and then delivers again is told to the host as lost, then back
    /// (`SessionHooks.streamChange`), once each.
    @Test func aSecondaryThatStallsIsToldLostThenBack() throws {
        final class Changes: @unchecked Sendable {
            let lock = NSLock()
            var all: [StreamChange] = []
            func add(_ c: StreamChange) { lock.withLock { all.append(c) } }
            var list: [StreamChange] { lock.withLock { all } }
        }
        let changes = Changes()
        var c = config()
        c.hasSecondary = true
        c.secondaryTimeout = 0.5
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(), log: { _ in }, startTimeout: 60,
                                    adjustHooks: { $0.streamChange = { changes.add($0) } })
        // 1 s of both, 1.5 s of the primary alone, 1 s of both again, at 30 frames a second.
        for i in 0..<105 {
            let pts = MediaTime(value: Int64(i), timescale: 30)
            if i < 30 || i >= 75 { try s.push(solidFrame(32, 18, (0, 0, 255), pts: pts), to: .secondary) }
            try s.push(solidFrame(32, 18, (255, 0, 0), pts: pts), to: .primary)
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        try s.finish()
        let got = changes.list
        #expect(got.count == 2, "\(got)")
        if case .sourceLost(.secondary, let reason)? = got.first { #expect(reason.contains("nothing for 0.5"), "\(reason)") }
        else { Issue.record("first: \(got)") }
        #expect(got.last == .sourceBack(.secondary), "\(got)")
    }

    @Test func aTakeThatEndsByItselfFailsPushesAndFinish() throws {
        let monitor = OverheatingMonitor(nominalReads: 1)
        let s = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs(), log: { _ in }, startTimeout: 60,
                                    adjustHooks: { $0.thermal = monitor; $0.monitorInterval = 0 })
        // The loop checks the monitors before each frame: the first check after the start reads critical.
        let started = Date()
        var ended: EmbeddingError?
        for i in 0..<200 {
            let pts = MediaTime(value: Int64(i), timescale: 30)
            do {
                try s.push(solidFrame(32, 18, (0, 0, 255), pts: pts), to: .secondary)
                try s.push(solidFrame(32, 18, (255, 0, 0), pts: pts), to: .primary)
            } catch {
                ended = error
                break
            }
        }
        #expect(ended?.code == .state)
        #expect(ended?.message.contains("critical thermal state") == true, "\(String(describing: ended))")
        #expect(Date().timeIntervalSince(started) < 1.5, "pushes must fail at once, not after the reader's stop timeout")
        do { try s.finish(); Issue.record("finish succeeded") } catch {
            #expect(error.code == .runtime)
            #expect(error.message.contains("critical thermal state"))
        }
        #expect(s.summary?.normalStop == false)
    }

    /// The capabilities of the GPU an embedded session opens with `gpu` (nil where none opens).
    static func capabilities(gpu: String) -> GPUCapabilities? {
        var c = EmbeddedConfiguration(canvas: PixelSize(width: 320, height: 180), frameRate: FrameRate(30))
        c.gpu = gpu
        c.preset = "ultrafast"
        guard let probe = try? EmbeddedSession(configuration: c) else { return nil }
        defer { _ = try? probe.finish() }
        return probe.gpu.capabilities
    }
    static let software = capabilities(gpu: "software")
    static let auto = capabilities(gpu: "auto")

    // A software session that does not open runs the test, which then fails opening one.
    @Test(.enabled(if: software?.dmaBufExport != true, "needs a software GPU without dma-buf export (this one exports)"))
    func dmaBufOutputWhereExportIsMissingIsRefused() throws {
        do {
            _ = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs(onDmaBuf: { _ in }))
            Issue.record("dma-buf output accepted without EGL_MESA_image_dma_buf_export")
        } catch {
            #expect(error.code == .unsupported)
            #expect(error.message.contains("EGL_MESA_image_dma_buf_export"))
        }
    }

    /// Where the GPU imports and exports dma-bufs (not llvmpipe): a render
    /// target of another compositor, exported, goes in as the secondary, and
    /// the session's own render target comes out as dma-buf.
    @Test(.enabled(if: auto.map { $0.dmaBufImport && $0.dmaBufExport && $0.eglImageExternal } == true,
                   "needs a GPU that imports and exports dma-bufs (not llvmpipe)"))
    func dmaBufInAndOutWhereOffered() throws {
        var c = config()
        c.gpu = "auto"

        let source = try GPUCompositor(selection: GPUSelection(parsing: "auto")!)
        defer { source.shutdown() }
        let size = PixelSize(width: 160, height: 90)
        let target = try source.addOutput(canvas: size)
        try source.upload(solidFrame(160, 90, (0, 0, 255), pts: .zero), role: .primary)
        try source.render(output: target, plan: CompositionPlan(canvas: size, draws: [
            DrawDescription(role: .primary, destination: PixelRect(size: size))]), pts: .zero, readback: false)
        let exported = try source.exportDmaBuf(output: target)
        defer { for p in exported.planes { close(p.fd) } }

        final class Seen: @unchecked Sendable { let lock = NSLock(); var buffers = 0; var pts: [MediaTime] = [] }
        let seen = Seen(), got = Collected()
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(
            onRGBA: { got.add(rgba: $0) },
            onDmaBuf: { d in
                seen.lock.lock(); seen.buffers += 1; seen.pts.append(d.pts); seen.lock.unlock()
                #expect(d.buffer.width == 320 && d.buffer.height == 180 && !d.buffer.planes.isEmpty)
                #expect(d.buffer.planes.allSatisfy { fcntl($0.fd, F_GETFD) != -1 })
                #expect(d.syncFenceFD == -1)
            }))
        for i in 0..<4 {
            let pts = MediaTime(value: Int64(i), timescale: 30)
            try s.push(DmaBufFrame(width: 160, height: 90, fourcc: exported.fourcc, modifier: exported.modifier,
                                   planes: exported.planes), pts: pts, to: .secondary)
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts), to: .primary)
        }
        try s.finish()
        #expect(seen.buffers == 4)
        #expect(seen.pts == (0..<4).map { MediaTime(value: Int64($0), timescale: 30) })
        let rgba = got.rgba
        #expect(rgba.count == 4)
        for f in rgba {
            #expect(near(pixel(f, 10, 10), red))
            #expect(near(pixel(f, 288, 160), blue), "imported secondary in the PiP corner: \(pixel(f, 288, 160))")
        }
    }

    @Test func finishReleasesABlockedPush() throws {
        var c = config()
        c.queueCapacity = 1
        c.secondaryTimeout = 30
        let s = try EmbeddedSession(configuration: c)
        final class Outcome: @unchecked Sendable { var accepted = 0; var error: EmbeddingError? }
        let outcome = Outcome()
        let pusherDone = DispatchSemaphore(value: 0)
        // No secondary comes, so the loop waits for one and the blocking pushes back up.
        Thread {
            for i in 0..<100 {
                do throws(EmbeddingError) { try s.push(solidFrame(32, 18, (255, 0, 0), pts: MediaTime(value: Int64(i), timescale: 30)), to: .primary); outcome.accepted += 1 }
                catch { outcome.error = error; break }
            }
            pusherDone.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.3)
        let started = Date()
        let summary = try s.finish()
        #expect(pusherDone.wait(timeout: .now() + 5) == .success)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(outcome.error?.code == .state)
        #expect(summary.frames == outcome.accepted)
    }

    @Test func finishWithoutFrames() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("embedded-empty-\(UUID().uuidString).ts").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let got = Collected()
        let s = try EmbeddedSession(configuration: config(), outputs: EmbeddedOutputs(file: path, onPacket: { got.add(packet: $0) }))
        let summary = try s.finish()
        #expect(summary.frames == 0)
        #expect(got.packets.isEmpty)
    }

    @Test func parsesCommandLineStyleOptions() throws {
        let (c, file, format) = try EmbeddedConfiguration.parse(arguments: [
            "--size", "640x360", "--fps", "30000/1001", "--layout", "side-by-side", "--secondary", "none",
            "--queue", "2", "--out", "x.ts", "--bitrate", "2M"])
        #expect(c.canvas == PixelSize(width: 640, height: 360))
        #expect(c.frameRate == FrameRate(30000, 1001))
        #expect(c.layout.kind == .sideBySide)
        #expect(!c.hasSecondary)
        #expect(c.queueCapacity == 2)
        #expect(c.bitrate == 2_000_000)
        #expect(file == "x.ts")
        #expect(format == nil)
        let (d, _, _) = try EmbeddedConfiguration.parse(arguments: ["--size", "640x360", "--fps", "30"])
        #expect(d.hasSecondary)
        let l = try EmbeddedConfiguration.parseLayout(arguments: ["--layout", "pip", "--pip-corner", "top-left"])
        #expect(l.kind == .pip && l.pip.corner == .topLeft)
        let t = try EmbeddedConfiguration.parseLayoutChange(arguments: ["--layout", "stacked", "--transition", "400"])
        #expect(t.layout.kind == .stacked && t.transition == LayoutTransition(milliseconds: 400, easing: .easeInOut))
        #expect(throws: EmbeddingError.self) { try EmbeddedConfiguration.parseLayoutChange(arguments: ["--layout", "pip", "--transition", "4:wobble"]) }
        let (e, _, _) = try EmbeddedConfiguration.parse(arguments: ["--size", "640x360", "--fps", "30", "--transition", "300:linear"])
        #expect(e.take.layoutTransition == LayoutTransition(milliseconds: 300, easing: .linear))
    }

    @Test func nonBlockingPushSaysWouldBlockWhenFull() throws {
        var c = config()
        c.queueCapacity = 1
        c.secondaryTimeout = 20
        let s = try EmbeddedSession(configuration: c)
        // No secondary frame comes, so the loop waits for one and the primary backs up.
        var results: [EmbeddedSession.PushResult] = []
        for i in 0..<40 {
            let r = try s.push(solidFrame(320, 180, (255, 0, 0), pts: MediaTime(value: Int64(i), timescale: 30)), to: .primary, mode: .nonBlocking)
            results.append(r)
            if r == .wouldBlock { break }
        }
        #expect(results.last == .wouldBlock)
        #expect(results.count < 20)
        s.endStream(.secondary)
        let summary = try s.finish()
        #expect(summary.frames == results.count - 1)
    }
}
