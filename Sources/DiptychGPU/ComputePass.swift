import CGLES
import DiptychCore

/// One compute frame: the plan's draws with the texture sets they sample, and
/// the background. Kept on the output so its RGBA target can be brought up to
/// date on demand (preview, export).
struct ComputeFrame {
    var draws: [(DrawDescription, StreamPicture)]
    var background: RGBAColor
}

/// The compute path (OpenGL ES 3.1): one dispatch per output frame does the
/// whole composite and its NV12 conversion (`composite.comp`), writing the
/// output's NV12 storage buffer and, when asked, its RGBA target as an `rgba8`
/// image. Per-draw parameters are an array indexed by draw in one uniform
/// block per frame; each frame's block has its own offset in a ring (bound
/// with glBindBufferRange), so no draw's or frame's parameters are rewritten
/// while an earlier dispatch may still read them. Render thread only.
final class ComputePass {
    static let maxDraws = 16
    /// Overlay pictures one dispatch samples (texture units 6...13, sources 2...9).
    static let maxOverlays = 8
    static let headerWords = 24    // 6 vec4
    static let drawWords = 48      // 12 vec4
    static let blockBytes = (headerWords + maxDraws * drawWords) * 4
    static let localSize = (x: 16, y: 8)

    private let ubo: GLuint
    private let slotBytes: Int
    private let slotCount: Int
    private var next = 0
    private var words: [UInt32]

    init(slots: Int) {
        var align: GLint = 0
        glGetIntegerv(GL.uniformBufferOffsetAlignment, &align)
        let a = max(Int(align), 16)
        slotBytes = (ComputePass.blockBytes + a - 1) / a * a
        slotCount = max(slots, 2)
        var b: GLuint = 0
        glGenBuffers(1, &b)
        glBindBuffer(GL.uniformBuffer, b)
        glBufferData(GL.uniformBuffer, GLsizeiptr(slotBytes * slotCount), nil, GL.dynamicDraw)
        glBindBuffer(GL.uniformBuffer, 0)
        ubo = b
        words = [UInt32](repeating: 0, count: ComputePass.blockBytes / 4)
    }

    /// Whether the draws fit one dispatch: at most `maxDraws`, none of an
    /// external (dma-buf) texture, which compute shaders cannot sample here,
    /// and at most `maxOverlays` overlay pictures.
    static func supports(_ draws: [(DrawDescription, StreamPicture)]) -> Bool {
        draws.count <= maxDraws && draws.allSatisfy { $0.1.input != .external } && overlayPictures(draws).count <= maxOverlays
    }

    /// The distinct overlay pictures of the draws, in order: overlay k is source 2 + k.
    static func overlayPictures(_ draws: [(DrawDescription, StreamPicture)]) -> [StreamPicture] {
        var out: [StreamPicture] = []
        for (_, set) in draws where set.input == .overlay && !out.contains(where: { $0 === set }) { out.append(set) }
        return out
    }

    /// The shader's source index of a draw: 0 primary, 1 secondary, 2 + k the frame's k-th overlay picture.
    static func source(_ d: DrawDescription, _ set: StreamPicture, _ frame: ComputeFrame) -> Int {
        guard set.input == .overlay else { return d.role == .primary ? 0 : 1 }
        return 2 + (overlayPictures(frame.draws).firstIndex { $0 === set } ?? 0)
    }

    /// Records the dispatch of `frame` into `out`'s NV12 buffer and/or RGBA
    /// target; with `barrier`, the memory barrier that makes its writes
    /// visible to the copies, fetches and reads after it (a batch of frames
    /// issues one for all its dispatches instead).
    func dispatch(_ frame: ComputeFrame, out: Output, nv12: Bool, rgba: Bool, shaders: ShaderCache, timer: PassTimer,
                  barrier: Bool = true, nv12Buffer: GLuint? = nil) throws(GPUError) {
        precondition(nv12 || rgba)
        let inPlace = frame.draws.contains { $0.1.inPlace != nil }
        let program = try shaders.program(.compute(nv12: nv12, rgba: rgba, drawList: ComputePass.drawList(frame), inPlace: inPlace))
        encode(frame, out)
        let offset = next * slotBytes
        next = (next + 1) % slotCount
        timer.begin(.composite)
        glBindBuffer(GL.uniformBuffer, ubo)
        words.withUnsafeBytes { glBufferSubData(GL.uniformBuffer, GLintptr(offset), GLsizeiptr($0.count), $0.baseAddress) }
        glBindBufferRange(GL.uniformBuffer, 0, ubo, GLintptr(offset), GLsizeiptr(ComputePass.blockBytes))
        var bound = Set<ObjectIdentifier>()
        for (d, set) in frame.draws where bound.insert(ObjectIdentifier(set)).inserted {
            let source = ComputePass.source(d, set, frame)
            if let p = set.inPlace {
                glBindBufferBase(GL.shaderStorageBuffer, GLuint(1 + source), p.buffer)
                continue
            }
            let filter = ComputePass.filtersLinearly(set, frame) ? GL.linear : GL.nearest
            for (plane, tex) in set.textures.enumerated() {
                glActiveTexture(GL.texture0 + GLenum(source < 2 ? 3 * source + plane : 4 + source))   // overlays: units 6...13
                glBindTexture(GL.texture2D, tex)
                glTexParameteri(GL.texture2D, GL.textureMinFilter, filter)
                glTexParameteri(GL.texture2D, GL.textureMagFilter, filter)
            }
        }
        if nv12 { glBindBufferBase(GL.shaderStorageBuffer, 0, nv12Buffer ?? out.nv12Storage().buffer) }
        if rgba { glBindImageTexture(0, out.target.texture, 0, GLboolean(GL_FALSE), 0, GL.writeOnly, GL.rgba8) }
        glUseProgram(program.id)
        let wordsPerRow = out.nv12Stride / 4, blockRows = out.canvas.height / 2
        glDispatchCompute(GLuint((wordsPerRow + ComputePass.localSize.x - 1) / ComputePass.localSize.x),
                          GLuint((blockRows + ComputePass.localSize.y - 1) / ComputePass.localSize.y), 1)
        if barrier { glMemoryBarrier(GL.computeOutputBarriers) }
        timer.end(.composite)
        glUseProgram(0)
        if nv12 { glBindBufferBase(GL.shaderStorageBuffer, 0, 0) }
        if inPlace { for b: GLuint in 1...2 { glBindBufferBase(GL.shaderStorageBuffer, b, 0) } }
        glBindBufferBase(GL.uniformBuffer, 0, 0)
        glBindBuffer(GL.uniformBuffer, 0)
        glActiveTexture(GL.texture0)
    }

