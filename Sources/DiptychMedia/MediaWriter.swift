import CFFmpeg
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import DiptychCore

/// Encodes video frames and muxes them, with the source's audio, into a file
/// or a network stream.
///
/// - MP4 is written fragmented (`frag_keyframe+empty_moov+default_base_moof`,
///   fragments of at most one second, each flushed to the file when complete),
///   so a process killed at any moment leaves a playable file holding every
///   fragment but the last. `finish()` writes the rest, the index (`mfra`)
///   and the length into the movie header (see `FragmentedMP4`).
/// - HLS (`.m3u8`): fragmented-MP4 segments of `segmentTime` (default 2 s)
///   beside the playlist (`HLSNaming`), each begun at a keyframe made at its
///   time and named in the live playlist once whole (`hlsListSize`: the last
///   N; 0, all); `finish()` replaces it with the complete VOD playlist. A
///   file of those names that exists already is never written over.
/// - MPEG-TS to files or `srt://`, FLV to `rtmp://`, all through avio
///   (network outputs get a write timeout).
/// - Audio (given an `AudioTrack`): copied without re-encoding when the
///   container can carry the codec, else re-encoded to AAC. No track → no
///   audio stream at all.
/// - Timestamps: frame pts become exact encoder ticks; N frames at F fps
///   last exactly N/F seconds. MP4 and FLV are written without B-frames
///   unless `maxBFrames` asks for them, so every stream starts at zero.
/// - A write failing with ENOSPC throws `MediaError.storageFull`.
/// - Split (`segmentTime`, MP4 and Matroska files): the file is written as
///   `SegmentNaming.path(url, index:)` files, each a whole file of its own
///   (the hybrid MP4 above, per file), cut at the first keyframe at or after
///   `segmentTime` into the file; a frame encoded here that falls due is made
///   a keyframe (pre-encoded video: `awaitsCut` says when one is wanted). Each file's timestamps start at 0 (`segments` gives each
///   file's place on the take's timeline); audio goes to the file its time
///   falls in. A file that exists already is never written over.
///
/// - Pre-encoded video (`init(url:container:preEncoded:...)`): H.264 access
///   units encoded elsewhere (the GPU encoder) go through the same packet
///   path — timestamps, durations, fragments, audio — with `write(_:)` taking
///   `EncodedVideoPacket`s instead of frames.
///
/// Not thread-safe: call from one thread.
public final class MediaWriter: @unchecked Sendable {   // FFmpeg format and codec contexts; used by one thread at a time
    /// The output asked for (for a split output, the name its files are named after).
    public let url: String
    /// The file written now: `url`, or a split output's current file.
    public internal(set) var path: String
    public let container: ContainerFormat
    public let settings: VideoEncoderSettings
    /// The encoder in use (`libx264`, `h264_vaapi`, `gpu-h264` for pre-encoded video, ...).
    public var encoderName: String { selection.name }
    /// Why that encoder was chosen (e.g. `VA-API unavailable: no /dev/dri`).
    public var encoderReason: String { selection.reason }
    /// `"libx264 (VA-API unavailable: no /dev/dri)"`.
    public var encoderDescription: String { selection.description }
    /// Whether the video comes encoded (`write(_: EncodedVideoPacket)`) rather than as frames.
    public var isPreEncoded: Bool { encoder == nil }
    /// Pre-encoded video: the packets dropped because no keyframe had been
    /// written yet (a stream starts at a keyframe).
    public private(set) var packetsBeforeKeyframe = 0
    /// How audio is written: `none`, `copy aac`, `aac (re-encoded from pcm_s16le)`.
    public internal(set) var audioDescription = "none"
    public private(set) var framesWritten = 0
    /// For an MP4 file cut short by a full disk: the frames it holds, once
    /// `finish()` has cut it after its last complete fragment (nil otherwise).
    public private(set) var framesInFile: Int?
    /// The first frame's pts: the output's zero. Video and audio timestamps
    /// are written relative to it, so a take starting mid-stream starts at 0.
    public private(set) var timestampOrigin: MediaTime?
    public internal(set) var audioPacketsWritten = 0
    /// A split output's files, completed ones first and the current one
    /// last (its frames and length so far); empty for an output written whole.
    public var segments: [WrittenSegment] {
        guard let split else { return [] }
        guard !finished else { return split.done }
        return split.done + [split.current(path: path, end: muxedVideoEnd, timeBase: videoTimeBase)]
    }

