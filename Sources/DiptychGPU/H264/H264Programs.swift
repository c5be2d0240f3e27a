import CGLES
import DiptychCore

/// How the GPU encoder's raster-order pass keeps the standard's order
/// (`H264Programs.rasterOrder`). A benchmark may ask for either: the walk on
/// a software renderer keeps the order only where llvmpipe runs a dispatch's
/// work groups one after another on one thread (`LP_NUM_THREADS=0`), so no
/// row waits, which checks the walk's bits, not its waits.
public enum H264RasterOrder: String, Sendable, CaseIterable {
    /// One work group walks each macroblock row, a row waiting for the one above.
    case walk
    /// A dispatch a step, each step a diagonal of macroblocks.
    case wavefront
}

/// The GPU encoder's compute programs, compiled once per context and shared
/// by every encoder in it (docs/ARCHITECTURE.md, "The GPU encoder"). Render thread only.
final class H264Programs {
    enum Pass: CaseIterable { case intra, intraWalk, interpolate, search, refine, subpel, choose, inter, intraP, probeGuess, probe, deblock, finish, cavlc, scan, gather }

    private(set) var ids: [Pass: GLuint] = [:]
    /// The CAVLC pass's code tables, bound at `H264CAVLCTables.binding`.
    let cavlcTables = H264CAVLCTables()
    private(set) var locations: [Pass: (size: GLint, layout: GLint, code: GLint, picture: GLint, step: GLint, sliceRows: GLint)] = [:]
    /// The storage buffer bindings each pass's program reads or writes (its
    /// active blocks): a picture's dispatch binds only these, as a batch
    /// records about twenty dispatches a picture on the render thread.
    private(set) var bindings: [Pass: [GLuint]] = [:]

    /// How the raster-order pass (P_Skip decision and deblocking) keeps the
    /// standard's order: one work group walking each macroblock row, a row
    /// waiting for the one above (a hardware GPU, where a dispatch's work
    /// groups run beside each other), or a wavefront of dispatches, one a
    /// step (a software renderer: llvmpipe runs a dispatch's groups in fixed
    /// shares per thread and ends a shader's loops after 65,535 iterations in
    /// all, so a row's wait for one another thread has not reached ends
    /// early and the picture differs from the decoder's).
    let rasterOrder: H264RasterOrder

    /// `softwareRenderer`: the context's renderer runs on the CPU
    /// (`GPUInfo.isSoftware`); `rasterOrder`, where given, is taken instead
    /// of the renderer's own (`H264RasterOrder`).
    init(softwareRenderer: Bool, rasterOrder: H264RasterOrder? = nil) throws(GPUError) {
        self.rasterOrder = rasterOrder ?? (softwareRenderer ? .wavefront : .walk)
        do {
            for pass in Pass.allCases {
                let p = try Self.build(pass)
                ids[pass] = p
                bindings[pass] = Self.storageBindings(p)
                locations[pass] = (glGetUniformLocation(p, "u_size"), glGetUniformLocation(p, "u_layout"), glGetUniformLocation(p, "u_code"),
                                   glGetUniformLocation(p, "u_pic"), glGetUniformLocation(p, "u_step"),
                                   glGetUniformLocation(p, "u_sliceRows"))
            }
        } catch {
            release()
            throw error
        }
    }

    func release() {
        for p in ids.values { glDeleteProgram(p) }
        ids = [:]
        cavlcTables.release()
    }

    deinit { precondition(ids.isEmpty, "H264Programs released without release()") }

