import DiptychCore
import Foundation

/// Bits written most significant first (ITU-T H.264 7.2: u(n), ue(v), se(v)).
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var current: UInt8 = 0
    private(set) var count = 0

    mutating func put(_ value: UInt64, _ n: Int) {
        guard n > 0 else { return }
        for i in stride(from: n - 1, through: 0, by: -1) { bit((value >> UInt64(i)) & 1 == 1) }
    }
    mutating func bit(_ b: Bool) {
        current = current << 1 | (b ? 1 : 0)
        count += 1
        if count % 8 == 0 { bytes.append(current); current = 0 }
    }
    mutating func flag(_ b: Bool) { bit(b) }
    mutating func ue(_ v: Int) {
        let k = UInt64(v + 1), len = 63 - k.leadingZeroBitCount
        put(0, len)
        put(k, len + 1)
    }
    mutating func se(_ v: Int) { ue(v > 0 ? 2 * v - 1 : -2 * v) }
    /// rbsp_trailing_bits(): the stop bit, then zeros to a byte boundary.
    mutating func trailing() {
        bit(true)
        while count % 8 != 0 { bit(false) }
    }
    /// The bits so far as big-endian 32-bit words, the last one zero-padded (the bit buffer's slot format).
    var words: [UInt32] {
        var all = bytes
        if count % 8 != 0 { all.append(current << UInt8(8 - count % 8)) }
        while all.count % 4 != 0 { all.append(0) }
        return stride(from: 0, to: all.count, by: 4).map {
            UInt32(all[$0]) << 24 | UInt32(all[$0 + 1]) << 16 | UInt32(all[$0 + 2]) << 8 | UInt32(all[$0 + 3])
        }
    }
}

/// What one GPU-encoded stream says in its parameter sets (ITU-T H.264 7.3.2):
/// Constrained Baseline, one reference frame, picture order from frame_num,
/// the in-loop deblocking filter on every edge (the reconstruction the
/// encoder predicts from is the decoder's output).
struct H264StreamFormat: Hashable, Sendable {
    var width: Int
    var height: Int
    /// Frames per second, for the level and the VUI timing.
    var rate: FrameRate
    var matrix: ColorMatrix
    var range: ColorRange

    var mbWidth: Int { (width + 15) / 16 }
    var mbHeight: Int { (height + 15) / 16 }
    static let log2MaxFrameNum = 16

    /// The smallest level (Table A-1) whose frame size and macroblock rate hold this stream.
    var levelIDC: Int {
        let frameMBs = mbWidth * mbHeight
        let mbps = Double(frameMBs) * rate.fps
        let levels: [(Int, Int, Double)] = [(30, 1620, 40500), (31, 3600, 108000), (32, 5120, 216000), (40, 8192, 245760),
                                            (42, 8704, 522240), (50, 22080, 589824), (51, 36864, 983040), (52, 36864, 2073600)]
        for (idc, fs, rate) in levels where frameMBs <= fs && mbps <= rate { return idc }
        return 52
    }

