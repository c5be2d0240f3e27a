import DiptychCore
import DiptychCUDA
import DiptychMedia
import Foundation
import Glibc
import Synchronization
import Testing
@testable import Diptych
@testable import DiptychGPU

/// Memory standing in for CUDA's readback allocations on llvmpipe (as
/// DiptychGPUTests' `MemfdMemory`): an unlinked file, mapped, that Mesa
/// imports (GL_EXT_memory_object_fd); its copies to "device" addresses are
/// memcpy into host buffers, which stand for an encoder's CUDA frames.
final class MappedReadbackMemory: ExportedMemory, @unchecked Sendable {
    let size: Int
    private let fd: Int32
    private let base: UnsafeMutableRawPointer
    private let copies: Counter

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var toHost = 0, toDevice = 0
        func note(host: Int = 0, device: Int = 0) { lock.lock(); toHost += host; toDevice += device; lock.unlock() }
        var counts: (host: Int, device: Int) { lock.lock(); defer { lock.unlock() }; return (toHost, toDevice) }
    }

    init(bytes: Int, copies: Counter) throws(GPUError) {
        size = (bytes + 4095) & ~4095
        self.copies = copies
        var template = Array((NSTemporaryDirectory() + "/diptych-nvenc-XXXXXX").utf8CString)
        fd = mkstemp(&template)
        if fd >= 0 { unlink(template) }
        // Mesa's export header: total size, offset of the data, the first 16 bytes of SHA-1("llvmpipe").
        let id: [UInt8] = [0x6c, 0xb9, 0xee, 0x07, 0x4a, 0x0b, 0xad, 0x7b, 0x01, 0x2e, 0x1b, 0xe9, 0x69, 0x7e, 0x53, 0x0f]
        var header = [Int(size + 8192), 4096].withUnsafeBytes { Array($0) } + id
        guard fd >= 0, ftruncate(fd, off_t(size + 8192)) == 0, pwrite(fd, &header, header.count, 0) == header.count,
              let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096), p != MAP_FAILED else {
            throw .unsupported("a mapped file of \(bytes) bytes")
        }
        base = p
    }

    func exportDescriptor() throws(GPUError) -> Int32 { dup(fd) }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) {
        dst.copyMemory(from: base, byteCount: count)
        copies.note(host: 1)
    }

    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) { throw .unsupported("uploads (readback only)") }

    func copyOut(_ planes: [DevicePlaneCopy]) throws(GPUError) {
        for p in planes {
            let dst = UnsafeMutableRawPointer(bitPattern: UInt(p.destination))!
            for y in 0..<p.rows { (dst + y * p.dstPitch).copyMemory(from: base + p.offset + y * p.pitch, byteCount: p.rowBytes) }
        }
        copies.note(device: 1)
    }

    deinit { munmap(base, size); close(fd) }
}

/// An output standing in for a `MediaWriter` on NVENC: it lends host
/// buffers as CUDA frames (with a wider row pitch, as FFmpeg's pool) and
/// keeps each frame's NV12 bytes, however it came.
final class LendingOutput: TakeOutput, @unchecked Sendable {
    final class Lent { let base = UnsafeMutableRawPointer.allocate(byteCount: 512 * 360, alignment: 256); deinit { base.deallocate() } }
    static let pitch = 512
    let lends: Bool
    private let lock = NSLock()
    private(set) var frames: [(pts: MediaTime, bytes: [UInt8], device: Bool)] = []
    private(set) var lent = 0
    /// The next write fails (a receiver gone), once.
    var failNext = false
    /// After this many frames the stand-in's NVENC "fails" and it goes on in
    /// software (`MediaWriter.encoderFallback`): no more CUDA frames lent.
    let fallBackAfter: Int?
    private var fellBack: EncoderFallback?

    init(lends: Bool, fallBackAfter: Int? = nil) { self.lends = lends; self.fallBackAfter = fallBackAfter }

