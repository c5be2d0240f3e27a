import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychGPU
import DiptychMedia

/// A zero-copy device that records every call, holds fences until the test
/// signals them, keeps the encoder's releases for the test to run (in any
/// order, from any thread), and checks at every render and free that the
/// buffer's last fence has signalled and the encoder has released it.
final class RecordingZeroCopyDevice: ZeroCopyDevice, @unchecked Sendable {
    private let lock = NSLock()
    private(set) var calls: [String] = []
    private(set) var violations: [String] = []
    private(set) var encoded: [(buffer: Int, pts: MediaTime)] = []
    private var releases: [(buffer: Int, release: EncoderRelease)] = []
    private var nextFence: UInt64 = 0
    private var signalled: UInt64 = 0
    /// Per buffer: its last fence and whether the encoder holds it.
    private var lastFence: [Int: UInt64] = [:]
    private var held: Set<Int> = []
    private var nextBuffer = 0
    var failAllocationAt: Int?
    /// Fences signal by themselves when polled (otherwise only `signal(through:)` or a wait does).
    var autoSignal = false

    func log(_ s: String) { lock.lock(); calls.append(s); lock.unlock() }
    var callLog: [String] { lock.lock(); defer { lock.unlock() }; return calls }
    var violationLog: [String] { lock.lock(); defer { lock.unlock() }; return violations }
    var encodedFrames: [(buffer: Int, pts: MediaTime)] { lock.lock(); defer { lock.unlock() }; return encoded }
    var heldCount: Int { lock.lock(); defer { lock.unlock() }; return releases.count }

    func allocate(size: PixelSize, modifier: UInt64) throws(GPUError) -> EncoderTargetBuffer {
        lock.lock(); defer { lock.unlock() }
        if nextBuffer == failAllocationAt { calls.append("allocate failed"); throw .dmaBuf("gbm_bo_create_with_modifiers2 failed") }
        let id = nextBuffer
        nextBuffer += 1
        calls.append("allocate \(id)")
        let frame = DmaBufFrame(width: size.width, height: size.height, fourcc: DmaBufFrame.nv12, modifier: modifier,
                                planes: [.init(fd: 100 + Int32(id), stride: size.width),
                                         .init(fd: 100 + Int32(id), offset: size.width * size.height, stride: size.width)])
        return EncoderTargetBuffer(id: id, frame: frame)
    }
    func importTarget(_ b: EncoderTargetBuffer) throws(GPUError) { log("import \(b.id)") }
    func checkEncoder(_ b: EncoderTargetBuffer) throws(MediaError) { log("check \(b.id)") }

    func render(into b: EncoderTargetBuffer) throws(GPUError) -> UInt64 {
        lock.lock(); defer { lock.unlock() }
        if let f = lastFence[b.id], f > signalled { violations.append("buffer \(b.id) rendered before its fence \(f) signalled") }
        if held.contains(b.id) { violations.append("buffer \(b.id) rendered while the encoder holds it") }
        nextFence += 1
        lastFence[b.id] = nextFence
        calls.append("render \(b.id) fence \(nextFence)")
        return nextFence
    }

    func fenceSignalled(_ fence: UInt64, wait: Bool) throws(GPUError) -> Bool {
        lock.lock(); defer { lock.unlock() }
        if wait || autoSignal { signalled = max(signalled, fence) }
        return fence <= signalled
    }

    func encode(_ b: EncoderTargetBuffer, pts: MediaTime, release: EncoderRelease) {
        lock.lock(); defer { lock.unlock() }
        if let f = lastFence[b.id], f > signalled { violations.append("buffer \(b.id) handed over before its fence \(f) signalled") }
        held.insert(b.id)
        encoded.append((b.id, pts))
        calls.append("encode \(b.id)")
        let id = b.id
        releases.append((b.id, EncoderRelease { [weak self] in self?.released(id) ; release() }))
    }

    private func released(_ id: Int) {
        lock.lock(); held.remove(id); calls.append("release \(id)"); lock.unlock()
    }

    func free(_ b: EncoderTargetBuffer) {
        lock.lock(); defer { lock.unlock() }
        if held.contains(b.id) { violations.append("buffer \(b.id) freed while the encoder holds it") }
        calls.append("free \(b.id)")
    }

    /// The context is lost: its fences will never matter again.
    func contextLost() { lock.lock(); signalled = nextFence; lock.unlock() }

    /// The GPU finishes every submission up to `fence`.
    func signal(through fence: UInt64) { lock.lock(); signalled = max(signalled, fence); lock.unlock() }

