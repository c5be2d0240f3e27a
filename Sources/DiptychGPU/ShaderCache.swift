import CGLES
import DiptychCore

/// A program variant: which program, and the `#define`s rendered into its prelude.
/// Small and hashable; programs are cached by it.
struct ShaderKey: Hashable, Sendable, CustomStringConvertible {
    enum Program: String, Hashable, Sendable, CaseIterable { case composite, nv12Pack, nv12Unpack, compute, nv12Luma, nv12Chroma }
    /// `overlay`: a premultiplied RGBA overlay picture, drawn with its own alpha.
    enum Input: String, Hashable, Sendable, CaseIterable { case rgb, nv12, i420, external, overlay }
    var program: Program
    var input: Input = .rgb
    var masked: Bool = false
    /// Compute variants: which targets the pass writes, and the kind of each
    /// draw (`DRAW(i, source, input, nearest, masked)` per draw, in order).
    var writesNV12 = false
    var writesRGBA = false
    var drawList = ""
    /// A draw reads its NV12 picture from a buffer (input 3 in `drawList`).
    var picturesInPlace = false

    static func composite(_ input: Input, masked: Bool) -> ShaderKey { ShaderKey(program: .composite, input: input, masked: masked) }
    static let nv12Pack = ShaderKey(program: .nv12Pack)
    static let nv12Unpack = ShaderKey(program: .nv12Unpack)
    /// The planes of an encoder target (`EncoderTargetPass`).
    static let nv12Luma = ShaderKey(program: .nv12Luma)
    static let nv12Chroma = ShaderKey(program: .nv12Chroma)
    static func compute(nv12: Bool, rgba: Bool, drawList: String = "", inPlace: Bool = false) -> ShaderKey {
        ShaderKey(program: .compute, writesNV12: nv12, writesRGBA: rgba, drawList: drawList, picturesInPlace: inPlace)
    }

    var vertexFile: String { program == .composite ? "quad.vert" : "fullscreen.vert" }
    var fragmentFile: String {
        switch program {
        case .composite: "composite.frag"
        case .nv12Pack: "nv12.frag"
        case .nv12Unpack: "nv12unpack.frag"
        case .compute: "composite.comp"
        case .nv12Luma, .nv12Chroma: "nv12planes.frag"
        }
    }

    /// The `#define` lines inserted after `#version`.
    var prelude: String {
        switch program {
        case .composite:
            var s = ""
            if input == .external { s += "#extension GL_OES_EGL_image_external_essl3 : require\n" }
            s += "#define INPUT_\(input.rawValue.uppercased()) 1\n"
            if masked { s += "#define MASKED 1\n" }
            return s
        case .compute:
            return (writesNV12 ? "#define WRITE_NV12 1\n" : "") + (writesRGBA ? "#define WRITE_RGBA 1\n" : "")
                + (picturesInPlace ? "#define PICTURES_IN_PLACE 1\n" : "")
                + (drawList.isEmpty ? "" : "#define DRAW_LIST \(drawList)\n")
        case .nv12Chroma:
            return "#define CHROMA 1\n"
        case .nv12Pack, .nv12Unpack, .nv12Luma:
            return ""
        }
    }

    /// Every variant; `external` only where GL_OES_EGL_image_external_essl3
    /// exists, compute only on OpenGL ES 3.1.
    static func all(external: Bool, compute: Bool = false) -> [ShaderKey] {
        var keys = [nv12Pack, nv12Unpack, nv12Luma, nv12Chroma]
        for input in Input.allCases where input != .external || external {
            // Overlays have no mask.
            for masked in [false, true] where !(masked && input == .overlay) { keys.append(.composite(input, masked: masked)) }
        }
        if compute { keys += [.compute(nv12: true, rgba: false), .compute(nv12: false, rgba: true), .compute(nv12: true, rgba: true)] }
        return keys
    }

    var description: String {
        switch program {
        case .composite: "composite[\(input.rawValue)\(masked ? ",masked" : "")]"
        case .compute: "compute[\([writesNV12 ? "nv12" : nil, writesRGBA ? "rgba" : nil].compactMap { $0 }.joined(separator: ","))]\(drawList)"
        case .nv12Pack, .nv12Unpack, .nv12Luma, .nv12Chroma: program.rawValue
        }
    }
}