    /// A split output of pre-encoded video whose current file has lasted its
    /// length: the next keyframe written begins the next file (whoever
    /// encodes may make one now). Encoder-side cuts need no asking.
    public var awaitsCut: Bool {
        guard isPreEncoded else { return false }
        if let hls { return hls.awaitsCut(muxedVideoEnd) }
        guard let split else { return false }
        return split.cutsBefore(muxedVideoEnd)
    }

    /// Nil for pre-encoded video. Replaced once where NVENC fails mid-take (`encoderFallback`).
    var encoder: VideoEncoder?
    var selection: EncoderSelection
    /// The NVENC encoder whose CUDA frames `lendCUDAFrame` lends (any thread); nil once it has failed.
    let lender: Mutex<CUDAFrameLender?>
    /// NVENC failed mid-take and the software encoder took over (docs/ARCHITECTURE.md, "Encoder paths").
    public internal(set) var encoderFallback: EncoderFallback?
    /// FLV after a fallback: the new encoder's parameter sets, sent with its first packet (a new sequence header).
    var pendingExtradata: [UInt8]?
    /// Video packets muxed so far, all files together.
    var muxedVideoPackets = 0
    /// The video's time base (the encoder's, or the same ticks for pre-encoded
    /// video: `VideoEncoder.ticks(for:)`) and one frame in it.
    let videoTimeBase: AVRational
    let frameTicks: Int64
    /// Pre-encoded video: the last dts written, in ticks (kept increasing).
    private var lastPacketTicks: Int64?
    /// Pre-encoded video without parameter sets yet: the muxer's options,
    /// and the header is written at the first keyframe (its SPS and PPS).
    private var pendingHeader: FFDictionary?
    /// The muxer; nil once the output is closed.
    var output: FFOutputContext?
    var videoStream: UnsafeMutablePointer<AVStream>
    var audioStream: UnsafeMutablePointer<AVStream>?
    let audioTrack: AudioTrack?
    var audioTranscoder: AudioTranscoder?
    var pendingAudio: [AudioPacket] = []
    let deadline: InterruptDeadline
    /// End of the last video frame written, in encoder ticks.
    var videoEnd: Int64 = 0
    /// End of the last video packet muxed, in encoder ticks on the take's timeline.
    var muxedVideoEnd: Int64 = 0
    /// A split output's state; nil for one written whole.
    var split: SplitState?
    /// An HLS output's state; nil for other containers.
    var hls: HLSState?
    /// The time base each stream was given before its header (a split output's next file asks for the same).
    var requestedTimeBases: [AVRational] = []
    var firstError: MediaError?
    private var finished = false
    /// MP4 files: each stream's end (last pts + duration, in its time base),
    /// written into the movie header by `finish()`.
    private var trackEnds: [Int64]?

    /// Opens the output and writes its header.
    /// - Parameters:
    ///   - container: nil infers it from `url` (`.mp4`, `.mkv`, `.ts`, `rtmp://`, `srt://`).
    ///   - audio: the primary source's audio (`AudioMode.primary`), or nil for no audio track.
    ///   - timestampOrigin: the output's zero; nil takes the first frame's pts
    ///     (a stream reopened mid-take passes the take's zero to keep its timeline).
    ///   - cancel: stops the open (and every write after it) once flipped, as a timeout would.
    ///   - segmentTime: split a file output into files of about this many
    ///     seconds (MP4 and Matroska; see the type's description); nil: one
    ///     file. HLS: the segment length (nil: `HLSNaming.defaultSegmentTime`).
    ///   - hlsListSize: HLS only: the segments the live playlist lists (nil or 0: all).
    public convenience init(url: String, container: ContainerFormat? = nil, video: VideoEncoderSettings,
                            audio: AudioTrack? = nil, networkTimeout: Double = 10, timestampOrigin: MediaTime? = nil,
                            cancel: OpenCancel? = nil, segmentTime: Double? = nil, hlsListSize: Int? = nil) throws(MediaError) {
        try self.init(url: url, container: container, video: .frames(video), audio: audio, networkTimeout: networkTimeout,
                      timestampOrigin: timestampOrigin, cancel: cancel, segmentTime: segmentTime, hlsListSize: hlsListSize)
    }

