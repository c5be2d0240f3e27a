import DiptychCore
import Synchronization

/// Converts straight RGB (0...1) to 8-bit limited-range BT.709 Y'CbCr.
func yuv709(_ r: Double, _ g: Double, _ b: Double) -> (y: UInt8, u: UInt8, v: UInt8) {
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    let cb = (b - y) / 1.8556, cr = (r - y) / 1.5748
    func q(_ x: Double) -> UInt8 { UInt8(max(0, min(255, x.rounded()))) }
    return (q(16 + 219 * y), q(128 + 224 * cb), q(128 + 224 * cr))
}

/// The frame counter drawn by `testsrc:counter`: the frame index as 16 bits
/// in a band at the top of the picture, readable after lossy encoding and
/// scaling (the layout is relative to the frame size).
///
/// Row 0 (height `rowHeight`) holds the bits, most significant first, each a
/// block `width / 16` pixels wide: white = 1, black = 0. Row 1 holds their
/// complement, so a frame that is not a counter frame decodes to nil.
/// Indices wrap at 65536.
public enum CounterPattern {
    public static let bits = 16

    public static func blockWidth(frameWidth: Int) -> Int { frameWidth / bits }
    public static func rowHeight(frameHeight: Int) -> Int { max(4, frameHeight / 12) }

    /// Whether luma row `y`, column `x` is white for frame `index`, or nil outside the band.
    static func isWhite(index: Int, x: Int, y: Int, width: Int, height: Int) -> Bool? {
        let bw = blockWidth(frameWidth: width), rh = rowHeight(frameHeight: height)
        guard y < 2 * rh, bw > 0 else { return nil }
        let block = x / bw
        guard block < bits else { return nil }
        let bit = (index >> (bits - 1 - block)) & 1 == 1
        return y < rh ? bit : !bit
    }

    /// Reads the frame index shown by `frame` (RGBA, BGRA, NV12 or I420, at
    /// least 64x64), or nil when the band is unreadable or not a counter.
    public static func decode(frame: VideoFrame) -> Int? {
        let w = frame.width, h = frame.height
        let bw = blockWidth(frameWidth: w), rh = rowHeight(frameHeight: h)
        guard bw >= 2, rh >= 4, let plane = frame.planes.first else { return nil }
        let base = plane.baseAddress.assumingMemoryBound(to: UInt8.self)
        func luma(_ x: Int, _ y: Int) -> Int {
            let row = base + y * plane.stride
            switch frame.format {
            case .nv12, .i420: return Int(row[x])
            case .rgba, .bgra:
                let p = row + 4 * x
                return (Int(p[0]) + 2 * Int(p[1]) + Int(p[2])) / 4
            }
        }
        func average(block: Int, row: Int) -> Int {
            let x0 = block * bw + bw / 4, x1 = max(x0 + 1, block * bw + (3 * bw) / 4)
            let y0 = row * rh + rh / 4, y1 = max(y0 + 1, row * rh + (3 * rh) / 4)
            var sum = 0
            for y in y0..<y1 { for x in x0..<x1 { sum += luma(x, y) } }
            return sum / ((x1 - x0) * (y1 - y0))
        }
        var value = 0
        for b in 0..<bits {
            let top = average(block: b, row: 0), bottom = average(block: b, row: 1)
            let t: Bool, u: Bool
            if top > 150 { t = true } else if top < 100 { t = false } else { return nil }
            if bottom > 150 { u = true } else if bottom < 100 { u = false } else { return nil }
            guard t != u else { return nil }
            value = value << 1 | (t ? 1 : 0)
        }
        return value
    }
}

/// A synthetic source generated in Swift: `smpte` (colour bars), `gradient`,
/// `counter` (frame index in the pixels, see `CounterPattern`) and
/// `solid-RRGGBB`. Frames are NV12 (or I420), BT.709 limited range, with
/// pts = index / rate exactly. Endless unless `duration` is given.
///
/// The picture is computed once; still patterns share that one immutable
/// buffer between all frames, `counter` copies it and rewrites only the band.
public final class TestPatternSource: VideoSource, Sendable {
    public static let names = ["smpte", "gradient", "counter", "solid-RRGGBB"]

    public let info: SourceInfo
    public let pattern: String
    private let format: PixelFormat
    private let base: FrameStorage
    private let offsets: [Int]
    private let strides: [Int]
    private let totalBytes: Int
    private let frameLimit: Int64?
    /// The next frame's index, and whether `close` was called.
    private let position = Mutex<(index: Int64, closed: Bool)>((0, false))

