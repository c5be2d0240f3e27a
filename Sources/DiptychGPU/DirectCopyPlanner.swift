import DiptychCore
import Foundation

/// A draw that is a 1:1 copy of a YUV frame: `destination` on the canvas
/// from the same-sized rectangle at (`sourceX`, `sourceY`) of `frame`
/// (sensor pixels), mirrored horizontally or not.
struct CopyDraw {
    var destination: PixelRect
    var frame: VideoFrame
    var sourceX: Int
    var sourceY: Int
    var mirrored: Bool
}

/// A composite whose bottom draws are opaque 1:1 copies of YUV frames
/// covering the whole canvas: their bytes go straight into the output's
/// NV12 planes, and only `region` (the bounding box of the draws above
/// them, aligned to 4 × 2 pixels) is rendered and converted on the GPU.
struct DirectPlan {
    var copies: [CopyDraw]
    var rendered: [DrawDescription]
    var region: PixelRect?

    /// What an opaque, unmasked rendered draw covers needs neither the
    /// background nor the copies' pixels beneath it.
    var cover: PixelRect? { rendered.first { $0.opacity >= 1 && $0.cornerRadius <= 0 && $0.borderWidth <= 0 }?.destination }
    func uncovered(_ r: PixelRect) -> [PixelRect] { cover.map { DirectCopyPlanner.subtract(r, $0) } ?? [r] }
}

/// What a rendered region's pixels depend on when nothing beneath shows:
/// its rectangle, the draws and the exact uploads they sample. Equal keys
/// give equal bytes, so a 30 fps secondary under a 60 fps primary is
/// rendered once per secondary frame.
struct RegionKey: Hashable {
    var region: PixelRect
    var draws: [DrawDescription]
    var uploads: [UInt64]
}

/// How a direct-copy frame is put together: each copy's source rectangle of
/// its (kept) frame into its destination, then the region from the GPU.
struct DirectFrame {
    var copies: [CopyDraw]
    /// The rendered region; its Y rows then its UV rows, tightly packed, lead the pack buffer.
    var region: PixelRect?
    /// Copy the region into this cache on delivery (a later frame may reuse it).
    var fill: RegionCache?
    /// The region was not rendered: its bytes come from this cache, filled by
    /// an earlier frame's delivery (frames are delivered in order).
    var reuse: RegionCache?
}

/// The bytes of one rendered region (Y rows then UV rows, tightly packed).
final class RegionCache: @unchecked Sendable {
    let region: PixelRect
    let bytes: Int
    let base: UnsafeMutableRawPointer
    init(region: PixelRect) {
        self.region = region
        bytes = region.width * region.height * 3 / 2
        base = UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 64)
    }
    deinit { base.deallocate() }
}

/// The direct-copy planner: pure arithmetic on plans, rectangles and CPU
/// frames (no GL). It decides whether a plan can be assembled from the kept
/// frames' bytes and lists the copies that do it.
enum DirectCopyPlanner {
    /// The source pixel offset of a 1:1 copy draw of `frame`, or nil when the
    /// draw is not one (scaled, rotated, mirrored, translucent, masked,
    /// unaligned, or another colour conversion than the output's).
    static func copySource(_ d: DrawDescription, frame f: VideoFrame, canvas: PixelSize, matrix: ColorMatrix, range: ColorRange) -> CopyDraw? {
        guard f.format.isYUV, f.matrix == matrix, f.range == range,
              d.orientation.rotation == .r0, d.opacity >= 1, d.cornerRadius <= 0, d.borderWidth <= 0,
              DrawSampling.isUnitScale(d, textureWidth: f.width, textureHeight: f.height) else { return nil }
        let r = d.destination
        guard r.x >= 0, r.y >= 0, r.x + r.width <= canvas.width, r.y + r.height <= canvas.height,
              r.x % 4 == 0, r.width % 4 == 0, r.y % 2 == 0, r.height % 2 == 0 else { return nil }
        let cx = Int((d.crop.x * Double(f.width)).rounded()), cy = Int((d.crop.y * Double(f.height)).rounded())
        guard cx % 2 == 0, cy % 2 == 0, cx >= 0, cy >= 0, cx + r.width <= f.width, cy + r.height <= f.height else { return nil }
        // Mirrored: the upright crop [cx, cx + w) is sensor [W - cx - w, W - cx), read right to left.
        let sx = d.orientation.mirrored ? f.width - cx - r.width : cx
        guard sx % 2 == 0 else { return nil }
        return CopyDraw(destination: r, frame: f, sourceX: sx, sourceY: cy, mirrored: d.orientation.mirrored)
    }

