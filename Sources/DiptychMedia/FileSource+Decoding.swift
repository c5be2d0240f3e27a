import CFFmpeg
import DiptychCore

/// A stream that left NVDEC mid-take: after which frame, when, and why.
public struct DecoderFallback: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Frames delivered before the CPU decoder took over.
    public var frame: Int
    /// The stream time of the last frame NVDEC delivered.
    public var seconds: Double
    public var reason: String
    /// True where the stream was asked to move (`DecoderMove`) and NVDEC
    /// had not failed; nil for a fall back from a failure.
    public var requested: Bool?
    public var description: String {
        "after frame \(frame) (\(String(format: "%.3f", seconds)) s)" + (requested == true ? ", as asked" : "") + ": \(reason)"
    }
}

/// The decoder of a `FileSource`: which one opens, how packets reach it, and
/// the fall back from NVDEC to the CPU without ending the stream.
extension FileSource {
    /// The decoder `decoding` chooses for `stream` (`DecoderPolicy`) and why.
    static func openDecoder(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, decoding: DecoderSettings,
                            name: String) throws(MediaError) -> (any FrameDecoder, DecoderDecision) {
        guard decoding.choice != .cpu else {
            return (try decoding.cpuDecoder(stream: stream, codec: codec, path: name), DecoderDecision(.cpu, reason: "--decoder cpu"))
        }
        let traits = StreamDecodeTraits(stream: stream)
        var decision: DecoderDecision
        do { decision = try DecoderPolicy.decide(decoding.choice, stream: traits, nvdec: decoding.status(for: traits)) } catch {
            throw .decoderUnavailable(path: name, reason: error.reason)
        }
        if decision.decoder == .nvdec, case .success(let backend) = decoding.nvdec,
           let hardware = NVDECDecoder.ffmpegDecoder(for: stream.pointee.codecpar.pointee.codec_id) {
            do { return (try backend.makeDecoder(stream: stream, codec: hardware, path: name), decision) } catch {
                if decoding.choice == .nvdec { throw .decoderUnavailable(path: name, reason: "\(error)") }
                decision = DecoderDecision(.cpu, reason: "NVDEC did not open: \(error)")
            }
        }
        return (try decoding.cpuDecoder(stream: stream, codec: codec, path: name), decision)
    }

    /// Sends a video packet read from the input (kept for a replay while NVDEC decodes).
    func sendVideo(_ packet: FFPacket) throws(MediaError) {
        guard let decoder else { return }
        if decoder.kind == .nvdec {
            replay.record(packet)
        } else if awaitKeyframe {
            guard packet.raw.pointee.flags & AV_PKT_FLAG_KEY != 0 else { return }
            awaitKeyframe = false
        }
        let s = decoder.send(packet)
        guard s < 0, s != averrorEAGAIN else { return }
        if decoder.kind == .nvdec { try fallBack(decoder.lost ?? "NVDEC: \(avErrorString(s))") } else { try noteDecodeError(s) }
    }

    /// Why NVDEC should hand the stream to the CPU at `packet`, or nil: it
    /// is a keyframe of a stream NVDEC decodes, a move is asked for
    /// (`DecoderMove`) and none is under way. Not before the first frame,
    /// whose decoder `prime` settles.
    func moveStarting(at packet: FFPacket) -> String? {
        guard moving == nil, framesDelivered > 0, let decoder, decoder.kind == .nvdec,
              packet.raw.pointee.flags & AV_PKT_FLAG_KEY != 0 else { return nil }
        return decoding.move?.requested
    }

    /// Starts the move at keyframe `packet`. Where it closes a GOP (`GOPStart`),
    /// NVDEC is flushed, and the keyframe is held back until it has given
    /// every frame it holds (`finishMove`). Where it opens one, its leading
    /// pictures refer to pictures before it, which a decoder starting there
    /// lacks (libavcodec drops them), so the CPU decoder decodes again from
    /// the keyframe before, as a fall back does, then goes on from this one.
    func beginMove(at packet: FFPacket, because reason: String) throws(MediaError) {
        guard let decoder, let kept = try? FFPacket(referencing: packet) else { return try sendVideo(packet) }
        if !GOPStart.closes(packet.raw, of: stream.pointee.codecpar), let last = lastPTS, replay.coversGOP(deliveredThrough: last) {
            return try fallBack(reason, requested: true, then: kept)
        }
        moving = (kept, reason)
        _ = decoder.send(nil)
    }