    var encoderFallback: EncoderFallback? { lock.lock(); defer { lock.unlock() }; return fellBack }

    private func took(_ frame: (pts: MediaTime, bytes: [UInt8], device: Bool)) {
        lock.lock(); defer { lock.unlock() }
        frames.append(frame)
        if let n = fallBackAfter, frames.count == n, fellBack == nil {
            fellBack = EncoderFallback(at: frame.pts.seconds, from: "h264_nvenc", to: "libx264", reason: "Input/output error", continuedIn: "x-0002.mp4")
        }
    }

    private func failing() -> Bool {
        lock.lock(); defer { lock.unlock() }
        let f = failNext
        failNext = false
        return f
    }

    var encoderName: String { "h264_nvenc" }
    var encoderReason: String { "stand-in" }
    var encoderDescription: String { "h264_nvenc (stand-in)" }
    var audioDescription: String { "none" }
    var takesCUDA: Bool { lends }

    func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget? {
        guard lends, encoderFallback == nil else { return nil }
        let f = Lent()
        lock.lock(); lent += 1; lock.unlock()
        let base = UInt64(UInt(bitPattern: f.base))
        return CUDAFrameTarget(picture: CUDANV12Picture(luma: base, chroma: base + UInt64(Self.pitch * size.height), pitch: Self.pitch,
                                                        width: size.width, height: size.height), owner: f)
    }

    func write(_ frame: CUDAFrameTarget, pts: MediaTime) throws(MediaError) {
        if failing() { throw .writeFailed(path: "stand-in", detail: "receiver gone") }
        let p = frame.picture
        var bytes: [UInt8] = []
        for (plane, rows) in [(p.luma, p.height), (p.chroma, p.height / 2)] {
            let b = UnsafeRawPointer(bitPattern: UInt(plane))!
            for y in 0..<rows { bytes += Array(UnsafeRawBufferPointer(start: b + y * p.pitch, count: p.width)) }
        }
        took((pts, bytes, true))
    }

    func write(_ frame: VideoFrame) throws(MediaError) {
        if failing() { throw .writeFailed(path: "stand-in", detail: "receiver gone") }
        var bytes: [UInt8] = []
        for (i, rows) in [(0, frame.height), (1, frame.height / 2)] {
            let pl = frame.planes[i]
            for y in 0..<rows { bytes += Array(UnsafeRawBufferPointer(start: pl.baseAddress + y * pl.stride, count: frame.width)) }
        }
        took((frame.pts, bytes, false))
    }

    func finish() throws(MediaError) {}
}

/// Takes on NVENC's plan whose frames go device to device from the
/// readback's (stand-in) CUDA memory into frames the output lends, against
/// the same take whose frames come in host memory; across lost contexts.
@Suite(.serialized) struct NVENCDeviceTakeTests {
    static let l4 = NVENCFacts.available(device: "NVIDIA L4 (CUDA device 0)", cudaDevice: 0, driverAPI: "12.1",
                                         limits: [NVENCCodecLimits(codec: .h264, maxWidth: 4096, maxHeight: 4096, maxBFrames: 4, tenBit: false)])

