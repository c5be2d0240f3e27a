import DiptychCore
import Foundation

/// A draw the CPU paints into the NV12 planes: an opaque, unrotated,
/// unmasked picture of a YUV frame at `destination`, either a 1:1 copy of
/// the same-sized rectangle at (`sourceX`, `sourceY`) of `frame` (sensor
/// pixels, mirrored horizontally or not) or, with `scale`, the frame's crop
/// scaled bilinearly (`PlaneScale`).
struct CopyDraw {
    var role: StreamRole
    var destination: PixelRect
    var frame: VideoFrame
    var sourceX: Int
    var sourceY: Int
    var mirrored: Bool
    /// Scaled draws: where the destination samples the frame (nil for a 1:1 copy).
    var scale: SensorMap?
    /// Counts the role's uploads: equal serials are the same picture (scaled results are reused).
    var upload: UInt64 = 0
}

/// A composite whose bottom draws are CPU draws (`CopyDraw`) covering the
/// whole canvas: their bytes go straight into the output's NV12 planes,
/// painted in order, and only `region` (the bounding box of the draws above
/// them, aligned to 4 × 2 pixels) is rendered and converted on the GPU.
struct DirectPlan {
    var copies: [CopyDraw]
    var rendered: [DrawDescription]
    var region: PixelRect?

    /// What an opaque, unmasked rendered draw covers needs neither the
    /// background nor the copies' pixels beneath it. An overlay is never
    /// opaque: its picture has an alpha of its own, whatever the draw's opacity.
    var cover: PixelRect? {
        rendered.first { $0.overlay == nil && $0.opacity >= 1 && $0.cornerRadius <= 0 && $0.borderWidth <= 0 }?.destination
    }
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
    /// Per scaled copy (by index): the cache its bytes go through, and whether
    /// this frame samples them into it (else an earlier frame did).
    var scaled: [Int: (cache: ScaledCache, fill: Bool)] = [:]
}

/// The bytes of one rendered region (Y rows then UV rows, tightly packed).
final class RegionCache: @unchecked Sendable {   // malloc'd bytes, written by deliveries that run in order
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
    /// The CPU draw of `d`, or nil when it is not one (rotated, translucent,
    /// masked, unaligned, outside the canvas, or another colour conversion
    /// than the output's). A 1:1 draw is a copy from its source pixel offset;
    /// any other scale is sampled bilinearly.
    static func copySource(_ d: DrawDescription, frame f: VideoFrame, canvas: PixelSize, matrix: ColorMatrix, range: ColorRange) -> CopyDraw? {
        guard d.overlay == nil, f.format.isYUV, f.matrix == matrix, f.range == range,
              d.orientation.rotation == .r0, d.opacity >= 1, d.cornerRadius <= 0, d.borderWidth <= 0 else { return nil }
        let r = d.destination
        guard r.x >= 0, r.y >= 0, r.x + r.width <= canvas.width, r.y + r.height <= canvas.height,
              r.x % 4 == 0, r.width % 4 == 0, r.y % 2 == 0, r.height % 2 == 0 else { return nil }
        guard DrawSampling.isUnitScale(d, textureWidth: f.width, textureHeight: f.height) else {
            guard d.crop.width > 0, d.crop.height > 0 else { return nil }
            return CopyDraw(role: d.role, destination: r, frame: f, sourceX: 0, sourceY: 0, mirrored: d.orientation.mirrored,
                            scale: SensorMap(d))
        }
        let cx = Int((d.crop.x * Double(f.width)).rounded()), cy = Int((d.crop.y * Double(f.height)).rounded())
        guard cx % 2 == 0, cy % 2 == 0, cx >= 0, cy >= 0, cx + r.width <= f.width, cy + r.height <= f.height else { return nil }
        // Mirrored: the upright crop [cx, cx + w) is sensor [W - cx - w, W - cx), read right to left.
        let sx = d.orientation.mirrored ? f.width - cx - r.width : cx
        guard sx % 2 == 0 else { return nil }
        return CopyDraw(role: d.role, destination: r, frame: f, sourceX: sx, sourceY: cy, mirrored: d.orientation.mirrored)
    }

