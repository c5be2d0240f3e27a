import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// Scaled CPU draws of the direct-copy path: an opaque, unrotated, unmasked
/// draw at another scale is sampled bilinearly on the CPU, in YUV, the way
/// GL_LINEAR samples a texture. Checked against an exact (double precision)
/// bilinear reference, and against the rendered path, which goes through
/// 8-bit RGB and back.
extension GPU {
    @Suite struct ScaledCopy {
        typealias DC = DirectCopy
        static let canvas = DC.canvas

        /// A band-limited YUV frame (smooth waves in every plane): where the
        /// rendered path's chroma (the average of four pixels' bilinear
        /// samples) and a bilinear sample at the block's centre agree closely.
        static func smoothFrame(_ w: Int, _ h: Int, format: PixelFormat, seed: Int) -> VideoFrame {
            let f = VideoFrame.allocate(width: w, height: h, format: format)
            func put(_ plane: Int, _ x: Int, _ y: Int, _ v: Double) {
                let p = f.planes[plane].storage.mutableBase.advanced(by: f.planes[plane].offset).assumingMemoryBound(to: UInt8.self)
                p[y * f.planes[plane].stride + x] = UInt8((v).rounded())
            }
            let a = Double(seed)
            for y in 0..<h {
                for x in 0..<w {
                    let wave: Double = sin(Double(x) * 0.21 + a) * cos(Double(y) * 0.17 - a)
                    put(0, x, y, 128 + 50 * wave)
                }
            }
            for y in 0..<(h / 2) {
                for x in 0..<(w / 2) {
                    let su: Double = sin(Double(x) * 0.3 + Double(y) * 0.1 + a)
                    let sv: Double = cos(Double(y) * 0.35 - Double(x) * 0.12 + a)
                    let u = 128 + 14 * su, v = 128 + 14 * sv
                    if format == .nv12 { put(1, 2 * x, y, u); put(1, 2 * x + 1, y, v) } else { put(1, x, y, u); put(2, x, y, v) }
                }
            }
            return f
        }

        /// A sample of plane `plane` (0 Y, 1 U, 2 V) of a YUV frame.
        static func sample(_ f: VideoFrame, plane: Int, _ x: Int, _ y: Int) -> Double {
            if plane == 0 { return Double(f.byte(plane: 0, x, y)) }
            if f.format == .nv12 { return Double(f.byte(plane: 1, 2 * x + plane - 1, y)) }
            return Double(f.byte(plane: plane, x, y))
        }

        /// GL_LINEAR at normalized (u, v) of a plane `w` × `h`, clamped to the edge.
        static func bilinear(_ f: VideoFrame, plane: Int, w: Int, h: Int, u: Double, v: Double) -> Double {
            let x = u * Double(w) - 0.5, y = v * Double(h) - 0.5
            let x0 = Int(x.rounded(.down)), y0 = Int(y.rounded(.down))
            let fx = x - Double(x0), fy = y - Double(y0)
            func at(_ i: Int, _ j: Int) -> Double { sample(f, plane: plane, min(max(i, 0), w - 1), min(max(j, 0), h - 1)) }
            let top = at(x0, y0) * (1 - fx) + at(x0 + 1, y0) * fx
            let bottom = at(x0, y0 + 1) * (1 - fx) + at(x0 + 1, y0 + 1) * fx
            return top * (1 - fy) + bottom * fy
        }