    /// seq_parameter_set_rbsp().
    var sps: [UInt8] {
        var w = BitWriter()
        w.put(66, 8)                 // profile_idc: Baseline
        w.put(0b1100_0000, 8)        // constraint_set0 and constraint_set1 (Constrained Baseline), reserved zeros
        w.put(UInt64(levelIDC), 8)
        w.ue(0)                      // seq_parameter_set_id
        w.ue(Self.log2MaxFrameNum - 4)
        w.ue(2)                      // pic_order_cnt_type: output order is decoding order
        w.ue(1)                      // max_num_ref_frames
        w.flag(false)                // gaps_in_frame_num_value_allowed_flag
        w.ue(mbWidth - 1)
        w.ue(mbHeight - 1)
        w.flag(true)                 // frame_mbs_only_flag
        w.flag(true)                 // direct_8x8_inference_flag
        let cropRight = (mbWidth * 16 - width) / 2, cropBottom = (mbHeight * 16 - height) / 2
        w.flag(cropRight > 0 || cropBottom > 0)
        if cropRight > 0 || cropBottom > 0 { w.ue(0); w.ue(cropRight); w.ue(0); w.ue(cropBottom) }
        w.flag(true)                 // vui_parameters_present_flag
        w.flag(false)                // aspect_ratio_info_present_flag
        w.flag(false)                // overscan_info_present_flag
        w.flag(true)                 // video_signal_type_present_flag
        w.put(5, 3)                  // video_format: unspecified
        w.flag(range == .full)
        w.flag(true)                 // colour_description_present_flag
        let (primaries, transfer, coefficients): (UInt64, UInt64, UInt64) = matrix == .bt601 ? (6, 6, 6) : (1, 1, 1)
        w.put(primaries, 8); w.put(transfer, 8); w.put(coefficients, 8)
        w.flag(false)                // chroma_loc_info_present_flag
        let timing = Int64(rate.numerator) * 2 <= Int64(UInt32.max)
        w.flag(timing)
        if timing {
            w.put(UInt64(rate.denominator), 32)      // num_units_in_tick
            w.put(UInt64(rate.numerator) * 2, 32)    // time_scale (two ticks a frame)
            w.flag(false)                            // fixed_frame_rate_flag
        }
        w.flag(false); w.flag(false) // nal_hrd, vcl_hrd
        w.flag(false)                // pic_struct_present_flag
        w.flag(true)                 // bitstream_restriction_flag
        w.flag(true)                 // motion_vectors_over_pic_boundaries_flag
        w.ue(0); w.ue(0)             // max_bytes_per_pic_denom, max_bits_per_mb_denom
        w.ue(16); w.ue(16)           // log2_max_mv_length horizontal, vertical
        w.ue(0)                      // max_num_reorder_frames
        w.ue(1)                      // max_dec_frame_buffering
        w.trailing()
        return w.bytes
    }

    /// pic_parameter_set_rbsp().
    var pps: [UInt8] {
        var w = BitWriter()
        w.ue(0); w.ue(0)             // pic_parameter_set_id, seq_parameter_set_id
        w.flag(false)                // entropy_coding_mode_flag: CAVLC
        w.flag(false)                // bottom_field_pic_order_in_frame_present_flag
        w.ue(0)                      // num_slice_groups_minus1
        w.ue(0); w.ue(0)             // num_ref_idx_l0/l1_default_active_minus1
        w.flag(false); w.put(0, 2)   // weighted_pred_flag, weighted_bipred_idc
        w.se(0); w.se(0)             // pic_init_qp_minus26, pic_init_qs_minus26
        w.se(0)                      // chroma_qp_index_offset
        w.flag(true)                 // deblocking_filter_control_present_flag
        w.flag(false)                // constrained_intra_pred_flag
        w.flag(false)                // redundant_pic_cnt_present_flag
        w.trailing()
        return w.bytes
    }

    /// slice_header() of one slice of a picture, without trailing bits (the
    /// macroblocks follow it at the next bit). `firstMB`: its first
    /// macroblock; `alone`: the picture's only slice (else the filter stops
    /// at slice edges).
    func sliceHeader(firstMB: Int = 0, alone: Bool = true, idr: Bool, frameNum: Int, idrPicID: Int, qp: Int, deblocking: Bool = true) -> BitWriter {
        var w = BitWriter()
        w.ue(firstMB)                // first_mb_in_slice
        w.ue(idr ? 7 : 5)            // slice_type: every slice of the picture I or P
        w.ue(0)                      // pic_parameter_set_id
        w.put(UInt64(frameNum % (1 << Self.log2MaxFrameNum)), Self.log2MaxFrameNum)
        if idr { w.ue(idrPicID) }
        if !idr {
            w.flag(false)            // num_ref_idx_active_override_flag
            w.flag(false)            // ref_pic_list_modification_flag_l0
        }
        if idr { w.flag(false); w.flag(false) }   // no_output_of_prior_pics_flag, long_term_reference_flag
        else { w.flag(false) }                     // adaptive_ref_pic_marking_mode_flag
        w.se(qp - 26)                // slice_qp_delta
        if deblocking {
            w.ue(alone ? 0 : 2)      // disable_deblocking_filter_idc: every edge, or every edge but the slices' own
            w.se(0)                  // slice_alpha_c0_offset_div2
            w.se(0)                  // slice_beta_offset_div2
        } else {
            w.ue(1)                  // disable_deblocking_filter_idc: off
        }
        return w
    }
}

