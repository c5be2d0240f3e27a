import DiptychCore

/// Where a scaled CPU draw samples its frame: the destination's local point
/// (s, t) in 0...1 shows the normalized sensor point (x0 + s·dx, y0 + t·dy),
/// as `DrawSampling.texFromLocal` maps it for an unrotated draw (`dx` is
/// negative when the picture is mirrored).
struct SensorMap: Hashable {
    var x0: Double
    var dx: Double
    var y0: Double
    var dy: Double

    /// The map of an unrotated draw (its crop, mirrored or not).
    init(_ d: DrawDescription) {
        let c = d.crop
        if d.orientation.mirrored { x0 = 1 - c.x; dx = -c.width } else { x0 = c.x; dx = c.width }
        y0 = c.y; dy = c.height
    }
}

/// One plane of a scaled draw, sampled the way GL_LINEAR samples a texture:
/// texel centres at half-integers, clamped to the edge, 8-bit weights, in
/// YUV (a draw the software renderer would convert to RGB and back; the
/// conversions are affine, so filtering before or after them agrees within
/// rounding). Chroma samples are taken at the centre of their 2 × 2 block,
/// which is where the NV12 pass averages the four pixels' chroma.
///
/// Writes destination samples `columns` × `rows` (indices into the draw's
/// plane of `destWidth` × `destHeight` samples) to `dst` (the sample at
/// `columns.lowerBound`, `rows.lowerBound`), `dstStep` bytes apart.
struct PlaneScale: @unchecked Sendable {   // raw plane pointers; their owners are kept alive by the copy job
    /// Sample (0, 0) of the source plane, `srcStep` bytes between samples.
    var src: UnsafeRawPointer
    var srcStride: Int
    var srcStep: Int
    var srcWidth: Int
    var srcHeight: Int
    var dst: UnsafeMutableRawPointer
    var dstStride: Int
    var dstStep: Int
    var destWidth: Int
    var destHeight: Int
    var columns: Range<Int>
    var rows: Range<Int>
    var map: SensorMap

    /// The source sample below sample `i` of `count` and the 8-bit weight of the next one.
    @inline(__always)
    static func tap(_ i: Int, count: Int, origin: Double, extent: Double, size: Int) -> (index: Int, weight: Int) {
        let u = (origin + (Double(i) + 0.5) / Double(count) * extent) * Double(size) - 0.5
        if !(u > 0) { return (0, 0) }
        let f = u.rounded(.down)
        var index = Int(f), weight = Int(((u - f) * 256).rounded())
        if weight == 256 { index += 1; weight = 0 }
        if index >= size - 1 { return (size - 1, 0) }
        return (index, weight)
    }

    func run() {
        guard !columns.isEmpty, !rows.isEmpty, srcWidth > 0, srcHeight > 0 else { return }
        let n = columns.count
        let xIndex = UnsafeMutablePointer<Int32>.allocate(capacity: n)
        let xWeight = UnsafeMutablePointer<UInt32>.allocate(capacity: n)
        defer { xIndex.deallocate(); xWeight.deallocate() }
        var lo = srcWidth, hi = 0
        for k in 0..<n {
            let t = Self.tap(columns.lowerBound + k, count: destWidth, origin: map.x0, extent: map.dx, size: srcWidth)
            xIndex[k] = Int32(t.index); xWeight[k] = UInt32(t.weight)
            lo = min(lo, t.index); hi = max(hi, t.index)
        }
        hi = min(srcWidth - 1, hi + 1)
        for k in 0..<n { xIndex[k] &-= Int32(lo) }
        let span = hi - lo + 1
        var yTaps: [(y0: Int, y1: Int, weight: Int)] = []
        yTaps.reserveCapacity(rows.count)
        var sourceRows = Set<Int>()
        for j in rows {
            let (y0, fy) = Self.tap(j, count: destHeight, origin: map.y0, extent: map.dy, size: srcHeight)
            let y1 = min(y0 + 1, srcHeight - 1)
            yTaps.append((y0, y1, fy))
            sourceRows.insert(y0)
            if fy > 0 { sourceRows.insert(y1) }
        }
        // Bilinear is separable: filter first along the direction that leaves
        // fewer rows to the gather (the horizontal taps, scalar).
        if sourceRows.count < rows.count {
            horizontalFirst(xIndex, xWeight, n: n, lo: lo, span: span, yTaps: yTaps)
        } else {
            verticalFirst(xIndex, xWeight, n: n, lo: lo, span: span, yTaps: yTaps)
        }
    }