    /// `body` with each `#include "NAME"` line (GLSL ES has none) replaced by
    /// the shader source NAME: code shared by some passes, placed where the
    /// pass's declarations it reads come before it.
    static func included(_ body: String, in file: String) throws(GPUError) -> String {
        var out: [Substring] = []
        for line in body.split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("#include \""), line.hasSuffix("\"") else { out.append(line); continue }
            let name = String(line.dropFirst("#include \"".count).dropLast())
            guard let text = ShaderLibrary.source(named: name) else { throw .encode("shader \(name), which \(file) includes, is missing from the build") }
            out.append(Substring(text))
        }
        return out.joined(separator: "\n")
    }

    /// The binding points of `program`'s active shader storage blocks (those the linker kept).
    static func storageBindings(_ program: GLuint) -> [GLuint] {
        var count: GLint = 0
        glGetProgramInterfaceiv(program, GLenum(GL_SHADER_STORAGE_BLOCK), GLenum(GL_ACTIVE_RESOURCES), &count)
        var property = GLenum(GL_BUFFER_BINDING)
        return (0..<GLuint(max(0, count))).map { i in
            var binding: GLint = 0
            glGetProgramResourceiv(program, GLenum(GL_SHADER_STORAGE_BLOCK), i, 1, &property, 1, nil, &binding)
            return GLuint(binding)
        }.sorted()
    }

    private static func build(_ pass: Pass) throws(GPUError) -> GLuint {
        let (file, defines): (String, String) = switch pass {
        case .intra: ("h264mb.comp", "#define INTRA 1\n")
        case .intraWalk: ("h264mb.comp", "#define INTRA 1\n#define INTRA_WALK 1\n")
        case .search: ("h264mb.comp", "#define INTER 1\n#define SEARCH 1\n")
        case .interpolate: ("h264interp.comp", "")
        case .refine: ("h264mb.comp", "#define INTER 1\n#define SEARCH 1\n#define REFINE 1\n")
        case .subpel: ("h264mb.comp", "#define INTER 1\n#define SEARCH 1\n#define SUBPEL 1\n")
        case .choose: ("h264mb.comp", "#define INTER 1\n#define SEARCH 1\n#define CHOOSE 1\n#define CHOICE_ROUNDS \(H264ComputeEncoder.choiceRounds)\n")
        case .inter: ("h264mb.comp", "#define INTER 1\n")
        case .intraP: ("h264mb.comp", "#define PINTRA 1\n")
        case .probeGuess: ("h264deblock.comp", "#define PROBE_GUESS 1\n")
        case .probe: ("h264deblock.comp", "#define PROBE_ROUND 1\n")
        case .deblock: ("h264deblock.comp", "")
        case .finish: ("h264finish.comp", "")
        case .cavlc: ("h264cavlc.comp", H264CAVLCTables.defines)
        case .scan: ("h264pack.comp", "#define SCAN 1\n")
        case .gather: ("h264pack.comp", "")
        }
        guard let common = ShaderLibrary.source(named: "h264common.glsl"), let body = ShaderLibrary.source(named: file) else {
            throw .encode("shader \(file) is missing from the build")
        }
        // The pass's own `#version` line first, then the variant's defines and the shared code.
        var lines = body.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let version = lines.first.map(String.init) ?? "#version 310 es"
        lines.removeFirst()
        let source = version + "\n" + defines + "#define MAX_SLICES \(GPUH264Settings.maxSlices)\n"
            + "#define SLOT_WORDS \(H264ComputeEncoder.slotWords)\n" + common + "\n" + (try included(lines.first.map(String.init) ?? "", in: file))
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

}

/// One GL fence after a batch of encoded pictures, shared by their result
/// slots; deleted when the last slot lets go. Render thread only.
final class BatchFence {
    private var sync: GLsync?
    private var signalled = false

    init() { sync = glFenceSync(GLenum(GL_SYNC_GPU_COMMANDS_COMPLETE), 0) }

    var isSignalled: Bool {
        guard !signalled, let sync else { return true }
        let r = glClientWaitSync(sync, 0, 0)
        signalled = r == GLenum(GL_ALREADY_SIGNALED) || r == GLenum(GL_CONDITION_SATISFIED)
        return signalled
    }

    func wait() {
        guard !signalled, let sync else { return }
        _ = glClientWaitSync(sync, GLbitfield(GL_SYNC_FLUSH_COMMANDS_BIT), UInt64.max)
        signalled = true
    }

    deinit { if let sync { glDeleteSync(sync) } }
}
