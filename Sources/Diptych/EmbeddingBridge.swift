import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// Where a take's NV12 frames go: a `MediaWriter` for `diptych record`, or
/// the embedding host's outputs (frames, packets and/or a file). Called by
/// the encoder thread only.
protocol TakeOutput: AnyObject, Sendable {
    var encoderName: String { get }
    var encoderReason: String { get }
    var encoderDescription: String { get }
    var audioDescription: String { get }
    func write(_ frame: VideoFrame) throws(MediaError)
    func finish() throws(MediaError)
}

extension MediaWriter: TakeOutput {}

/// What an embedded take plugs into `TakeRun`: its push sources, its outputs,
/// layout changes tied to primary frames, and dma-buf inputs. `TakeRun` asks
/// it at five points (source opening, output creation, take start, after each
/// render, and the start of finalize); everything else is the same loop the
/// CLI runs.
final class EmbeddingBridge: @unchecked Sendable {
    let primary: PushSource
    let secondary: PushSource?
    let outputs: EmbeddedOutputs
    let log: @Sendable (String) -> Void

    private let lock = NSLock()
    private var pendingLayout: Layout?
    /// Layout changes, each applying from the primary frame with that host timestamp.
    private var layoutChanges: [(pts: MediaTime, layout: Layout)] = []
    private var dmaBufs: [ObjectIdentifier: DmaBufFrame] = [:]
    private var _gpu: GPUInfo?
    private var _endReason: StopReason?
    private let startedSignal = DispatchSemaphore(value: 0)

    init(primary: PushSource, secondary: PushSource?, outputs: EmbeddedOutputs, log: @escaping @Sendable (String) -> Void) {
        self.primary = primary; self.secondary = secondary; self.outputs = outputs; self.log = log
    }

    // MARK: Host side

    var gpu: GPUInfo? { lock.lock(); defer { lock.unlock() }; return _gpu }
    var endReason: StopReason? { lock.lock(); defer { lock.unlock() }; return _endReason }

    /// Waits until the take has started (true) or `timeout` passes.
    func waitStarted(timeout: Double) -> Bool { startedSignal.wait(timeout: .now() + timeout) == .success }

    /// The layout for the next primary frame pushed.
    func setLayout(_ layout: Layout) {
        lock.lock(); pendingLayout = layout; lock.unlock()
    }

    /// Ties a pending layout change to the primary frame about to be pushed
    /// at `pts`; returns a token to undo it if the push is not accepted.
    func attachPendingLayout(to pts: MediaTime) -> Layout? {
        lock.lock(); defer { lock.unlock() }
        guard let l = pendingLayout else { return nil }
        pendingLayout = nil
        layoutChanges.append((pts, l))
        return l
    }

    func detachLayout(_ layout: Layout, from pts: MediaTime) {
        lock.lock(); defer { lock.unlock() }
        if let i = layoutChanges.lastIndex(where: { $0.pts == pts && $0.layout == layout }) { layoutChanges.remove(at: i) }
        if pendingLayout == nil { pendingLayout = layout }
    }

    /// Registers the dma-buf behind a placeholder frame's storage.
    func register(_ d: DmaBufFrame, storage: FrameStorage) {
        lock.lock(); dmaBufs[ObjectIdentifier(storage)] = d; lock.unlock()
    }
    func unregister(_ id: ObjectIdentifier) {
        lock.lock(); dmaBufs[id] = nil; lock.unlock()
    }
    private func dmaBuf(for frame: VideoFrame) -> DmaBufFrame? {
        guard let s = frame.planes.first?.storage else { return nil }
        lock.lock(); defer { lock.unlock() }
        return dmaBufs[ObjectIdentifier(s)]
    }

    /// Take timeline → host timeline (the first primary frame's timestamp is
    /// the take's zero), in the host's timescale.
    func hostTime(_ t: MediaTime) -> MediaTime {
        guard let origin = primary.firstPTS else { return t }
        return (t + origin).converted(to: origin.timescale)
    }

    // MARK: TakeRun side

    /// The push source for `role` (TakeRun opens these instead of a spec).
    func source(_ role: StreamRole) -> (any VideoSource)? {
        role == .primary ? primary : secondary
    }

    /// Called when the take's loop starts (GPU and outputs exist).
    func takeStarted(gpu: GPUInfo) {
        lock.lock(); _gpu = gpu; lock.unlock()
        startedSignal.signal()
    }

    /// Wakes `waitStarted` without a GPU (the take failed to start).
    func wakeStartWaiters() { startedSignal.signal() }

    /// Called first thing in finalize, whatever ended the take: pushes fail
    /// from now on and the reader threads leave the push sources at once.
    func takeEnding(_ reason: StopReason) {
        lock.lock(); if _endReason == nil { _endReason = reason }; lock.unlock()
        primary.close()
        secondary?.close()
    }

