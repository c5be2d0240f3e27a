import DiptychCore
import Testing
@testable import DiptychGPU

/// The direct-copy path (opaque 1:1 YUV draws copied straight into the output's
/// NV12 planes, only the region above them rendered) against the general path.
extension GPU {
    @Suite struct DirectCopy {
        /// An in-gamut YUV frame (Y 80...180, U and V 112...144), smooth with some detail.
        static func yuvFrame(_ w: Int, _ h: Int, format: PixelFormat, seed: Int) -> VideoFrame {
            let f = VideoFrame.allocate(width: w, height: h, format: format)
            let y = f.planes[0].storage.mutableBase.advanced(by: f.planes[0].offset).assumingMemoryBound(to: UInt8.self)
            for r in 0..<h { for x in 0..<w { y[r * f.planes[0].stride + x] = UInt8(80 + (x * 3 + r * 5 + seed * 11 + (x ^ r) % 7) % 100) } }
            for r in 0..<(h / 2) {
                for x in 0..<(w / 2) {
                    let u = UInt8(112 + (x + seed * 3) % 32), v = UInt8(112 + (r * 2 + seed) % 32)
                    if format == .nv12 {
                        let p = f.planes[1].storage.mutableBase.advanced(by: f.planes[1].offset).assumingMemoryBound(to: UInt8.self)
                        p[r * f.planes[1].stride + 2 * x] = u; p[r * f.planes[1].stride + 2 * x + 1] = v
                    } else {
                        let pu = f.planes[1].storage.mutableBase.advanced(by: f.planes[1].offset).assumingMemoryBound(to: UInt8.self)
                        let pv = f.planes[2].storage.mutableBase.advanced(by: f.planes[2].offset).assumingMemoryBound(to: UInt8.self)
                        pu[r * f.planes[1].stride + x] = u; pv[r * f.planes[2].stride + x] = v
                    }
                }
            }
            return f
        }

        struct Result { var nv12: VideoFrame; var preview: VideoFrame; var stats: GPUStats }

        static func run(direct: Bool, canvas: PixelSize, plan: CompositionPlan, primary: VideoFrame, secondary: VideoFrame?) throws -> Result {
            let c = try GPUCompositor(selection: .software, directCopy: direct)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: canvas)
            try c.upload(primary, role: .primary)
            if let secondary { try c.upload(secondary, role: .secondary) }
            try c.render(output: out, plan: plan, pts: .zero)
            let frames = try c.flush()
            let preview = try c.previewRGBA(output: out)
            return Result(nv12: frames[0], preview: preview, stats: c.stats)
        }

        /// Largest difference between two NV12 frames, and where.
        static func maxDifference(_ a: VideoFrame, _ b: VideoFrame) -> (Int, String) {
            var worst = (0, "")
            for plane in 0..<2 {
                for y in 0..<(plane == 0 ? a.height : a.height / 2) {
                    for x in 0..<a.width {
                        let d = abs(Int(a.byte(plane: plane, x, y)) - Int(b.byte(plane: plane, x, y)))
                        if d > worst.0 { worst = (d, "plane \(plane) (\(x), \(y))") }
                    }
                }
            }
            return worst
        }

        static let canvas = PixelSize(width: 128, height: 72)

