import CFFmpeg
import DiptychCore
import Synchronization

/// One compressed audio packet read from a source, timestamps already
/// shifted so that the source's start is zero (same zero as its video frames).
public final class AudioPacket: Sendable {
    let packet: FFPacket
    let timeBase: AVRational
    init(moving src: UnsafeMutablePointer<AVPacket>, timeBase: AVRational) {
        packet = FFPacket(moving: src)
        self.timeBase = timeBase
    }
    /// Presentation time (nil when the input gave none).
    public var pts: MediaTime? {
        packet.raw.pointee.pts == avNoPTS ? nil : timeBase.mediaTime(packet.raw.pointee.pts)
    }
    public var duration: MediaTime { timeBase.mediaTime(packet.raw.pointee.duration) }
    public var byteCount: Int { Int(packet.raw.pointee.size) }
}

/// A source file's audio stream, offered for passthrough: its codec
/// parameters and the packets the demuxer met while reading video.
///
/// The source queues packets as it demuxes (at most `capacity`; the oldest
/// are dropped beyond that, so an unused track costs bounded memory); a
/// `MediaWriter` given this track drains them as video is written. Each
/// further output of the take gets a `branch()`: a queue of its own fed with
/// the same packets (writers only read them). Thread-safe.
public final class AudioTrack: Sendable {
    public let codecName: String
    public let sampleRate: Int
    public let channels: Int
    /// Owned copy of the stream's parameters.
    let parameters: FFCodecParameters
    let timeBase: AVRational
    /// The source's start time in `timeBase`, subtracted from every packet.
    let startOffset: Int64
    public let capacity: Int
    /// How a writer describes the track (`MediaWriter.audioDescription`);
    /// nil: "copy CODEC".
    public let label: String?
    /// False for a hub (`AudioMixer`'s): it keeps nothing itself and only
    /// feeds its branches.
    private let keeps: Bool
    private let queue = Mutex<(packets: [AudioPacket], dropped: Int, ended: Bool)>(([], 0, false))
    /// The queues of further outputs, fed with every packet queued here
    /// (held weakly: a branch lives as long as the output reading it).
    private let branches = Mutex<[WeakBranch]>([])
    private struct WeakBranch { weak var track: AudioTrack? }

    init(stream: UnsafeMutablePointer<AVStream>, startOffset: Int64, capacity: Int = 4096) {
        parameters = FFCodecParameters(copying: stream.pointee.codecpar)
        timeBase = stream.pointee.time_base
        self.startOffset = startOffset
        self.capacity = capacity
        label = nil
        keeps = true
        codecName = String(cString: avcodec_get_name(parameters.raw.pointee.codec_id))
        sampleRate = Int(parameters.raw.pointee.sample_rate)
        channels = Int(parameters.raw.pointee.ch_layout.nb_channels)
    }

    /// A branch of `trunk`: its parameters, and the packets it holds now.
    private init(branchOf trunk: AudioTrack) {
        parameters = FFCodecParameters(copying: trunk.parameters.raw)
        timeBase = trunk.timeBase
        startOffset = trunk.startOffset
        capacity = trunk.capacity
        label = trunk.label
        keeps = true
        codecName = trunk.codecName
        sampleRate = trunk.sampleRate
        channels = trunk.channels
        let now = trunk.queue.withLock { $0 }
        queue.withLock { $0 = (now.packets, 0, now.ended) }
    }

    /// A hub for packets made by `encoder` (timestamps in its time base,
    /// from the take's zero): it queues nothing itself, each `branch()` gets
    /// every packet published from then on.
    init(hubFor encoder: FFCodecContext, label: String) throws(FFmpegError) {
        let p = FFCodecParameters()
        try encoder.copyParameters(to: p.raw)
        parameters = p
        timeBase = encoder.raw.pointee.time_base
        startOffset = 0
        capacity = 4096
        self.label = label
        keeps = false
        codecName = String(cString: avcodec_get_name(p.raw.pointee.codec_id))
        sampleRate = Int(p.raw.pointee.sample_rate)
        channels = Int(p.raw.pointee.ch_layout.nb_channels)
    }

    var codecID: AVCodecID { parameters.raw.pointee.codec_id }

    /// A hub's packet, timestamps already on the take's timeline, to every branch.
    func publish(_ packet: FFPacket) {
        let p = AudioPacket(moving: packet.raw, timeBase: timeBase)
        if keeps { append(p) }
        for b in branches.withLock({ $0.compactMap(\.track) }) { b.append(p) }
    }

    /// A queue of the same audio for another output: the packets queued now
    /// and every one queued from now on.
    public func branch() -> AudioTrack {
        let b = AudioTrack(branchOf: self)
        branches.withLock { $0.removeAll { $0.track == nil }; $0.append(WeakBranch(track: b)) }
        return b
    }

    /// Called by the demuxer: takes the packet's data (leaves `packet` blank).
    func enqueue(moving packet: UnsafeMutablePointer<AVPacket>) {
        if packet.pointee.pts != avNoPTS { packet.pointee.pts -= startOffset }
        if packet.pointee.dts != avNoPTS { packet.pointee.dts -= startOffset }
        let p = AudioPacket(moving: packet, timeBase: timeBase)
        if keeps { append(p) }
        for b in branches.withLock({ $0.compactMap(\.track) }) { b.append(p) }
    }

    private func append(_ p: AudioPacket) {
        queue.withLock { q in
            q.packets.append(p)
            if q.packets.count > capacity { q.packets.removeFirst(q.packets.count - capacity); q.dropped += 1 }
        }
    }

    func markEnded() {
        queue.withLock { $0.ended = true }
        for b in branches.withLock({ $0.compactMap(\.track) }) { b.markEnded() }
    }

    /// Removes and returns the queued packets (in demux order).
    public func drain() -> [AudioPacket] {
        queue.withLock { q in let out = q.packets; q.packets.removeAll(); return out }
    }
    /// Packets dropped because nobody drained the queue in time.
    public var droppedPackets: Int { queue.withLock { $0.dropped } }
    /// Whether the source has read its whole input (no more packets will come).
    public var ended: Bool { queue.withLock { $0.ended } }
}
