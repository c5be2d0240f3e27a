import CVA
import DiptychCore

/// How the VA-API encoder is driven, from what its driver offers for the
/// profile FFmpeg picks (docs/ARCHITECTURE.md, "Encoder paths"): the
/// low-power entrypoint where it is the only encode entrypoint (FFmpeg 5.1
/// does not fall back to it by itself), and the rate control that honours
/// the bit rate: VBR for files (peak twice the target), CBR for live
/// streams, the other where only one is offered.
public struct VAEncoderTuning: Hashable, Sendable, CustomStringConvertible {
    public enum RateControl: String, Hashable, Sendable { case cbr = "CBR", vbr = "VBR" }
    /// `low_power=1`: VAEntrypointEncSliceLP.
    public var lowPower: Bool
    /// nil: the driver offers neither, FFmpeg's automatic choice runs.
    public var rateControl: RateControl?
    public var bitrate: Int
    /// `rc_max_rate` and `rc_buffer_size` in bits.
    public var maxRate: Int
    public var bufferSize: Int

    public var description: String {
        let entry = lowPower ? "low-power entrypoint, " : ""
        switch rateControl {
        case .vbr?: return entry + "VBR \(bitrate / 1000) kbit/s (peak \(maxRate / 1000) kbit/s)"
        case .cbr?: return entry + "CBR \(bitrate / 1000) kbit/s"
        case nil: return entry + "the driver offers neither CBR nor VBR: FFmpeg's rate control"
        }
    }

    /// - Parameters:
    ///   - entrypoints: the profile's entrypoints (`VAEntrypointEncSlice`, `VAEntrypointEncSliceLP`, ...).
    ///   - rateControls: `VAConfigAttribRateControl` (`VA_RC_CBR | VA_RC_VBR | ...`), 0 when unknown.
    public static func choose(entrypoints: [String], rateControls: UInt32, bitrate: Int, live: Bool) -> VAEncoderTuning {
        let lowPower = !entrypoints.contains("VAEntrypointEncSlice") && entrypoints.contains("VAEntrypointEncSliceLP")
        let cbr = rateControls & UInt32(VA_RC_CBR) != 0, vbr = rateControls & UInt32(VA_RC_VBR) != 0
        let rc: RateControl? = live ? (cbr ? .cbr : vbr ? .vbr : nil) : (vbr ? .vbr : cbr ? .cbr : nil)
        let peak = rc == .vbr ? 2 * bitrate : bitrate
        return VAEncoderTuning(lowPower: lowPower, rateControl: rc, bitrate: bitrate, maxRate: peak, bufferSize: peak)
    }

    /// Asks the driver behind `display` about the first profile of `codec`
    /// that has an encode entrypoint (FFmpeg tries them in the same order).
    static func query(display: VADisplay, va: VALibrary, codec: VideoCodec, bitrate: Int, live: Bool) -> VAEncoderTuning {
        let profiles = codec == .h264 ? [VAProfileH264High, VAProfileH264Main, VAProfileH264ConstrainedBaseline] : [VAProfileHEVCMain]
        for p in profiles {
            var eps = [VAEntrypoint](repeating: VAEntrypoint(rawValue: 0), count: max(1, Int(va.maxNumEntrypoints(display))))
            var n: Int32 = 0
            guard va.queryConfigEntrypoints(display, p, &eps, &n) == VA_STATUS_SUCCESS else { continue }
            let have = Array(eps.prefix(Int(n)))
            guard let ep = have.first(where: { $0 == VAEntrypointEncSlice }) ?? have.first(where: { $0 == VAEntrypointEncSliceLP }) else { continue }
            let names = have.compactMap { e -> String? in
                e == VAEntrypointEncSlice ? "VAEntrypointEncSlice" : e == VAEntrypointEncSliceLP ? "VAEntrypointEncSliceLP" : nil
            }
            var attr = VAConfigAttrib(type: VAConfigAttribRateControl, value: 0)
            let ok = va.getConfigAttributes(display, p, ep, &attr, 1) == VA_STATUS_SUCCESS && attr.value != UInt32(VA_ATTRIB_NOT_SUPPORTED)
            return choose(entrypoints: names, rateControls: ok ? attr.value : 0, bitrate: bitrate, live: live)
        }
        return choose(entrypoints: [], rateControls: 0, bitrate: bitrate, live: live)
    }
}
