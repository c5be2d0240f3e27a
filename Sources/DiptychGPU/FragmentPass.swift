import CGLES
import DiptychCore

/// The fragment path (OpenGL ES 3.0): one quad per draw into the output's
/// RGBA target (composite.frag, blended premultiplied), then a full-target
/// pass packing Y and UV into the output's packed NV12 texture (nv12.frag),
/// read back with glReadPixels. Also draws a packed NV12 picture as RGB
/// (nv12unpack.frag) for the direct-copy path. Render thread only.
final class FragmentPass {
    private var vao: GLuint = 0

    init() { glGenVertexArrays(1, &vao) }

    /// The draws with their programs (compiled first, so a compile error leaves no pass open).
    static func work(_ draws: [(DrawDescription, StreamPicture)], shaders: ShaderCache) throws(GPUError) -> [(DrawDescription, StreamPicture, ShaderProgram)] {
        var work: [(DrawDescription, StreamPicture, ShaderProgram)] = []
        for (d, set) in draws {
            let masked = set.input != .overlay && (d.cornerRadius > 0 || d.borderWidth > 0)
            work.append((d, set, try shaders.program(.composite(set.input, masked: masked))))
        }
        return work
    }

    /// Clears the RGBA target to the background and draws every draw into it.
    func composite(_ work: [(DrawDescription, StreamPicture, ShaderProgram)], out: Output, background bg: RGBAColor,
                   timer: PassTimer, serial: UInt64) {
        glBindFramebuffer(GL.framebuffer, out.target.fbo)
        glViewport(0, 0, GLsizei(out.canvas.width), GLsizei(out.canvas.height))
        glDisable(GL.scissorTest); glDisable(GL.depthTest); glDisable(GL.cullFace); glDisable(GL.dither)
        glClearColor(GLfloat(bg.r * bg.a), GLfloat(bg.g * bg.a), GLfloat(bg.b * bg.a), GLfloat(bg.a))
        // Begun after the bind and clear: llvmpipe times the bound framebuffer's scene.
        timer.begin(.composite)
        glClear(GL.colorBufferBit)
        glEnable(GL.blend)
        glBlendFunc(GL.one, GL.oneMinusSrcAlpha)
        drawAll(work, canvas: out.canvas, serial: serial)
        glDisable(GL.blend)
        timer.end(.composite)
    }

