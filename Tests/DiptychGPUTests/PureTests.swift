import CGLES
import Foundation
import DiptychCore
import Testing
@testable import DiptychGPU

/// No GL here: selection parsing, frame validation, colour maths, fence timeline.
@Suite struct GPUSelectionParsing {
    @Test(arguments: [
        ("auto", GPUSelection.auto),
        ("software", GPUSelection.software),
        ("0", GPUSelection.index(0)),
        ("2", GPUSelection.index(2)),
        ("/dev/dri/renderD128", GPUSelection.renderNode("/dev/dri/renderD128")),
        ("surfaceless", GPUSelection.platform(.surfaceless)),
        ("device", GPUSelection.platform(.device)),
        ("gbm", GPUSelection.platform(.gbm)),
        ("device:1", GPUSelection(device: .index(1), platform: .device)),
        ("device:software", GPUSelection(device: .software, platform: .device)),
        ("gbm:/dev/dri/renderD129", GPUSelection(device: .renderNode("/dev/dri/renderD129"), platform: .gbm)),
    ])
    func parses(_ text: String, _ want: GPUSelection) {
        #expect(GPUSelection(parsing: text) == want)
        #expect(GPUSelection(parsing: want.description) == want)
    }

    @Test(arguments: ["", "-1", "gpu", "/dev/dri/", "vulkan:0", "device:x"])
    func rejects(_ text: String) {
        if text.isEmpty { #expect(GPUSelection(parsing: text) == .auto) } else { #expect(GPUSelection(parsing: text) == nil) }
    }

    @Test func extensionTokensAreExact() {
        let t = extensionTokens("EGL_EXT_image_dma_buf_import_modifiers EGL_KHR_fence_sync")
        let caps = GPUCapabilities(egl: t, gl: ["GL_EXT_disjoint_timer_query_webgl2"])
        #expect(!caps.dmaBufImport)
        #expect(caps.dmaBufImportModifiers)
        #expect(caps.eglFenceSync)
        #expect(!caps.timerQuery)
    }
}

@Suite struct FrameValidationTable {
    static func frame(_ w: Int, _ h: Int, _ f: PixelFormat, strides: [Int]? = nil, bytes: Int? = nil, planes: Int? = nil) -> VideoFrame {
        let s = strides ?? (0..<f.planeCount).map { f.minimumStride(plane: $0, width: w) }
        let need = zip(s, 0..<f.planeCount).map { $0 * f.planeHeight(plane: $1, height: h) }.reduce(0, +)
        let storage = FrameStorage(zeroedCount: bytes ?? need)
        var offs: [Int] = [], o = 0
        for p in 0..<f.planeCount { offs.append(o); o += s[p] * f.planeHeight(plane: p, height: h) }
        let pl = (0..<(planes ?? f.planeCount)).map { FramePlane(storage: storage, offset: offs[min($0, offs.count - 1)], stride: s[min($0, s.count - 1)]) }
        return VideoFrame(width: w, height: h, format: f, planes: pl, pts: .zero)
    }

    @Test func goodFramesPass() throws {
        for f in PixelFormat.allCases { try validateUpload(Self.frame(64, 32, f)) }
        try validateUpload(Self.frame(64, 32, .rgba, strides: [300]))
    }

