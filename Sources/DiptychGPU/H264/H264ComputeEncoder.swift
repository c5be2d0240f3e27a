import CGLES
import DiptychCore

/// Settings of the GPU H.264 encoder.
public struct GPUH264Settings: Hashable, Sendable, Codable {
    /// Quantisation parameter of every macroblock, 0 to 51.
    public var qp: Int
    /// Frames from one IDR picture to the next.
    public var keyframeInterval: Int

    /// Refines each full-sample vector to half and then quarter samples (8.4.2.2.1).
    public var quarterSample: Bool
    /// Drops P macroblock residuals of a few isolated small levels, so more of them become P_Skip.
    public var decimate: Bool
    /// P pictures code Intra_16x16 macroblocks where intra prediction beats motion (new
    /// content, occlusions; a scene cut becomes a P picture of mostly intra macroblocks).
    public var intraInP: Bool
    /// IDR pictures are coded at `qp` less this (at least 0): the reference every later picture
    /// predicts from is worth the bits (libx264's constant-QP mode does the same, 3 for its ipratio 1.4).
    public var keyframeQPOffset: Int

    public init(qp: Int = 23, keyframeInterval: Int = 250, quarterSample: Bool = true, decimate: Bool = true, intraInP: Bool = true,
                keyframeQPOffset: Int = 3) {
        self.qp = qp; self.keyframeInterval = keyframeInterval
        self.quarterSample = quarterSample; self.decimate = decimate; self.intraInP = intraInP
        self.keyframeQPOffset = keyframeQPOffset
    }

    /// The QP of an IDR picture.
    public var keyframeQP: Int { max(0, qp - keyframeQPOffset) }

    /// Whether the values are in range; the message names the one that is not.
    public func validate() throws(GPUError) {
        guard (0...51).contains(qp) else { throw .encode("QP \(qp) is outside 0 to 51") }
        guard (0...51).contains(keyframeQPOffset) else { throw .encode("keyframe QP offset \(keyframeQPOffset) is outside 0 to 51") }
        guard keyframeInterval >= 1 else { throw .encode("keyframe interval \(keyframeInterval) must be at least 1") }
    }
}

/// One picture the GPU encoder wrote: an Annex B access unit (SPS and PPS before each IDR slice).
public struct H264Picture: Sendable {
    public var data: [UInt8]
    public var keyframe: Bool
    public var pts: MediaTime
}

/// An H.264 encoder made of GLES 3.1 compute passes (docs/ARCHITECTURE.md,
/// "The GPU encoder"): Constrained Baseline, I_16x16, P_L0_16x16 and
/// P_Skip, full-sample motion, CAVLC, one slice a picture. It reads an NV12
/// storage buffer (the compute composite's output) and returns the bitstream;
/// the reconstructed reference and every macroblock's record stay on the GPU.
/// Owns its programs and buffers. Render thread only (a GL context current).
final class H264ComputeEncoder {
    let format: H264StreamFormat
    let settings: GPUH264Settings
    /// 32-bit words of one macroblock's slot in the bit buffer.
    static let slotWords = 512
    /// 32-bit words of one macroblock's record (MB_WORDS in h264common.glsl).
    static let recordWords = 222

    private var programs: [Pass: GLuint] = [:]
    private var locations: [Pass: (size: GLint, layout: GLint, code: GLint)] = [:]
    /// Reconstructed pictures (NV12 at the coded size, packed four bytes a word): the one written and the reference.
    private var pictures: [GLuint] = [0, 0]
    /// Macroblock records of this picture and the previous one.
    private var records: [GLuint] = [0, 0]
    private var bits: GLuint = 0, lens: GLuint = 0, result: GLuint = 0, output: GLuint = 0
    private var current = 0
    private var frameNum = 0
    private var idrCount = 0
    private var sinceKeyframe = 0
    private var started = false
    let outputWords: Int

    enum Pass: CaseIterable { case intra, search, decide, finish, cavlc, scan, gather }

    var pictureRowBytes: Int { format.mbWidth * 16 }
    var pictureUVOffset: Int { pictureRowBytes * format.mbHeight * 16 }
    var pictureBytes: Int { pictureUVOffset + pictureRowBytes * format.mbHeight * 8 }
    var macroblocks: Int { format.mbWidth * format.mbHeight }