        /// Largest difference between the NV12 `out` inside `d`'s destination and
        /// `d` drawn from `f` exactly (Y per pixel, chroma at each 2 × 2 block's centre).
        static func referenceDifference(_ out: VideoFrame, _ d: DrawDescription, _ f: VideoFrame) -> (Int, String) {
            let map = SensorMap(d), r = d.destination
            var worst = (0, "")
            for j in 0..<r.height {
                for i in 0..<r.width {
                    let s = (Double(i) + 0.5) / Double(r.width), t = (Double(j) + 0.5) / Double(r.height)
                    let ref = bilinear(f, plane: 0, w: f.width, h: f.height, u: map.x0 + s * map.dx, v: map.y0 + t * map.dy)
                    let diff = abs(Int(ref.rounded()) - Int(out.byte(plane: 0, r.x + i, r.y + j)))
                    if diff > worst.0 { worst = (diff, "Y (\(r.x + i), \(r.y + j))") }
                }
            }
            for j in 0..<(r.height / 2) {
                for i in 0..<(r.width / 2) {
                    let s = (Double(i) + 0.5) / Double(r.width / 2), t = (Double(j) + 0.5) / Double(r.height / 2)
                    for k in 1...2 {
                        let ref = bilinear(f, plane: k, w: f.width / 2, h: f.height / 2, u: map.x0 + s * map.dx, v: map.y0 + t * map.dy)
                        let got = out.byte(plane: 1, r.x + 2 * i + k - 1, r.y / 2 + j)
                        let diff = abs(Int(ref.rounded()) - Int(got))
                        if diff > worst.0 { worst = (diff, "UV \(k) (\(r.x / 2 + i), \(r.y / 2 + j))") }
                    }
                }
            }
            return worst
        }