    /// Blends each output row's two source rows, then samples that row (downscaling).
    private func verticalFirst(_ xIndex: UnsafeMutablePointer<Int32>, _ xWeight: UnsafeMutablePointer<UInt32>, n: Int, lo: Int, span: Int,
                               yTaps: [(y0: Int, y1: Int, weight: Int)]) {
        // Vertically blended source samples lo...hi (×256), and one past the end for the last tap.
        let blended = UnsafeMutablePointer<UInt16>.allocate(capacity: span + 1)
        defer { blended.deallocate() }
        for (i, t) in yTaps.enumerated() {
            let r0 = (src + t.y0 * srcStride + lo * srcStep).assumingMemoryBound(to: UInt8.self)
            let r1 = (src + t.y1 * srcStride + lo * srcStep).assumingMemoryBound(to: UInt8.self)
            // a·(256 − w) + b·w = 256·a + (b − a)·w, exact in wrapping arithmetic (the result fits).
            let w = UInt16(t.weight)
            if srcStep == 1 {
                for k in 0..<span { blended[k] = UInt16(r0[k]) &<< 8 &+ (UInt16(r1[k]) &- UInt16(r0[k])) &* w }
            } else {
                for k in 0..<span {
                    let a = UInt16(r0[k &* srcStep]), b = UInt16(r1[k &* srcStep])
                    blended[k] = a &<< 8 &+ (b &- a) &* w
                }
            }
            blended[span] = blended[span - 1]
            var out = (dst + i * dstStride).assumingMemoryBound(to: UInt8.self)
            for k in 0..<n {
                let x = Int(xIndex[k])
                let a = UInt32(blended[x]), b = UInt32(blended[x &+ 1])
                out.pointee = UInt8(truncatingIfNeeded: (a &<< 8 &+ (b &- a) &* xWeight[k] &+ 32768) >> 16)
                out += dstStep
            }
        }
    }

    /// Samples each source row once (kept while the output rows use it), then
    /// blends the two for each output row (upscaling). The sampled rows are
    /// rounded to 8 bits, so the blend runs in 16-bit vector lanes (within one
    /// code value of the exact bilinear value).
    private func horizontalFirst(_ xIndex: UnsafeMutablePointer<Int32>, _ xWeight: UnsafeMutablePointer<UInt32>, n: Int, lo: Int, span: Int,
                                 yTaps: [(y0: Int, y1: Int, weight: Int)]) {
        // Two sampled source rows and which rows they are, and one output row.
        let a = UnsafeMutablePointer<UInt8>.allocate(capacity: n), b = UnsafeMutablePointer<UInt8>.allocate(capacity: n)
        let row = UnsafeMutablePointer<UInt8>.allocate(capacity: n)
        defer { a.deallocate(); b.deallocate(); row.deallocate() }
        var inA = -1, inB = -1
        let base = (src + lo * srcStep).assumingMemoryBound(to: UInt8.self)
        for (i, t) in yTaps.enumerated() {
            // The first tap's row, keeping the second tap's where it is.
            var h0 = a
            if inA == t.y0 { h0 = a } else if inB == t.y0 { h0 = b } else {
                if t.weight > 0 && inA == t.y1 { h0 = b; inB = t.y0 } else { h0 = a; inA = t.y0 }
                sampleRow(base + t.y0 * srcStride, into: h0, xIndex, xWeight, n: n, last: span - 1)
            }
            var h1 = h0
            if t.weight > 0 {
                if inA == t.y1 { h1 = a } else if inB == t.y1 { h1 = b } else {
                    if h0 == a { h1 = b; inB = t.y1 } else { h1 = a; inA = t.y1 }
                    sampleRow(base + t.y1 * srcStride, into: h1, xIndex, xWeight, n: n, last: span - 1)
                }
            }
            let out = (dst + i * dstStride).assumingMemoryBound(to: UInt8.self)
            let target = dstStep == 1 ? out : row
            let w = UInt16(t.weight)
            for k in 0..<n {
                let p = UInt16(h0[k]), q = UInt16(h1[k])
                target[k] = UInt8(truncatingIfNeeded: (p &<< 8 &+ (q &- p) &* w &+ 128) &>> 8)
            }
            if dstStep != 1 { for k in 0..<n { out[k &* dstStep] = row[k] } }
        }
    }

