import CFFmpeg
import DiptychCore
import Synchronization

/// NVENC failed mid-take and the output went on with the software encoder
/// (docs/ARCHITECTURE.md, "Encoder paths"): when, why, and where.
public struct EncoderFallback: Sendable, Codable, Hashable, CustomStringConvertible {
    /// Seconds into the output of the first frame the software encoder took.
    public var at: Double
    /// The encoder that failed (`h264_nvenc`) and the one that took over (`libx264`).
    public var from: String
    public var to: String
    /// What the failed encoder said.
    public var reason: String
    /// The file the output went on in (an MP4 or Matroska file goes on in
    /// its next file: a file's parameter sets cannot change); nil where the
    /// stream itself went on (MPEG-TS and FLV carry the new ones at the
    /// switch) or the file began again (nothing had been written to it).
    public var continuedIn: String?
    /// Frames NVENC had lent before it failed that could not be read back
    /// from CUDA memory for the software encoder (the device gone with the
    /// engine): not in the output.
    public var framesLost = 0

    public init(at: Double, from: String, to: String, reason: String, continuedIn: String?) {
        self.at = at; self.from = from; self.to = to; self.reason = reason; self.continuedIn = continuedIn
    }

    public var description: String {
        let where_ = continuedIn.map { ", going on in \($0)" } ?? ""
        return "\(from) failed at \(String(format: "%.3f", at)) s (\(reason)); \(to) from there\(where_)"
    }
}

/// The NVENC encoder whose CUDA frames `MediaWriter.lendCUDAFrame` lends, from any thread.
final class CUDAFrameLender: @unchecked Sendable {   // VideoEncoder.lendCUDAFrame takes from FFmpeg's thread-safe buffer pool
    let encoder: VideoEncoder
    init(_ encoder: VideoEncoder) { self.encoder = encoder }
}

/// The fallback side of `MediaWriter`: an NVENC session that fails mid-take
/// (the engine lost, the driver reset) hands the output to the software
/// encoder at the frame that failed, without ending the take.
extension MediaWriter {
    /// Runs `encode` on the encoder. Where that is NVENC and it fails (other
    /// than a frame refused), the software encoder takes over (`fallBack`)
    /// and `encode` runs again on it (`fresh`: its first picture is an IDR
    /// anyway). Any other failure is the output's first error.
    func encoding(at t: MediaTime, _ encode: (VideoEncoder, _ fresh: Bool) throws(MediaError) -> [FFPacket]) throws(MediaError) -> [FFPacket] {
        guard let current = encoder else { throw .invalidFrame(reason: "output \(url) takes encoded pictures (\(encoderName)), not frames") }
        do { return try encode(current, false) } catch {
            if case .invalidFrame = error { throw error }
            do throws(MediaError) {
                let next = try fallBack(from: current, after: error, at: t)
                return try encode(next, true)
            } catch {
                if case .invalidFrame = error {} else { firstError = error }
                throw error
            }
        }
    }

    /// The software encoder for the rest of the output, the container told:
    /// an MP4 or Matroska file is completed and the output goes on in its
    /// next file (`SegmentNaming`; a file nothing was written to begins
    /// again instead); MPEG-TS goes on in the same stream (the new encoder
    /// repeats its SPS and PPS at each IDR); FLV too, its muxer given the new
    /// parameter sets with the first packet (a new sequence header). HLS
    /// cannot: its playlist's init segment holds the old parameter sets.
    private func fallBack(from failed: VideoEncoder, after error: MediaError, at t: MediaTime) throws(MediaError) -> VideoEncoder {
        guard failed.nvenc != nil, encoderFallback == nil, case .encoderFailed(_, let detail) = error, let out = output else { throw error }
        guard hls == nil else {
            throw .encoderFailed(encoder: failed.name, detail: "\(detail); an HLS output cannot change its encoder mid-playlist, so it ends here")
        }
        let next = try failed.softwareSuccessor(globalHeader: out.raw.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0,
                                                streamGoesOn: container != .mp4 && container != .matroska, failure: detail)
        lender.withLock { $0 = nil }
        var continuedIn: String?
        switch container {
        case .mp4, .matroska:
            if (split?.frames ?? muxedVideoPackets) == 0 {
                try beginFileAgain(video: next)
            } else {
                // A file written whole becomes the first of its files from here.
                if split == nil {
                    var whole = SplitState(ticks: Int64.max / 4)
                    whole.frames = muxedVideoPackets
                    split = whole
                }
                let ticks = t.converted(to: videoTimeBase.den).value
                try startNextSegment(at: ticks, video: next)
                split!.restartSchedule(at: ticks)
                continuedIn = path
            }
        case .rtmp:
            pendingExtradata = try MediaWriter.extradata(of: next)
        case .mpegts, .srt, .hls:
            break
        }
        encoder = next
        selection = EncoderSelection(name: next.name, isHardware: false, reason: "\(failed.name) failed mid-take: \(detail)", devicePath: nil)
        encoderFallback = EncoderFallback(at: t.seconds, from: failed.name, to: next.name, reason: detail, continuedIn: continuedIn)
        return next
    }

    /// The current file holds no video: it is written again from its start,
    /// its video described by `video` (what audio it had is dropped).
    private func beginFileAgain(video: VideoEncoder) throws(MediaError) {
        guard let old = output else { return }
        try? old.closeIO()
        do throws(MediaError) { try openSegment(path, like: old, video: video, claim: false) } catch {
            output = nil
            throw error
        }
    }

    /// The parameter sets `encoder` describes its stream with (as the muxer would be given them).
    static func extradata(of encoder: VideoEncoder) throws(MediaError) -> [UInt8] {
        guard let p = avcodec_parameters_alloc() else { throw .encoderFailed(encoder: encoder.name, detail: "out of memory") }
        defer { var freed: UnsafeMutablePointer<AVCodecParameters>? = p; avcodec_parameters_free(&freed) }
        do { try encoder.copyParameters(to: p) } catch { throw .encoderFailed(encoder: encoder.name, detail: "\(error)") }
        guard let data = p.pointee.extradata, p.pointee.extradata_size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(p.pointee.extradata_size)))
    }

    /// A frame NVENC lent, filled, read back into host memory for the
    /// encoder that took over from it (the frame is dropped where its
    /// memory cannot be read: the device gone with the engine).
    static func download(_ target: CUDAFrameTarget, size: PixelSize, pts: MediaTime) throws(MediaError) -> VideoFrame {
        guard let lent = target.owner as? LentCUDAFrame else { throw .invalidFrame(reason: "a CUDA frame this output did not lend") }
        let host = FFFrame()
        host.raw.pointee.format = AV_PIX_FMT_NV12.rawValue
        let r = av_hwframe_transfer_data(host.raw, lent.frame.raw, 0)
        guard r >= 0 else { throw .invalidFrame(reason: "a CUDA frame the failed encoder lent cannot be read back: \(avErrorString(r))") }
        let frame = VideoFrame.allocate(width: size.width, height: size.height, format: .nv12, pts: pts)
        for (plane, rows) in [(0, size.height), (1, size.height / 2)] {
            guard let src = diptych_frame_data(host.raw, Int32(plane)) else { throw .invalidFrame(reason: "a CUDA frame read back without plane \(plane)") }
            let pitch = Int(diptych_frame_linesize(host.raw, Int32(plane)))
            let dst = UnsafeMutableRawPointer(mutating: frame.planes[plane].baseAddress)
            for y in 0..<rows { (dst + y * frame.planes[plane].stride).copyMemory(from: src + y * pitch, byteCount: size.width) }
        }
        return frame
    }
}
