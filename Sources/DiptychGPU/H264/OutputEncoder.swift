import CGLES
import DiptychCore
import Foundation
import Synchronization

/// What a GPU-encoded output's stream says before its first picture: the
/// parameter sets a muxer needs as extradata (docs/ARCHITECTURE.md, "The GPU encoder").
public struct GPUEncodedStream: Sendable, Hashable {
    public var width: Int
    public var height: Int
    public var rate: FrameRate
    /// The SPS and PPS NAL units, Annex B (start codes included).
    public var parameterSets: [UInt8]
    /// Profile and level, as a log line says them.
    public var description: String
}

/// A picture the GPU encoder wrote for an output.
public struct GPUEncodedPicture: Sendable {
    public var output: OutputID
    public var picture: H264Picture
    /// The QP the picture was coded with.
    public var qp: Int
}

/// An output's GPU encoder: the encoder, the pictures whose passes were
/// recorded and not yet collected, and those collected and not yet taken.
/// `encode` and `collect` run on the render thread; `take` on any thread
/// (the ready queue is behind a `Mutex`).
final class OutputEncoder: @unchecked Sendable {   // `pending` and the encoder's GL state are render-thread only; `ready` is behind a Mutex
    let encoder: H264ComputeEncoder
    let output: OutputID
    /// Pictures recorded and not yet collected, each with its frame's submission serial.
    private var pending: [(picture: H264ComputeEncoder.Pending, serial: UInt64)] = []
    /// Serials of the pictures kept for the batch's encode, in order.
    private var deferredSerials: [UInt64] = []
    /// Pictures collected and not yet taken, and whether the next picture is an IDR.
    private let ready = Mutex<(pictures: [GPUEncodedPicture], keyframeAsked: Bool)>(([], false))
    static let depth = 4
    /// Where each picture's reconstruction goes (`DIPTYCH_GPU_ENCODER_RECONSTRUCTION`), if anywhere.
    private let reconstructions: ReconstructionDump?

    /// `reconstructions`: a folder where the encoder's reconstructed pictures are written (`ReconstructionDump`).
    init(output: OutputID, format: H264StreamFormat, settings: GPUH264Settings, programs: H264Programs,
         bufferStorage: PFNGLBUFFERSTORAGEEXTPROC?, reconstructions folder: String? = nil) throws(GPUError) {
        self.output = output
        reconstructions = try folder.map { (f) throws(GPUError) in try ReconstructionDump(folder: f, width: format.width, height: format.height) }
        encoder = try H264ComputeEncoder(format: format, settings: settings, programs: programs, depth: Self.depth,
                                         bufferStorage: bufferStorage, keepsReconstructions: folder != nil)
    }

    var stream: GPUEncodedStream {
        let f = encoder.format
        var sets: [UInt8] = []
        NALUnit.annexB(type: NALUnit.spsType, rbsp: f.sps, into: &sets)
        NALUnit.annexB(type: NALUnit.ppsType, rbsp: f.pps, into: &sets)
        return GPUEncodedStream(width: f.width, height: f.height, rate: f.rate, parameterSets: sets,
                                description: "H.264 Constrained Baseline level \(Double(f.levelIDC) / 10), GPU compute encoder")
    }

