import Foundation
import Testing
import CFFmpeg
@testable import DiptychMedia

/// Which keyframes close a GOP (`GOPStart`), read from files libx264 and
/// libx265 wrote, length-prefixed (MP4) and with start codes (MPEG-TS).
@Suite struct GOPStartTests {
    /// For each keyframe packet of `path`'s video, in file order: whether it closes its GOP.
    static func keyframes(_ path: String) throws -> [Bool] {
        var fmt: UnsafeMutablePointer<AVFormatContext>?
        try #require(avformat_open_input(&fmt, path, nil, nil) >= 0)
        defer { avformat_close_input(&fmt) }
        let f = try #require(fmt)
        try #require(avformat_find_stream_info(f, nil) >= 0)
        let packet = FFPacket()
        var out: [Bool] = []
        while av_read_frame(f, packet.raw) >= 0 {
            defer { packet.unref() }
            let par = f.pointee.streams[Int(packet.raw.pointee.stream_index)]!.pointee.codecpar!
            guard par.pointee.codec_type == AVMEDIA_TYPE_VIDEO, packet.raw.pointee.flags & AV_PKT_FLAG_KEY != 0 else { continue }
            out.append(GOPStart.closes(packet.raw, of: par))
        }
        return out
    }

    /// 90 frames, a keyframe every 30, B-frames; `open`: open GOPs.
    static func clip(_ dir: TempDir, _ name: String, codec: String, open: Bool) throws -> String {
        let path = dir.path(name)
        let params = codec == "libx264" ? ["-x264-params", "b-adapt=0:open-gop=\(open ? 1 : 0)"]
                                        : ["-x265-params", "log-level=error:open-gop=\(open ? 1 : 0):keyint=30:min-keyint=30:scenecut=0"]
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30", "-frames:v", "90", "-c:v", codec, "-preset", "ultrafast",
                                        "-g", "30", "-keyint_min", "30", "-sc_threshold", "0", "-bf", "2"] + params + ["-pix_fmt", "yuv420p", path]) == 0)
        return path
    }

    @Test(arguments: ["libx264", "libx265"], ["mp4", "ts"])
    func idrsCloseAndRecoveryPointsOpen(codec: String, container: String) throws {
        _ = quietFFmpeg
        let dir = TempDir(); defer { dir.remove() }
        let closed = try Self.keyframes(Self.clip(dir, "closed.\(container)", codec: codec, open: false))
        let open = try Self.keyframes(Self.clip(dir, "open.\(container)", codec: codec, open: true))
        #expect(closed == [true, true, true], "\(codec) in \(container), closed GOPs")
        // The first keyframe is an IDR either way; the later ones open (an I picture with a recovery point, a CRA).
        #expect(open == [true, false, false], "\(codec) in \(container), open GOPs")
    }

    @Test func framingsAndCodecsItDoesNotParse() {
        let idr: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0, 0, 0, 1, 0x65, 0x88]
        let nonIDR: [UInt8] = [0, 0, 1, 0x06, 0x05, 0, 0, 1, 0x41, 0x9a]
        let avcC: [UInt8] = [1, 0x42, 0, 0x1e, 0xff, 0xe1]   // length size 4 (0xff & 3 = 3)
        let prefixed: [UInt8] = [0, 0, 0, 2, 0x06, 0x05, 0, 0, 0, 2, 0x65, 0x88]
        func closes(_ d: [UInt8], _ c: AVCodecID, _ e: [UInt8] = []) -> Bool {
            d.withUnsafeBufferPointer { dp in e.withUnsafeBufferPointer { ep in GOPStart.closes(dp, codec: c, extradata: ep) } }
        }
        #expect(closes(idr, AV_CODEC_ID_H264))
        #expect(!closes(nonIDR, AV_CODEC_ID_H264))
        #expect(closes(prefixed, AV_CODEC_ID_H264, avcC + [0, 0]))
        #expect(!closes([0, 0, 0, 9, 0x65], AV_CODEC_ID_H264, avcC + [0, 0]), "a length past the packet")
        #expect(!closes([], AV_CODEC_ID_H264))
        #expect(closes([0x12, 0], AV_CODEC_ID_AV1) && closes([0x82], AV_CODEC_ID_VP9))
        #expect(!closes([0, 0, 1, 0xb3], AV_CODEC_ID_MPEG2VIDEO), "MPEG-2 GOPs are taken as open")
    }
}
