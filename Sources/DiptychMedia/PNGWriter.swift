import CFFmpeg
import DiptychCore
import Foundation

/// Writes still images with FFmpeg's PNG encoder.
public enum PNGWriter {
    /// Encodes an RGBA `frame` (any stride) as a PNG file at `path`, written
    /// to a temporary name first and renamed, so a crash never leaves half a file.
    public static func write(_ frame: VideoFrame, to path: String) throws(MediaError) {
        let data = try encode(frame)
        let tmp = path + ".partial"
        guard FileManager.default.createFile(atPath: tmp, contents: data) else {
            throw MediaError.writeFailed(path: path, detail: "cannot create the file")
        }
        if rename(tmp, path) != 0 {
            unlink(tmp)
            throw MediaError.writeFailed(path: path, detail: String(cString: strerror(errno)))
        }
    }

    /// Encodes an RGBA `frame` as PNG bytes.
    public static func encode(_ frame: VideoFrame) throws(MediaError) -> Data {
        precondition(frame.format == .rgba, "PNGWriter takes RGBA frames")
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG), let ctx = avcodec_alloc_context3(codec) else {
            throw MediaError.encoderUnavailable(encoder: "png", reason: "FFmpeg has no PNG encoder")
        }
        var context: UnsafeMutablePointer<AVCodecContext>? = ctx
        defer { avcodec_free_context(&context) }
        ctx.pointee.width = Int32(frame.width)
        ctx.pointee.height = Int32(frame.height)
        ctx.pointee.pix_fmt = AV_PIX_FMT_RGBA
        ctx.pointee.time_base = AVRational(num: 1, den: 1)
        guard avcodec_open2(ctx, codec, nil) >= 0, let av = av_frame_alloc() else {
            throw MediaError.encoderFailed(encoder: "png", detail: "cannot open the encoder")
        }
        var avOpt: UnsafeMutablePointer<AVFrame>? = av
        defer { av_frame_free(&avOpt) }
        av.pointee.width = Int32(frame.width)
        av.pointee.height = Int32(frame.height)
        av.pointee.format = AV_PIX_FMT_RGBA.rawValue
        av.pointee.data.0 = UnsafeMutablePointer(mutating: frame.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self))
        av.pointee.linesize.0 = Int32(frame.planes[0].stride)
        av.pointee.pts = 0
        guard avcodec_send_frame(ctx, av) >= 0, avcodec_send_frame(ctx, nil) >= 0, let pkt = av_packet_alloc() else {
            throw MediaError.encoderFailed(encoder: "png", detail: "encoding failed")
        }
        var pktOpt: UnsafeMutablePointer<AVPacket>? = pkt
        defer { av_packet_free(&pktOpt) }
        guard avcodec_receive_packet(ctx, pkt) >= 0 else {
            throw MediaError.encoderFailed(encoder: "png", detail: "no image produced")
        }
        return Data(bytes: pkt.pointee.data, count: Int(pkt.pointee.size))
    }
}