        static func pip(inset: PixelRect, crop: NormalizedRect, mirrored: Bool) -> CompositionPlan {
            CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: inset, crop: crop,
                                orientation: Orientation(rotation: .r0, mirrored: mirrored), zIndex: 1)])
        }

        @Test(arguments: [(PixelFormat.nv12, false), (.i420, true), (.nv12, true), (.i420, false)])
        func downscaledInsetMatchesTheReference(_ format: PixelFormat, _ mirrored: Bool) throws {
            let primary = DC.yuvFrame(128, 72, format: .i420, seed: 30)
            let secondary = DC.yuvFrame(96, 64, format: format, seed: 31)
            let plan = Self.pip(inset: PixelRect(x: 72, y: 36, width: 40, height: 26),
                                crop: NormalizedRect(x: 0.05, y: 0.1, width: 0.9, height: 0.8), mirrored: mirrored)
            let direct = try DC.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.referenceDifference(direct.nv12, plan.draws[1], secondary)
            #expect(d <= 1, "scaled inset differs from the reference by \(d) at \(at)")
            // Around the inset the primary's bytes arrive untouched.
            #expect(direct.nv12.byte(plane: 0, 71, 36) == primary.byte(plane: 0, 71, 36))
            #expect(direct.nv12.byte(plane: 0, 112, 61) == primary.byte(plane: 0, 112, 61))
            #expect(direct.nv12.byte(plane: 0, 100, 35) == primary.byte(plane: 0, 100, 35))
            // On smooth pictures the rendered path differs by its trip through 8-bit RGB only.
            let smooth = Self.smoothFrame(96, 64, format: format, seed: 3)
            let general = try DC.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: smooth)
            let cpu = try DC.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: smooth)
            let (g, gat) = DC.maxDifference(general.nv12, cpu.nv12)
            #expect(g <= 3, "scaled inset and rendered path differ by \(g) at \(gat)")
        }

        /// Side by side with an upscaled half: both halves are CPU draws, nothing is rendered.
        @Test func upscaledHalfSideBySide() throws {
            let primary = DC.yuvFrame(128, 72, format: .nv12, seed: 32)
            let secondary = DC.yuvFrame(48, 40, format: .i420, seed: 33)
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 64, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.125, y: 0, width: 0.75, height: 1))])
            let direct = try DC.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.referenceDifference(direct.nv12, plan.draws[1], secondary)
            #expect(d <= 1, "scaled half differs from the reference by \(d) at \(at)")
            #expect(direct.nv12.byte(plane: 0, 10, 10) == primary.byte(plane: 0, 42, 10))
        }

        /// A scaled primary beneath a rounded inset: the scaled picture's part
        /// under the inset goes to the GPU for the rendered region.
        @Test func scaledCopyBeneathARenderedInset() throws {
            let primary = Self.smoothFrame(64, 36, format: .nv12, seed: 34)
            let secondary = Self.smoothFrame(64, 48, format: .nv12, seed: 35)
            let plan = DC.pipPlan(mirrored: true)
            var scaledPrimary = plan
            scaledPrimary.draws[0].crop = .unit
            let direct = try DC.run(direct: true, canvas: Self.canvas, plan: scaledPrimary, primary: primary, secondary: secondary)
            let general = try DC.run(direct: false, canvas: Self.canvas, plan: scaledPrimary, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (g, at) = DC.maxDifference(general.nv12, direct.nv12)
            #expect(g <= 3, "direct and rendered paths differ by \(g) at \(at)")
            // Away from the inset, the scaled primary is the reference's.
            var whole = scaledPrimary.draws[0]
            whole.destination = PixelRect(x: 0, y: 0, width: 64, height: 36)
            whole.crop = NormalizedRect(x: 0, y: 0, width: 0.5, height: 0.5)
            let (d, dat) = Self.referenceDifference(direct.nv12, whole, primary)
            #expect(d <= 1, "scaled primary differs from the reference by \(d) at \(dat)")
        }

        /// A 30 fps secondary under a 60 fps primary is sampled once per
        /// secondary frame; the frames in between copy those bytes. A moved
        /// inset is sampled again (nothing stale is reused).
        @Test func scaledInsetSampledOncePerSecondaryFrame() throws {
            let plans = [Self.pip(inset: PixelRect(x: 72, y: 36, width: 40, height: 26), crop: .unit, mirrored: true),
                         Self.pip(inset: PixelRect(x: 8, y: 8, width: 40, height: 26), crop: .unit, mirrored: true)]
            let primaries = (0..<8).map { DC.yuvFrame(128, 72, format: .i420, seed: 50 + $0) }
            let secondaries = (0..<4).map { DC.yuvFrame(96, 64, format: .nv12, seed: 60 + $0) }
            let c = try GPUCompositor(selection: .software, directCopy: true)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            var frames: [VideoFrame] = []
            for i in 0..<8 {
                var uploads = [(primaries[i], StreamRole.primary)]
                if i % 2 == 0 { uploads.append((secondaries[i / 2], .secondary)) }
                // Frame 5 moves the inset while its secondary frame holds.
                frames += try c.composite(uploads: uploads, output: out, plan: plans[i == 5 ? 1 : 0],
                                          pts: MediaTime(value: Int64(i), timescale: 60))
            }
            frames += try c.flush()
            #expect(frames.count == 8)
            #expect(c.stats.framesDirect == 8)
            #expect(c.stats.scaledReused == 3)   // frames 1, 3 and 7
            for f in frames {
                let i = Int(f.pts.value)
                let draw = plans[i == 5 ? 1 : 0].draws[1]
                let (d, at) = Self.referenceDifference(f, draw, secondaries[i / 2])
                #expect(d <= 1, "frame \(i): inset differs from its secondary by \(d) at \(at)")
            }
        }

        /// Rotated, translucent or masked scaled draws are rendered, not drawn on the CPU.
        @Test func onlyPlainUnrotatedDrawsAreCPUDraws() {
            let f = DC.yuvFrame(96, 64, format: .nv12, seed: 36)
            let base = DrawDescription(role: .secondary, destination: PixelRect(x: 72, y: 36, width: 40, height: 26))
            #expect(DirectCopyPlanner.copySource(base, frame: f, canvas: Self.canvas, matrix: .bt709, range: .limited)?.scale != nil)
            var rotated = base; rotated.orientation = Orientation(rotation: .r90, mirrored: false)
            var faded = base; faded.opacity = 0.5
            var rounded = base; rounded.cornerRadius = 3
            var unaligned = base; unaligned.destination.x = 70
            for d in [rotated, faded, rounded, unaligned] {
                #expect(DirectCopyPlanner.copySource(d, frame: f, canvas: Self.canvas, matrix: .bt709, range: .limited) == nil)
            }
        }
    }
}
