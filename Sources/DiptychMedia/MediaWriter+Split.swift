import CFFmpeg
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// The split side of `MediaWriter` (`segmentTime`): where a file ends, the
/// next file opened with the same streams, and every file claimed before it
/// is written (a split output never writes over a file).
extension MediaWriter {
    /// Whether the frame at `ticks` (on the take's timeline) is to be made a
    /// keyframe: the first frame at or after `segmentTime` into the file.
    /// An HLS output: the first frame at or after the next cut (`HLSState`).
    func keyframeDue(at ticks: Int64) -> Bool {
        if hls != nil { return hls!.keyframeDue(at: ticks) }
        guard split != nil else { return false }
        return split!.keyframeDue(at: ticks)
    }

    /// Completes the current file (its audio before `pts`, trailer, length)
    /// and opens the next, whose first frame is the keyframe at `pts`; its
    /// video described by `next` where another encoder begins there
    /// (`encoderFallback`), else as the file before.
    func startNextSegment(at pts: Int64, video next: VideoEncoder? = nil) throws(MediaError) {
        guard let old = output else { return }
        try writeHeldAudio(before: pts)
        deadline.arm()
        let r = av_write_trailer(old.raw)
        deadline.disarm()
        try check(r, "trailer")
        do { try old.closeIO() } catch { try check(error.code, "close") }
        try writeLength(of: old)
        split!.close(path: path, end: pts, timeBase: videoTimeBase)
        split!.start = pts

        let file = SegmentNaming.path(url, index: split!.done.count + 1)
        do throws(MediaError) { try openSegment(file, like: old, video: next) } catch {
            output = nil
            if firstError == nil { firstError = error }
            throw error
        }
    }

    /// Opens `next` with the streams of `old` (parameters, time bases; the
    /// video's from `video` where given) and writes its header. `claim`:
    /// the file must not exist (`claim(_:)`); else it is one this writer made.
    func openSegment(_ next: String, like old: FFOutputContext, video: VideoEncoder? = nil, claim: Bool = true) throws(MediaError) {
        if claim { try MediaWriter.claim(next) }
        path = next
        let out: FFOutputContext
        do { out = try FFOutputContext(muxer: container.muxer, url: next) } catch {
            throw .writeFailed(path: next, detail: "no \(container.muxer) muxer: \(error.message)")
        }
        out.raw.pointee.interrupt_callback = deadline.callback
        out.raw.pointee.flush_packets = 1
        for i in 0..<old.streamCount {
            let from = old.stream(i)
            let st: UnsafeMutablePointer<AVStream>
            do { st = try out.newStream() } catch { throw .writeFailed(path: next, detail: "stream \(i): \(error)") }
            guard avcodec_parameters_copy(st.pointee.codecpar, from.pointee.codecpar) >= 0 else {
                throw .writeFailed(path: next, detail: "stream \(i): avcodec_parameters_copy failed")
            }
            if let video, i == Int(videoStream.pointee.index) {
                do { try video.copyParameters(to: st.pointee.codecpar) } catch { throw .writeFailed(path: next, detail: "video stream: \(error)") }
            }
            st.pointee.codecpar.pointee.codec_tag = 0
            st.pointee.time_base = requestedTimeBases[i]
            st.pointee.avg_frame_rate = from.pointee.avg_frame_rate
        }
        do { try out.openIO(url: next, options: FFDictionary()) } catch {
            throw MediaWriter.error(error.code, path: next, deadline: deadline, doing: "cannot open output")
        }
        output = out
        videoStream = out.stream(Int(videoStream.pointee.index))
        if let a = audioStream { audioStream = out.stream(Int(a.pointee.index)) }
        try writeHeader(muxerOptions())
    }

    /// Creates `path` as a new, empty file, failing where a file is there
    /// already: a split output never writes over anything.
    static func claim(_ path: String) throws(MediaError) {
        let file = path.hasPrefix("file:") ? String(path.dropFirst(5)) : path
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            let e = errno
            if e == EEXIST { throw .writeFailed(path: path, detail: "exists already; a split recording never writes over a file") }
            if e == ENOSPC { throw .storageFull(path: path) }
            throw .writeFailed(path: path, detail: "cannot create: \(String(cString: strerror(e)))")
        }
        close(fd)
    }
}

/// Where a split output stands: the current file's start and frames, the
/// files completed, and when the next keyframe is to be made.
struct SplitState {
    /// The segment length in video ticks.
    let ticks: Int64
    /// The current file's first frame, in video ticks on the take's timeline.
    var start: Int64 = 0
    /// Video packets in the current file.
    var frames = 0
    var done: [WrittenSegment] = []
    /// Audio packets (timestamps on the take's timeline, in their time base)
    /// waiting for the video to pass them (`writeHeldAudio`).
    var heldAudio: [(FFPacket, AVRational)] = []
    /// Frames handed to an encoder here: the next frame to be made a keyframe (nil before the first frame).
    private var nextKeyframe: Int64?

    init(ticks: Int64) { self.ticks = ticks }

    /// A keyframe at `pts` begins a new file: the current one holds a frame and has lasted its length.
    func cutsBefore(_ pts: Int64) -> Bool { frames > 0 && pts >= start + ticks }

    mutating func keyframeDue(at t: Int64) -> Bool {
        guard let next = nextKeyframe else { nextKeyframe = t + ticks; return false }
        guard t >= next else { return false }
        nextKeyframe = t + ticks
        return true
    }

    /// A file begun at `t` out of turn (an encoder taking over there): the next keyframe is made `ticks` after it.
    mutating func restartSchedule(at t: Int64) { nextKeyframe = t + ticks }

    func current(path: String, end: Int64, timeBase: AVRational) -> WrittenSegment {
        let seconds = { (t: Int64) in Double(t) * Double(timeBase.num) / Double(timeBase.den) }
        return WrittenSegment(path: path, frames: frames, start: seconds(start), duration: seconds(max(end, start) - start))
    }

    /// The current file is complete, its video ending at `end`.
    mutating func close(path: String, end: Int64, timeBase: AVRational) {
        done.append(current(path: path, end: end, timeBase: timeBase))
        frames = 0
    }
}
