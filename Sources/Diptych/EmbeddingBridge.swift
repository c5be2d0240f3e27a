import Foundation
import Synchronization
import DiptychCore
import DiptychGPU
import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// What an embedded take plugs into the session (`TakeIO`): its push
/// sources as inputs, the host's callbacks and file as outputs, readers of
/// the render target for RGBA and dma-buf frames. Host-side state (the GPU
/// once started, why the take ended, the layout for the next push) lives
/// here too.
final class EmbeddingBridge: Sendable {
    let primary: PushSource
    let secondary: PushSource?
    let outputs: EmbeddedOutputs
    let log: @Sendable (String) -> Void

    private struct State {
        var pendingLayout: LayoutChange?
        var gpu: GPUInfo?
        var endReason: StopReason?
        var origin: MediaTime?
        /// The take started, or failed to (`waitStarted` returns).
        var startedOrOver = false
    }
    private let state = Condition(State())

    init(primary: PushSource, secondary: PushSource?, outputs: EmbeddedOutputs, log: @escaping @Sendable (String) -> Void) {
        self.primary = primary; self.secondary = secondary; self.outputs = outputs; self.log = log
    }

    var gpu: GPUInfo? { state.withLock { $0.gpu } }
    var endReason: StopReason? { state.withLock { $0.endReason } }

    /// Waits until the take has started (true) or `timeout` passes.
    func waitStarted(timeout: Double) -> Bool { state.wait(until: { $0.startedOrOver }, timeout: timeout) }
    /// Wakes `waitStarted` without a GPU (the take failed to start).
    func wakeStartWaiters() { state.update { $0.startedOrOver = true } }

    /// The layout for the next primary frame pushed.
    func setLayout(_ change: LayoutChange) {
        state.withLock { $0.pendingLayout = change }
    }

    /// Takes the pending layout change for the primary frame about to be pushed.
    func takePendingLayout() -> LayoutChange? {
        state.withLock { s in defer { s.pendingLayout = nil }; return s.pendingLayout }
    }

    /// Puts back a layout change whose frame was not accepted (unless a newer one came).
    func restoreLayout(_ change: LayoutChange) {
        state.withLock { if $0.pendingLayout == nil { $0.pendingLayout = change } }
    }

    /// Take timeline → host timeline (the first primary frame's timestamp is
    /// the take's zero), in the host's timescale.
    func hostTime(_ t: MediaTime) -> MediaTime {
        guard let origin = state.withLock({ $0.origin }) else { return t }
        return (t + origin).converted(to: origin.timescale)
    }
    var hostTimescale: Int32? { state.withLock { $0.origin?.timescale } }

    /// The take's ends, as the session runs them.
    var io: TakeIO {
        var io = TakeIO(
            openInput: { [self] role, _, _, _, _ throws(MediaError) in
                guard let s: any TakeInput = role == .primary ? primary : secondary else {
                    throw .invalidSource(spec: "push:\(role)", reason: "the session has no \(role) stream")
                }
                return s
            },
            openOutput: { [self] index, spec, video, _, _, _ throws(MediaError) in
                guard index == 0 else { throw .writeFailed(path: "output \(index)", detail: "embedded sessions have one output") }
                return try EmbeddedOutput(bridge: self, video: video, segmentTime: spec.segmentTime, hlsListSize: spec.hlsListSize)
            })
        io.taps = [EmbeddedTaps(bridge: self)]
        io.sharedClock = true
        io.outputIsNamed = outputs.file != nil
        io.emptyTakeFails = false
        io.started = { [self] info in
            state.update { $0.gpu = info; $0.startedOrOver = true }
        }
        io.timelineOrigin = { [self] origin in state.withLock { $0.origin = origin } }
        io.ending = { [self] reason in
            // Pushes fail from now on and the reader threads leave the push sources at once.
            state.withLock { if $0.endReason == nil { $0.endReason = reason } }
            primary.close()
            secondary?.close()
        }
        return io
    }
}

/// RGBA readback and dma-buf export of the render target after each frame,
/// the same target the NV12 frames come from.
final class EmbeddedTaps: RenderTap, Sendable {
    private let bridge: EmbeddingBridge
    init(bridge: EmbeddingBridge) { self.bridge = bridge }

    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts t: MediaTime, index: Int) {
        let outputs = bridge.outputs
        if let onRGBA = outputs.onRGBA, index % max(1, outputs.rgbaInterval) == 0 {
            do throws(GPUError) {
                var f = try gpu.previewRGBA(output: target)
                f.pts = bridge.hostTime(t)
                onRGBA(f)
            } catch {
                bridge.log("warning: RGBA readback of frame \(index): \(error)")
            }
        }
        if let onDmaBuf = outputs.onDmaBuf {
            do throws(GPUError) {
                let e = try gpu.exportDmaBuf(output: target)
                onDmaBuf(CompositedDmaBuf(buffer: e, pts: bridge.hostTime(t), syncFenceFD: -1))
                for p in e.planes where p.fd >= 0 { close(p.fd) }
            } catch {
                bridge.log("warning: dma-buf export of frame \(index): \(error)")
            }
        }
    }
}

