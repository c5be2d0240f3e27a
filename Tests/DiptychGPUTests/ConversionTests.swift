import DiptychCore
import Testing
@testable import DiptychGPU

extension GPU {
    @Suite struct Conversion {
        /// CPU NV12 of an RGBA image: Y per pixel, UV from the 2×2 average.
        static func referenceNV12(_ img: VideoFrame, matrix: ColorMatrix, range: ColorRange) -> (y: [[UInt8]], uv: [[UInt8]]) {
            let k = YUVCoefficients(matrix: matrix, range: range)
            func rgb(_ x: Int, _ y: Int) -> (Double, Double, Double) {
                let p = img.rgba(x, y); return (Double(p.r) / 255, Double(p.g) / 255, Double(p.b) / 255)
            }
            var Y = [[UInt8]](), UV = [[UInt8]]()
            for y in 0..<img.height {
                Y.append((0..<img.width).map { x in let c = rgb(x, y); return byte(k.yuv(r: c.0, g: c.1, b: c.2).y) })
            }
            for cy in 0..<(img.height / 2) {
                var row: [UInt8] = []
                for cx in 0..<(img.width / 2) {
                    var s = (0.0, 0.0, 0.0)
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let c = rgb(cx * 2 + dx, cy * 2 + dy); s.0 += c.0 / 4; s.1 += c.1 / 4; s.2 += c.2 / 4
                    }
                    let v = k.yuv(r: s.0, g: s.1, b: s.2)
                    row += [byte(v.u), byte(v.v)]
                }
                UV.append(row)
            }
            return (Y, UV)
        }