    /// Render thread, after the composite wrote `nv12` (and a storage barrier):
    /// collects what completed, then records this picture's passes.
    /// Inside a render-thread batch the picture is recorded with the batch's
    /// other GPU-encoded pictures, pass by pass, before the batch's fence.
    /// `callersCollect` (`collectsOffThread`): the take's thread collects the
    /// completed pictures, so the render thread, which every take of the
    /// context waits on, leaves them to it (framing a picture is CPU work).
    func encode(nv12: NV12Buffer, rowBytes: Int, height: Int, pts: MediaTime, serial: UInt64, callersCollect: Bool) throws(GPUError) {
        if !callersCollect { try collect(wait: false) }
        if pending.count + deferred >= Self.depth && !pending.isEmpty {
            let started = PassTimer.now()
            while pending.count + deferred >= Self.depth && !pending.isEmpty { try collectOne(wait: true) }
            RenderThread.add(.encoderWait, since: started)
        }
        let key = ready.withLock { r in
            defer { r.keyframeAsked = false }
            return r.keyframeAsked
        }
        let job = H264ComputeEncoder.Job(encoder: encoder, source: nv12.buffer, rowBytes: rowBytes, uvOffset: rowBytes * height,
                                         pts: pts, keyframe: key)
        if RenderThread.deferEncode(self, job) {
            deferred += 1
            deferredSerials.append(serial)
        } else {
            glMemoryBarrier(GLbitfield(GL_SHADER_STORAGE_BARRIER_BIT))
            pending.append((H264ComputeEncoder.encode([job], programs: encoder.programs)[0], serial))
        }
    }

    /// Pictures kept for the batch's encode, not yet recorded.
    private var deferred = 0

    /// Render thread, at the end of a batch: records the kept pictures together.
    static func encode(_ batch: [(OutputEncoder, H264ComputeEncoder.Job)]) {
        guard let programs = batch.first?.1.encoder.programs else { return }
        glMemoryBarrier(GLbitfield(GL_SHADER_STORAGE_BARRIER_BIT))
        let recorded = H264ComputeEncoder.encode(batch.map(\.1), programs: programs)
        for ((e, _), p) in zip(batch, recorded) {
            e.deferred -= 1
            e.pending.append((p, e.deferredSerials.removeFirst()))
        }
    }

    /// Render thread: moves completed pictures (all of them, with `wait`) to the ready queue.
    func collect(wait: Bool) throws(GPUError) {
        while !pending.isEmpty {
            guard try collectOne(wait: wait) else { return }
        }
    }

    @discardableResult
    private func collectOne(wait: Bool) throws(GPUError) -> Bool {
        guard let p = pending.first?.picture else { return false }
        if !wait && !encoder.isComplete(p) { return false }
        pending.removeFirst()
        let picture = GPUEncodedPicture(output: output, picture: try encoder.collect(p), qp: p.qp)
        if let reconstructions { try reconstructions.append(try encoder.reconstruction(of: p)) }
        ready.withLock { $0.pictures.append(picture) }
        return true
    }

    /// Whether a caller's thread can collect this encoder's pictures: its
    /// results are persistently mapped, `timeline`'s fences can be waited
    /// for anywhere, and no reconstruction is read (a GL call).
    func collectsOffThread(_ timeline: FenceTimeline) -> Bool {
        encoder.mapped && timeline.canWaitOffThread && reconstructions == nil
    }

    /// A caller's thread (under the renderer's lock, so the render thread
    /// is not working for it): moves the pictures whose frames completed
    /// (all of them, with `wait`) to the ready queue. No GL call: the
    /// bitstreams are read where the GPU wrote them.
    func collectOffThread(_ timeline: FenceTimeline, wait: Bool) throws(GPUError) {
        while let (p, serial) = pending.first {
            if wait { guard timeline.waitOffThread(for: serial) else { return } }
            else if !timeline.isCompleteOffThread(serial) { return }
            pending.removeFirst()
            let picture = GPUEncodedPicture(output: output, picture: try encoder.read(p), qp: p.qp)
            ready.withLock { $0.pictures.append(picture) }
        }
    }

    /// Pictures recorded and not collected (kept for a batch included).
    var inFlight: Int { pending.count + deferred }

    /// Any thread: the oldest collected picture.
    func take() -> GPUEncodedPicture? {
        ready.withLock { $0.pictures.isEmpty ? nil : $0.pictures.removeFirst() }
    }

    var outstanding: Int { pending.count }

    /// Any thread: the next picture encoded is an IDR (a live output reconnected).
    func askKeyframe() { ready.withLock { $0.keyframeAsked = true } }

    func release() { encoder.release() }
}