    /// Source row `r` (from sample `lo`) sampled horizontally at the column taps, rounded.
    private func sampleRow(_ r: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>, _ xIndex: UnsafeMutablePointer<Int32>,
                           _ xWeight: UnsafeMutablePointer<UInt32>, n: Int, last: Int) {
        let step = srcStep
        for k in 0..<n {
            let x = Int(xIndex[k]), x1 = min(x &+ 1, last)
            let p = UInt16(r[x &* step]), q = UInt16(r[x1 &* step])
            out[k] = UInt8(truncatingIfNeeded: (p &<< 8 &+ (q &- p) &* UInt16(truncatingIfNeeded: xWeight[k]) &+ 128) &>> 8)
        }
    }

    /// The three jobs that draw `part` (canvas pixels, inside the draw's
    /// destination, 2-aligned) of scaled draw `c` into NV12: Y rows at `y`,
    /// interleaved UV rows at `uv`.
    static func jobs(_ c: CopyDraw, map: SensorMap, part r: PixelRect, y: UnsafeMutableRawPointer, yStride: Int,
                     uv: UnsafeMutableRawPointer, uvStride: Int) -> [PlaneScale] {
        let f = c.frame, d = c.destination
        let px = r.x - d.x, py = r.y - d.y
        let yp = f.planes[0]
        var out = [PlaneScale(src: yp.baseAddress, srcStride: yp.stride, srcStep: 1, srcWidth: f.width, srcHeight: f.height,
                              dst: y, dstStride: yStride, dstStep: 1, destWidth: d.width, destHeight: d.height,
                              columns: px..<(px + r.width), rows: py..<(py + r.height), map: map)]
        let cw = (f.width + 1) / 2, ch = (f.height + 1) / 2
        let columns = (px / 2)..<((px + r.width) / 2), rows = (py / 2)..<((py + r.height) / 2)
        for k in 0..<2 {
            let (base, stride, step): (UnsafeRawPointer, Int, Int) = f.format == .nv12
                ? (f.planes[1].baseAddress + k, f.planes[1].stride, 2)
                : (f.planes[1 + k].baseAddress, f.planes[1 + k].stride, 1)
            out.append(PlaneScale(src: base, srcStride: stride, srcStep: step, srcWidth: cw, srcHeight: ch,
                                  dst: uv + k, dstStride: uvStride, dstStep: 2, destWidth: d.width / 2, destHeight: d.height / 2,
                                  columns: columns, rows: rows, map: map))
        }
        return out
    }
}

/// What a scaled CPU draw's pixels depend on: equal keys give equal bytes.
struct ScaleKey: Hashable {
    var role: StreamRole
    var upload: UInt64
    var source: PixelSize
    var map: SensorMap
    var destination: PixelRect

    init(_ c: CopyDraw, map: SensorMap) {
        role = c.role; upload = c.upload; source = c.frame.size; self.map = map; destination = c.destination
    }
}

/// The bytes of one scaled CPU draw (Y rows then UV rows, tightly packed):
/// a 30 fps secondary under a 60 fps primary is sampled once per frame of
/// its own, and the frames in between copy these bytes. `key` is what the
/// last frame committed asked for; deliveries run in submission order, so
/// each one finds the bytes the frames before it left.
final class ScaledCache: @unchecked Sendable {   // malloc'd bytes, written by deliveries that run in order
    var key: ScaleKey
    let bytes: Int
    let base: UnsafeMutableRawPointer

    init(key: ScaleKey) {
        self.key = key
        bytes = key.destination.width * key.destination.height * 3 / 2
        base = UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 64)
    }
    deinit { base.deallocate() }
}