    /// An output encoding on NVENC through `nvenc` (a stand-in in tests).
    convenience init(url: String, container: ContainerFormat? = nil, video: VideoEncoderSettings, nvenc: any NVENCBackend,
                     audio: AudioTrack? = nil, segmentTime: Double? = nil, hlsListSize: Int? = nil) throws(MediaError) {
        try self.init(url: url, container: container, video: .frames(video), audio: audio, networkTimeout: 10,
                      timestampOrigin: nil, cancel: nil, segmentTime: segmentTime, hlsListSize: hlsListSize, nvenc: nvenc)
    }

    /// Opens an output whose video is encoded already (H.264 access units in
    /// Annex B, from the GPU encoder): the stream is described by
    /// `preEncoded` (size, rate, colour, and the SPS and PPS as extradata,
    /// which the MP4 and FLV muxers turn into `avcC`), and `write(_:
    /// EncodedVideoPacket)` takes its pictures. Without parameter sets the
    /// header is written at the first keyframe, from the SPS and PPS in front
    /// of it. Packets before the first keyframe are dropped (counted in
    /// `packetsBeforeKeyframe`).
    public convenience init(url: String, container: ContainerFormat? = nil, preEncoded: PreEncodedVideo,
                            audio: AudioTrack? = nil, networkTimeout: Double = 10, timestampOrigin: MediaTime? = nil,
                            cancel: OpenCancel? = nil, segmentTime: Double? = nil, hlsListSize: Int? = nil) throws(MediaError) {
        try self.init(url: url, container: container, video: .encoded(preEncoded), audio: audio, networkTimeout: networkTimeout,
                      timestampOrigin: timestampOrigin, cancel: cancel, segmentTime: segmentTime, hlsListSize: hlsListSize)
    }

    enum VideoSource { case frames(VideoEncoderSettings), encoded(PreEncodedVideo) }