    /// The encoder lets go of the oldest held buffer (or the one at `index`).
    func releaseOne(at index: Int = 0) {
        lock.lock()
        guard index < releases.count else { lock.unlock(); return }
        let r = releases.remove(at: index)
        lock.unlock()
        r.release()
    }
    func releaseAll() { while heldCount > 0 { releaseOne() } }
}

@Suite struct EncoderTargetRingTests {
    let size = PixelSize(width: 64, height: 32)

    /// One frame through every step, then the buffer's reuse, in the order the calls were made.
    @Test func oneFrameLifecycle() throws {
        let d = RecordingZeroCopyDevice()
        let ring = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 2)
        #expect(d.callLog == ["allocate 0", "import 0", "allocate 1", "import 1"])
        try ring.render(pts: .zero)
        #expect(try ring.deliver(wait: false) == 0)  // the fence has not signalled: nothing goes to the encoder
        d.signal(through: 1)
        #expect(try ring.deliver(wait: false) == 1)
        d.releaseOne()
        try ring.render(pts: MediaTime(value: 1, timescale: 30))
        #expect(Array(d.callLog.dropFirst(4)) == ["render 0 fence 1", "encode 0", "release 0", "render 0 fence 2"])
        #expect(d.violationLog.isEmpty)
        #expect(ring.snapshot == [.fenced(2, MediaTime(value: 1, timescale: 30)), .free])
        ring.shutdown()
        #expect(d.callLog.suffix(2).sorted() == ["free 0", "free 1"])
    }

    /// Late fences, an encoder that releases out of order from another
    /// thread, a ring of three: every frame reaches the encoder, in order, and
    /// no buffer is reused before both its fence and the encoder's release.
    @Test func noReuseBeforeFenceAndRelease() throws {
        let d = RecordingZeroCopyDevice()
        let ring = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 3)
        let encoder = DispatchQueue(label: "encoder")
        let stop = LockedFlag()
        encoder.async {
            var n = 0
            while !stop.value {
                usleep(200)
                n += 1
                if d.heldCount >= 2 { d.releaseOne(at: n % 2) } else if n % 5 == 0 { d.releaseOne() }
            }
            d.releaseAll()
        }
        var fence: UInt64 = 0
        for i in 0..<200 {
            try ring.render(pts: MediaTime(value: Int64(i), timescale: 60))
            fence += 1
            if i % 3 == 0 { d.signal(through: fence - 1) }  // the GPU runs a frame behind
            try ring.deliver(wait: false)
        }
        try ring.deliver(wait: true)
        stop.set()
        encoder.sync {}
        #expect(d.violationLog.isEmpty, "\(d.violationLog.prefix(3))")
        let encoded = d.encodedFrames
        #expect(encoded.count == 200)
        #expect(encoded.map(\.pts.value) == (0..<200).map(Int64.init))
        #expect(ring.snapshot.allSatisfy { $0 == .free })
    }

    /// Every buffer with the encoder: `render` waits until one is released.
    @Test func exhaustedRingWaitsForTheEncoder() throws {
        let d = RecordingZeroCopyDevice()
        d.autoSignal = true
        let ring = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 2)
        for i in 0..<2 { try ring.render(pts: MediaTime(value: Int64(i), timescale: 30)) }
        try ring.deliver(wait: true)
        #expect(d.heldCount == 2)
        let released = LockedFlag()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { released.set(); d.releaseOne() }
        try ring.render(pts: MediaTime(value: 2, timescale: 30))
        #expect(released.value)
        #expect(d.violationLog.isEmpty)
        d.releaseAll()
    }

    /// A full ring with fenced frames hands them over (waiting for the oldest fence) rather than stall.
    @Test func exhaustedRingDeliversFencedFrames() throws {
        let d = RecordingZeroCopyDevice()
        let ring = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 2)
        for i in 0..<2 { try ring.render(pts: MediaTime(value: Int64(i), timescale: 30)) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { d.releaseOne() }
        try ring.render(pts: MediaTime(value: 2, timescale: 30))
        #expect(d.encodedFrames.map(\.pts.value) == [0, 1])
        #expect(d.violationLog.isEmpty)
        d.releaseAll()
    }

    /// A lost context: frames not handed over are dropped (to be rendered
    /// again), the buffers are imported into the new context, and buffers the
    /// encoder holds stay held until it releases them.
    @Test func contextLossAbandonsAndReimports() throws {
        let d = RecordingZeroCopyDevice()
        let ring = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 3)
        try ring.render(pts: MediaTime(value: 0, timescale: 30))
        d.signal(through: 1)
        try ring.deliver(wait: false)
        try ring.render(pts: MediaTime(value: 1, timescale: 30))
        try ring.render(pts: MediaTime(value: 2, timescale: 30))
        d.contextLost()
        #expect(ring.abandonUndelivered().map(\.value) == [1, 2])
        try ring.reimport()
        #expect(d.callLog.filter { $0.hasPrefix("import") }.count == 6)
        #expect(ring.snapshot == [.encoding, .free, .free])
        try ring.render(pts: MediaTime(value: 1, timescale: 30))
        #expect(d.violationLog.isEmpty)
        ring.shutdown()
        #expect(!d.callLog.contains("free 0"))  // still with the encoder
        d.releaseAll()
        #expect(d.callLog.filter { $0 == "free 0" }.count == 1)
        #expect(d.violationLog.isEmpty)
    }

    /// A failed allocation frees what was made before it.
    @Test func failedAllocationFreesTheOthers() {
        let d = RecordingZeroCopyDevice()
        d.failAllocationAt = 2
        #expect(throws: GPUError.dmaBuf("gbm_bo_create_with_modifiers2 failed")) {
            _ = try EncoderTargetRing(device: d, size: size, modifier: 0, count: 4)
        }
        #expect(d.callLog == ["allocate 0", "import 0", "allocate 1", "import 1", "allocate failed", "free 0", "free 1"])
    }

    @Test(arguments: [(4, 3, 2, 9), (30, 3, 2, 35), (0, 0, 0, 2), (1, 0, 0, 2)])
    func ringSize(queue: Int, hold: Int, inFlight: Int, expected: Int) {
        #expect(EncoderTargetRing.size(queueDepth: queue, encoderHold: hold, gpuInFlight: inFlight) == expected)
    }

    @Test func releaseRunsOnce() {
        let count = LockedCounter()
        do {
            let r = EncoderRelease { count.increment() }
            r(); r()
        }
        do { _ = EncoderRelease { count.increment() } }  // dropped without a call: runs on deinit
        #expect(count.value == 2)
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var v = false
    func set() { lock.lock(); v = true; lock.unlock() }
    var value: Bool { lock.lock(); defer { lock.unlock() }; return v }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var v = 0
    func increment() { lock.lock(); v += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return v }
}

