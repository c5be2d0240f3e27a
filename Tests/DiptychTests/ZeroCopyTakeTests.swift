import Foundation
import Testing
@testable import Diptych
import DiptychCore
@testable import DiptychGPU
import DiptychMedia

/// Encoder targets in GL's own memory, for takes on llvmpipe (no dma-buf,
/// no VA-API): the ring, the GPU stage's delivery and the conversion into the
/// targets run as on a VA-API machine; the stand-in encoder reads each target
/// back into NV12 in host memory, queues it for the output's encoder and
/// releases the target. Counts every call.
final class HostMemoryTargets: ZeroCopyDevice, @unchecked Sendable {
    private let current: @Sendable () -> (GPUCompositor, OutputID)?
    private let encoder: EncoderStage?
    private let lock = NSLock()
    private var targets: [Int: (gpu: GPUCompositor, id: EncoderTargetID)] = [:]
    private var next = 0
    private(set) var counts: [String: Int] = [:]
    private var sizes: Set<PixelSize> = []
    /// The sizes of the buffers the ring asked for.
    var allocatedSizes: Set<PixelSize> { lock.lock(); defer { lock.unlock() }; return sizes }

    /// Fences report "not yet" unless waited for, as on a loaded machine:
    /// frames stay in flight until the ring needs their buffers.
    private let slowFences: Bool

    init(current: @escaping @Sendable () -> (GPUCompositor, OutputID)?, encoder: EncoderStage?, slowFences: Bool = false) {
        self.current = current; self.encoder = encoder; self.slowFences = slowFences
    }

    private func count(_ s: String) { lock.lock(); counts[s, default: 0] += 1; lock.unlock() }
    func count(of s: String) -> Int { lock.lock(); defer { lock.unlock() }; return counts[s] ?? 0 }

    func allocate(size: PixelSize, modifier: UInt64) throws(GPUError) -> EncoderTargetBuffer {
        lock.lock(); defer { lock.unlock() }
        next += 1
        counts["allocate", default: 0] += 1
        sizes.insert(size)
        return EncoderTargetBuffer(id: next, frame: DmaBufFrame(width: size.width, height: size.height, fourcc: DmaBufFrame.nv12,
                                                                 modifier: modifier, planes: [.init(fd: -1, stride: size.width),
                                                                                              .init(fd: -1, stride: size.width)]))
    }
    func importTarget(_ b: EncoderTargetBuffer) throws(GPUError) {
        guard let (gpu, out) = current() else { throw .shutDown }
        let id = try gpu.addHostEncoderTarget(output: out)
        lock.lock(); targets[b.id] = (gpu, id); lock.unlock()
        count("import")
    }
    func checkEncoder(_ b: EncoderTargetBuffer) throws(MediaError) { count("check") }
    private func target(_ b: EncoderTargetBuffer) -> (gpu: GPUCompositor, id: EncoderTargetID) {
        lock.lock(); defer { lock.unlock() }
        return targets[b.id]!
    }
    func render(into b: EncoderTargetBuffer) throws(GPUError) -> UInt64 {
        count("render")
        let t = target(b)
        return try t.gpu.renderEncoderTarget(t.id)
    }
    func fenceSignalled(_ fence: UInt64, wait: Bool) throws(GPUError) -> Bool {
        guard let (gpu, _) = current() else { throw .shutDown }
        if slowFences && !wait { return false }
        return try gpu.encoderTargetDone(fence, wait: wait)
    }
    func encode(_ b: EncoderTargetBuffer, pts: MediaTime, release: EncoderRelease) {
        count("encode")
        let t = target(b)
        guard var frame = try? t.gpu.readEncoderTarget(t.id) else { release(); return }
        frame.pts = pts
        release()
        count("release")
        encoder?.push(.frame(frame))
    }
    func free(_ b: EncoderTargetBuffer) {
        lock.lock(); let t = targets.removeValue(forKey: b.id); lock.unlock()
        if let t { t.gpu.removeEncoderTarget(t.id) }
        count("free")
    }
}

/// Takes whose frames go through encoder targets (the zero-copy wiring) on
/// llvmpipe, against the same take read back.
@Suite(.serialized) struct ZeroCopyTakeTests {
    init() { _ = quietMedia }