    /// The draws' kinds, compiled into the program variant (so no branch of
    /// the shader depends on them); their parameters stay in the uniform block.
    static func drawList(_ frame: ComputeFrame) -> String {
        frame.draws.enumerated().map { i, e in
            let m = mode(e.0, e.1, frame)
            return "DRAW(\(i), \(m.source), \(m.input), \(m.nearest), \(m.masked))"
        }.joined(separator: " ")
    }

    /// A source's textures filter linearly unless every draw of it is 1:1 (then nearest, exact).
    static func filtersLinearly(_ set: StreamPicture, _ frame: ComputeFrame) -> Bool {
        frame.draws.contains { $0.1 === set && !DrawSampling.isUnitScale($0.0, textureWidth: set.width, textureHeight: set.height) }
    }

    /// The draw's kind: source, input, nearest (a 1:1 draw of a linearly
    /// filtered source, fetched texel by texel), masked.
    static func mode(_ d: DrawDescription, _ set: StreamPicture, _ frame: ComputeFrame) -> (source: Int, input: Int, nearest: Int, masked: Int) {
        let unit = DrawSampling.isUnitScale(d, textureWidth: set.width, textureHeight: set.height)
        if set.input == .overlay { return (source(d, set, frame), 5, unit && filtersLinearly(set, frame) ? 1 : 0, 0) }
        return (source(d, set, frame), set.inPlace?.kind ?? (set.input == .nv12 ? 1 : set.input == .i420 ? 2 : 0),
                unit && filtersLinearly(set, frame) ? 1 : 0, d.cornerRadius > 0 || d.borderWidth > 0 ? 1 : 0)
    }

    /// The frame's uniform block (std140: header, then one 12-vec4 record per draw).
    private func encode(_ frame: ComputeFrame, _ out: Output) {
        for i in words.indices { words[i] = 0 }
        var at = 0
        func f(_ v: Double) { words[at] = Float(v).bitPattern; at += 1 }
        func n(_ v: Int) { words[at] = UInt32(bitPattern: Int32(v)); at += 1 }
        let bg = frame.background
        f(bg.r * bg.a); f(bg.g * bg.a); f(bg.b * bg.a); f(bg.a)
        let c = YUVCoefficients(matrix: out.matrix, range: out.range)
        for row in c.rgbToYUV { for v in row { f(v) }; f(0) }
        for v in c.offset { f(v) }; f(0)
        n(out.canvas.width); n(out.canvas.height); n(out.nv12Stride / 4); n(frame.draws.count)
        for (d, set) in frame.draws {
            let r = d.destination
            f(Double(r.x)); f(Double(r.y)); f(Double(r.width)); f(Double(r.height))
            let t = DrawSampling.texFromLocal(crop: d.crop, orientation: d.orientation)
            for v in t { words[at] = v.bitPattern; at += 1 }
            f(0); f(0)
            f(min(max(d.opacity, 0), 1)); f(max(d.cornerRadius, 0)); f(max(d.borderWidth, 0)); f(0)
            let b = d.borderColor
            f(b.r); f(b.g); f(b.b); f(b.a)
            let k = YUVCoefficients(matrix: set.matrix, range: set.range)
            for col in 0..<3 { for row in 0..<3 { f(k.yuvToRGB[row][col]) }; f(0) }
            for v in k.offset { f(v) }; f(0)
            let m = ComputePass.mode(d, set, frame)
            n(m.source); n(m.input); n(m.nearest); n(m.masked)
            let p = set.inPlace
            n(set.width); n(set.height); n(p?.yRowBytes ?? 0); n(p?.uvOffset ?? 0)
            let unit = DrawSampling.isUnitScale(d, textureWidth: set.width, textureHeight: set.height)
            n(p?.uvRowBytes ?? 0); n(unit ? 0 : 1); n(p?.format == .bgra ? 1 : 0); n(p?.vOffset ?? 0)
        }
    }

    func release(_ r: GLReleaser) { r.delete(.buffer, [ubo]) }
}