        static func pipPlan(mirrored: Bool) -> CompositionPlan {
            CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas), crop: NormalizedRect(x: 0, y: 0, width: 1, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 77, y: 37, width: 41, height: 27),
                                crop: NormalizedRect(x: 0, y: 0.05, width: 1, height: 0.9),
                                orientation: Orientation(rotation: .r0, mirrored: mirrored),
                                cornerRadius: 5, borderWidth: 2, zIndex: 1)])
        }

        @Test(arguments: [PixelFormat.nv12, .i420])
        func pipMatchesGeneralPath(_ format: PixelFormat) throws {
            let primary = Self.yuvFrame(128, 72, format: format, seed: 1)
            let secondary = Self.yuvFrame(64, 48, format: format, seed: 2)
            let plan = Self.pipPlan(mirrored: true)
            let general = try Self.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            let direct = try Self.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(general.stats.framesDirect == 0)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.maxDifference(general.nv12, direct.nv12)
            #expect(d <= 1, "direct and general paths differ by \(d) at \(at)")
            // Outside the inset the primary's bytes arrive untouched.
            #expect(direct.nv12.byte(plane: 0, 5, 5) == primary.byte(plane: 0, 5, 5))
        }

        /// A plain (opaque, unmasked) inset: the region is not cleared or
        /// unpacked beneath it, only around it (alignment margins).
        @Test func plainInsetMatchesGeneralPath() throws {
            let primary = Self.yuvFrame(128, 72, format: .i420, seed: 12)
            let secondary = Self.yuvFrame(64, 48, format: .nv12, seed: 13)
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas), crop: NormalizedRect(x: 0, y: 0, width: 1, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 70, y: 35, width: 50, height: 30),
                                crop: NormalizedRect(x: 0, y: 0.1, width: 1, height: 0.8), zIndex: 1)])
            let general = try Self.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            let direct = try Self.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.maxDifference(general.nv12, direct.nv12)
            #expect(d <= 1, "direct and general paths differ by \(d) at \(at)")
        }

        /// A 30 fps secondary under a 60 fps primary: with nothing beneath the
        /// (aligned, opaque, rotated so it is rendered) inset showing, its
        /// region is rendered once per secondary frame and reused in between;
        /// every frame still matches.
        @Test func regionReusedWhileTheSecondaryHolds() throws {
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas), crop: NormalizedRect(x: 0, y: 0, width: 1, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 72, y: 36, width: 48, height: 30),
                                crop: NormalizedRect(x: 0, y: 0.1, width: 1, height: 0.8),
                                orientation: Orientation(rotation: .r180, mirrored: false), zIndex: 1)])
            let primaries = (0..<6).map { Self.yuvFrame(128, 72, format: .i420, seed: 20 + $0) }
            let secondaries = (0..<3).map { Self.yuvFrame(64, 48, format: .nv12, seed: 40 + $0) }
            func run(direct: Bool) throws -> ([VideoFrame], GPUStats) {
                let c = try GPUCompositor(selection: .software, directCopy: direct)
                defer { c.shutdown() }
                let out = try c.addOutput(canvas: Self.canvas)
                var frames: [VideoFrame] = []
                for i in 0..<6 {
                    var uploads = [(primaries[i], StreamRole.primary)]
                    if i % 2 == 0 { uploads.append((secondaries[i / 2], .secondary)) }
                    frames += try c.composite(uploads: uploads, output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 60))
                }
                frames += try c.flush()
                return (frames, c.stats)
            }
            let (general, _) = try run(direct: false)
            let (direct, stats) = try run(direct: true)
            #expect(stats.framesDirect == 6)
            #expect(stats.regionsReused == 3)
            #expect(direct.count == 6 && general.count == 6)
            for (g, d) in zip(general, direct) {
                let (diff, at) = Self.maxDifference(g, d)
                #expect(diff <= 1, "frame \(d.pts.value): direct and general paths differ by \(diff) at \(at)")
            }
        }

        /// Delivery copies run on the caller's thread after the render thread
        /// has moved on: they must keep the copied frames (which the caller
        /// drops at once here) and the region caches alive.
        @Test func deliveryKeepsItsSourcesAlive() throws {
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas), crop: NormalizedRect(x: 0, y: 0, width: 1, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 72, y: 36, width: 48, height: 30),
                                crop: NormalizedRect(x: 0, y: 0.1, width: 1, height: 0.8), zIndex: 1)])
            let c = try GPUCompositor(selection: .software, readbackDepth: 6, directCopy: true)
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: Self.canvas)
            var frames: [VideoFrame] = []
            for i in 0..<24 {
                var uploads = [(Self.yuvFrame(128, 72, format: .nv12, seed: 100 + i), StreamRole.primary)]
                if i % 2 == 0 { uploads.append((Self.yuvFrame(64, 48, format: .nv12, seed: 200 + i), .secondary)) }
                frames += try c.composite(uploads: uploads, output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 60))
                uploads.removeAll()
                // Churn the allocator with frames of the same size.
                _ = (0..<3).map { Self.yuvFrame(128, 72, format: .nv12, seed: $0) }
            }
            frames += try c.flush()
            #expect(frames.count == 24)
            for f in frames {
                let expected = Self.yuvFrame(128, 72, format: .nv12, seed: 100 + Int(f.pts.value))
                // The first bytes of a freed block are the allocator's: check them too.
                for (x, y) in [(0, 0), (3, 0), (9, 0), (7, 3), (64, 40)] {
                    #expect(f.byte(plane: 0, x, y) == expected.byte(plane: 0, x, y), "frame \(f.pts.value): Y(\(x), \(y)) is not its primary's")
                }
                #expect(f.byte(plane: 1, 2, 0) == expected.byte(plane: 1, 2, 0) && f.byte(plane: 1, 10, 2) == expected.byte(plane: 1, 10, 2))
            }
        }

        @Test func sideBySideCopiesBothHalves() throws {
            let primary = Self.yuvFrame(128, 72, format: .nv12, seed: 3)
            let secondary = Self.yuvFrame(128, 72, format: .nv12, seed: 4)
            let half = NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 1)
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 72), crop: half),
                DrawDescription(role: .secondary, destination: PixelRect(x: 64, y: 0, width: 64, height: 72), crop: half)])
            let general = try Self.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            let direct = try Self.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.maxDifference(general.nv12, direct.nv12)
            #expect(d <= 1, "direct and general paths differ by \(d) at \(at)")
            #expect(direct.nv12.byte(plane: 0, 64, 10) == secondary.byte(plane: 0, 32, 10))
            #expect(direct.nv12.byte(plane: 1, 0, 3) == primary.byte(plane: 1, 32, 3))
        }

        /// A mirrored half is rendered (the region), the other half copied.
        @Test func sideBySideWithMirroredHalf() throws {
            let primary = Self.yuvFrame(128, 72, format: .nv12, seed: 9)
            let secondary = Self.yuvFrame(96, 64, format: .i420, seed: 10)
            let plan = CompositionPlan(canvas: Self.canvas, background: RGBAColor(r: 0.2, g: 0.4, b: 0.6, a: 1), draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 1)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 64, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.125, y: 0, width: 0.75, height: 1),
                                orientation: Orientation(rotation: .r0, mirrored: true), cornerRadius: 6)])
            let general = try Self.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            let direct = try Self.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.maxDifference(general.nv12, direct.nv12)
            #expect(d <= 1, "direct and general paths differ by \(d) at \(at)")
        }

        /// A scaled primary is a CPU draw too (sampled bilinearly, `ScaledCopy`);
        /// a rotated one is rendered.
        @Test func scaledPrimaryIsACPUDrawRotatedIsRendered() throws {
            let primary = Self.yuvFrame(64, 36, format: .nv12, seed: 5)
            var draw = DrawDescription(role: .primary, destination: PixelRect(size: Self.canvas), crop: NormalizedRect(x: 0, y: 0, width: 1, height: 1))
            let scaled = try Self.run(direct: true, canvas: Self.canvas, plan: CompositionPlan(canvas: Self.canvas, draws: [draw]),
                                      primary: primary, secondary: nil)
            #expect(scaled.stats.framesDirect == 1)
            let (d, at) = ScaledCopy.referenceDifference(scaled.nv12, draw, primary)
            #expect(d <= 1, "scaled primary differs from the reference by \(d) at \(at)")
            draw.orientation = Orientation(rotation: .r180, mirrored: false)
            let rotated = try Self.run(direct: true, canvas: Self.canvas, plan: CompositionPlan(canvas: Self.canvas, draws: [draw]),
                                       primary: primary, secondary: nil)
            #expect(rotated.stats.framesDirect == 0)
        }

        /// Mirrored 1:1 draws are copies too (bytes, and UV pairs, reversed).
        @Test(arguments: [PixelFormat.nv12, .i420])
        func mirroredCopiesMatchGeneralPath(_ format: PixelFormat) throws {
            let primary = Self.yuvFrame(160, 72, format: format, seed: 6)
            let secondary = Self.yuvFrame(128, 72, format: format, seed: 11)
            let plan = CompositionPlan(canvas: Self.canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.1, y: 0, width: 0.4, height: 1),
                                orientation: Orientation(rotation: .r0, mirrored: true)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 64, y: 0, width: 64, height: 72),
                                crop: NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 1),
                                orientation: Orientation(rotation: .r0, mirrored: true))])
            let general = try Self.run(direct: false, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            let direct = try Self.run(direct: true, canvas: Self.canvas, plan: plan, primary: primary, secondary: secondary)
            #expect(direct.stats.framesDirect == 1)
            let (d, at) = Self.maxDifference(general.nv12, direct.nv12)
            #expect(d <= 1, "direct and general paths differ by \(d) at \(at)")
        }

        /// The preview after a direct-copy frame is the NV12 frame the encoder gets.
        @Test func previewShowsTheEncodedPixels() throws {
            let primary = Self.yuvFrame(128, 72, format: .nv12, seed: 7)
            let secondary = Self.yuvFrame(64, 48, format: .nv12, seed: 8)
            let r = try Self.run(direct: true, canvas: Self.canvas, plan: Self.pipPlan(mirrored: false), primary: primary, secondary: secondary)
            let k = YUVCoefficients(matrix: .bt709, range: .limited)
            var worst = 0
            for y in 0..<72 {
                for x in 0..<128 {
                    let Y = Double(r.nv12.byte(plane: 0, x, y)) / 255
                    let U = Double(r.nv12.byte(plane: 1, (x / 2) * 2, y / 2)) / 255
                    let V = Double(r.nv12.byte(plane: 1, (x / 2) * 2 + 1, y / 2)) / 255
                    let c = k.rgb(y: Y, u: U, v: V)
                    let p = r.preview.rgba(x, y)
                    for (a, b) in [(c.r, p.r), (c.g, p.g), (c.b, p.b)] {
                        worst = max(worst, abs(Int((min(max(a, 0), 1) * 255).rounded()) - Int(b)))
                    }
                }
            }
            #expect(worst <= 1, "preview differs from the NV12 frame by \(worst)")
        }
    }
}