    static let node = "/dev/dri/renderD128"
    static let report = VAAPIReport(directory: "/dev/dri", devices: [VADeviceReport(path: node, vendor: "stand-in", vaVersion: "1.17", profiles: [
        VAProfileSupport(profile: "VAProfileH264High", entrypoints: ["VAEntrypointEncSlice"])], error: nil)], problem: nil)

    final class Devices: @unchecked Sendable {
        private let lock = NSLock()
        private var all: [HostMemoryTargets] = []
        func add(_ d: HostMemoryTargets) { lock.lock(); all.append(d); lock.unlock() }
        var list: [HostMemoryTargets] { lock.lock(); defer { lock.unlock() }; return all }
    }

    func hooks(_ log: LogLines, devices: Devices?, loss: Set<Int> = [], slowFences: Bool = false) -> SessionHooks {
        var h = SessionHooks(storage: plentyOfSpace, log: log.add, simulateContextLossAtFrames: loss)
        // The fragment path without the direct-copy shortcut, as on a hardware GPU.
        h.makeCompositor = { sel throws(GPUError) in try GPUCompositor(selection: sel, directCopy: .off, pass: .fragment) }
        if let devices {
            h.zeroCopyOverride = ZeroCopyOverride(
                report: Self.report,
                support: EncoderTargetFacts(platform: "gbm", renderNode: Self.node, renderableModifiers: [0x0100_0000_0000_0002, 0]),
                device: { current, encoder in
                    let d = HostMemoryTargets(current: current, encoder: encoder, slowFences: slowFences)
                    devices.add(d)
                    return d
                })
        }
        return h
    }

    /// Every frame goes through the ring (render, fence, hand over, release),
    /// the file holds exactly the frames of the same take read back, and
    /// every buffer is freed at the end.
    @Test(arguments: [(Set<Int>(), false), ([7, 19], false), ([7, 19], true)] as [(Set<Int>, Bool)])
    func framesMatchTheReadbackTake(loss: Set<Int>, slowFences: Bool) throws {
        let dir = Scratch(); defer { dir.remove() }
        // A secondary that a loaded machine delays is waited for, not timed out: both takes composite the same frames.
        let config = { (out: String) in
            try takeConfig(primary: "testsrc:counter:320x240@30", out: out, duration: 1, extra: ["--secondary-timeout", "120"])
        }
        let plainLog = LogLines(), zeroLog = LogLines(), devices = Devices()
        let plain = try RecordingSession(configuration: config(dir.path("plain.mp4")), hooks: hooks(plainLog, devices: nil)).run()
        let zero = try RecordingSession(configuration: config(dir.path("zero.mp4")), hooks: hooks(zeroLog, devices: devices, loss: loss, slowFences: slowFences)).run()
        #expect(plain.frames == 30 && zero.frames == 30)
        #expect(plain.encoderPath == "software")
        // A file take's encoder queue (3), the VA-API encoder's hold (4) and the GPU's frames in flight (2).
        let n = EncoderTargetRing.size(queueDepth: 3, encoderHold: 4, gpuInFlight: 2)
        #expect(n == 9)
        #expect(zeroLog.contains("output \(dir.path("zero.mp4")): \(n) encoder targets (one NV12 buffer, modifier 0x0100000000000002)"))
        #expect(loss.isEmpty || zero.gpuRebuilds == loss.count)
        let trial = devices.list[0], ring = devices.list[1]
        #expect(trial.count(of: "check") == 1 && trial.count(of: "free") == 1)
        #expect(ring.count(of: "allocate") == n && ring.count(of: "free") == n)
        #expect(ring.count(of: "import") == n * (1 + loss.count))
        #expect(ring.count(of: "encode") == 30 && ring.count(of: "release") == 30)
        #expect(ring.count(of: "render") >= 30)
        let a = try decodeAll(dir.path("plain.mp4")).frames, b = try decodeAll(dir.path("zero.mp4")).frames
        #expect(a.count == 30 && b.count == 30)
        #expect(b.map(\.counter) == (0..<30).map { Optional($0) })
        for (x, y) in zip(a, b) { #expect(x.pts == y.pts && x.frame.format == y.frame.format) }
        let (differ, where_) = Self.rowDifferences(a, b)
        var why = ""
        if differ > 0 {
            // Which take is off: a second readback take says whether the readback take itself repeats.
            let again = try RecordingSession(configuration: config(dir.path("again.mp4")), hooks: hooks(LogLines(), devices: nil)).run()
            let c = try decodeAll(dir.path("again.mp4")).frames
            why = "; a second readback take (\(again.frames) frames) differs from the first by \(Self.rowDifferences(a, c).rows) rows"
                + " and from the zero-copy take by \(Self.rowDifferences(b, c).rows); warnings: "
                + (plainLog.all + zeroLog.all).filter { $0.contains("warning") }.joined(separator: " | ")
        }
        #expect(differ == 0, "\(differ) rows differ from the readback take: \(where_.joined(separator: ", "))\(why)")
    }

    /// An output of its own size and rate (a ladder's rung) gets a ring of
    /// encoder targets of its size, and only its frames go through it.
    @Test func rungHasARingOfItsSize() throws {
        let dir = Scratch(); defer { dir.remove() }
        let log = LogLines(), devices = Devices()
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("main.mp4"), duration: 1,
                                    extra: ["--secondary-timeout", "120", "--also-out", dir.path("rung.mp4"), "--also-size", "160x120",
                                            "--also-rate-divisor", "2"])
        let summary = try RecordingSession(configuration: config, hooks: hooks(log, devices: devices)).run()
        #expect(summary.frames == 30 && summary.outputs.map(\.frames) == [15])
        // The trial's device, then the main output's ring and the rung's.
        let rings = Array(devices.list.dropFirst())
        #expect(rings.count == 2)
        #expect(rings.map(\.allocatedSizes) == [[PixelSize(width: 320, height: 240)], [PixelSize(width: 160, height: 120)]])
        #expect(rings.map { $0.count(of: "encode") } == [30, 15])
        let rung = try decodeAll(dir.path("rung.mp4")).frames, main = try decodeAll(dir.path("main.mp4")).frames
        #expect(main.count == 30 && rung.count == 15)
        #expect(rung.allSatisfy { $0.frame.width == 160 && $0.frame.height == 120 })
        #expect(zip(rung, stride(from: 0, to: 30, by: 2)).allSatisfy { r, k in r.pts == main[k].pts }, "the rung's frames at the take's times")
    }

