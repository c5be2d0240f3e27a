import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychGPU

/// Pictures the GPU encoder hands over (`EncoderInput.encoded`) through an
/// output's encoder stage: into files, through a reconnecting live output
/// (FLV over RTMP), into an embedding host's packet callback; an output
/// that encodes frames itself refuses them with a clear error.
@Suite struct EncodedOutputTests {
    static let size = PixelSize(width: 320, height: 240)
    static let rate = FrameRate(30)

    /// Counter frames as libx264 encodes them into Annex B access units (the GPU encoder's shape).
    static func packets(_ count: Int) throws -> [EncodedVideoPacket] {
        let source = try TestPatternSource(name: "counter", size: size, rate: rate)
        let encoder = try PacketEncoder(settings: VideoEncoderSettings(size: size, frameRate: rate, encoder: .x264, preset: "ultrafast"))
        var out: [EncodedVideoPacket] = []
        for _ in 0..<count {
            guard let f = try source.nextFrame() else { break }
            out += try encoder.encode(f)
        }
        return (out + (try encoder.finish())).map { EncodedVideoPacket(data: $0.data, pts: $0.pts, keyframe: $0.isKeyframe) }
    }

    @Test(arguments: ["take.mp4", "take.ts", "take.m3u8"])
    func stageWritesEncodedPictures(name: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let settings = VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .gpu)
        // As a take opens its outputs when the plan is the GPU encoder.
        let sink = try TakeIO.media.openOutput(0, OutputSpec(out: dir.path(name)), settings, nil, nil, nil)
        #expect(sink.takesEncoded && sink.encoderName == "gpu-h264")
        let stage = EncoderStage(key: 0, name: name, sink: sink)
        for p in try Self.packets(60) { stage.push(p) }
        #expect(stage.finish() == nil)
        #expect(stage.written == 60)
        let decoded = try decodeAll(dir.path(name)).frames
        #expect(decoded.map(\.counter) == (0..<60).map { Optional($0) })
        #expect(decoded.enumerated().allSatisfy { abs($0.element.pts.seconds - Double($0.offset) / 30) < 1e-4 })
    }

    /// An output that encodes frames takes no encoded picture, and says so.
    @Test func frameOutputRefusesEncodedPictures() throws {
        let dir = Scratch(); defer { dir.remove() }
        let writer = try MediaWriter(url: dir.path("frames.mp4"), video: VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .x264, preset: "ultrafast"))
        #expect(!writer.takesEncoded)
        let stage = EncoderStage(key: 0, name: "frames.mp4", sink: writer)
        stage.push(try Self.packets(1)[0])
        _ = stage.finish()
        #expect(stage.failure.map { "\($0)" }?.contains("libx264 encodes frames itself; output") == true, "\(String(describing: stage.failure))")
        // A sink that implements only frames refuses them too.
        let plain = FramesOnlySink()
        #expect(!plain.takesEncoded)
        #expect(throws: MediaError.self) { try plain.write(try Self.packets(1)[0]) }
    }

    /// FLV over RTMP (the muxer turns the Annex B pictures and parameter sets
    /// into length-prefixed ones), through the reconnecting live output.
    @Test(.timeLimit(.minutes(3)))
    func liveOutputCarriesEncodedPictures() throws {
        let dir = Scratch(); defer { dir.remove() }
        let url = "rtmp://127.0.0.1:\(LiveReceiver.freePort())/live/x"
        let receiver = try LiveReceiver(url: url, path: dir.path("got.ts"))
        let settings = VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .gpu)
        let log = LogLines()
        let sink = try ReconnectingOutput(name: url, window: 5, log: { log.add($0) }, open: { again, cancel, _ throws(MediaError) in
            try TakeIO.media.openOutput(0, OutputSpec(out: url), settings, nil, again ? .zero : nil, cancel)
        })
        #expect(sink.takesEncoded)
        let stage = EncoderStage(key: 0, name: url, sink: sink, live: true)
        for p in try Self.packets(60) { stage.push(p); Thread.sleep(forTimeInterval: 0.005) }
        #expect(stage.finish() == nil)
        #expect(receiver.waitForEnd(timeout: 20))
        let decoded = try decodeAll(receiver.path).frames
        #expect(decoded.count == 60 - stage.dropped && stage.dropped < 10, "\(decoded.count) decoded, \(stage.dropped) dropped")
        #expect(decoded.first?.counter == 0)
    }
}