    /// The direct plan for `plan`, or nil when it does not qualify. `kept`: the
    /// roles' kept YUV frames; `drawable`: the roles that have a picture.
    static func plan(_ plan: CompositionPlan, matrix: ColorMatrix, range: ColorRange,
                     kept: [StreamRole: VideoFrame], drawable: Set<StreamRole>) -> DirectPlan? {
        let W = plan.canvas.width, H = plan.canvas.height
        guard W % 4 == 0, H % 2 == 0 else { return nil }
        let draws = plan.draws.filter { d in d.destination.width > 0 && d.destination.height > 0 && drawable.contains(d.role) }
        var copies: [CopyDraw] = []
        var area = 0
        for d in draws {
            guard let f = kept[d.role], let c = copySource(d, frame: f, canvas: plan.canvas, matrix: matrix, range: range) else { break }
            for other in copies where intersection(other.destination, d.destination) != nil { return nil }
            copies.append(c)
            area += d.destination.width * d.destination.height
        }
        guard !copies.isEmpty else { return nil }
        let rendered = Array(draws[copies.count...])
        var region: PixelRect?
        if !rendered.isEmpty {
            var x0 = W, y0 = H, x1 = 0, y1 = 0
            for d in rendered {
                let r = d.destination
                x0 = min(x0, r.x); y0 = min(y0, r.y); x1 = max(x1, r.x + r.width); y1 = max(y1, r.y + r.height)
            }
            x0 = max(0, x0) & ~3; y0 = max(0, y0) & ~1
            x1 = min(W, (x1 + 3) & ~3); y1 = min(H, (y1 + 1) & ~1)
            if x1 > x0 && y1 > y0 { region = PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) }
        }
        // Every pixel comes from a copy or from the rendered region (copies are disjoint).
        var covered = area
        if let R = region {
            covered += R.width * R.height
            for c in copies { covered -= intersection(R, c.destination).map { $0.width * $0.height } ?? 0 }
        }
        guard covered == W * H else { return nil }
        return DirectPlan(copies: copies, rendered: rendered, region: region)
    }

    /// `a` minus `b`: up to four rectangles (above, below, left, right of `b`).
    static func subtract(_ a: PixelRect, _ b: PixelRect) -> [PixelRect] {
        guard let i = intersection(a, b) else { return [a] }
        var out: [PixelRect] = []
        if i.y > a.y { out.append(PixelRect(x: a.x, y: a.y, width: a.width, height: i.y - a.y)) }
        if i.y + i.height < a.y + a.height {
            out.append(PixelRect(x: a.x, y: i.y + i.height, width: a.width, height: a.y + a.height - i.y - i.height))
        }
        if i.x > a.x { out.append(PixelRect(x: a.x, y: i.y, width: i.x - a.x, height: i.height)) }
        if i.x + i.width < a.x + a.width {
            out.append(PixelRect(x: i.x + i.width, y: i.y, width: a.x + a.width - i.x - i.width, height: i.height))
        }
        return out
    }

    static func intersection(_ a: PixelRect, _ b: PixelRect) -> PixelRect? {
        let x0 = max(a.x, b.x), y0 = max(a.y, b.y)
        let x1 = min(a.x + a.width, b.x + b.width), y1 = min(a.y + a.height, b.y + b.height)
        return x1 > x0 && y1 > y0 ? PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : nil
    }

    /// The jobs copying rectangle `r` (canvas pixels, inside `c.destination`,
    /// aligned to 2) of copy draw `c` from its frame: Y rows to `y`, NV12 UV rows to `uv`.
    static func copyJobs(_ c: CopyDraw, part r: PixelRect, y: UnsafeMutableRawPointer, yStride: Int,
                         uv: UnsafeMutableRawPointer, uvStride: Int) -> [CopyJob] {
        let d = c.destination, f = c.frame
        let dx = r.x - d.x, dy = r.y - d.y
        let sx = c.mirrored ? c.sourceX + (d.width - dx - r.width) : c.sourceX + dx
        let sy = c.sourceY + dy
        let yp = f.planes[0]
        var jobs = [CopyJob(dst: y, dstStride: yStride, src: yp.baseAddress + sy * yp.stride + sx, srcStride: yp.stride,
                            rowBytes: r.width, rows: r.height, mirror: c.mirrored ? 1 : 0)]
        if f.format == .nv12 {
            let p = f.planes[1]
            jobs.append(CopyJob(dst: uv, dstStride: uvStride, src: p.baseAddress + (sy / 2) * p.stride + sx, srcStride: p.stride,
                                rowBytes: r.width, rows: r.height / 2, mirror: c.mirrored ? 2 : 0))
        } else {
            let u = f.planes[1], v = f.planes[2]
            for row in 0..<(r.height / 2) {
                jobs.append(CopyJob(dst: uv + row * uvStride, dstStride: uvStride,
                                    src: u.baseAddress + (sy / 2 + row) * u.stride + sx / 2, srcStride: 0,
                                    rowBytes: r.width, rows: 1,
                                    interleaving: v.baseAddress + (sy / 2 + row) * v.stride + sx / 2, mirror: c.mirrored ? 2 : 0))
            }
        }
        return jobs
    }

    /// The copies that fill a delivered frame at `dst`: the pack buffer as is,
    /// or, for a direct-copy frame, each copy's planes and then the region.
    static func deliveryJobs(_ r: PendingReadback, packed src: UnsafeRawPointer?, into dst: UnsafeMutableRawPointer) -> [CopyJob] {
        guard let direct = r.direct else {
            return [CopyJob(dst: dst, dstStride: r.bytes, src: src!, srcStride: r.bytes, rowBytes: r.bytes, rows: 1)]
        }
        // The copies' frames and the region caches must outlive `r`: the jobs may run later, on another thread.
        let keep = KeepAlive(direct)
        let S = r.stride, uvBase = dst + S * r.height
        var jobs: [CopyJob] = []
        for c in direct.copies {
            let d = c.destination
            jobs += copyJobs(c, part: d, y: dst + d.y * S + d.x, yStride: S, uv: uvBase + (d.y / 2) * S + d.x, uvStride: S)
        }
        // The region, tightly packed (Y rows, then UV rows): from the pack buffer, or from the last rendered one.
        let packed: UnsafeRawPointer? = direct.reuse.map { UnsafeRawPointer($0.base) } ?? src
        if let R = direct.region ?? direct.reuse?.region, let packed {
            if let fill = direct.fill {
                jobs.append(CopyJob(dst: fill.base, dstStride: fill.bytes, src: packed, srcStride: fill.bytes, rowBytes: fill.bytes, rows: 1))
            }
            jobs.append(CopyJob(dst: dst + R.y * S + R.x, dstStride: S, src: packed, srcStride: R.width, rowBytes: R.width, rows: R.height))
            jobs.append(CopyJob(dst: uvBase + (R.y / 2) * S + R.x, dstStride: S, src: packed + R.width * R.height,
                                srcStride: R.width, rowBytes: R.width, rows: R.height / 2))
        }
        for i in jobs.indices { jobs[i].owner = keep }
        return jobs
    }
}