    /// The draws of a composite pass, each with all of its own uniforms.
    func drawAll(_ work: [(DrawDescription, StreamPicture, ShaderProgram)], canvas: PixelSize, serial: UInt64) {
        let W = canvas.width, H = canvas.height
        glBindVertexArray(vao)
        for (d, set, prog) in work {
            glUseProgram(prog.id)
            // Every draw sets all of its own uniforms (no shared buffer).
            let r = d.destination
            glUniform4f(prog.uniform("u_dest"), GLfloat(r.x), GLfloat(r.y), GLfloat(r.width), GLfloat(r.height))
            glUniform2f(prog.uniform("u_canvas"), GLfloat(W), GLfloat(H))
            DrawSampling.texFromLocal(crop: d.crop, orientation: d.orientation).withUnsafeBufferPointer {
                glUniformMatrix3x2fv(prog.uniform("u_texFromLocal"), 1, GL.noTranspose, $0.baseAddress)
            }
            glUniform1f(prog.uniform("u_opacity"), GLfloat(min(max(d.opacity, 0), 1)))
            if set.input == .nv12 || set.input == .i420 {
                let c = YUVCoefficients(matrix: set.matrix, range: set.range)
                YUVCoefficients.columnMajor(c.yuvToRGB).withUnsafeBufferPointer {
                    glUniformMatrix3fv(prog.uniform("u_yuvToRgb"), 1, GL.noTranspose, $0.baseAddress)
                }
                glUniform3f(prog.uniform("u_yuvOffset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
            }
            if prog.key.masked {
                glUniform1f(prog.uniform("u_radius"), GLfloat(max(d.cornerRadius, 0)))
                glUniform1f(prog.uniform("u_border"), GLfloat(max(d.borderWidth, 0)))
                let b = d.borderColor
                glUniform4f(prog.uniform("u_borderColor"), GLfloat(b.r), GLfloat(b.g), GLfloat(b.b), GLfloat(b.a))
            }
            let filter = DrawSampling.isUnitScale(d, textureWidth: set.width, textureHeight: set.height) ? GL.nearest : GL.linear
            let target = set.input == .external ? GL.textureExternalOES : GL.texture2D
            for (unit, tex) in set.textures.enumerated() {
                glActiveTexture(GL.texture0 + GLenum(unit))
                glBindTexture(target, tex)
                glTexParameteri(target, GL.textureMinFilter, filter)
                glTexParameteri(target, GL.textureMagFilter, filter)
                glUniform1i(prog.uniform("u_tex\(unit)"), GLint(unit))
            }
            glDrawArrays(GL.triangleStrip, 0, 4)
            set.lastUse = serial
        }
        glActiveTexture(GL.texture0)
    }

    /// Binds the NV12 pack program with the output's conversion.
    func useNV12Pack(_ program: ShaderProgram, _ out: Output) {
        glUseProgram(program.id)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, out.target.texture)
        glUniform1i(program.uniform("u_src"), 0)
        glUniform2i(program.uniform("u_size"), GLint(out.canvas.width), GLint(out.canvas.height))
        let c = YUVCoefficients(matrix: out.matrix, range: out.range)
        let m = c.rgbToYUV
        glUniform3f(program.uniform("u_yCoef"), GLfloat(m[0][0]), GLfloat(m[0][1]), GLfloat(m[0][2]))
        glUniform3f(program.uniform("u_uCoef"), GLfloat(m[1][0]), GLfloat(m[1][1]), GLfloat(m[1][2]))
        glUniform3f(program.uniform("u_vCoef"), GLfloat(m[2][0]), GLfloat(m[2][1]), GLfloat(m[2][2]))
        glUniform3f(program.uniform("u_offset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
        glBindVertexArray(vao)
    }

    /// Converts the whole RGBA target into the packed NV12 texture and reads it
    /// into the pack buffer bound to GL_PIXEL_PACK_BUFFER.
    func convertAndRead(_ program: ShaderProgram, out: Output, nv12: ColorTarget, timer: PassTimer) {
        glBindFramebuffer(GL.framebuffer, nv12.fbo)
        glViewport(0, 0, GLsizei(nv12.width), GLsizei(nv12.height))
        timer.begin(.nv12)
        useNV12Pack(program, out)
        glDrawArrays(GL.triangles, 0, 3)
        glPixelStorei(GL.packAlignment, 4)
        glReadPixels(0, 0, GLsizei(nv12.width), GLsizei(nv12.height), GL.rgba, GL.unsignedByte, nil) // offset 0 into the bound pack buffer
        timer.end(.nv12)
        glBindFramebuffer(GL.framebuffer, 0)
    }

    /// Draws the packed NV12 texture as RGB into the bound framebuffer
    /// (full canvas; the scissor, if any, limits it).
    func drawNV12Picture(_ program: ShaderProgram, _ out: Output, nv12: ColorTarget) {
        glUseProgram(program.id)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, nv12.texture)
        glUniform1i(program.uniform("u_src"), 0)
        glUniform1i(program.uniform("u_height"), GLint(out.canvas.height))
        let c = YUVCoefficients(matrix: out.matrix, range: out.range)
        YUVCoefficients.columnMajor(c.yuvToRGB).withUnsafeBufferPointer {
            glUniformMatrix3fv(program.uniform("u_yuvToRgb"), 1, GL.noTranspose, $0.baseAddress)
        }
        glUniform3f(program.uniform("u_yuvOffset"), GLfloat(c.offset[0]), GLfloat(c.offset[1]), GLfloat(c.offset[2]))
        glBindVertexArray(vao)
        glDrawArrays(GL.triangles, 0, 3)
    }

    func release() { glDeleteVertexArrays(1, &vao) }
}