    /// The layout change due at take time `t`, if any (applied before the
    /// frame is resolved, so it reaches every draw of that frame at once).
    func layout(at t: MediaTime) -> Layout? {
        lock.lock(); defer { lock.unlock() }
        guard !layoutChanges.isEmpty, let origin = primary.firstPTS else { return nil }
        let host = t + origin
        var chosen: Layout?
        while let first = layoutChanges.first, first.pts <= host {
            chosen = first.layout
            layoutChanges.removeFirst()
        }
        return chosen
    }

    /// Uploads a frame, importing it as dma-buf when it stands for one.
    func upload(_ frame: VideoFrame, role: StreamRole, to gpu: GPUCompositor) throws(GPUError) {
        if let d = dmaBuf(for: frame) { try gpu.upload(d, role: role) } else { try gpu.upload(frame, role: role) }
    }

    /// After each output frame is drawn: RGBA readback and dma-buf export of
    /// the render target, the same target the NV12 frames come from.
    func rendered(gpu: GPUCompositor, output: OutputID, pts t: MediaTime, index: Int) {
        if let onRGBA = outputs.onRGBA, index % max(1, outputs.rgbaInterval) == 0 {
            do throws(GPUError) {
                var f = try gpu.previewRGBA(output: output)
                f.pts = hostTime(t)
                onRGBA(f)
            } catch {
                log("warning: RGBA readback of frame \(index): \(error)")
            }
        }
        if let onDmaBuf = outputs.onDmaBuf {
            do throws(GPUError) {
                let e = try gpu.exportDmaBuf(output: output)
                onDmaBuf(CompositedDmaBuf(buffer: e, pts: hostTime(t), syncFenceFD: -1))
                for p in e.planes where p.fd >= 0 { close(p.fd) }
            } catch {
                log("warning: dma-buf export of frame \(index): \(error)")
            }
        }
    }

    /// The take's output: the host's callbacks and/or a file.
    func makeOutput(video: VideoEncoderSettings) throws(MediaError) -> any TakeOutput {
        try EmbeddedOutput(bridge: self, video: video)
    }
}

/// The embedded take's outputs, fed by the encoder thread with the NV12
/// frames read back from the render target: the NV12 callback, an Annex B
/// packet encoder, and a file (its own `MediaWriter`, so a file and packets
/// together encode twice).
final class EmbeddedOutput: TakeOutput, @unchecked Sendable {
    private let bridge: EmbeddingBridge
    private let writer: MediaWriter?
    private let packets: PacketEncoder?

    init(bridge: EmbeddingBridge, video: VideoEncoderSettings) throws(MediaError) {
        self.bridge = bridge
        let o = bridge.outputs
        if let path = o.file {
            var v = video
            v.maxBFrames = v.maxBFrames ?? 0
            writer = try MediaWriter(url: path, container: o.fileFormat, video: v, audio: nil)
        } else {
            writer = nil
        }
        packets = o.onPacket != nil ? try PacketEncoder(settings: video) : nil
    }

    var encoderName: String { writer?.encoderName ?? packets?.encoderName ?? "none" }
    var encoderReason: String { writer?.encoderReason ?? packets?.encoderReason ?? "no encoded output requested" }
    var encoderDescription: String { writer?.encoderDescription ?? packets?.encoderDescription ?? "none (frames only)" }
    var audioDescription: String { "none" }

    func write(_ frame: VideoFrame) throws(MediaError) {
        if let onNV12 = bridge.outputs.onNV12 {
            var f = frame
            f.pts = bridge.hostTime(frame.pts)
            onNV12(f)
        }
        if let packets, let onPacket = bridge.outputs.onPacket {
            for p in try packets.encode(frame) { onPacket(hostPacket(p)) }
        }
        try writer?.write(frame)
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
        p.pts = bridge.hostTime(p.pts)
        p.dts = bridge.hostTime(p.dts)
        if let scale = bridge.primary.firstPTS?.timescale { p.duration = p.duration.converted(to: scale) }
        return p
    }
}

/// A storage monitor for takes without a file: free space does not apply.
struct NoStorageMonitor: StorageMonitor {
    func freeBytes(at path: String) -> Int64? { nil }
}

extension TakeRun {
    /// Uploads through the embedding bridge (dma-buf inputs) when there is one.
    func upload(_ frame: VideoFrame, role: StreamRole, to gpu: GPUCompositor) throws(GPUError) {
        if let e = session.embedding { try e.upload(frame, role: role, to: gpu) } else { try gpu.upload(frame, role: role) }
    }
}