    func take(lends: Bool, loss: Set<Int> = [], fallBackAfter: Int? = nil, log: LogLines,
              changes: (@Sendable (StreamChange) -> Void)? = nil) throws -> (output: LendingOutput, copies: MappedReadbackMemory.Counter, summary: TakeSummary) {
        let dir = Scratch(); defer { dir.remove() }
        let copies = MappedReadbackMemory.Counter()
        var h = SessionHooks(storage: plentyOfSpace, log: log.add, simulateContextLossAtFrames: loss)
        h.streamChange = changes
        var asked = GPURequest()
        asked.uploads = .off
        let request = asked
        h.makeCompositor = { sel throws(GPUError) in
            // The fragment path without the direct-copy shortcut, reading back into the stand-in CUDA memory.
            try GPUCompositor(selection: sel, directCopy: .off, pass: .fragment, request: request,
                              hooks: GPUTestHooks(exportedMemory: ExportedMemorySource(name: "test memory", allocate: { n throws(GPUError) in
                                  try MappedReadbackMemory(bytes: n, copies: copies)
                              })))
        }
        h.zeroCopyOverride = ZeroCopyOverride(
            report: VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri"),
            support: EncoderTargetFacts(platform: "device", renderNode: nil), nvenc: Self.l4,
            device: { _, _ in preconditionFailure("no VA-API device stands in") })
        let output = LendingOutput(lends: lends, fallBackAfter: fallBackAfter)
        let io = TakeIO(openInput: TakeIO.media.openInput, openOutput: { _, _, _, _, _, _ in output })
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("x.mp4"), duration: 1,
                                    extra: ["--encoder", "nvenc", "--secondary-timeout", "120"])
        let summary = try RecordingSession(configuration: config, hooks: h, io: io).run()
        #expect(summary.frames == 30 && summary.encoderPath == "nvenc", "\(summary.frames) \(summary.encoderPath)")
        return (output, copies, summary)
    }

    /// NVENC failing mid-take (the output's writer going on in software):
    /// the take goes on, the output's frames come in host memory from there,
    /// and the warning, the change and the output's summary say so.
    @Test func aFallbackMidTakeIsToldAndTheFramesComeToTheHost() throws {
        let log = LogLines()
        let changes = Mutex<[StreamChange]>([])
        let r = try take(lends: true, fallBackAfter: 12, log: log, changes: { c in changes.withLock { $0.append(c) } })
        let frames = r.output.frames
        #expect(frames.count == 30)
        #expect(frames.prefix(12).allSatisfy { $0.device }, "lent CUDA frames before the failure")
        // Frames lent before the failure was seen (in the queue, in flight) still come in them.
        let firstHost = try #require(frames.firstIndex { !$0.device })
        #expect((12..<30).contains(firstHost) && frames[firstHost...].allSatisfy { !$0.device }, "host frames from \(firstHost) on")
        let told = "output \(r.summary.output): h264_nvenc failed at 0.367 s (Input/output error); libx264 from there, going on in x-0002.mp4"
        #expect(log.contains("warning: " + told), "\(log.all.filter { $0.contains("failed") })")
        #expect(r.summary.warnings.contains(told))
        #expect(r.summary.encoderFallback?.to == "libx264" && r.summary.encoder == "h264_nvenc")
        let fellBack = changes.withLock { $0 }.filter { if case .encoderFellBack = $0 { true } else { false } }
        #expect(fellBack.count == 1, "told once: \(fellBack)")
    }

    @Test(arguments: [Set<Int>(), [7, 19]])
    func framesGoDeviceToDevice(loss: Set<Int>) throws {
        let plainLog = LogLines(), log = LogLines()
        let plain = try take(lends: false, log: plainLog)
        #expect(plainLog.contains("NVENC: frames read back and uploaded into CUDA frames (a host copy a frame: output "))
        #expect(plain.output.frames.count == 30 && plain.output.frames.allSatisfy { !$0.device })
        let device = try take(lends: true, loss: loss, log: log)
        #expect(log.contains("NVENC: " + ZeroCopySetup.nvencInCUDA), "\(log.all.filter { $0.contains("NVENC") })")
        let frames = device.output.frames
        #expect(frames.count == 30 && frames.allSatisfy(\.device), "every frame in a lent CUDA frame")
        #expect(device.copies.counts.host == 0 && device.copies.counts.device == 30, "one copy on the device a frame, none to host memory: \(device.copies.counts)")
        #expect(frames.map(\.pts) == plain.output.frames.map(\.pts))
        let differ = zip(frames, plain.output.frames).filter { $0.0.bytes != $0.1.bytes }.count
        #expect(differ == 0, "\(differ) frames differ from the same take in host memory")
        if !loss.isEmpty { #expect(log.contains("GPU context lost")) }
    }

    /// A live output that reconnects lends the frames of the writer open
    /// now; a frame lent by a writer since replaced, or while it is down, is
    /// dropped (counted lost), never an error that would end the output.
    @Test func aReconnectingOutputLendsFromItsOpenWriter() throws {
        let writers = Writers()
        let out = try ReconnectingOutput(name: "srt://x", window: 30, log: { _ in }, open: { _, _, _ in writers.open() })
        #expect(out.takesCUDA)
        let size = PixelSize(width: 64, height: 48)
        let a = try #require(out.lendCUDAFrame(size))
        try out.write(a, pts: .zero)
        #expect(writers.all[0].frames.count == 1 && writers.all[0].frames[0].device)
        let stale = try #require(out.lendCUDAFrame(size))
        writers.all[0].failNext = true
        try out.write(try #require(out.lendCUDAFrame(size)), pts: MediaTime(value: 1, timescale: 30))   // fails: the output goes down
        #expect(out.lendCUDAFrame(size) == nil, "none lent while down")
        Thread.sleep(forTimeInterval: 1.05)   // the first reconnect attempt comes after a second
        try out.write(stale, pts: MediaTime(value: 2, timescale: 30))   // reopens; the stale frame is dropped
        #expect(writers.all.count == 2 && writers.all[1].frames.isEmpty && out.framesLost == 2)
        try out.write(try #require(out.lendCUDAFrame(size)), pts: MediaTime(value: 3, timescale: 30))
        #expect(writers.all[1].frames.count == 1 && writers.all[1].frames[0].device)
        try out.finish()
    }

    /// A live output whose writer fell back to software mid-take asks for
    /// software again when it reopens (NVENC's engine may be gone), and
    /// keeps telling the fallback.
    @Test func aReconnectingOutputReopensInSoftwareAfterAFallback() throws {
        let writers = Writers(fallBackAfter: 1)
        let out = try ReconnectingOutput(name: "srt://x", window: 30, log: { _ in }, open: { _, _, after in writers.open(after: after) })
        let size = PixelSize(width: 64, height: 48)
        try out.write(try #require(out.lendCUDAFrame(size)), pts: .zero)
        #expect(out.encoderFallback?.from == "h264_nvenc" && out.lendCUDAFrame(size) == nil)
        writers.all[0].failNext = true
        try out.write(VideoFrame.allocate(width: 64, height: 48, format: .nv12, pts: MediaTime(value: 1, timescale: 30)))   // fails: down
        Thread.sleep(forTimeInterval: 1.05)
        try out.write(VideoFrame.allocate(width: 64, height: 48, format: .nv12, pts: MediaTime(value: 2, timescale: 30)))   // reopens
        #expect(writers.asked.count == 2 && writers.asked[0] == nil && writers.asked[1]?.to == "libx264", "\(writers.asked)")
        #expect(writers.all[1].frames.count == 1 && out.encoderFallback?.from == "h264_nvenc")
        try out.finish()
    }

    final class Writers: @unchecked Sendable {
        private let lock = NSLock()
        private var made: [LendingOutput] = []
        private var afters: [EncoderFallback?] = []
        let fallBackAfter: Int?
        init(fallBackAfter: Int? = nil) { self.fallBackAfter = fallBackAfter }
        func open(after: EncoderFallback? = nil) -> LendingOutput {
            // A writer opened after a fallback is a software one: it lends nothing.
            let w = LendingOutput(lends: after == nil, fallBackAfter: after == nil ? fallBackAfter : nil)
            lock.lock(); made.append(w); afters.append(after); lock.unlock()
            return w
        }
        var all: [LendingOutput] { lock.lock(); defer { lock.unlock() }; return made }
        /// What each open was told of a fallback before it.
        var asked: [EncoderFallback?] { lock.lock(); defer { lock.unlock() }; return afters }
    }
}