/// A sink that takes dma-bufs slowly, releasing each after it "encodes" it, or fails every write.
final class SlowDmaBufSink: TakeOutput, @unchecked Sendable {
    let fails: Bool
    private let lock = NSLock()
    private var n = 0
    init(fails: Bool) { self.fails = fails }
    var encoderName: String { "stand-in" }
    var encoderReason: String { "test" }
    var encoderDescription: String { "stand-in" }
    var audioDescription: String { "none" }
    var takesDmaBuf: Bool { true }
    var written: Int { lock.lock(); defer { lock.unlock() }; return n }
    func write(_ frame: VideoFrame) throws(MediaError) {}
    func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?) throws(MediaError) {
        usleep(2000)
        release?()
        if fails { throw .encoderFailed(encoder: "stand-in", detail: "refused") }
        lock.lock(); n += 1; lock.unlock()
    }
    func finish() throws(MediaError) {}
}

@Suite struct EncoderStageDmaBufTests {
    static let frame = DmaBufFrame(width: 16, height: 16, fourcc: DmaBufFrame.nv12,
                                   planes: [.init(fd: -1, stride: 16), .init(fd: -1, offset: 256, stride: 16)])

    /// Every buffer handed to an output comes back exactly once: encoded,
    /// dropped by a live output's full queue, or skipped after a failure.
    @Test(arguments: [(true, false), (false, false), (false, true)])
    func everyBufferComesBack(live: Bool, fails: Bool) {
        let sink = SlowDmaBufSink(fails: fails)
        let stage = EncoderStage(key: 0, name: "out", sink: sink, live: live, depth: 2)
        let released = LockedCounter()
        for i in 0..<40 {
            stage.push(.dmaBuf(Self.frame, pts: MediaTime(value: Int64(i), timescale: 30), release: EncoderRelease { released.increment() }))
        }
        _ = stage.finish()
        #expect(released.value == 40)
        if live { #expect(stage.dropped > 0 && sink.written + stage.dropped == 40) }
        if fails { #expect(stage.failure != nil && sink.written == 0) }
        if !live && !fails { #expect(sink.written == 40 && stage.written == 40) }
    }
}