    /// NVDEC has given its last frame: a CPU decoder goes on from the held keyframe.
    func finishMove() throws(MediaError) {
        guard let (keyframe, reason) = moving else { return }
        moving = nil
        let cpu: VideoDecoder
        do { cpu = try decoding.cpuDecoder(stream: stream, codec: cpuCodec, path: path) } catch {
            finish()
            throw error
        }
        _ = replay.take()
        decoder = cpu
        let seconds = lastPTS.map { timeBase.mediaTime($0 - startPTS).seconds } ?? 0
        let moved = DecoderFallback(frame: framesDelivered, seconds: seconds, reason: reason, requested: true)
        fallback = moved
        decoding.onFallback(moved)
        try sendVideo(keyframe)
    }

    /// After a fall back, sends the next kept packet to the CPU decoder;
    /// false when none is left (read from the input again).
    func sendReplayed() throws(MediaError) -> Bool {
        guard !replaying.isEmpty, let decoder else { return false }
        let p = replaying.removeFirst()
        let s = decoder.send(p)
        if s < 0 && s != averrorEAGAIN { try noteDecodeError(s) }
        return true
    }

    /// After a fall back, whether `frame` was delivered already (NVDEC
    /// decoded it before it stopped); such a frame is dropped.
    func isAlreadyDelivered(_ frame: FFFrame) -> Bool {
        guard let last = skipThrough else { return false }
        var ts = frame.raw.pointee.best_effort_timestamp
        if ts == avNoPTS { ts = frame.raw.pointee.pts }
        guard ts != avNoPTS else { return false }
        if ts <= last { frame.unref(); return true }
        skipThrough = nil
        return false
    }

    /// Leaves NVDEC for the CPU without ending the stream: a CPU decoder
    /// decodes again from the last keyframe (the packets kept since), frames
    /// already delivered are dropped, and reading goes on. When the packets
    /// since the keyframe were too many to keep, decoding resumes at the
    /// next keyframe (the frames between are missing, the stream goes on).
    ///
    /// A move asked for (`requested`) comes here at an open GOP's keyframe
    /// `next`, which follows the packets kept.
    func fallBack(_ reason: String, requested: Bool = false, then next: FFPacket? = nil) throws(MediaError) {
        let cpu: VideoDecoder
        do { cpu = try decoding.cpuDecoder(stream: stream, codec: cpuCodec, path: path) } catch {
            finish()
            throw error
        }
        let kept = replay.take()
        replaying = kept ?? []
        awaitKeyframe = kept == nil
        // NVDEC failed while draining for a move: the keyframe held back follows what it had.
        if let (keyframe, _) = moving {
            moving = nil
            replaying.append(keyframe)
            awaitKeyframe = false
        }
        if let next { replaying.append(next) }
        skipThrough = lastPTS
        draining = false
        decoder = cpu
        let seconds = lastPTS.map { timeBase.mediaTime($0 - startPTS).seconds } ?? 0
        fallback = DecoderFallback(frame: framesDelivered, seconds: seconds, reason: reason, requested: requested ? true : nil)
        if framesDelivered > 0 { decoding.onFallback(fallback!) }
    }
}

/// The video packets since the last keyframe while NVDEC decodes, so a CPU
/// decoder can take over exactly where NVDEC stopped. Bounded: a longer run
/// of packets is dropped and the take resumes at the next keyframe instead.
struct PacketReplay {
    var maximumBytes = 64 << 20
    var maximumPackets = 1200
    private var packets: [FFPacket] = []
    private var bytes = 0
    private var overflowed = false

    mutating func record(_ packet: FFPacket) {
        if packet.raw.pointee.flags & AV_PKT_FLAG_KEY != 0 { reset() }
        guard !overflowed else { return }
        guard let copy = try? FFPacket(referencing: packet) else { overflow(); return }
        packets.append(copy)
        bytes += Int(packet.raw.pointee.size)
        if bytes > maximumBytes || packets.count > maximumPackets { overflow() }
    }

    /// Whether the packets kept start at a keyframe and hold every packet
    /// since, and the pictures before that keyframe in output order were
    /// delivered (`delivered`, the last delivered timestamp, is past it), so
    /// a decoder starting there gives every picture after `delivered`.
    func coversGOP(deliveredThrough delivered: Int64) -> Bool {
        guard !overflowed, let first = packets.first?.raw.pointee, first.flags & AV_PKT_FLAG_KEY != 0, first.pts != avNoPTS else { return false }
        return first.pts <= delivered
    }

    /// The packets kept, or nil when they did not fit; empties the replay.
    mutating func take() -> [FFPacket]? {
        defer { reset() }
        return overflowed ? nil : packets
    }

    init(maximumPackets: Int = 1200) { self.maximumPackets = maximumPackets }

    private mutating func reset() { packets.removeAll(); bytes = 0; overflowed = false }
    private mutating func overflow() { packets.removeAll(); bytes = 0; overflowed = true }
}
