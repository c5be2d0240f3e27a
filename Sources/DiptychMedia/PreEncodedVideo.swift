import CFFmpeg
import DiptychCore

/// The video of an output whose pictures are encoded already (the GPU
/// H.264 encoder): what the muxer needs to describe the stream.
public struct PreEncodedVideo: Hashable, Sendable {
    public var codec: VideoCodec = .h264
    public var size: PixelSize
    public var frameRate: FrameRate
    /// Colour signalled in the container (the stream's VUI says the same).
    public var matrix: ColorMatrix
    public var range: ColorRange
    /// The SPS and PPS NAL units in Annex B (start codes), the stream's
    /// extradata; nil: taken from the first keyframe, whose header waits for it.
    public var parameterSets: [UInt8]?
    /// The encoder as plans and summaries name it.
    public var encoderName: String
    /// Why it was chosen (the plan's reason).
    public var encoderReason: String

    public init(size: PixelSize, frameRate: FrameRate, matrix: ColorMatrix = .bt709, range: ColorRange = .limited,
                parameterSets: [UInt8]? = nil, encoderName: String = GPUEncoderFacts.encoderName,
                encoderReason: String = "encoded on the GPU") {
        self.size = size; self.frameRate = frameRate; self.matrix = matrix; self.range = range
        self.parameterSets = parameterSets; self.encoderName = encoderName; self.encoderReason = encoderReason
    }

    /// The output's settings as its frames would have been encoded: size, rate, colour.
    public init(settings: VideoEncoderSettings, parameterSets: [UInt8]? = nil, encoderReason: String = "encoded on the GPU") {
        self.init(size: settings.size, frameRate: settings.frameRate, matrix: settings.matrix, range: settings.range,
                  parameterSets: parameterSets, encoderReason: encoderReason)
        codec = settings.codec
    }

    /// As `VideoEncoderSettings` (what `MediaWriter.settings` reports).
    var settings: VideoEncoderSettings {
        var s = VideoEncoderSettings(size: size, frameRate: frameRate, codec: codec, encoder: .gpu, matrix: matrix, range: range)
        s.maxBFrames = 0
        return s
    }
}

extension EncodedVideoPacket {
    /// A picture of a stream without B-frames (decode order = output order):
    /// dts = pts; a zero duration is one frame of the output's rate.
    public init(data: [UInt8], pts: MediaTime, keyframe: Bool, duration: MediaTime = .zero) {
        self.init(data: data, pts: pts, dts: pts, duration: duration, isKeyframe: keyframe)
    }

    /// `isKeyframe`.
    public var keyframe: Bool { get { isKeyframe } set { isKeyframe = newValue } }
}

/// H.264 Annex B byte streams: NAL units between start codes.
public enum H264AnnexB {
    /// The NAL units of `bytes`, each without its start code (ranges into `bytes`).
    public static func nalUnits(in bytes: [UInt8]) -> [Range<Int>] {
        var starts: [(code: Int, payload: Int)] = []
        var i = 0
        let n = bytes.count
        while i + 2 < n {
            if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 {
                let code = i > 0 && bytes[i - 1] == 0 ? i - 1 : i
                starts.append((code, i + 3))
                i += 3
            } else {
                i += 1
            }
        }
        var units: [Range<Int>] = []
        for (k, s) in starts.enumerated() {
            var end = k + 1 < starts.count ? starts[k + 1].code : n
            while end > s.payload, bytes[end - 1] == 0 { end -= 1 }   // trailing zero bytes
            if end > s.payload { units.append(s.payload..<end) }
        }
        return units
    }

    /// The type of a NAL unit (`nal_unit_type`: 1 slice, 5 IDR slice, 7 SPS, 8 PPS, 9 AUD).
    public static func type(_ bytes: [UInt8], _ unit: Range<Int>) -> Int { Int(bytes[unit.lowerBound] & 0x1F) }

    /// The SPS and PPS NAL units of `bytes`, each after a four-byte start
    /// code, in their order; nil when it has no SPS or no PPS.
    public static func parameterSets(in bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var sps = false, pps = false
        for u in nalUnits(in: bytes) {
            let t = type(bytes, u)
            guard t == 7 || t == 8 else { continue }
            if t == 7 { sps = true } else { pps = true }
            out += [0, 0, 0, 1] + bytes[u]
        }
        return sps && pps ? out : nil
    }

    /// Splits an Annex B elementary stream into access units: a new one
    /// starts at an access unit delimiter, or at an SPS, PPS or SEI, or at a
    /// slice whose `first_mb_in_slice` is 0, after a slice of the current
    /// one. Each keeps its NAL units with four-byte start codes.
    public static func accessUnits(in stream: [UInt8]) -> [(data: [UInt8], keyframe: Bool)] {
        var units: [(data: [UInt8], keyframe: Bool)] = []
        var current: [UInt8] = []
        var key = false, hasSlice = false
        func close() {
            if !current.isEmpty { units.append((current, key)) }
            current = []; key = false; hasSlice = false
        }
        for u in nalUnits(in: stream) {
            let t = type(stream, u)
            let isSlice = t == 1 || t == 5
            // first_mb_in_slice is ue(v) first in the slice header: 0 is the single bit 1.
            let firstSlice = isSlice && u.count > 1 && stream[u.lowerBound + 1] & 0x80 != 0
            if hasSlice && (t == 9 || t == 7 || t == 8 || t == 6 || firstSlice) { close() }
            current += [0, 0, 0, 1] + stream[u]
            if isSlice { hasSlice = true }
            if t == 5 { key = true }
        }
        close()
        return units
    }
}

extension MediaWriter {
    /// The codec parameters of a pre-encoded H.264 stream: Constrained
    /// Baseline, progressive 4:2:0, the colour signalled, and the SPS and PPS
    /// (Annex B) as extradata.
    static func describeH264(_ par: UnsafeMutablePointer<AVCodecParameters>, settings: VideoEncoderSettings, parameterSets: [UInt8]?) {
        par.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        par.pointee.codec_id = AV_CODEC_ID_H264
        par.pointee.width = Int32(settings.size.width)
        par.pointee.height = Int32(settings.size.height)
        par.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        par.pointee.profile = FF_PROFILE_H264_CONSTRAINED_BASELINE
        par.pointee.field_order = AV_FIELD_PROGRESSIVE
        par.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        par.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        if settings.matrix == .bt709 {
            par.pointee.color_space = AVCOL_SPC_BT709; par.pointee.color_primaries = AVCOL_PRI_BT709; par.pointee.color_trc = AVCOL_TRC_BT709
        } else {
            par.pointee.color_space = AVCOL_SPC_SMPTE170M; par.pointee.color_primaries = AVCOL_PRI_SMPTE170M; par.pointee.color_trc = AVCOL_TRC_SMPTE170M
        }
        if let ps = parameterSets { setExtradata(par, ps) }
    }

    static func setExtradata(_ par: UnsafeMutablePointer<AVCodecParameters>, _ bytes: [UInt8]) {
        av_freep(&par.pointee.extradata)
        let padded = bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)
        guard let p = av_mallocz(padded)?.assumingMemoryBound(to: UInt8.self) else { par.pointee.extradata_size = 0; return }
        bytes.withUnsafeBufferPointer { p.update(from: $0.baseAddress!, count: bytes.count) }
        par.pointee.extradata = p
        par.pointee.extradata_size = Int32(bytes.count)
    }
}
