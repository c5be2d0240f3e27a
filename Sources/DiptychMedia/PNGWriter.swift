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
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG) else {
            throw MediaError.encoderUnavailable(encoder: "png", reason: "FFmpeg has no PNG encoder")
        }
        let packet = FFPacket()
        do {
            let ctx = try FFCodecContext(codec)
            ctx.raw.pointee.width = Int32(frame.width)
            ctx.raw.pointee.height = Int32(frame.height)
            ctx.raw.pointee.pix_fmt = AV_PIX_FMT_RGBA
            ctx.raw.pointee.time_base = AVRational(num: 1, den: 1)
            try ctx.open()
            let av = FFFrame()
            av.raw.pointee.width = Int32(frame.width)
            av.raw.pointee.height = Int32(frame.height)
            av.raw.pointee.format = AV_PIX_FMT_RGBA.rawValue
            diptych_frame_set_plane(av.raw, 0, UnsafeMutablePointer(mutating: frame.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self)),
                                    Int32(frame.planes[0].stride))
            av.raw.pointee.pts = 0
            try ffCheck(ctx.send(av.raw), "avcodec_send_frame")
            try ffCheck(ctx.send(nil as UnsafeMutablePointer<AVFrame>?), "avcodec_send_frame")
            try ffCheck(ctx.receive(packet), "avcodec_receive_packet")
        } catch {
            throw MediaError.encoderFailed(encoder: "png", detail: "\(frame.width)x\(frame.height): \(error)")
        }
        return Data(bytes: packet.raw.pointee.data, count: Int(packet.raw.pointee.size))
    }
}