        @Test(arguments: [(PixelSize(width: 64, height: 48), ColorMatrix.bt709, ColorRange.limited),
                          (PixelSize(width: 38, height: 20), .bt709, .limited),
                          (PixelSize(width: 64, height: 48), .bt601, .full),
                          (PixelSize(width: 30, height: 18), .bt601, .limited)])
        func nv12MatchesCPUReference(_ canvas: PixelSize, _ matrix: ColorMatrix, _ range: ColorRange) throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try c.addOutput(canvas: canvas, matrix: matrix, range: range)
            var rng = LCG(state: 42)
            let noise = rgbaFrame(canvas.width, canvas.height) { _, _ in RGBA8(r: rng.next(), g: rng.next(), b: rng.next()) }
            try c.upload(noise, role: .primary)
            let plan = CompositionPlan(canvas: canvas, draws: [DrawDescription(role: .primary, destination: PixelRect(size: canvas))])
            let pts = MediaTime(value: 7, timescale: 25)
            try c.render(output: out, plan: plan, pts: pts)
            let rgba = try c.previewRGBA(output: out)
            #expect(mismatches(rgba, referenceComposite(canvas: canvas, background: RGBA8(r: 0, g: 0, b: 0),
                                                        draws: [(plan.draws[0], noise)])) == [])
            let nv = try #require(try c.nextNV12(wait: true))
            #expect(nv.pts == pts && nv.format == .nv12 && nv.matrix == matrix && nv.range == range)
            #expect(nv.planes[0].stride == (canvas.width + 3) / 4 * 4)
            #expect(nv.planes[0].stride >= PixelFormat.nv12.minimumStride(plane: 0, width: canvas.width))
            try validateUpload(nv)
            let ref = Self.referenceNV12(rgba, matrix: matrix, range: range)
            var worst = 0
            for y in 0..<canvas.height { for x in 0..<canvas.width { worst = max(worst, abs(Int(nv.byte(plane: 0, x, y)) - Int(ref.y[y][x]))) } }
            for y in 0..<canvas.height / 2 { for x in 0..<canvas.width { worst = max(worst, abs(Int(nv.byte(plane: 1, x, y)) - Int(ref.uv[y][x]))) } }
            #expect(worst <= 1, "largest difference \(worst) code values")
        }

        @Test(arguments: [PixelFormat.nv12, .i420], [ColorMatrix.bt601, .bt709])
        func yuvInputsRoundTrip(_ format: PixelFormat, _ matrix: ColorMatrix) throws {
            for range in ColorRange.allCases {
                let c = try makeCompositor()
                defer { c.shutdown() }
                let size = PixelSize(width: 32, height: 16)
                let out = try c.addOutput(canvas: size)
                // 2×2 blocks of one colour, so chroma subsampling loses nothing.
                var rng = LCG(state: 7)
                var blocks: [[RGBA8]] = (0..<8).map { _ in (0..<16).map { _ in
                    RGBA8(r: 30 + rng.next() / 2, g: 30 + rng.next() / 2, b: 30 + rng.next() / 2) } }
                blocks[0][0] = RGBA8(r: 0, g: 0, b: 0); blocks[0][1] = RGBA8(r: 255, g: 255, b: 255)
                let k = YUVCoefficients(matrix: matrix, range: range)
                func yuv(_ x: Int, _ y: Int) -> (UInt8, UInt8, UInt8) {
                    let p = blocks[y / 2][x / 2]
                    let v = k.yuv(r: Double(p.r) / 255, g: Double(p.g) / 255, b: Double(p.b) / 255)
                    return (byte(v.y), byte(v.u), byte(v.v))
                }
                // Padded strides exercise GL_UNPACK_ROW_LENGTH.
                let frame = yuvFrame(32, 16, format: format, matrix: matrix, range: range, padding: [13, 6, 5], yuv)
                try c.upload(frame, role: .secondary)
                let img = try renderPreview(c, out, CompositionPlan(canvas: size, draws: [
                    DrawDescription(role: .secondary, destination: PixelRect(size: size))]))
                var worstDecoded = 0, worstOriginal = 0
                for y in 0..<16 {
                    for x in 0..<32 {
                        let (Y, U, V) = yuv(x, y)
                        let d = k.rgb(y: Double(Y) / 255, u: Double(U) / 255, v: Double(V) / 255)
                        let decoded = RGBA8(r: byte(d.r), g: byte(d.g), b: byte(d.b))
                        let got = img.rgba(x, y), orig = blocks[y / 2][x / 2]
                        for (a, b) in [(got.r, decoded.r), (got.g, decoded.g), (got.b, decoded.b)] { worstDecoded = max(worstDecoded, abs(Int(a) - Int(b))) }
                        for (a, b) in [(got.r, orig.r), (got.g, orig.g), (got.b, orig.b)] { worstOriginal = max(worstOriginal, abs(Int(a) - Int(b))) }
                    }
                }
                #expect(worstDecoded <= 1, "\(format) \(matrix) \(range): \(worstDecoded) from the CPU decode")
                #expect(worstOriginal <= 3, "\(format) \(matrix) \(range): \(worstOriginal) from the original RGB")
                #expect(img.rgba(0, 0).close(to: RGBA8(r: 0, g: 0, b: 0), within: 1))
                #expect(img.rgba(2, 0).close(to: RGBA8(r: 255, g: 255, b: 255), within: 1))
            }
        }

        @Test func bgraAndRGBAStrides() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let size = PixelSize(width: 20, height: 10)
            let out = try c.addOutput(canvas: size)
            let plan = CompositionPlan(canvas: size, draws: [DrawDescription(role: .primary, destination: PixelRect(size: size))])
            let pattern: (Int, Int) -> RGBA8 = { x, y in RGBA8(r: UInt8(x * 10), g: UInt8(y * 20), b: UInt8(255 - x)) }
            let ref = referenceComposite(canvas: size, background: RGBA8(r: 0, g: 0, b: 0),
                                         draws: [(plan.draws[0], rgbaFrame(20, 10, pattern))])
            // Tight, padded (row length), and padded by a non-multiple of 4 (repacked).
            for (format, padding) in [(PixelFormat.rgba, 0), (.rgba, 16), (.rgba, 3), (.bgra, 0), (.bgra, 12), (.bgra, 7)] {
                try c.upload(rgbaFrame(20, 10, padding: padding, format: format, pattern), role: .primary)
                #expect(mismatches(try renderPreview(c, out, plan), ref) == [], "\(format) padding \(padding)")
            }
            // Switching formats and sizes on one role.
            try c.upload(yuvFrame(20, 10, format: .nv12, matrix: .bt709, range: .full) { _, _ in (255, 128, 128) }, role: .primary)
            #expect(try renderPreview(c, out, plan).rgba(5, 5) == RGBA8(r: 255, g: 255, b: 255))
        }

        @Test func readbacksComeInSubmissionOrder() throws {
            let c = try makeCompositor(readbackDepth: 3)
            defer { c.shutdown() }
            let size = PixelSize(width: 16, height: 8)
            let out = try c.addOutput(canvas: size, range: .full)
            let plan = CompositionPlan(canvas: size, draws: [DrawDescription(role: .primary, destination: PixelRect(size: size))])
            var got: [VideoFrame] = []
            for i in 0..<10 {
                let g = UInt8(i * 25)
                try c.upload(solidFrame(16, 8, RGBA8(r: g, g: g, b: g)), role: .primary)
                try c.render(output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 30))
                if i % 3 == 0, let f = try c.nextNV12(wait: false) { got.append(f) }
            }
            #expect(c.outstandingReadbacks == 10 - got.count)
            got += try c.flush()
            #expect(got.map(\.pts.value) == Array(0..<10))
            for (i, f) in got.enumerated() {
                #expect(Int(f.byte(plane: 0, 3, 3)).distance(to: i * 25) <= 1 && i * 25 - Int(f.byte(plane: 0, 3, 3)) <= 1,
                        "frame \(i) has Y \(f.byte(plane: 0, 3, 3))")
            }
            #expect(try c.nextNV12(wait: true) == nil)
            #expect(try c.flush().isEmpty)
            let s = c.stats
            #expect(s.framesRendered == 10 && s.framesDelivered == 10)
            #expect(s.upload.count == 10 && s.composite.count == 10 && s.nv12.count == 10)
            if s.timerQueries { #expect(s.nv12.gpuCount > 0 && s.nv12.gpuMeanMs != nil) }
            c.resetStats()
            #expect(c.stats.framesRendered == 0)
        }

        @Test func batchedCompositeCall() throws {
            let c = try makeCompositor(readbackDepth: 2)
            defer { c.shutdown() }
            let size = PixelSize(width: 16, height: 8)
            let a = try c.addOutput(canvas: size, range: .full)
            let b = try c.addOutput(canvas: PixelSize(width: 8, height: 8), range: .full)
            let plan = CompositionPlan(canvas: size, draws: [
                DrawDescription(role: .primary, destination: PixelRect(x: 0, y: 0, width: 8, height: 8)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 8, y: 0, width: 8, height: 8))])
            var frames: [VideoFrame] = []
            for i in 0..<6 {
                frames += try c.composite(uploads: [(solidFrame(8, 8, RGBA8(r: 255, g: 255, b: 255)), .primary),
                                                    (solidFrame(8, 8, RGBA8(r: UInt8(i * 40), g: UInt8(i * 40), b: UInt8(i * 40))), .secondary)],
                                          output: a, plan: plan, pts: MediaTime(value: Int64(i), timescale: 10))
            }
            // A second output from the same textures, then everything left, in order.
            try c.render(output: b, plan: CompositionPlan(canvas: PixelSize(width: 8, height: 8), draws: [
                DrawDescription(role: .secondary, destination: PixelRect(x: 0, y: 0, width: 8, height: 8))]), pts: MediaTime(value: 99, timescale: 10))
            let rest = try c.flushReadbacks()
            #expect(rest.last?.output == b)
            frames += rest.filter { $0.output == a }.map(\.frame)
            #expect(frames.map(\.pts.value) == Array(0..<6))
            for (i, f) in frames.enumerated() {
                #expect(f.byte(plane: 0, 2, 2) == 255)
                #expect(abs(Int(f.byte(plane: 0, 12, 4)) - i * 40) <= 1)
            }
            c.removeOutput(b)
            #expect(try c.flush().isEmpty)
        }
    }
}