extension EncodedOutputTests {
    /// An embedding host with `--encoder gpu`: each picture goes to its
    /// packet callback as it comes and into its file (encoded once).
    @Test func embeddedOutputTakesEncodedPictures() throws {
        let dir = Scratch(); defer { dir.remove() }
        final class Got: @unchecked Sendable { let lock = NSLock(); var packets: [EncodedVideoPacket] = [] }
        let got = Got()
        let outputs = EmbeddedOutputs(file: dir.path("host.mp4"), onPacket: { p in got.lock.withLock { got.packets.append(p) } })
        let primary = PushSource(name: "push:primary", size: Self.size, frameRate: Self.rate, capacity: 4)
        let bridge = EmbeddingBridge(primary: primary, secondary: nil, outputs: outputs, log: { _ in })
        let output = try EmbeddedOutput(bridge: bridge, video: VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .gpu))
        #expect(output.takesEncoded && output.encoderName == "gpu-h264")
        let packets = try Self.packets(45)
        for p in packets { try output.write(p) }
        try output.finish()
        #expect(got.packets.count == 45)
        #expect(got.packets.map(\.data) == packets.map(\.data) && got.packets.map(\.pts) == packets.map(\.pts))
        #expect(got.packets.allSatisfy { $0.duration == Self.rate.time(ofFrame: 1) })
        #expect(try decodeAll(dir.path("host.mp4")).frames.map(\.counter) == (0..<45).map { Optional($0) })
    }
}

extension EncodedOutputTests {
    /// A live output whose queue drops an encoded picture drops the pictures
    /// after it up to the next keyframe (they refer to it), and says so.
    @Test func droppedPictureWaitsForTheNextKeyframe() throws {
        let dir = Scratch(); defer { dir.remove() }
        let sink = BlockingSink()
        let stage = EncoderStage(key: 0, name: "live", sink: sink, live: true, depth: 1)
        let packets = try Self.packets(60)
        stage.push(packets[0])          // taken by the encoder thread, which blocks in it
        sink.entered.wait()
        stage.push(packets[1])          // queued
        stage.push(packets[2])          // the queue is full: dropped
        #expect(stage.needsKeyframe)
        for p in packets[3..<30] { stage.push(p) }   // refer to the dropped one: dropped
        sink.release.signal()
        // From the keyframe on, each once the one before is written (a depth of one drops otherwise).
        func written(_ n: Int) -> Bool {
            let end = Date().addingTimeInterval(10)
            while sink.written.count < n && Date() < end { Thread.sleep(forTimeInterval: 0.002) }
            return sink.written.count >= n
        }
        #expect(written(2))
        for (i, p) in packets[30...].enumerated() { stage.push(p); #expect(written(3 + i)) }
        #expect(stage.finish() == nil)
        #expect(!stage.needsKeyframe && stage.dropped == 28)
        #expect(sink.written.map(\.pts) == [packets[0], packets[1]].map(\.pts) + packets[30...].map(\.pts))
    }
}

/// Takes encoded pictures; the first write waits until `release` is signalled.
final class BlockingSink: TakeOutput, @unchecked Sendable {
    let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var _written: [EncodedVideoPacket] = []
    var written: [EncodedVideoPacket] { lock.withLock { _written } }
    var encoderName: String { "blocking" }
    var encoderReason: String { "test" }
    var encoderDescription: String { "blocking" }
    var audioDescription: String { "none" }
    var takesEncoded: Bool { true }
    func write(_ frame: VideoFrame) throws(MediaError) {}
    func write(_ packet: EncodedVideoPacket) throws(MediaError) {
        let first = lock.withLock { () -> Bool in _written.append(packet); return _written.count == 1 }
        if first { entered.signal(); release.wait() }
    }
    func finish() throws(MediaError) {}
}

extension EncodedOutputTests {
    /// An output's settings as the GPU encoder takes them: --bitrate (with --maxrate's
    /// buffer, a second of it without --bufsize), or --qp; the keyframe interval; --slices, else slices of at most 34 rows.
    @Test func gpuEncoderSettings() {
        var s = VideoEncoderSettings(size: Self.size, frameRate: FrameRate(60), encoder: .gpu, gop: 120)
        let slices = GPUH264Settings.defaultSlices(height: Self.size.height)
        #expect(ZeroCopySetup.gpuH264Settings(s) == GPUH264Settings(keyframeInterval: 120, bitrate: 10_000_000, slices: slices))
        s.maxrate = 4_000_000
        #expect(ZeroCopySetup.gpuH264Settings(s) == GPUH264Settings(keyframeInterval: 120, bitrate: 4_000_000, maxrate: 4_000_000, bufsize: 4_000_000, slices: slices))
        s.bufsize = 2_000_000
        #expect(ZeroCopySetup.gpuH264Settings(s).bufsize == 2_000_000)
        s.maxrate = nil; s.bufsize = nil
        s.qp = 30
        s.gop = nil
        #expect(ZeroCopySetup.gpuH264Settings(s) == GPUH264Settings(qp: 30, keyframeInterval: 60, slices: slices))
        s.slices = 5
        #expect(ZeroCopySetup.gpuH264Settings(s).slices == 5)
        // 1080p and 720p in two, 480p in one, 2160p in four.
        #expect([1080, 720, 480, 2160, 16].map { GPUH264Settings.defaultSlices(height: $0) } == [2, 2, 1, 4, 1])
    }
}

/// A sink that takes frames only (the protocol's defaults for the rest).
final class FramesOnlySink: TakeOutput, @unchecked Sendable {
    var encoderName: String { "frames-only" }
    var encoderReason: String { "test" }
    var encoderDescription: String { "frames-only" }
    var audioDescription: String { "none" }
    func write(_ frame: VideoFrame) throws(MediaError) {}
    func finish() throws(MediaError) {}
}