    private init(url: String, container: ContainerFormat?, video source: VideoSource,
                 audio: AudioTrack?, networkTimeout: Double, timestampOrigin: MediaTime?,
                 cancel: OpenCancel?, segmentTime segmentLength: Double?, hlsListSize: Int?,
                 nvenc: (any NVENCBackend)? = nil) throws(MediaError) {
        guard let container = container ?? ContainerFormat.infer(from: url) else {
            throw .writeFailed(path: url, detail: "cannot tell the container from the name (use .mp4, .mkv, .ts, .m3u8, rtmp:// or srt://)")
        }
        self.url = url
        self.container = container
        if let t = segmentLength, !(t > 0 && t.isFinite) {
            throw .writeFailed(path: url, detail: "a segment time must be a positive number of seconds, not \(t)")
        }
        // HLS takes the segment time as the length of its segments; a file of MP4 or Matroska is split.
        let segmentTime = container == .hls ? nil : segmentLength
        if let segmentTime {
            guard container == .mp4 || container == .matroska, !isURL(url) || url.hasPrefix("file:") else {
                throw .writeFailed(path: url, detail: "only MP4 and Matroska files are split (segment time \(segmentTime) s)")
            }
        }
        if let n = hlsListSize, container != .hls || n < 0 {
            throw .writeFailed(path: url, detail: "a list size (\(n)) is for an HLS output only, 0 or more")
        }
        if container == .hls, !isURL(url) || url.hasPrefix("file:"), let existing = HLSNaming.existingFile(of: url) {
            throw .writeFailed(path: existing, detail: "exists already; an HLS output never writes over a file")
        }
        let firstPath = segmentTime == nil ? url : SegmentNaming.path(url, index: 1)
        self.path = firstPath
        var video: VideoEncoderSettings
        switch source {
        case .frames(let v): video = v
        case .encoded(let e):
            guard e.codec == .h264 else {
                throw .writeFailed(path: url, detail: "pre-encoded video must be H.264, not \(e.codec.rawValue)")
            }
            if let ps = e.parameterSets, H264AnnexB.parameterSets(in: ps) == nil {
                throw .writeFailed(path: url, detail: "the parameter sets given hold no SPS and PPS (Annex B NAL units)")
            }
            video = e.settings
        }
        if video.maxBFrames == nil && (container == .mp4 || container == .rtmp || container == .hls || segmentTime != nil) {
            // Fragmented MP4 has no edit list to hide the B-frame reorder delay:
            // with B-frames the muxer shifts every stream by it. Without them
            // video and audio start exactly at zero.
            video.maxBFrames = 0
        }
        self.settings = video
        self.audioTrack = audio
        self.timestampOrigin = timestampOrigin
        let network = url.contains("://") && !url.hasPrefix("file:")
        deadline = InterruptDeadline(timeout: network ? networkTimeout : 0, cancel: cancel)

        let muxer = container.muxer
        let out: FFOutputContext
        do { out = try FFOutputContext(muxer: muxer, url: firstPath) } catch {
            throw .writeFailed(path: firstPath, detail: "no \(muxer) muxer: \(error.message)")
        }
        out.raw.pointee.interrupt_callback = deadline.callback
        // Each completed fragment / packet goes to the file at once.
        out.raw.pointee.flush_packets = 1
        let globalHeader = out.raw.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0
        var parameterSets: [UInt8]?
        switch source {
        case .frames:
            let e = try VideoEncoder(settings: video, globalHeader: globalHeader, nvenc: nvenc)
            encoder = e
            selection = e.selection
            videoTimeBase = e.timeBase
            frameTicks = e.frameTicks
        case .encoded(let pre):
            encoder = nil
            selection = EncoderSelection(name: pre.encoderName, isHardware: false, reason: pre.encoderReason, devicePath: nil)
            (videoTimeBase, frameTicks) = VideoEncoder.ticks(for: video.frameRate)
            parameterSets = pre.parameterSets.flatMap(H264AnnexB.parameterSets(in:))
        }
        lender = Mutex(encoder.flatMap { $0.nvenc == nil ? nil : CUDAFrameLender($0) })
        do {
            videoStream = try out.newStream()
            videoStream.pointee.time_base = videoTimeBase
            videoStream.pointee.avg_frame_rate = AVRational(num: video.frameRate.numerator, den: video.frameRate.denominator)
            if let encoder {
                try encoder.copyParameters(to: videoStream.pointee.codecpar)
            } else {
                MediaWriter.describeH264(videoStream.pointee.codecpar, settings: video, parameterSets: parameterSets)
            }
        } catch { throw .writeFailed(path: url, detail: "video stream: \(error)") }
        if let audio { try addAudioStream(audio, to: out, globalHeader: globalHeader) }

        let options = FFDictionary()
        if network { options.set("rw_timeout", String(Int(networkTimeout * 1_000_000))) }
        // SRT in live mode drops what is unsent when the socket closes: wait
        // up to 2 s for the receiver to have the end of the take (unless the
        // URL says otherwise; libsrt takes it from the URL, not the options).
        if segmentTime != nil { try MediaWriter.claim(firstPath) }
        var ioURL = firstPath
        if url.lowercased().hasPrefix("srt://") && !url.contains("linger=") { ioURL += (url.contains("?") ? "&" : "?") + "linger=2" }
        deadline.arm()
        do { try out.openIO(url: ioURL, options: options.copy()) } catch {
            deadline.disarm()
            throw MediaWriter.error(error.code, path: firstPath, deadline: deadline, doing: "cannot open output")
        }
        deadline.disarm()
        requestedTimeBases = (0..<out.streamCount).map { out.stream($0).pointee.time_base }
        if container == .hls {
            hls = HLSState(playlist: url, segmentTime: segmentLength ?? HLSNaming.defaultSegmentTime, listSize: hlsListSize ?? 0,
                           timeBase: videoTimeBase)
        }
        if let segmentTime {
            split = SplitState(ticks: max(1, Int64((segmentTime * Double(videoTimeBase.den) / Double(videoTimeBase.num)).rounded())))
        }
        output = out
        let muxOptions = muxerOptions()
        if encoder == nil && parameterSets == nil {
            pendingHeader = muxOptions
        } else {
            do throws(MediaError) { try writeHeader(muxOptions) } catch { output = nil; throw error }
        }
    }