enum NALUnit {
    static let sliceType = 1, idrType = 5, spsType = 7, ppsType = 8

    /// A start code, the NAL header and the payload with emulation prevention bytes (7.4.1).
    static func annexB(type: Int, refIDC: Int = 3, rbsp: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.reserveCapacity(out.count + rbsp.count + rbsp.count / 64 + 5)
        out += [0, 0, 0, 1, UInt8(refIDC << 5 | type)]
        guard let base = rbsp.baseAddress, rbsp.count > 0 else { return }
        let n = rbsp.count
        var start = 0, i = 0
        // Jump from zero byte to zero byte (memchr); an emulation prevention
        // byte goes before any byte 0-3 that follows two zeros.
        while i < n {
            guard let z = memchr(base + i, 0, n - i) else { break }
            var j = base.distance(to: z.assumingMemoryBound(to: UInt8.self))
            var zeros = 0
            while j < n && base[j] == 0 {
                zeros += 1
                if zeros == 2 && j + 1 < n && base[j + 1] <= 3 {
                    out.append(contentsOf: UnsafeBufferPointer(start: base + start, count: j + 1 - start))
                    out.append(3)
                    start = j + 1
                    zeros = 0
                }
                j += 1
            }
            i = j
        }
        out.append(contentsOf: UnsafeBufferPointer(start: base + start, count: n - start))
    }

    static func annexB(type: Int, refIDC: Int = 3, rbsp: [UInt8], into out: inout [UInt8]) {
        rbsp.withUnsafeBufferPointer { annexB(type: type, refIDC: refIDC, rbsp: $0, into: &out) }
    }
}

/// The deblocking filter's thresholds for a picture at one QP (ITU-T H.264
/// Tables 8-16 and 8-17, filter offsets 0), packed for the deblocking pass:
/// `thresholds` α | β << 8 of luma and α | β << 8 of chroma (at the chroma
/// QP), each tC0 word tC0 for bS 1, 2, 3 a byte each.
struct H264Deblocking: Equatable {
    var thresholds: Int32
    var lumaTC0: Int32
    var chromaTC0: Int32

    static let alpha: [Int32] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 5, 6, 7, 8, 9, 10, 12, 13, 15, 17, 20, 22, 25, 28,
                                 32, 36, 40, 45, 50, 56, 63, 71, 80, 90, 101, 113, 127, 144, 162, 182, 203, 226, 255, 255]
    static let beta: [Int32] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 6, 6, 7, 7, 8, 8,
                                9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 18, 18]
    /// tC0 for bS 1, 2, 3 from indexA 17 (all zero below; 0 to 16 give none).
    static let tc0: [(Int32, Int32, Int32)] = [
        (0, 0, 1), (0, 0, 1), (0, 0, 1), (0, 0, 1), (0, 1, 1), (0, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1),
        (1, 1, 2), (1, 1, 2), (1, 1, 2), (1, 1, 2), (1, 2, 3), (1, 2, 3), (2, 2, 3), (2, 2, 4), (2, 3, 4), (2, 3, 4),
        (3, 3, 5), (3, 4, 6), (3, 4, 6), (4, 5, 7), (4, 5, 8), (4, 6, 9), (5, 7, 10), (6, 8, 11), (6, 8, 13), (7, 10, 14),
        (8, 11, 16), (9, 12, 18), (10, 13, 20), (11, 15, 23), (13, 17, 25)]

    /// Chroma's QP from luma's (Table 8-15, chroma_qp_index_offset 0).
    static func chromaQP(_ qp: Int) -> Int {
        qp < 30 ? qp : [29, 30, 31, 32, 32, 33, 34, 34, 35, 35, 36, 36, 37, 37, 37, 38, 38, 38, 39, 39, 39, 39][qp - 30]
    }

    static func tc0Word(_ index: Int) -> Int32 {
        guard index >= 17 else { return 0 }
        let (a, b, c) = tc0[index - 17]
        return a | b << 8 | c << 16
    }

    init(qp: Int) {
        let c = Self.chromaQP(qp)
        thresholds = Self.alpha[qp] | Self.beta[qp] << 8 | Self.alpha[c] << 16 | Self.beta[c] << 24
        lumaTC0 = Self.tc0Word(qp)
        chromaTC0 = Self.tc0Word(c)
    }
}