    /// The direct plan for `plan`, or nil when it does not qualify. `kept`: the
    /// roles' kept YUV frames and their upload serials; `drawable`: the roles that have a picture.
    static func plan(_ plan: CompositionPlan, matrix: ColorMatrix, range: ColorRange,
                     kept: [StreamRole: (frame: VideoFrame, upload: UInt64)], drawable: Set<StreamRole>) -> DirectPlan? {
        let W = plan.canvas.width, H = plan.canvas.height
        guard W % 4 == 0, H % 2 == 0 else { return nil }
        // Overlay draws are always rendered (the renderer skips one without a picture).
        let draws = plan.draws.filter { d in d.destination.width > 0 && d.destination.height > 0 && (d.overlay != nil || drawable.contains(d.role)) }
        var copies: [CopyDraw] = []
        for d in draws {
            guard d.overlay == nil, let k = kept[d.role], var c = copySource(d, frame: k.frame, canvas: plan.canvas, matrix: matrix, range: range) else { break }
            c.upload = k.upload
            copies.append(c)
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
        // Every pixel comes from a CPU draw or from the rendered region.
        guard covers(plan.canvas, copies.map(\.destination) + (region.map { [$0] } ?? [])) else { return nil }
        return DirectPlan(copies: copies, rendered: rendered, region: region)
    }

    /// Whether the union of `rects` is the whole canvas (on the grid of their edges).
    static func covers(_ canvas: PixelSize, _ rects: [PixelRect]) -> Bool {
        let xs = Array(Set([0, canvas.width] + rects.flatMap { [$0.x, $0.x + $0.width] }).filter { $0 >= 0 && $0 <= canvas.width }).sorted()
        let ys = Array(Set([0, canvas.height] + rects.flatMap { [$0.y, $0.y + $0.height] }).filter { $0 >= 0 && $0 <= canvas.height }).sorted()
        for i in 0..<(xs.count - 1) {
            for j in 0..<(ys.count - 1) {
                let x = xs[i], y = ys[j]
                guard rects.contains(where: { x >= $0.x && x < $0.x + $0.width && y >= $0.y && y < $0.y + $0.height }) else { return false }
            }
        }
        return true
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

    /// The jobs painting rectangle `r` (canvas pixels, inside `c.destination`,
    /// aligned to 2) of CPU draw `c` from its frame: Y rows to `y`, NV12 UV rows to `uv`.
    static func copyJobs(_ c: CopyDraw, part r: PixelRect, y: UnsafeMutableRawPointer, yStride: Int,
                         uv: UnsafeMutableRawPointer, uvStride: Int) -> [CopyJob] {
        if let map = c.scale {
            return PlaneScale.jobs(c, map: map, part: r, y: y, yStride: yStride, uv: uv, uvStride: uvStride).map { CopyJob(scaling: $0) }
        }
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
        for (k, c) in direct.copies.enumerated() {
            let d = c.destination
            guard let (cache, fill) = direct.scaled[k] else {
                jobs += copyJobs(c, part: d, y: dst + d.y * S + d.x, yStride: S, uv: uvBase + (d.y / 2) * S + d.x, uvStride: S)
                continue
            }
            let w = d.width, h = d.height
            if fill { jobs += copyJobs(c, part: d, y: cache.base, yStride: w, uv: cache.base + w * h, uvStride: w) }
            jobs.append(CopyJob(dst: dst + d.y * S + d.x, dstStride: S, src: cache.base, srcStride: w, rowBytes: w, rows: h))
            jobs.append(CopyJob(dst: uvBase + (d.y / 2) * S + d.x, dstStride: S, src: cache.base + w * h, srcStride: w,
                                rowBytes: w, rows: h / 2))
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