    /// The muxer's options for this container (a fresh dictionary: writing a header consumes it).
    func muxerOptions() -> FFDictionary {
        let muxOptions = FFDictionary()
        if container == .mp4 {
            muxOptions.set("movflags", "frag_keyframe+empty_moov+default_base_moof")
            muxOptions.set("frag_duration", "1000000")
        }
        if container == .matroska {
            // A cluster a second at most, each begun at a keyframe, and
            // every packet flushed: a killed take keeps its finished clusters.
            muxOptions.set("cluster_time_limit", "1000")
            muxOptions.set("flush_packets", "1")
        }
        if let hls { hlsOptions(hls, into: muxOptions) }
        return muxOptions
    }

    /// Writes the container's header (and, for an MP4 file, the room for its length).
    func writeHeader(_ muxOptions: FFDictionary) throws(MediaError) {
        guard let out = output else { return }
        deadline.arm()
        var r = avformat_write_header(out.raw, &muxOptions.raw)
        if r >= 0, let io = out.io { avio_flush(io); if let e = out.ioError { r = e } }
        deadline.disarm()
        if r < 0 { throw MediaWriter.error(r, path: path, deadline: deadline, doing: "header") }
        if container == .mp4 && !isURL(url), let io = out.io {
            // Room for the movie length that a clean finish writes (FragmentedMP4).
            avio_write(io, FragmentedMP4.reservedBox, Int32(FragmentedMP4.reservedBox.count))
            avio_flush(io)
            if let e = out.ioError { throw MediaWriter.error(e, path: path, deadline: deadline, doing: "header") }
            trackEnds = Array(repeating: 0, count: out.streamCount)
        }
    }

    /// The SRT latency in microseconds: the URL's `latency=` (as FFmpeg reads it), else SRT's 120 ms.
    static func srtLatency(_ url: String) -> Int {
        guard let q = url.split(separator: "?", maxSplits: 1).last, url.contains("?") else { return 120_000 }
        for pair in q.split(separator: "&") where pair.hasPrefix("latency=") {
            if let v = Int(pair.dropFirst("latency=".count)), v >= 0 { return min(v, 10_000_000) }
        }
        return 120_000
    }

    deinit {
        // finish() should have run; finish best-effort so the file is complete.
        if !finished { try? finish() }
    }

    static func error(_ code: Int32, path: String, deadline: InterruptDeadline, doing: String) -> MediaError {
        if code == averrorENOSPC { return .storageFull(path: path) }
        if deadline.interrupted && !deadline.fired { return .writeFailed(path: path, detail: "\(doing): stopped") }
        if deadline.fired || code == averrorExit { return .timedOut(path: path) }
        return .writeFailed(path: path, detail: "\(doing): \(avErrorString(code))")
    }

    /// Throws for `r` < 0 or an error the output has recorded, remembering the first.
    func check(_ r: Int32, _ doing: String) throws(MediaError) {
        var code = r
        if code >= 0, let e = output?.ioError { code = e }
        guard code < 0 else { return }
        let e = MediaWriter.error(code, path: path, deadline: deadline, doing: doing)
        if firstError == nil { firstError = e }
        throw e
    }

