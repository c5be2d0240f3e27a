import DiptychCore

/// Settings of the GPU H.264 encoder.
public struct GPUH264Settings: Hashable, Sendable, Codable {
    /// Quantisation parameter of every macroblock, 0 to 51 (when `bitrate` is nil).
    public var qp: Int
    /// Frames from one IDR picture to the next.
    public var keyframeInterval: Int
    /// Target bit rate (bits per second): the QP then changes from picture to picture.
    public var bitrate: Int?
    /// With `bitrate`: the VBV buffer's fill rate and size, bits (both or neither).
    public var maxrate: Int?
    public var bufsize: Int?
    /// Slices a picture, each whole macroblock rows: ⌈rows / slices⌉ rows
    /// each, the last one what is left (so a picture may have fewer; at most one a row). The
    /// raster-order pass's chain runs through one slice, not the picture;
    /// nothing is predicted or filtered across a slice's top edge.
    public var slices: Int

    public init(qp: Int = 23, keyframeInterval: Int = 250, bitrate: Int? = nil, maxrate: Int? = nil, bufsize: Int? = nil, slices: Int = 1) {
        self.qp = qp; self.keyframeInterval = keyframeInterval
        self.bitrate = bitrate; self.maxrate = maxrate; self.bufsize = bufsize
        self.slices = slices
    }

    /// The most slices a picture may have (`--slices`).
    public static let maxSlices = TakeConfiguration.maxSlices

    /// A take's slices where it does not say (`--slices`): slices of at
    /// most 34 macroblock rows, so two at 1080p and 720p, one at 480p,
    /// four at 2160p. Two slices at 1080p shorten the raster-order pass's
    /// chain from 254 steps to 186 and kept the quality target on every
    /// clip measured (`bench/results/gpu-h264-quality.md`, "Slices").
    public static func defaultSlices(height: Int) -> Int {
        let rows = (height + 15) / 16
        return max(1, (rows + 33) / 34)
    }

    /// Whether the values are in range; the message names the one that is not.
    public func validate() throws(GPUError) {
        guard (0...51).contains(qp) else { throw .encode("QP \(qp) is outside 0 to 51") }
        guard keyframeInterval >= 1 else { throw .encode("keyframe interval \(keyframeInterval) must be at least 1") }
        guard (1...Self.maxSlices).contains(slices) else { throw .encode("\(slices) slices: a picture takes 1 to \(Self.maxSlices)") }
        if let bitrate, bitrate < 1000 { throw .encode("bit rate \(bitrate) is below 1000 bits/s") }
        if (maxrate == nil) != (bufsize == nil) { throw .encode("maxrate and bufsize go together (got \(maxrate.map(String.init) ?? "no maxrate"), \(bufsize.map(String.init) ?? "no bufsize"))") }
        if maxrate != nil && bitrate == nil { throw .encode("maxrate and bufsize need a bit rate") }
        if let maxrate, let bitrate, maxrate < bitrate { throw .encode("maxrate \(maxrate) is below the bit rate \(bitrate)") }
        if let bufsize, let bitrate, let maxrate, bufsize < max(bitrate, maxrate) / 30 { throw .encode("bufsize \(bufsize) holds less than a thirtieth of a second at maxrate") }
    }

    var rateMode: H264RateControl.Mode {
        if let bitrate { return .bitrate(target: bitrate, maxrate: maxrate, bufsize: bufsize) }
        return .constantQP(qp)
    }
}