/// The embedded take's output, fed by the encoder thread with the NV12
/// frames read back from the render target: the NV12 callback, an Annex B
/// packet encoder, and a file (its own `MediaWriter`, so a file and packets
/// together encode twice). With the GPU encoder (`--encoder gpu`) it takes
/// the GPU's access units instead: the packet callback gets each as it
/// comes, and the file is written from them (encoded once).
final class EmbeddedOutput: TakeOutput, Sendable {
    private let bridge: EmbeddingBridge
    private let writer: MediaWriter?
    private let packets: PacketEncoder?
    /// The host timestamps of the frames given to `packets` whose packets
    /// have not come out yet (one packet a frame, in order: no B-frames), so
    /// a packet carries its primary frame's pts exactly as pushed, not as
    /// rounded through the encoder's time base. The encoder thread's.
    private let pendingPTS = Mutex<[MediaTime]>([])

    init(bridge: EmbeddingBridge, video: VideoEncoderSettings, segmentTime: Double? = nil, hlsListSize: Int? = nil) throws(MediaError) {
        self.bridge = bridge
        let o = bridge.outputs
        gpuEncoded = video.encoder == .gpu
        frameDuration = video.frameRate.time(ofFrame: 1)
        if let path = o.file {
            var v = video
            v.maxBFrames = v.maxBFrames ?? 0
            writer = gpuEncoded
                ? try MediaWriter(url: path, container: o.fileFormat, preEncoded: PreEncodedVideo(settings: v), audio: nil,
                                  segmentTime: segmentTime, hlsListSize: hlsListSize)
                : try MediaWriter(url: path, container: o.fileFormat, video: v, audio: nil, segmentTime: segmentTime, hlsListSize: hlsListSize)
        } else {
            writer = nil
        }
        packets = o.onPacket != nil && !gpuEncoded ? try PacketEncoder(settings: video) : nil
    }

    /// The GPU encodes: pictures come encoded (`write(_: EncodedVideoPacket)`).
    private let gpuEncoded: Bool
    /// One frame at the take's rate: the duration of a picture that gives none.
    private let frameDuration: MediaTime
    var takesEncoded: Bool { gpuEncoded }
    var segments: [WrittenSegment] { writer?.segments ?? [] }
    var awaitsCut: Bool { writer?.awaitsCut ?? false }
    var encoderFallback: EncoderFallback? { writer?.encoderFallback ?? packets?.encoderFallback }

    /// A picture the GPU encoded: to the packet callback (at its host
    /// timestamp) and into the file.
    func write(_ packet: EncodedVideoPacket) throws(MediaError) {
        guard gpuEncoded else { throw .invalidFrame(reason: "this embedded output encodes frames itself; it takes no encoded pictures") }
        if let onPacket = bridge.outputs.onPacket {
            var p = packet
            p.pts = bridge.hostTime(packet.pts)
            p.dts = bridge.hostTime(packet.dts)
            if p.duration.value <= 0 { p.duration = frameDuration }
            if let scale = bridge.hostTimescale { p.duration = p.duration.converted(to: scale) }
            onPacket(p)
        }
        try writer?.write(packet)
    }

    var encoderName: String {
        writer?.encoderName ?? packets?.encoderName ?? (gpuEncoded && bridge.outputs.onPacket != nil ? GPUEncoderFacts.encoderName : "none")
    }
    var encoderReason: String {
        writer?.encoderReason ?? packets?.encoderReason ?? (gpuEncoded && bridge.outputs.onPacket != nil ? "encoded on the GPU" : "no encoded output requested")
    }
    var encoderDescription: String {
        writer?.encoderDescription ?? packets?.encoderDescription ?? (encoderName == "none" ? "none (frames only)" : "\(encoderName) (\(encoderReason))")
    }
    var audioDescription: String { "none" }

    /// A file alone (no frame or packet callbacks) is encoded from the GPU's
    /// buffers in place where its encoder can (VA-API).
    var takesDmaBuf: Bool {
        bridge.outputs.onNV12 == nil && packets == nil && writer?.takesDmaBuf == true
    }

    func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?) throws(MediaError) {
        guard takesDmaBuf, let writer else {
            release?()
            throw .invalidFrame(reason: "this embedded output takes frames in host memory")
        }
        try writer.write(frame, pts: pts, release: release)
    }

    func write(_ frame: VideoFrame) throws(MediaError) {
        if let onNV12 = bridge.outputs.onNV12 {
            var f = frame
            f.pts = bridge.hostTime(frame.pts)
            onNV12(f)
        }
        if let packets, let onPacket = bridge.outputs.onPacket {
            let pts = bridge.hostTime(frame.pts)
            pendingPTS.withLock { $0.append(pts) }
            for p in try packets.encode(frame) { onPacket(hostPacket(p)) }
        }
        // With the GPU encoder, frames (where the GPU stage still reads them back) feed the NV12 callback only.
        if !gpuEncoded { try writer?.write(frame) }
    }

    func finish() throws(MediaError) {
        var first: MediaError?
        if let packets, let onPacket = bridge.outputs.onPacket {
            do { for p in try packets.finish() { onPacket(hostPacket(p)) } } catch { first = error }
        }
        do { try writer?.finish() } catch { if first == nil { first = error } }
        if let first { throw first }
    }

    private func hostPacket(_ p: EncodedVideoPacket) -> EncodedVideoPacket {
        var p = p
        if let pts = pendingPTS.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            p.pts = pts
            p.dts = pts
        } else {
            p.pts = bridge.hostTime(p.pts)
            p.dts = bridge.hostTime(p.dts)
        }
        if let scale = bridge.hostTimescale { p.duration = p.duration.converted(to: scale) }
        return p
    }
}

/// A storage monitor for takes without a file: free space does not apply.
struct NoStorageMonitor: StorageMonitor {
    func freeBytes(at path: String) -> Int64? { nil }
}
