import CFFmpeg
import Foundation
import DiptychCore

/// A video stream's decoder as a `FileSource` drives it: packets in, frames
/// out (`avcodec_send_packet` / `avcodec_receive_frame`). The CPU decoder
/// (`VideoDecoder`) and NVDEC (`NVDECDecoder`) are the two kinds.
protocol FrameDecoder: AnyObject {
    var kind: DecoderKind { get }
    var context: FFCodecContext { get }
    /// The stream's own format (`yuv420p`, `yuv422p10le`, ...): the decoder's
    /// output on the CPU, the format NVDEC decodes from on the GPU.
    var nativeFormat: AVPixelFormat { get }
    /// What frames are delivered in (NVDEC: as the compositor's textures hold them).
    var deliveredFormat: PixelFormat { get }
    /// The frame `receive()` fills.
    var decoded: FFFrame { get }
    /// `avcodec_send_packet` (nil drains); the raw code.
    func send(_ packet: FFPacket?) -> Int32
    /// `avcodec_receive_frame` into `decoded`; the raw code.
    func receive() -> Int32
    /// Why this decoder cannot go on with the stream (set when the stream
    /// changes beyond what it decodes); nil while it can.
    var lost: String? { get }
}

/// One video stream's decoder on the CPU (frame and slice threads, one per core).
final class VideoDecoder: FrameDecoder {
    let context: FFCodecContext
    let nativeFormat: AVPixelFormat
    let deliveredFormat: PixelFormat
    let decoded = FFFrame()
    var kind: DecoderKind { .cpu }
    var lost: String? { nil }

    /// The clock this decoder's threads count toward, and those threads
    /// (found where a clock counts them or a nice value is given; else none).
    private let clock: DecodeCPUClock?
    let threads: [Int32]

    /// Opens the decoder for `stream`. `path` names the input in errors;
    /// the threads it starts count toward `clock` when one is given.
    /// `threads`: its frame threads, or nil for one a core (at most 16).
    /// `nice`: the nice value its threads get (`CodecThreads.yield`), or nil for the process's.
    init(stream: UnsafeMutablePointer<AVStream>, codec: UnsafePointer<AVCodec>, path: String,
         clock: DecodeCPUClock? = nil, threads frameThreads: Int? = nil, nice: Int? = nil) throws(MediaError) {
        do {
            let c = try FFCodecContext(decoding: stream.pointee.codecpar, codec: codec)
            // One frame thread per core by default (FFmpeg's automatic count is one more, and each holds a frame).
            c.raw.pointee.thread_count = Int32(max(1, frameThreads ?? min(16, ProcessInfo.processInfo.activeProcessorCount)))
            c.raw.pointee.thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE
            c.raw.pointee.pkt_timebase = stream.pointee.time_base
            if let clock {
                threads = try clock.opening { () throws(FFmpegError) in try c.open() }
            } else if nice != nil {
                threads = try CodecThreads.opening(.decode) { () throws(FFmpegError) in try c.open() }
            } else {
                try StageClock.naming(.decode) { () throws(FFmpegError) in try c.open() }
                threads = []
            }
            if let nice { CodecThreads.yield(threads, nice: nice) }
            self.clock = clock
            context = c
        } catch {
            throw .unsupportedFormat(path: path, detail: "cannot open \(String(cString: codec.pointee.name)) decoder: \(error.message)")
        }
        nativeFormat = context.raw.pointee.pix_fmt
        guard let delivered = deliveredPixelFormat(nativeFormat) else {
            throw .unsupportedFormat(path: path, detail: "pixel format \(pixelFormatName(nativeFormat)) cannot be converted")
        }
        deliveredFormat = delivered
    }

    /// The decoder's threads end with the context: their time is read first.
    deinit {
        StageClock.sample()
        clock?.retire(threads)
    }

    func send(_ packet: FFPacket?) -> Int32 { context.send(packet) }
    func receive() -> Int32 { context.receive(decoded) }
}

/// Turns decoded CPU frames into `VideoFrame`s. Frames whose format the GPU
/// uploads directly (NV12, yuv420p, yuvj420p, RGBA, BGRA) are wrapped
/// without copying; any other format is converted once with libswscale (to
/// I420, or RGBA for RGB/alpha formats).
final class FrameConverter {
    private let scaler = FFScaler()
    private let path: String
    init(path: String) { self.path = path }

    /// Turns `frame` (decoded, derived or downloaded) into a `VideoFrame`,
    /// leaving `frame` blank.
    func videoFrame(from frame: FFFrame, pts: MediaTime, matrix: ColorMatrix, range streamRange: ColorRange) throws(MediaError) -> VideoFrame {
        let fmt = frame.pixelFormat
        let owned = FFFrame()
        if let direct = directPixelFormat(fmt), (0..<direct.planeCount).allSatisfy({ frame.linesize($0) > 0 }) {
            owned.take(from: frame)
            let full = owned.raw.pointee.color_range == AVCOL_RANGE_JPEG || fmt == AV_PIX_FMT_YUVJ420P
            return wrapFrame(owned, format: direct, pts: pts, matrix: matrix, range: direct.isYUV ? (full ? .full : streamRange) : .full)
        }
        defer { frame.unref() }
        guard let target = conversionTarget(fmt) else {
            throw .unsupportedFormat(path: path, detail: "pixel format \(pixelFormatName(fmt)) cannot be converted")
        }
        do {
            try owned.allocate(format: avPixelFormat(target), width: frame.width, height: frame.height)
            try StageClock.measure(.convert) { () throws(FFmpegError) in try scaler.convert(frame, into: owned) }
        } catch {
            throw .unsupportedFormat(path: path, detail: "cannot convert \(pixelFormatName(fmt)) to \(target.rawValue): \(error)")
        }
        return wrapFrame(owned, format: target, pts: pts, matrix: matrix, range: target.isYUV ? .limited : .full)
    }
}
