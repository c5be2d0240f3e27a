import DiptychCore
import Testing
@testable import DiptychGPU

/// The compute pass (composite and NV12 in one dispatch) against the fragment
/// passes, within ±1 code value: every layout, rotation × mirror, corner and
/// border case and input format; several draws in one output.
extension GPU {
    @Suite struct ComputePath {
        static let canvas = PixelSize(width: 128, height: 72)

        /// A smooth, in-gamut test picture with some detail: RGB gradients, or
        /// YUV with Y 40...210 and chroma 100...156 (BT.709 limited).
        static func picture(_ w: Int, _ h: Int, _ format: PixelFormat, seed: Int) -> VideoFrame {
            if format.isYUV {
                return yuvFrame(w, h, format: format, matrix: .bt709, range: .limited, padding: [3, 4, 5]) { x, y in
                    (UInt8(40 + (x * 5 + y * 3 + seed * 17 + (x ^ y) % 9) % 170),
                     UInt8(100 + (x / 2 + seed * 7) % 56), UInt8(100 + (y / 2 + seed * 5) % 56))
                }
            }
            return rgbaFrame(w, h, padding: 8, format: format) { x, y in
                RGBA8(r: UInt8((x * 7 + seed * 40) % 256), g: UInt8((y * 9 + seed * 20) % 256), b: UInt8((x * y + seed * 13) % 256))
            }
        }

        /// One fragment and one compute compositor, reused across cases (programs stay compiled).
        final class Pair {
            let fragment: GPUCompositor
            let compute: GPUCompositor
            init() throws {
                fragment = try makeCompositor(pass: .fragment)
                compute = try makeCompositor(pass: .compute)
            }
            deinit { fragment.shutdown(); compute.shutdown() }

            struct Rendered { var nv12: VideoFrame; var rgba: VideoFrame }

            func render(_ c: GPUCompositor, _ plan: CompositionPlan, _ frames: [(VideoFrame, StreamRole)],
                        matrix: ColorMatrix, range: ColorRange) throws -> Rendered {
                let out = try c.addOutput(canvas: plan.canvas, matrix: matrix, range: range)
                defer { c.removeOutput(out) }
                for r in StreamRole.allCases { c.clearStream(r) }
                for (f, role) in frames { try c.upload(f, role: role) }
                let before = c.stats
                try c.render(output: out, plan: plan, pts: .zero)
                let nv12 = try #require(try c.flush().first)
                let s = c.stats
                #expect(s.framesCompute - before.framesCompute == (c === compute ? 1 : 0), "the \(c === compute ? "compute" : "fragment") pass drew the frame")
                return Rendered(nv12: nv12, rgba: try c.previewRGBA(output: out))
            }

            /// Both paths' NV12 frames and RGBA targets within `tolerance`.
            func expectSame(_ plan: CompositionPlan, _ frames: [(VideoFrame, StreamRole)], _ label: String,
                            matrix: ColorMatrix = .bt709, range: ColorRange = .limited, tolerance: Int = 1) throws {
                let f = try render(fragment, plan, frames, matrix: matrix, range: range)
                let c = try render(compute, plan, frames, matrix: matrix, range: range)
                let (d, at) = ComputePath.nv12Difference(f.nv12, c.nv12)
                #expect(d <= tolerance, "\(label): NV12 differs by \(d) at \(at)")
                let (e, where_) = ComputePath.rgbDifference(f.rgba, c.rgba)
                #expect(e <= tolerance, "\(label): RGBA differs by \(e) at \(where_)")
            }
        }

        static func nv12Difference(_ a: VideoFrame, _ b: VideoFrame) -> (Int, String) { DirectCopy.maxDifference(a, b) }

        static func rgbDifference(_ a: VideoFrame, _ b: VideoFrame) -> (Int, String) {
            var worst = (0, "-")
            for y in 0..<a.height {
                for x in 0..<a.width {
                    let p = a.rgba(x, y), q = b.rgba(x, y)
                    let d = [abs(Int(p.r) - Int(q.r)), abs(Int(p.g) - Int(q.g)), abs(Int(p.b) - Int(q.b)), abs(Int(p.a) - Int(q.a))].max()!
                    if d > worst.0 { worst = (d, "(\(x), \(y)): \(p) vs \(q)") }
                }
            }
            return worst
        }

        static func frames(_ format: PixelFormat, primary: PixelSize = PixelSize(width: 160, height: 90),
                           secondary: PixelSize = PixelSize(width: 96, height: 54)) -> [(VideoFrame, StreamRole)] {
            [(picture(primary.width, primary.height, format, seed: 1), .primary),
             (picture(secondary.width, secondary.height, format, seed: 2), .secondary)]
        }

        static let orientations: [Orientation] = Rotation.allCases.flatMap { r in [false, true].map { Orientation(rotation: r, mirrored: $0) } }