    /// Rows (of every plane of 320x240 frames) that differ between two takes, and where.
    static func rowDifferences(_ a: [DecodedFrame], _ b: [DecodedFrame]) -> (rows: Int, where: [String]) {
        var differ = 0, where_: [String] = []
        for (i, (x, y)) in zip(a, b).enumerated() where x.frame.format == y.frame.format {
            let f = x.frame.format
            for p in 0..<f.planeCount {
                let bytes = f.minimumStride(plane: p, width: 320)
                let rows = (0..<f.planeHeight(plane: p, height: 240)).filter {
                    memcmp(x.frame.planes[p].baseAddress + $0 * x.frame.planes[p].stride,
                           y.frame.planes[p].baseAddress + $0 * y.frame.planes[p].stride, bytes) != 0
                }
                differ += rows.count
                if let r0 = rows.first, let r1 = rows.last { where_.append("frame \(i) plane \(p) rows \(r0)...\(r1) (\(rows.count))") }
            }
        }
        return (differ + abs(a.count - b.count) * 360, where_)
    }

    /// An output whose encoder takes frames in host memory reads back, and the log says why.
    @Test func planSaysWhy() throws {
        let dir = Scratch(); defer { dir.remove() }
        let log = LogLines()
        var h = hooks(log, devices: Devices())
        h.zeroCopyOverride?.support.missing = ["EGL_EXT_image_dma_buf_import_modifiers"]
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("x.mp4"), duration: 0.2)
        let summary = try RecordingSession(configuration: config, hooks: h).run()
        #expect(summary.frames == 6)
        #expect(!log.contains("encoder targets ("))
        // The stand-in VA-API device is no encoder here: the file is libx264's, its reason its own.
        #expect(summary.encoder == "libx264" && summary.encoderPath == "software")
    }
}
