import CFFmpeg

/// What a keyframe packet of a video stream starts: a closed GOP, which no
/// later picture decodes past (an H.264 or HEVC IDR, a VP8, VP9 or AV1 key
/// frame), or an open one, whose leading pictures (after it in decoding
/// order, before it in output order) refer to pictures before it (an
/// H.264 I picture with a recovery point, an HEVC CRA or BLA, and whatever
/// else is not known to close).
enum GOPStart {
    /// Whether a decoder that starts at keyframe `data` decodes every later
    /// picture as one that started earlier does. `codec` and `extradata` are
    /// the stream's (`AVCodecParameters`): they say how NAL units are framed
    /// (length-prefixed where the extradata is an avcC or hvcC record, else
    /// Annex B start codes).
    static func closes(_ data: UnsafeBufferPointer<UInt8>, codec: AVCodecID, extradata: UnsafeBufferPointer<UInt8>) -> Bool {
        switch codec {
        case AV_CODEC_ID_VP8, AV_CODEC_ID_VP9, AV_CODEC_ID_AV1:
            return true
        case AV_CODEC_ID_H264:
            // The first slice's NAL unit type: 5 is an IDR picture's, 1 any other's.
            let type = firstNAL(data, lengthSize: lengthSize(extradata, recordBytes: 7, at: 4)) { ($0 & 0x1f) == 1 || ($0 & 0x1f) == 5 }
            return type.map { $0 & 0x1f == 5 } ?? false
        case AV_CODEC_ID_HEVC:
            // The first slice's type (the VCL types are 0-31): IDR_W_RADL (19) and IDR_N_LP (20) close.
            let type = firstNAL(data, lengthSize: lengthSize(extradata, recordBytes: 23, at: 21)) { ($0 >> 1) & 0x3f < 32 }
            return type.map { [19, 20].contains(($0 >> 1) & 0x3f) } ?? false
        default:
            return false
        }
    }

    /// Whether keyframe `packet` of a stream with parameters `par` closes its GOP (the function above).
    static func closes(_ packet: UnsafePointer<AVPacket>, of par: UnsafePointer<AVCodecParameters>) -> Bool {
        closes(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)), codec: par.pointee.codec_id,
               extradata: UnsafeBufferPointer(start: par.pointee.extradata, count: Int(par.pointee.extradata_size)))
    }

    /// The NAL length prefix's size where `extradata` is a configuration
    /// record (its first byte 1; the size's low two bits at `at`), else nil (Annex B).
    private static func lengthSize(_ extradata: UnsafeBufferPointer<UInt8>, recordBytes: Int, at: Int) -> Int? {
        guard extradata.count >= recordBytes, extradata[0] == 1 else { return nil }
        return Int(extradata[at] & 3) + 1
    }

    /// The header byte of the first NAL unit in `data` that `wanted` takes.
    private static func firstNAL(_ data: UnsafeBufferPointer<UInt8>, lengthSize: Int?, where wanted: (UInt8) -> Bool) -> UInt8? {
        var i = 0
        if let n = lengthSize {
            while i + n < data.count {
                var length = 0
                for k in 0..<n { length = length << 8 | Int(data[i + k]) }
                i += n
                guard length > 0, i + length <= data.count else { return nil }
                if wanted(data[i]) { return data[i] }
                i += length
            }
            return nil
        }
        // Annex B: each unit follows 00 00 01.
        while i + 3 < data.count {
            if data[i] == 0, data[i + 1] == 0, data[i + 2] == 1 {
                if wanted(data[i + 3]) { return data[i + 3] }
                i += 3
            } else {
                i += 1
            }
        }
        return nil
    }
}