    init(format: H264StreamFormat, settings: GPUH264Settings) throws(GPUError) {
        try settings.validate()
        guard format.width >= 16, format.height >= 16, format.width % 2 == 0, format.height % 2 == 0 else {
            throw .encode("picture \(format.width)x\(format.height): the GPU encoder takes even sizes of at least 16x16")
        }
        // The tail slot's skip run has to fit one word (ue of up to 2^15 - 1 macroblocks).
        guard format.mbWidth * format.mbHeight < 32_767 else {
            throw .encode("picture \(format.width)x\(format.height) has more than 32,766 macroblocks")
        }
        self.format = format
        self.settings = settings
        // Room for any picture this encoder can write: 2 bytes a pixel is more than an I_PCM picture takes.
        outputWords = max(1024, format.mbWidth * format.mbHeight * 256 * 2 / 4)
        do {
            for pass in Pass.allCases {
                let p = try Self.build(pass)
                programs[pass] = p
                locations[pass] = (glGetUniformLocation(p, "u_size"), glGetUniformLocation(p, "u_layout"), glGetUniformLocation(p, "u_code"))
            }
        } catch {
            release()
            throw error
        }
        let n = macroblocks
        func buffer(_ bytes: Int) -> GLuint {
            var b: GLuint = 0
            glGenBuffers(1, &b)
            glBindBuffer(GL.shaderStorageBuffer, b)
            glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes), nil, GL.dynamicCopy)
            return b
        }
        pictures = [buffer(pictureBytes), buffer(pictureBytes)]
        records = [buffer(n * Self.recordWords * 4), buffer(n * Self.recordWords * 4)]
        bits = buffer(((n + 2) * Self.slotWords + 1) * 4)
        lens = buffer(2 * (n + 2) * 4)
        result = buffer(8 * 4)
        output = buffer(outputWords * 4)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        let code = glGetError()
        guard code == GL_NO_ERROR else { release(); throw .gl(label: "GPU encoder buffers for \(format.width)x\(format.height)", code: code) }
    }

    private static func build(_ pass: Pass) throws(GPUError) -> GLuint {
        let (file, defines): (String, String) = switch pass {
        case .intra: ("h264mb.comp", "#define INTRA 1\n")
        case .search: ("h264mb.comp", "#define INTER 1\n#define SEARCH 1\n")
        case .decide: ("h264mb.comp", "#define INTER 1\n#define DECIDE 1\n")
        case .finish: ("h264finish.comp", "")
        case .cavlc: ("h264cavlc.comp", "")
        case .scan: ("h264pack.comp", "#define SCAN 1\n")
        case .gather: ("h264pack.comp", "")
        }
        guard let common = ShaderLibrary.source(named: "h264common.glsl"), let body = ShaderLibrary.source(named: file) else {
            throw .encode("shader \(file) is missing from the build")
        }
        // Each pass carries its own #version line; the defines and the shared code go after it.
        let version = "#version 310 es\n"
        guard body.hasPrefix(version) else { throw .encode("shader \(file) does not start with \(version)") }
        let source = version + defines + common + "\n" + body.dropFirst(version.count)
        let shader = try ShaderCache.compile(GL.computeShader, name: "\(file) (\(pass))", source: source)
        let program = glCreateProgram()
        glAttachShader(program, shader)
        glLinkProgram(program)
        glDeleteShader(shader)
        var ok: GLint = 0
        glGetProgramiv(program, GL.linkStatus, &ok)
        guard ok != 0 else {
            var len: GLint = 0
            glGetProgramiv(program, GL.infoLogLength, &len)
            var buf = [GLchar](repeating: 0, count: Int(max(len, 1)) + 1)
            glGetProgramInfoLog(program, GLsizei(buf.count), nil, &buf)
            glDeleteProgram(program)
            throw .shaderCompile(name: "link \(file) (\(pass))", log: cLogString(buf), numberedSource: ShaderCache.numbered(source))
        }
        return program
    }

    func release() {
        for p in programs.values { glDeleteProgram(p) }
        programs = [:]
        let all = pictures + records + [bits, lens, result, output]
        let live = all.filter { $0 != 0 }
        glDeleteBuffers(GLsizei(live.count), live)
        pictures = [0, 0]; records = [0, 0]; bits = 0; lens = 0; result = 0; output = 0
    }

    deinit { precondition(programs.isEmpty, "H264ComputeEncoder released without release()") }

    /// x264's lambda for SAD-based motion costs, by QP.
    static let lambda: [Int32] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6, 6, 7, 8, 9,
                                  10, 11, 13, 14, 16, 18, 20, 23, 25, 29, 32, 36, 40, 45, 51, 57, 64, 72, 81, 91]

    /// A picture whose passes were recorded; `collect` maps its bitstream.
    struct Pending { var idr: Bool; var pts: MediaTime }

    /// Records the passes that encode the NV12 picture in storage buffer
    /// `source` (`rowBytes` a row, the interleaved UV rows at `uvOffset`).
    func encode(source: GLuint, rowBytes: Int, uvOffset: Int, pts: MediaTime, keyframe: Bool = false) -> Pending {
        let idr = !started || keyframe || sinceKeyframe >= settings.keyframeInterval
        started = true
        if idr { frameNum = 0; sinceKeyframe = 0 }
        let pictureQP = idr ? settings.keyframeQP : settings.qp
        let header = format.sliceHeader(idr: idr, frameNum: frameNum, idrPicID: idrCount % 2, qp: pictureQP)
        if idr { idrCount += 1 }
        frameNum += 1
        sinceKeyframe += 1

        let ref = current ^ 1
        let n = macroblocks
        let w = header.words
        glBindBuffer(GL.shaderStorageBuffer, bits)
        glBufferSubData(GL.shaderStorageBuffer, 0, GLsizeiptr(w.count * 4), w)
        var headerBits = UInt32(header.count)
        glBindBuffer(GL.shaderStorageBuffer, lens)
        glBufferSubData(GL.shaderStorageBuffer, 0, 4, &headerBits)
        var zero: [UInt32] = [0, 0, 0, 0, 0, 0, 0, 0]
        glBindBuffer(GL.shaderStorageBuffer, result)
        glBufferSubData(GL.shaderStorageBuffer, 0, 32, &zero)
        glBindBuffer(GL.shaderStorageBuffer, 0)

        for (binding, buffer) in [(0, source), (1, pictures[current]), (2, pictures[ref]), (3, records[current]),
                                  (4, records[ref]), (5, bits), (6, lens), (7, result), (8, output)] {
            glBindBufferBase(GL.shaderStorageBuffer, GLuint(binding), buffer)
        }
        let qp = Int32(pictureQP), p: Int32 = idr ? 0 : 1
        func use(_ pass: Pass, code: (Int32, Int32, Int32, Int32)) {
            glUseProgram(programs[pass]!)
            let l = locations[pass]!
            glUniform4i(l.size, Int32(format.width), Int32(format.height), Int32(format.mbWidth), Int32(format.mbHeight))
            glUniform4i(l.layout, Int32(rowBytes), Int32(uvOffset), Int32(pictureRowBytes), Int32(pictureUVOffset))
            glUniform4i(l.code, code.0, code.1, code.2, code.3)
        }
        let storage = GLbitfield(GL_SHADER_STORAGE_BARRIER_BIT)
        if idr {
            use(.intra, code: (qp, 0, Self.lambda[pictureQP], 0))
            let l = locations[.intra]!
            for d in 0..<(format.mbWidth + format.mbHeight - 1) {
                let first = max(0, d - (format.mbWidth - 1)), last = min(d, format.mbHeight - 1)
                glUniform4i(l.code, qp, 0, Self.lambda[pictureQP], Int32(d))
                glDispatchCompute(GLuint(last - first + 1), 1, 1)
                glMemoryBarrier(storage)
            }
        } else {
            let tools = Int32((settings.quarterSample ? 1 : 0) | (settings.decimate ? 2 : 0) | (settings.intraInP ? 4 : 0))
            use(.search, code: (qp, 1, Self.lambda[pictureQP], tools))
            glDispatchCompute(GLuint(format.mbWidth), GLuint(format.mbHeight), 1)
            glMemoryBarrier(storage)
            // The decision over diagonals x + 2y.
            use(.decide, code: (qp, 1, Self.lambda[pictureQP], tools))
            let l = locations[.decide]!
            let w = format.mbWidth, h = format.mbHeight
            for d in 0..<(w + 2 * h - 2) {
                let first = max(0, (d - (w - 1) + 1) / 2), last = min(h - 1, d / 2)
                guard last >= first else { continue }
                glUniform4i(l.code, qp, 1, Self.lambda[pictureQP], tools | Int32(d << 3))
                glDispatchCompute(GLuint(last - first + 1), 1, 1)
                glMemoryBarrier(storage)
            }
        }
        let slot = Int32(Self.slotWords)
        use(.finish, code: (qp, p, slot, 0))
        glDispatchCompute(1, 1, 1)
        glMemoryBarrier(storage)
        use(.cavlc, code: (qp, p, slot, 0))
        glDispatchCompute(GLuint((n + 63) / 64), 1, 1)
        glMemoryBarrier(storage)
        use(.scan, code: (qp, p, slot, Int32(outputWords)))
        glDispatchCompute(1, 1, 1)
        glMemoryBarrier(storage | GLbitfield(GL_COMMAND_BARRIER_BIT))
        use(.gather, code: (qp, p, slot, Int32(outputWords)))
        glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), result)
        glDispatchComputeIndirect(0)
        glBindBuffer(GLenum(GL_DISPATCH_INDIRECT_BUFFER), 0)
        glMemoryBarrier(GLbitfield(GL_BUFFER_UPDATE_BARRIER_BIT) | storage)
        glUseProgram(0)
        current = ref
        return Pending(idr: idr, pts: pts)
    }

    /// Maps the bitstream of `pending` (blocks until the GPU wrote it) and frames it as Annex B.
    func collect(_ pending: Pending) throws(GPUError) -> H264Picture {
        glBindBuffer(GL.shaderStorageBuffer, result)
        guard let r = glMapBufferRange(GL.shaderStorageBuffer, 0, 32, GL.mapReadBit) else {
            glBindBuffer(GL.shaderStorageBuffer, 0)
            throw .gl(label: "mapping the GPU encoder's result", code: glGetError())
        }
        let words = r.assumingMemoryBound(to: UInt32.self)
        let bytes = Int(words[4]), overflow = words[5] != 0
        glUnmapBuffer(GL.shaderStorageBuffer)
        guard !overflow else {
            glBindBuffer(GL.shaderStorageBuffer, 0)
            throw .encode("a picture of \(format.width)x\(format.height) at QP \(settings.qp) overflowed the encoder's bit buffer")
        }
        var data: [UInt8] = []
        if pending.idr {
            NALUnit.annexB(type: NALUnit.spsType, rbsp: format.sps, into: &data)
            NALUnit.annexB(type: NALUnit.ppsType, rbsp: format.pps, into: &data)
        }
        glBindBuffer(GL.shaderStorageBuffer, output)
        guard bytes > 0, let o = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(bytes), GL.mapReadBit) else {
            glBindBuffer(GL.shaderStorageBuffer, 0)
            throw .gl(label: "mapping the GPU encoder's bitstream (\(bytes) bytes)", code: glGetError())
        }
        NALUnit.annexB(type: pending.idr ? NALUnit.idrType : NALUnit.sliceType,
                       rbsp: UnsafeBufferPointer(start: o.assumingMemoryBound(to: UInt8.self), count: bytes), into: &data)
        glUnmapBuffer(GL.shaderStorageBuffer)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        return H264Picture(data: data, keyframe: pending.idr, pts: pending.pts)
    }

    /// The last reconstructed picture, cropped, as NV12 bytes (Y rows then UV rows, `width` bytes each).
    func reconstruction() throws(GPUError) -> [UInt8] {
        glBindBuffer(GL.shaderStorageBuffer, pictures[current ^ 1])
        guard let p = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(pictureBytes), GL.mapReadBit) else {
            glBindBuffer(GL.shaderStorageBuffer, 0)
            throw .gl(label: "mapping the GPU encoder's reconstruction", code: glGetError())
        }
        let b = p.assumingMemoryBound(to: UInt8.self)
        var out = [UInt8](repeating: 0, count: format.width * format.height * 3 / 2)
        for y in 0..<format.height {
            for x in 0..<format.width { out[y * format.width + x] = b[y * pictureRowBytes + x] }
        }
        for y in 0..<format.height / 2 {
            for x in 0..<format.width { out[format.width * format.height + y * format.width + x] = b[pictureUVOffset + y * pictureRowBytes + x] }
        }
        glUnmapBuffer(GL.shaderStorageBuffer)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        return out
    }
}