/// A linked program and its uniform locations (looked up once).
final class ShaderProgram {
    let id: GLuint
    let key: ShaderKey
    private var locations: [String: GLint] = [:]
    init(id: GLuint, key: ShaderKey) { self.id = id; self.key = key }
    func uniform(_ name: String) -> GLint {
        if let l = locations[name] { return l }
        let l = glGetUniformLocation(id, name)
        locations[name] = l
        return l
    }
}

/// Compiles programs on demand and caches them by key. Render thread only.
final class ShaderCache {
    private var programs: [ShaderKey: ShaderProgram] = [:]
    var count: Int { programs.count }

    func program(_ key: ShaderKey) throws(GPUError) -> ShaderProgram {
        if let p = programs[key] { return p }
        let p = try ShaderCache.build(key)
        programs[key] = p
        return p
    }

    /// Deletes every program (render thread, context current).
    func deleteAll() {
        for p in programs.values { glDeleteProgram(p.id) }
        programs.removeAll()
    }

    /// The file's source with the key's prelude after its `#version` line.
    static func source(file: String, prelude: String) -> String {
        guard let text = ShaderLibrary.source(named: file) else { preconditionFailure("shader \(file) is not embedded") }
        guard !prelude.isEmpty else { return text }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let v = lines.firstIndex { $0.hasPrefix("#version") } ?? -1
        lines.insert(prelude.hasSuffix("\n") ? String(prelude.dropLast()) : prelude, at: v + 1)
        return lines.joined(separator: "\n")
    }

    static func numbered(_ source: String) -> String {
        source.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            .map { String(format4($0.offset + 1)) + ": " + $0.element }.joined(separator: "\n")
    }
    private static func format4(_ n: Int) -> String { let s = String(n); return String(repeating: " ", count: max(0, 4 - s.count)) + s }

    static func compile(_ type: GLenum, name: String, source: String) throws(GPUError) -> GLuint {
        let shader = glCreateShader(type)
        source.withCString { p in
            var ptr: UnsafePointer<GLchar>? = p
            glShaderSource(shader, 1, &ptr, nil)
        }
        glCompileShader(shader)
        var ok: GLint = 0
        glGetShaderiv(shader, GL.compileStatus, &ok)
        if ok == 0 {
            var len: GLint = 0
            glGetShaderiv(shader, GL.infoLogLength, &len)
            var buf = [GLchar](repeating: 0, count: Int(max(len, 1)) + 1)
            glGetShaderInfoLog(shader, GLsizei(buf.count), nil, &buf)
            glDeleteShader(shader)
            throw .shaderCompile(name: name, log: cLogString(buf), numberedSource: numbered(source))
        }
        return shader
    }

    static func build(_ key: ShaderKey) throws(GPUError) -> ShaderProgram {
        let main = source(file: key.fragmentFile, prelude: key.prelude)
        let name = "\(key.fragmentFile) \(key)"
        var shaders: [GLuint] = []
        defer { for s in shaders { glDeleteShader(s) } }
        if key.program == .compute {
            shaders.append(try compile(GL.computeShader, name: name, source: main))
        } else {
            shaders.append(try compile(GL.vertexShader, name: key.vertexFile, source: source(file: key.vertexFile, prelude: "")))
            shaders.append(try compile(GL.fragmentShader, name: name, source: main))
        }
        let prog = glCreateProgram()
        for s in shaders { glAttachShader(prog, s) }
        glLinkProgram(prog)
        var ok: GLint = 0
        glGetProgramiv(prog, GL.linkStatus, &ok)
        if ok == 0 {
            var len: GLint = 0
            glGetProgramiv(prog, GL.infoLogLength, &len)
            var buf = [GLchar](repeating: 0, count: Int(max(len, 1)) + 1)
            glGetProgramInfoLog(prog, GLsizei(buf.count), nil, &buf)
            glDeleteProgram(prog)
            throw .shaderCompile(name: "link \(key)", log: cLogString(buf), numberedSource: numbered(main))
        }
        return ShaderProgram(id: prog, key: key)
    }
}

func cLogString(_ buf: [GLchar]) -> String {
    String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