extension GPU {
    /// Compositors sharing one context (one render thread), driven through the
    /// batched `composite` call whose copies run on the caller's thread.
    @Suite struct SharedContext {
        @Test func sharedCompositorsMatchAndOutliveTheFirst() throws {
            let canvas = DirectCopy.canvas
            let plan = DirectCopy.pipPlan(mirrored: true)
            let p = DirectCopy.yuvFrame(128, 72, format: .nv12, seed: 1), s = DirectCopy.yuvFrame(64, 48, format: .nv12, seed: 2)
            let reference = try DirectCopy.run(direct: false, canvas: canvas, plan: plan, primary: p, secondary: s)

            let a = try GPUCompositor(selection: .software, directCopy: true)
            let b = try GPUCompositor(sharingContextOf: a)   // general path
            let oa = try a.addOutput(canvas: canvas), ob = try b.addOutput(canvas: canvas)
            var fa: [VideoFrame] = [], fb: [VideoFrame] = []
            for i in 0..<6 {
                let t = MediaTime(value: Int64(i), timescale: 60)
                fa += try a.composite(uploads: [(p, .primary), (s, .secondary)], output: oa, plan: plan, pts: t)
                fb += try b.composite(uploads: [(p, .primary), (s, .secondary)], output: ob, plan: plan, pts: t)
            }
            fa += try a.flush()
            a.shutdown()
            fb += try b.flush()
            #expect(fa.count == 6 && fb.count == 6)
            #expect(fa.map(\.pts.value) == Array(0..<6))
            for f in fa + fb {
                let (d, at) = DirectCopy.maxDifference(reference.nv12, f)
                #expect(d <= 1, "differs by \(d) at \(at)")
            }
            // The shared context outlives the first compositor.
            try b.upload(p, role: .primary)
            try b.render(output: ob, plan: plan, pts: MediaTime(value: 6, timescale: 60))
            #expect(try b.flush().count == 1)
            b.shutdown()
            #expect(throws: GPUError.shutDown) { try b.flush() }
        }
    }
}