        @Test(arguments: PixelFormat.allCases)
        func everyLayout(_ format: PixelFormat) throws {
            let pair = try Pair()
            let frames = Self.frames(format)
            let geometry = (StreamGeometry(sensorSize: frames[0].0.size), StreamGeometry(sensorSize: frames[1].0.size))
            for kind in [LayoutKind.pip, .sideBySide, .stacked, .primaryOnly, .secondaryOnly] {
                for mode in ContentMode.allCases {
                    let layout = Layout(kind: kind, contentMode: mode, background: RGBAColor(r: 0.2, g: 0.4, b: 0.6, a: 1))
                    try pair.expectSame(layout.resolve(canvas: Self.canvas, primary: geometry.0, secondary: geometry.1), frames,
                                        "\(format) \(kind) \(mode)")
                }
            }
            // A 1:1 primary (nearest sampling) under a scaled inset.
            let oneToOne = Self.frames(format, primary: Self.canvas)
            try pair.expectSame(Layout.pip().resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: Self.canvas),
                                                     secondary: geometry.1), oneToOne, "\(format) pip 1:1")
        }

        @Test(arguments: PixelFormat.allCases)
        func everyRotationAndMirror(_ format: PixelFormat) throws {
            let pair = try Pair()
            let frames = Self.frames(format)
            for o in Self.orientations {
                // The inset of a PiP, and the top half of a stacked layout (the primary turned).
                let pip = Layout.pip().resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: frames[0].0.size),
                                               secondary: StreamGeometry(sensorSize: frames[1].0.size, orientation: o))
                try pair.expectSame(pip, frames, "\(format) pip inset \(o)")
                let stacked = Layout.stacked.resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: frames[0].0.size, orientation: o),
                                                     secondary: StreamGeometry(sensorSize: frames[1].0.size))
                try pair.expectSame(stacked, frames, "\(format) stacked primary \(o)")
            }
        }

        @Test(arguments: PixelFormat.allCases)
        func everyCornerAndBorder(_ format: PixelFormat) throws {
            let pair = try Pair()
            let frames = Self.frames(format)
            let styles = [DrawStyle.plain, DrawStyle(cornerRadius: 7), DrawStyle(borderWidth: 2),
                          DrawStyle(cornerRadius: 9, borderWidth: 3, borderColor: RGBAColor(r: 1, g: 0.5, b: 0, a: 1)),
                          DrawStyle(cornerRadius: 100, borderWidth: 1.5),
                          DrawStyle(cornerRadius: 5, borderWidth: 2, borderColor: RGBAColor(r: 0, g: 1, b: 0.5, a: 0.5))]
            for style in styles {
                let layout = Layout(kind: .pip, pip: PiPPlacement(size: 0.45), insetStyle: style)
                let plan = layout.resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: frames[0].0.size),
                                          secondary: StreamGeometry(sensorSize: frames[1].0.size, orientation: Orientation(rotation: .r0, mirrored: true)))
                try pair.expectSame(plan, frames, "\(format) inset radius \(style.cornerRadius) border \(style.borderWidth)")
            }
        }

        @Test func translucencyAndOutputConversions() throws {
            let pair = try Pair()
            let frames = Self.frames(.nv12)
            let layout = Layout(kind: .pip, pip: PiPPlacement(size: 0.5), insetStyle: DrawStyle(opacity: 0.6, cornerRadius: 6, borderWidth: 2))
            let plan = layout.resolve(canvas: Self.canvas, primary: StreamGeometry(sensorSize: frames[0].0.size),
                                      secondary: StreamGeometry(sensorSize: frames[1].0.size))
            for matrix in ColorMatrix.allCases {
                for range in ColorRange.allCases {
                    // llvmpipe's fragment output rounding and its 8-bit blender differ
                    // from exact maths by up to 1 each; through a translucent blend and
                    // the 2×2 chroma average the two paths may then differ by 2.
                    try pair.expectSame(plan, frames, "translucent inset, output \(matrix) \(range)", matrix: matrix, range: range, tolerance: 2)
                }
            }
        }

        @Test func canvasWidthNotAMultipleOfFour() throws {
            let pair = try Pair()
            let canvas = PixelSize(width: 38, height: 20)
            let frames = Self.frames(.i420, primary: PixelSize(width: 38, height: 20), secondary: PixelSize(width: 20, height: 12))
            let plan = Layout.pip().resolve(canvas: canvas, primary: StreamGeometry(sensorSize: canvas),
                                            secondary: StreamGeometry(sensorSize: PixelSize(width: 20, height: 12)))
            try pair.expectSame(plan, frames, "38x20")
        }

        /// Several draws of both roles in one output, each with its own crop,
        /// orientation, opacity, radius and border: each keeps its parameters
        /// (the compute pass reads them from an array indexed by draw).
        @Test func severalDrawsKeepTheirOwnParameters() throws {
            let pair = try Pair()
            let frames = Self.frames(.rgba)
            var draws: [DrawDescription] = []
            for i in 0..<8 {
                draws.append(DrawDescription(role: i % 2 == 0 ? .primary : .secondary,
                                             destination: PixelRect(x: (i % 4) * 32, y: (i / 4) * 36, width: 30 - i, height: 34 - i),
                                             crop: NormalizedRect(x: 0.05 * Double(i), y: 0.02 * Double(i), width: 0.5, height: 0.6),
                                             orientation: Self.orientations[i], opacity: i == 5 ? 0.5 : 1,
                                             cornerRadius: Double(i), borderWidth: i % 3 == 0 ? 2 : 0,
                                             borderColor: RGBAColor(r: Double(i) / 8, g: 0, b: 1, a: 1), zIndex: i))
            }
            // A ninth draw over them all: a 1:1 solid square.
            let solid = solidFrame(16, 16, RGBA8(r: 10, g: 200, b: 30))
            let plan = CompositionPlan(canvas: Self.canvas, background: RGBAColor(r: 0, g: 0, b: 0.5, a: 1), draws: draws)
            try pair.expectSame(plan, frames, "8 draws")

            // Each draw shows its own picture where nothing covers it.
            let c = pair.compute
            let out = try c.addOutput(canvas: Self.canvas, range: .full)
            defer { c.removeOutput(out) }
            try c.upload(solid, role: .primary)
            try c.upload(frames[1].0, role: .secondary)
            let squares = (0..<4).map { i in
                DrawDescription(role: .primary, destination: PixelRect(x: 8 + 30 * i, y: 8, width: 16, height: 16),
                                opacity: Double(i + 1) / 4, zIndex: i)
            }
            let img = try renderPreview(c, out, CompositionPlan(canvas: Self.canvas, draws: squares))
            for i in 0..<4 {
                let a = Double(i + 1) / 4
                let want = RGBA8(r: byte(10 / 255 * a), g: byte(200 / 255 * a), b: byte(30 / 255 * a), a: 255)
                #expect(img.rgba(16 + 30 * i, 16).close(to: want, within: 1), "square \(i): \(img.rgba(16 + 30 * i, 16)), want \(want)")
            }
        }

        /// Opaque 1:1 draws against the CPU reference, exactly; the NV12 frame
        /// within ±1 of the CPU conversion of that reference.
        @Test func matchesCPUReference() throws {
            let c = try makeCompositor(pass: .compute)
            defer { c.shutdown() }
            let canvas = PixelSize(width: 64, height: 48)
            let out = try c.addOutput(canvas: canvas)
            var rng = LCG(state: 9)
            let noise = rgbaFrame(64, 48) { _, _ in RGBA8(r: rng.next(), g: rng.next(), b: rng.next()) }
            let inset = coordinateFrame(16, 12, tag: 99)
            let plan = CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 40, y: 30, width: 12, height: 16),
                                orientation: Orientation(rotation: .r90, mirrored: true), zIndex: 1)])
            try c.upload(noise, role: .primary)
            try c.upload(inset, role: .secondary)
            try c.render(output: out, plan: plan, pts: .zero)
            let nv = try #require(try c.flush().first)
            let ref = referenceComposite(canvas: canvas, background: RGBA8(r: 0, g: 0, b: 0),
                                         draws: [(plan.draws[0], noise), (plan.draws[1], inset)])
            let rgba = try c.previewRGBA(output: out)
            #expect(mismatches(rgba, ref) == [])
            let want = Conversion.referenceNV12(rgba, matrix: .bt709, range: .limited)
            var worst = 0
            for y in 0..<48 { for x in 0..<64 { worst = max(worst, abs(Int(nv.byte(plane: 0, x, y)) - Int(want.y[y][x]))) } }
            for y in 0..<24 { for x in 0..<64 { worst = max(worst, abs(Int(nv.byte(plane: 1, x, y)) - Int(want.uv[y][x]))) } }
            #expect(worst <= 1, "NV12 differs from the CPU reference by \(worst)")

            // Translucent: the inset at opacity 0.6 over the primary, blended as
            // 8-bit premultiplied values (source rounded, then the sum rounded).
            var translucent = plan
            translucent.draws[1].opacity = 0.6
            let img = try renderPreview(c, out, translucent)
            var off = 0
            for y in 0..<48 {
                for x in 0..<64 {
                    let under = noise.rgba(x, y)   // the primary, 1:1
                    guard translucent.draws[1].destination.contains(x: Double(x) + 0.5, y: Double(y) + 0.5) else { continue }
                    let top = referenceComposite(canvas: canvas, background: RGBA8(r: 0, g: 0, b: 0),
                                                 draws: [(plan.draws[1], inset)])[y][x]
                    func blend(_ s: UInt8, _ d: UInt8) -> UInt8 {
                        let s8 = (Double(s) * 0.6).rounded()
                        return UInt8(min(255, (s8 + Double(d) * (1 - 153.0 / 255)).rounded()))
                    }
                    let want = RGBA8(r: blend(top.r, under.r), g: blend(top.g, under.g), b: blend(top.b, under.b))
                    let got = img.rgba(x, y)
                    off = max(off, abs(Int(got.r) - Int(want.r)), abs(Int(got.g) - Int(want.g)), abs(Int(got.b) - Int(want.b)))
                }
            }
            #expect(off <= 1, "translucent inset differs from the CPU blend by \(off)")
        }
    }
}
