import CFFmpeg
import DiptychCore

/// One compressed video access unit, handed to an embedding host.
///
/// H.264 and HEVC come out in Annex B (start codes); the parameter sets
/// (SPS/PPS, and VPS for HEVC) are repeated in band before every keyframe,
/// so a receiver can start at any keyframe.
public struct EncodedVideoPacket: Sendable {
    /// The access unit's bytes.
    public var data: [UInt8]
    public var pts: MediaTime
    /// Decode timestamp; equals `pts` when the stream has no B-frames.
    public var dts: MediaTime
    public var duration: MediaTime
    /// An IDR (random access) picture: decoding may start here.
    public var isKeyframe: Bool

    public init(data: [UInt8], pts: MediaTime, dts: MediaTime, duration: MediaTime, isKeyframe: Bool) {
        self.data = data; self.pts = pts; self.dts = dts; self.duration = duration; self.isKeyframe = isKeyframe
    }
}

/// An encoder without a muxer: NV12 frames in, Annex B access units out.
/// The same encoder choice as `MediaWriter` (VA-API where it works, else
/// libx264/libx265), opened without global headers so parameter sets travel
/// in band. B-frames are off unless `settings.maxBFrames` asks for them, so
/// packets come out in presentation order with `dts == pts`. Where NVENC
/// fails mid-take, libx264 (libx265) takes over at the frame that failed, its
/// first packet an IDR with its own parameter sets in band
/// (`encoderFallback`; docs/ARCHITECTURE.md, "Encoder paths").
///
/// Not thread-safe: call from one thread.
public final class PacketEncoder: @unchecked Sendable {   // FFmpeg codec context and frames; used by one thread at a time
    private var encoder: VideoEncoder
    private var finished = false
    /// NVENC failed mid-take and the software encoder took over.
    public private(set) var encoderFallback: EncoderFallback?
    public var encoderName: String { encoder.name }
    public var encoderReason: String { encoder.selection.reason }
    public var encoderDescription: String { encoder.selection.description }
    public private(set) var packetsOut = 0

    public convenience init(settings: VideoEncoderSettings) throws(MediaError) {
        try self.init(settings: settings, nvenc: nil)
    }

    /// `nvenc`: NVENC's backend (a stand-in in tests; nil: FFmpeg's).
    init(settings: VideoEncoderSettings, nvenc: (any NVENCBackend)?) throws(MediaError) {
        var s = settings
        if s.maxBFrames == nil { s.maxBFrames = 0 }
        encoder = try VideoEncoder(settings: s, globalHeader: false, nvenc: nvenc)
    }

    /// Encodes `frame` (its size must be `settings.size`) and returns the
    /// packets that are complete, in decode order.
    public func encode(_ frame: VideoFrame) throws(MediaError) -> [EncodedVideoPacket] {
        guard !finished else { throw .invalidFrame(reason: "PacketEncoder.encode after finish") }
        do { return convert(try encoder.encode(frame)) } catch {
            guard encoder.nvenc != nil, encoderFallback == nil, case .encoderFailed(_, let detail) = error else { throw error }
            let next = try encoder.softwareSuccessor(globalHeader: false, streamGoesOn: true, failure: detail)
            encoderFallback = EncoderFallback(at: frame.pts.seconds, from: encoder.name, to: next.name, reason: detail, continuedIn: nil)
            encoder = next
            return convert(try encoder.encode(frame))
        }
    }

    /// Drains the encoder: the packets still inside it. Idempotent.
    public func finish() throws(MediaError) -> [EncodedVideoPacket] {
        guard !finished else { return [] }
        finished = true
        return convert(try encoder.flush())
    }

    private func convert(_ packets: [FFPacket]) -> [EncodedVideoPacket] {
        let tb = encoder.timeBase
        return packets.map { p in
            let av = p.raw.pointee
            let bytes = av.data.map { Array(UnsafeBufferPointer(start: $0, count: Int(av.size))) } ?? []
            let pts = av.pts == avNoPTS ? av.dts : av.pts
            let dts = av.dts == avNoPTS ? pts : av.dts
            packetsOut += 1
            return EncodedVideoPacket(data: bytes, pts: tb.mediaTime(pts), dts: tb.mediaTime(dts),
                                      duration: tb.mediaTime(av.duration),
                                      isKeyframe: av.flags & AV_PKT_FLAG_KEY != 0)
        }
    }
}