    /// `av_interleaved_write_frame` under the deadline (nothing once the output is closed).
    func mux(_ packet: UnsafeMutablePointer<AVPacket>, _ doing: String) throws(MediaError) {
        guard let output else { return }
        if trackEnds != nil, packet.pointee.pts != avNoPTS {
            let i = Int(packet.pointee.stream_index)
            trackEnds![i] = max(trackEnds![i], packet.pointee.pts + max(0, packet.pointee.duration))
        }
        deadline.arm()
        let r = StageClock.measure(.mux) { av_interleaved_write_frame(output.raw, packet) }
        deadline.disarm()
        try check(r, doing)
        if hls != nil { readPlaylistIfChanged() }
    }

    /// Encodes and writes one frame (NV12 preferred, any `PixelFormat` accepted),
    /// then any audio the source has read up to this frame's end.
    public func write(_ frame: VideoFrame) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { throw e }
        guard encoder != nil else { throw .invalidFrame(reason: "output \(url) takes encoded pictures (\(encoderName)), not frames") }
        let origin = timestampOrigin ?? frame.pts
        var frame = frame
        frame.pts = frame.pts - origin
        let key = keyframeDue(at: frame.pts.converted(to: videoTimeBase.den).value)
        let packets = try encoding(at: frame.pts, { (e: VideoEncoder, fresh: Bool) throws(MediaError) in
            try e.encode(frame, keyframe: key && !fresh)
        })
        timestampOrigin = origin
        try afterVideo(packets, frameEnd: frame.pts.converted(to: videoTimeBase.den).value + frameTicks)
    }

    /// Whether `write(_:pts:release:)` takes dma-bufs: the VA-API encoder reads them in place.
    public var takesDmaBuf: Bool { encoder?.selection.isHardware ?? false }

    /// The VA-API encoder's rate control and entrypoint (`VAEncoderTuning`); nil for software.
    public var encoderTuning: VAEncoderTuning? { encoder?.tuning }

    /// Encodes an NV12 dma-buf frame at `pts` without copying it (VA-API
    /// encoder only; `takesDmaBuf`). `release` runs exactly once, when the
    /// encoder no longer reads the buffer: right away if the frame is refused.
    public func write(_ frame: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)? = nil) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { release?(); throw e }
        guard let encoder else {
            release?()
            throw .invalidFrame(reason: "output \(url) takes encoded pictures (\(encoderName)), not dma-bufs")
        }
        let origin = timestampOrigin ?? pts
        let t = pts - origin
        let packets: [FFPacket]
        let key = keyframeDue(at: t.converted(to: videoTimeBase.den).value)
        do { packets = try encoder.encode(frame, pts: t, release: release, keyframe: key) } catch {
            if case .invalidFrame = error {} else { firstError = error }
            throw error
        }
        timestampOrigin = origin
        try afterVideo(packets, frameEnd: t.converted(to: encoder.timeBase.den).value + encoder.frameTicks)
    }

    /// Whether `lendCUDAFrame` lends CUDA frames to fill: the NVENC encoder
    /// takes the compositor's frames device to device, no host copy.
    public var takesCUDA: Bool { lender.withLock { $0 != nil } }

    /// A CUDA frame of the NVENC encoder's pool for the compositor to fill
    /// (`GPUCompositor.setCUDAFrameProvider`); nil where the encoder is not
    /// NVENC (or no longer: `encoderFallback`) or no frame can be had. Any thread.
    public func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget? { lender.withLock { $0 }?.encoder.lendCUDAFrame(size) }

    /// Encodes a CUDA frame this writer lent (`lendCUDAFrame`), now filled
    /// with the composite's NV12, at `pts`.
    public func write(_ frame: CUDAFrameTarget, pts: MediaTime) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { throw e }
        guard encoder != nil else { throw .invalidFrame(reason: "output \(url) takes encoded pictures (\(encoderName)), not CUDA frames") }
        let origin = timestampOrigin ?? pts
        let t = pts - origin
        let key = keyframeDue(at: t.converted(to: videoTimeBase.den).value)
        let packets = try encoding(at: t, { (e: VideoEncoder, fresh: Bool) throws(MediaError) in
            // A frame the failed NVENC encoder lent comes to its successor in host memory, or not at all.
            if e.nvenc == nil {
                guard let host = try? MediaWriter.download(frame, size: e.settings.size, pts: t) else { encoderFallback?.framesLost += 1; return [] }
                return try e.encode(host, keyframe: false)
            }
            return try e.encode(lent: frame, pts: t, keyframe: key && !fresh)
        })
        timestampOrigin = origin
        try afterVideo(packets, frameEnd: t.converted(to: videoTimeBase.den).value + frameTicks)
    }

    /// Writes one pre-encoded access unit (H.264, Annex B) at its pts, then
    /// any audio the source has read up to its end. The packet's duration
    /// (one frame when zero) and timestamps are set in the stream's ticks,
    /// kept increasing; a packet's dts equal to its pts (no B-frames) is the
    /// usual case. Until the first keyframe, packets are dropped; the header
    /// of an output opened without parameter sets is written at that keyframe.
    public func write(_ packet: EncodedVideoPacket) throws(MediaError) {
        precondition(!finished, "MediaWriter.write after finish")
        if let e = firstError { throw e }
        guard encoder == nil else {
            throw .invalidFrame(reason: "\(encoderName) encodes frames itself; output \(url) takes no encoded pictures")
        }
        guard !packet.data.isEmpty else { throw .invalidFrame(reason: "an encoded picture of 0 bytes") }
        if framesWritten == 0 && !packet.isKeyframe { packetsBeforeKeyframe += 1; return }
        if let options = pendingHeader {
            guard let ps = H264AnnexB.parameterSets(in: packet.data) else {
                throw .invalidFrame(reason: "the first keyframe carries no SPS and PPS, and the output was opened without them")
            }
            MediaWriter.setExtradata(videoStream.pointee.codecpar, ps)
            pendingHeader = nil
            do throws(MediaError) { try writeHeader(options) } catch { firstError = error; throw error }
        }
        let origin = timestampOrigin ?? packet.pts
        // Decode order is the order given: dts strictly increasing, pts never before it.
        var pts = (packet.pts - origin).converted(to: videoTimeBase.den).value
        var dts = packet.dts == packet.pts ? pts : (packet.dts - origin).converted(to: videoTimeBase.den).value
        if let last = lastPacketTicks, dts <= last { dts = last + 1 }
        if pts < dts { pts = dts }
        let duration = packet.duration.value > 0 ? max(1, packet.duration.converted(to: videoTimeBase.den).value) : frameTicks
        let p = FFPacket()
        guard av_new_packet(p.raw, Int32(packet.data.count)) >= 0 else { throw .writeFailed(path: url, detail: "av_new_packet: out of memory") }
        packet.data.withUnsafeBufferPointer { p.raw.pointee.data.update(from: $0.baseAddress!, count: packet.data.count) }
        p.raw.pointee.pts = pts
        p.raw.pointee.dts = dts
        p.raw.pointee.duration = duration
        if packet.isKeyframe { p.raw.pointee.flags |= AV_PKT_FLAG_KEY }
        lastPacketTicks = dts
        timestampOrigin = origin
        try afterVideo([p], frameEnd: pts + duration)
    }

    private func afterVideo(_ packets: [FFPacket], frameEnd: Int64) throws(MediaError) {
        framesWritten += 1
        videoEnd = max(videoEnd, frameEnd)
        for p in packets { try writeVideoPacket(p) }
        if let audioTrack { try writeAudio(audioTrack.drain()) }
    }

    private func writeVideoPacket(_ p: FFPacket) throws(MediaError) {
        if let extradata = pendingExtradata {
            // FLV: the muxer writes a new sequence header before this packet (flvenc reads the side data).
            guard let side = av_packet_new_side_data(p.raw, AV_PKT_DATA_NEW_EXTRADATA, extradata.count) else {
                throw .writeFailed(path: url, detail: "av_packet_new_side_data: out of memory")
            }
            extradata.withUnsafeBufferPointer { side.update(from: $0.baseAddress!, count: extradata.count) }
            pendingExtradata = nil
        }
        let pts = p.raw.pointee.pts
        if split != nil, pts != avNoPTS {
            if p.raw.pointee.flags & AV_PKT_FLAG_KEY != 0, split!.cutsBefore(pts) { try startNextSegment(at: pts) }
            let start = split!.start
            p.raw.pointee.pts -= start
            if p.raw.pointee.dts != avNoPTS { p.raw.pointee.dts -= start }
        }
        p.raw.pointee.stream_index = videoStream.pointee.index
        let end = pts == avNoPTS ? muxedVideoEnd : pts + max(0, p.raw.pointee.duration)
        if hls != nil, pts != avNoPTS, p.raw.pointee.flags & AV_PKT_FLAG_KEY != 0 { hls!.muxedKeyframe(at: pts) }
        av_packet_rescale_ts(p.raw, videoTimeBase, videoStream.pointee.time_base)
        try mux(p.raw, "video packet")
        muxedVideoPackets += 1
        muxedVideoEnd = max(muxedVideoEnd, end)
        if split != nil {
            split!.frames += 1
            try writeHeldAudio(before: muxedVideoEnd)
        }
    }

    /// Flushes the encoder, writes the remaining audio and the trailer, and
    /// closes the output. If a write already failed, finish only closes the
    /// output (without throwing again); an MP4 file whose disk filled is then
    /// cut after its last complete fragment, with the length of what it holds
    /// written in (`framesInFile`). If the encoder failed (the output did
    /// not), the output is completed with what was muxed.
    public func finish() throws(MediaError) {
        guard !finished else { return }
        finished = true
        defer { output = nil }
        // The encoder failed, not the output: what was muxed is completed as
        // any output is (trailer, playlist, length), the failed encoder not drained.
        let encoderFailed = firstError.map { if case .encoderFailed = $0 { true } else { false } } ?? false
        if let e = firstError, !encoderFailed {
            if e.isStorageFull, trackEnds != nil, let output {
                try? output.closeIO()
                let held = try? FragmentedMP4.cutToLastFragment(path: path).firstTrackSamples
                if let held, split != nil { split!.frames = held }
                framesInFile = held.map { $0 + (split?.done.reduce(0) { $0 + $1.frames } ?? 0) }
            }
            if split != nil { split!.close(path: path, end: muxedVideoEnd, timeBase: videoTimeBase) }
            return
        }
        if !encoderFailed, let encoder { for p in try encoder.flush() { try writeVideoPacket(p) } }
        // Pre-encoded video that never had a keyframe: nothing was muxed, no header written.
        if pendingHeader != nil { try? output?.closeIO(); return }
        try finishAudio()
        guard let output else { return }
        if split != nil { split!.close(path: path, end: muxedVideoEnd, timeBase: videoTimeBase) }
        deadline.arm()
        let r = av_write_trailer(output.raw)
        deadline.disarm()
        try check(r, "trailer")
        if hls != nil { try writeCompletePlaylist() }
        if container == .srt, let io = output.io {
            // An SRT receiver delivers each packet its latency after it was sent, and
            // one that sees the connection close drops what it still holds: keep the
            // connection open until the end of the take has been delivered.
            avio_flush(io)
            usleep(UInt32(MediaWriter.srtLatency(url) * 2 + 100_000))
        }
        do { try output.closeIO() } catch { try check(error.code, "close") }
        try writeLength(of: output)
    }

    /// An MP4 file's length, written into its movie header once it is complete (`FragmentedMP4`).
    func writeLength(of output: FFOutputContext) throws(MediaError) {
        guard let trackEnds else { return }
        let tracks = trackEnds.enumerated().map { i, end in
            let tb = output.stream(i).pointee.time_base  // the muxer sets 1/mdhd timescale
            return FragmentedMP4.TrackEnd(end: end * Int64(tb.num), timescale: tb.den)
        }
        do { try FragmentedMP4.writeDuration(path: path, tracks: tracks) } catch {
            throw .writeFailed(path: path, detail: "writing the duration: \(error)")
        }
    }
}