    @Test(arguments: [
        (frame(0, 32, .rgba), "zero size"),
        (frame(64, 0, .nv12), "zero size"),
        (frame(63, 32, .nv12), "odd dimensions"),
        (frame(64, 31, .i420), "odd dimensions"),
        (frame(64, 32, .nv12, planes: 1), "needs 2 plane(s)"),
        (frame(64, 32, .i420, planes: 2), "needs 3 plane(s)"),
        (frame(64, 32, .rgba, planes: 2), "needs 1 plane(s)"),
        (frame(64, 32, .rgba, strides: [255]), "stride 255 < minimum 256"),
        (frame(64, 32, .nv12, strides: [64, 62]), "plane 1 stride 62 < minimum 64"),
        (frame(64, 32, .rgba, bytes: 64 * 4 * 32 - 1), "plane 0 too small"),
        (frame(64, 32, .i420, bytes: 64 * 32 + 32 * 16 * 2 - 1), "plane 2 too small"),
    ])
    func badFramesAreTyped(_ frame: VideoFrame, _ reason: String) {
        do {
            try validateUpload(frame)
            Issue.record("accepted a bad frame (\(reason))")
        } catch {
            guard case .badFrame(let r) = error else { Issue.record("wrong error \(error)"); return }
            #expect(r.contains(reason), "\(r)")
        }
    }
}

@Suite struct YUVMath {
    @Test(arguments: ColorMatrix.allCases, ColorRange.allCases)
    func roundTrips(_ m: ColorMatrix, _ r: ColorRange) {
        let c = YUVCoefficients(matrix: m, range: r)
        for (R, G, B) in [(0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (1.0, 0.0, 0.0), (0.2, 0.7, 0.4)] {
            let y = c.yuv(r: R, g: G, b: B)
            let back = c.rgb(y: y.y, u: y.u, v: y.v)
            #expect(abs(back.r - R) < 1e-9 && abs(back.g - G) < 1e-9 && abs(back.b - B) < 1e-9)
        }
        let black = c.yuv(r: 0, g: 0, b: 0), white = c.yuv(r: 1, g: 1, b: 1)
        #expect(byte(black.y) == (r == .limited ? 16 : 0))
        #expect(byte(white.y) == (r == .limited ? 235 : 255))
        #expect(byte(white.u) == 128 && byte(white.v) == 128)
    }
}

/// Fences a test signals by hand.
final class FakeFences: @unchecked Sendable {
    var issued = 0
    var signalledUpTo = 0
    var waits: [Int] = []
    var deletedFences = 0
    let finishGL: Bool
    init(finishGL: Bool) { self.finishGL = finishGL }
    static func id(_ p: OpaquePointer) -> Int { Int(bitPattern: UnsafeRawPointer(p)) }
    var ops: FenceOps {
        FenceOps(
            insert: { self.issued += 1; return OpaquePointer(bitPattern: self.issued) },
            isSignalled: { FakeFences.id($0) <= self.signalledUpTo },
            wait: { f in
                self.waits.append(FakeFences.id(f))
                self.signalledUpTo = max(self.signalledUpTo, FakeFences.id(f))
                if self.finishGL { glFinish() }
            },
            delete: { _ in self.deletedFences += 1 },
            kind: "fake \(ObjectIdentifier(self))")
    }
    func signalAll() { signalledUpTo = issued }
}

@Suite struct FenceTimelineRules {
    @Test func releasesRunOnlyAfterTheirFenceInOrder() {
        let fakes = FakeFences(finishGL: false)
        let t = FenceTimeline(ops: fakes.ops)
        var log: [String] = []
        let a = t.pendingSerial          // used by submission 1
        t.submit()
        t.retire(lastUse: a) { log.append("a") }
        let b = t.pendingSerial          // used by submission 2
        t.retire(lastUse: b) { log.append("b") }
        t.submit()
        t.retire(lastUse: 0) { log.append("done-already") }
        #expect(log == ["done-already"])
        t.poll()
        #expect(log == ["done-already"])          // nothing signalled
        fakes.signalledUpTo = 1
        t.poll()
        #expect(log == ["done-already", "a"])     // b still in flight
        #expect(!t.isComplete(b))
        t.wait(for: b)
        #expect(log == ["done-already", "a", "b"])
        #expect(fakes.waits == [2])
        #expect(fakes.deletedFences == 2)
    }

    @Test func waitSubmitsAnUnfencedUseAndDrainRunsEverything() {
        let fakes = FakeFences(finishGL: false)
        let t = FenceTimeline(ops: fakes.ops)
        var ran = 0
        t.retire(lastUse: t.pendingSerial) { ran += 1 }   // used, never submitted
        #expect(t.inFlight == 0 && ran == 0)
        t.drain()
        #expect(ran == 1)
        #expect(fakes.issued == 1)
    }
}

@Suite struct CopyAndPool {
    @Test(arguments: [1, 3, 4])
    func bulkCopyCopiesEveryByte(_ lanes: Int) {
        let n = 3 * 1024 * 1024 + 13
        let src = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 64)
        let dst = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 64)
        defer { src.deallocate(); dst.deallocate() }
        var rng = LCG(state: 3)
        for i in 0..<n { src.storeBytes(of: rng.next(), toByteOffset: i, as: UInt8.self) }
        dst.initializeMemory(as: UInt8.self, repeating: 0, count: n)
        BulkCopy.copy(dst, src, n, lanes: lanes)
        #expect(memcmp(dst, src, n) == 0)
    }

    @Test func poolReusesReleasedBuffers() {
        let pool = FrameBufferPool(keep: 2)
        var a: FrameStorage? = pool.storage(count: 1000) { $0.storeBytes(of: 7, as: UInt8.self) }
        let first = a!.base
        a = nil
        let b = pool.storage(count: 1000) { _ in }
        #expect(b.base == first)
        let c = pool.storage(count: 1000) { _ in }
        #expect(c.base != first)
    }
}

@Suite struct RenderThreadLoadSums {
    /// Several contexts' loads add up (the nvdec stage's `--contexts`), and a
    /// difference of snapshots undoes a sum.
    @Test func loadsAddAndSubtract() {
        var a = RenderThreadLoad(), b = RenderThreadLoad()
        a.busySeconds = 1.5; a.cpuSeconds = 1; a.items = 10; a.wakeups = 2; a.phaseSeconds = ["fence": 0.5, "begin": 0.25]
        b.busySeconds = 0.5; b.cpuSeconds = 0.25; b.items = 4; b.wakeups = 1; b.phaseSeconds = ["fence": 0.25, "flush": 0.125]
        a.gpuEncoderPassSeconds = ["deblock": 0.5, "search": 0.25]; b.gpuEncoderPassSeconds = ["deblock": 0.25]
        let s = a + b
        #expect(s.busySeconds == 2 && s.cpuSeconds == 1.25 && s.items == 14 && s.wakeups == 3)
        #expect(s.phaseSeconds == ["fence": 0.75, "begin": 0.25, "flush": 0.125])
        let d = s - b
        #expect(d.busySeconds == a.busySeconds && d.cpuSeconds == a.cpuSeconds && d.items == a.items && d.wakeups == a.wakeups)
        #expect(d.phaseSeconds == ["fence": 0.5, "begin": 0.25, "flush": 0])
        #expect(s.gpuEncoderPassSeconds == ["deblock": 0.75, "search": 0.25] && d.gpuEncoderPassSeconds == a.gpuEncoderPassSeconds)
    }
}