    public init(name: String, size: PixelSize, rate: FrameRate, duration: Double? = nil,
                format: PixelFormat = .nv12) throws(MediaError) {
        let spec = "testsrc:\(name):\(size)@\(rate)"
        guard format.isYUV else { throw .invalidSource(spec: spec, reason: "test patterns are generated as nv12 or i420") }
        guard !size.isEmpty else { throw .invalidSource(spec: spec, reason: "size must be positive") }
        let rgb: (Double, Double, Int, Int) -> (Double, Double, Double)
        switch name {
        case "smpte": rgb = TestPatternSource.smpte
        case "gradient": rgb = { x, y, _, _ in (x, y, 1 - x) }
        case "counter":
            guard size.width >= 64, size.height >= 64 else {
                throw .invalidSource(spec: spec, reason: "counter needs at least 64x64")
            }
            // A dim diagonal ramp, so the band stands out and frames differ from bars.
            rgb = { x, y, _, _ in let v = 0.25 + 0.25 * (x + y) / 2; return (v, v * 0.9, v * 1.2) }
        default:
            if name.hasPrefix("solid-"), name.count == 12, let v = UInt32(name.dropFirst(6), radix: 16) {
                let c = (Double((v >> 16) & 0xff) / 255, Double((v >> 8) & 0xff) / 255, Double(v & 0xff) / 255)
                rgb = { _, _, _, _ in c }
            } else {
                throw .invalidSource(spec: spec, reason: "unknown test pattern '\(name)' (known: \(TestPatternSource.names.joined(separator: ", ")))")
            }
        }
        pattern = name
        self.format = format
        let w = size.width, h = size.height
        var offs: [Int] = [], strd: [Int] = [], total = 0
        for p in 0..<format.planeCount {
            offs.append(total)
            let s = format.minimumStride(plane: p, width: w)
            strd.append(s)
            total += s * format.planeHeight(plane: p, height: h)
        }
        offsets = offs; strides = strd; totalBytes = total
        let storage = FrameStorage(zeroedCount: total)
        let m = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        let counter = name == "counter"
        let cw = (w + 1) / 2, ch = (h + 1) / 2
        for y in 0..<h {
            for x in 0..<w {
                let c = rgb((Double(x) + 0.5) / Double(w), (Double(y) + 0.5) / Double(h), x, y)
                m[offs[0] + y * strd[0] + x] = yuv709(c.0, c.1, c.2).y
            }
        }
        for cy in 0..<ch {
            for cx in 0..<cw {
                let x = min(2 * cx, w - 1), y = min(2 * cy, h - 1)
                let c = rgb((Double(x) + 1) / Double(w), (Double(y) + 1) / Double(h), x, y)
                var (_, u, v) = yuv709(c.0, c.1, c.2)
                if counter && y < 2 * CounterPattern.rowHeight(frameHeight: h) { u = 128; v = 128 }
                if format == .nv12 {
                    m[offs[1] + cy * strd[1] + 2 * cx] = u
                    m[offs[1] + cy * strd[1] + 2 * cx + 1] = v
                } else {
                    m[offs[1] + cy * strd[1] + cx] = u
                    m[offs[2] + cy * strd[2] + cx] = v
                }
            }
        }
        base = storage
        frameLimit = duration.map { d in
            // Frames with pts < duration: ceil(duration · rate).
            Int64((d * rate.fps - 1e-9).rounded(.up))
        }
        info = SourceInfo(name: spec, size: size, frameRate: rate, matrix: .bt709, range: .limited,
                          pixelFormat: format, nativeFormat: "generated", hasAudio: false,
                          duration: duration, codec: "testsrc")
    }

    public func close() { position.withLock { $0.closed = true } }

    public func nextFrame() throws(MediaError) -> VideoFrame? {
        let frameLimit = self.frameLimit
        let next = position.withLock { p -> Int64? in
            if p.closed { return nil }
            if let frameLimit, p.index >= frameLimit { return nil }
            defer { p.index += 1 }
            return p.index
        }
        guard let i = next else { return nil }
        let pts = info.frameRate.time(ofFrame: i)
        var storage = base
        if pattern == "counter" {
            storage = FrameStorage(copying: UnsafeRawBufferPointer(start: base.base, count: totalBytes))
            drawCounter(Int(i & 0xffff), into: storage.mutableBase.assumingMemoryBound(to: UInt8.self))
        }
        let planes = (0..<format.planeCount).map { FramePlane(storage: storage, offset: offsets[$0], stride: strides[$0]) }
        return VideoFrame(width: info.size.width, height: info.size.height, format: format, planes: planes,
                          pts: pts, matrix: .bt709, range: .limited)
    }

    private func drawCounter(_ value: Int, into m: UnsafeMutablePointer<UInt8>) {
        let w = info.size.width, h = info.size.height
        let bw = CounterPattern.blockWidth(frameWidth: w), rh = CounterPattern.rowHeight(frameHeight: h)
        for row in 0..<2 {
            for b in 0..<CounterPattern.bits {
                let bit = (value >> (CounterPattern.bits - 1 - b)) & 1 == 1
                let white = row == 0 ? bit : !bit
                let yv: UInt8 = white ? 235 : 16
                for y in (row * rh)..<min(h, (row + 1) * rh) {
                    (m + offsets[0] + y * strides[0] + b * bw).update(repeating: yv, count: bw)
                }
            }
        }
    }

    static func smpte(_ x: Double, _ y: Double, _ px: Int, _ py: Int) -> (Double, Double, Double) {
        let bars: [(Double, Double, Double)] = [(0.75, 0.75, 0.75), (0.75, 0.75, 0), (0, 0.75, 0.75), (0, 0.75, 0),
                                                (0.75, 0, 0.75), (0.75, 0, 0), (0, 0, 0.75)]
        let i = min(6, Int(x * 7))
        if y < 2.0 / 3 { return bars[i] }
        if y < 0.75 {
            let rev: [(Double, Double, Double)] = [(0, 0, 0.75), (0, 0, 0), (0.75, 0, 0.75), (0, 0, 0),
                                                   (0, 0.75, 0.75), (0, 0, 0), (0.75, 0.75, 0.75)]
            return rev[i]
        }
        let j = min(5, Int(x * 6))
        let bottom: [(Double, Double, Double)] = [(0, 0.13, 0.3), (1, 1, 1), (0.2, 0, 0.42), (0, 0, 0), (0.04, 0.04, 0.04), (0, 0, 0)]
        return bottom[j]
    }
}