/// How a draw samples its picture (shared by the fragment and compute passes).
enum DrawSampling {
    /// Whether the draw samples its picture 1:1 (then nearest filtering is exact).
    static func isUnitScale(_ d: DrawDescription, textureWidth: Int, textureHeight: Int) -> Bool {
        let upright = PixelSize(width: textureWidth, height: textureHeight).rotated(d.orientation.rotation)
        let cw = d.crop.width * Double(upright.width), ch = d.crop.height * Double(upright.height)
        let cx = d.crop.x * Double(upright.width), cy = d.crop.y * Double(upright.height)
        func integral(_ v: Double) -> Bool { abs(v - v.rounded()) < 1e-6 }
        return abs(cw - Double(d.destination.width)) < 1e-6 && abs(ch - Double(d.destination.height)) < 1e-6
            && integral(cx) && integral(cy)
    }

    /// Local (s, t) → texture coordinate as GL's column-major mat3x2: the
    /// upright crop point mapped through `orientation.sensorPoint(fromUpright:)`
    /// (affine, so three points define it). Texture row 0 is the picture's top.
    static func texFromLocal(crop: NormalizedRect, orientation: Orientation) -> [Float] {
        let c0 = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x, y: crop.y))
        let px = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x + crop.width, y: crop.y))
        let py = orientation.sensorPoint(fromUpright: NormalizedPoint(x: crop.x, y: crop.y + crop.height))
        return [px.x - c0.x, px.y - c0.y, py.x - c0.x, py.y - c0.y, c0.x, c0.y].map { Float($0) }
    }
}
