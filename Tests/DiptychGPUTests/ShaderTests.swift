import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

extension GPU {
    @Suite struct Shaders {
        @Test func everyShaderFileHasVersionAndPrecisionGuard() {
            for (name, src) in ShaderLibrary.sources {
                // Shared code (.glsl) goes after a pass's own #version line.
                if name.hasSuffix(".glsl") { #expect(!src.contains("#version"), "\(name)"); continue }
                #expect(src.hasPrefix(name.hasSuffix(".comp") ? "#version 310 es" : "#version 300 es"), "\(name)")
                if name.hasSuffix(".frag") { #expect(src.contains("#ifdef GL_FRAGMENT_PRECISION_HIGH"), "\(name)") }
            }
        }

        @Test func everyVariantCompilesAndLinks() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let caps = c.info.capabilities
            let keys = ShaderKey.all(external: caps.eglImageExternal, compute: caps.computeShaders)
            #expect(caps.computeShaders, "llvmpipe offers OpenGL ES 3.2")
            // nv12Pack, nv12Unpack, nv12Luma, nv12Chroma, composite × inputs × masked (overlays unmasked only), compute × (NV12, RGBA, both).
            #expect(keys.count == (caps.eglImageExternal ? 13 : 11) + 3)
            try c.withRenderer { r throws(GPUError) in
                for k in keys { _ = try r.shaders.program(k) }
                #expect(r.shaders.count == keys.count)
                // Cached by key: asking again builds nothing new.
                let p = try r.shaders.program(.composite(.nv12, masked: true))
                #expect(try r.shaders.program(.composite(.nv12, masked: true)) === p)
                #expect(r.shaders.count == keys.count)
            }
        }

        @Test func preludeDefinesTheVariant() {
            let src = ShaderCache.source(file: "composite.frag", prelude: ShaderKey.composite(.i420, masked: true).prelude)
            let lines = src.split(separator: "\n").map(String.init)
            #expect(lines[0] == "#version 300 es")
            #expect(lines[1] == "#define INPUT_I420 1")
            #expect(lines[2] == "#define MASKED 1")
        }

        @Test func compileFailureGivesLogAndNumberedSource() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let bad = "#version 300 es\nprecision mediump float;\nout vec4 o;\nvoid main() { o = vec4(undefined_thing); }\n"
            try c.withRenderer { _ throws(GPUError) in
                do throws(GPUError) {
                    _ = try ShaderCache.compile(GL.fragmentShader, name: "broken.frag", source: bad)
                    Issue.record("compiled a broken shader")
                } catch {
                    guard case .shaderCompile(let name, let log, let numbered) = error else { Issue.record("\(error)"); return }
                    #expect(name == "broken.frag")
                    #expect(log.contains("undefined_thing"))
                    #expect(numbered.contains("   1: #version 300 es"))
                    #expect(numbered.contains("   4: void main()"))
                }
                #expect(glGetError() == 0)
            }
        }
    }

    @Suite struct DmaBuf {
        @Test func importNeedsTheExtension() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let frame = DmaBufFrame(width: 16, height: 16, fourcc: DmaBufFrame.nv12,
                                    planes: [.init(fd: 0, stride: 16), .init(fd: 0, offset: 256, stride: 16)])
            if !c.info.capabilities.dmaBufImport {
                #expect(throws: GPUError.unsupported("EGL_EXT_image_dma_buf_import")) { try c.upload(frame, role: .primary) }
            }
            #expect(throws: GPUError.badFrame("dma-buf plane 0 fd -1 is invalid")) {
                try c.upload(DmaBufFrame(width: 16, height: 16, fourcc: DmaBufFrame.abgr8888, planes: [.init(fd: -1, stride: 64)]), role: .primary)
            }
            #expect(try glErrorNow(c) == 0)
        }

        /// The software GPU's dma-buf capabilities, read once.
        static let dmaBuf: (export: Bool, import: Bool) = {
            guard let c = try? makeCompositor() else { return (false, false) }
            defer { c.shutdown() }
            return (c.info.capabilities.dmaBufExport, c.info.capabilities.dmaBufImport)
        }()

        /// The output as one picture of 40, 80, 120 on a 16x16 canvas.
        private func renderedOutput(_ c: GPUCompositor) throws -> OutputID {
            let canvas = PixelSize(width: 16, height: 16)
            let out = try c.addOutput(canvas: canvas)
            try c.upload(solidFrame(16, 16, RGBA8(r: 40, g: 80, b: 120)), role: .primary)
            try c.render(output: out, plan: CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas))]), pts: .zero, readback: false)
            return out
        }

        @Test(.enabled(if: !dmaBuf.export, "needs a GPU without dma-buf export (this one exports)"))
        func exportIsRefusedWhereNotOffered() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let out = try renderedOutput(c)
            #expect(throws: GPUError.unsupported("EGL_MESA_image_dma_buf_export")) { try c.exportDmaBuf(output: out) }
        }

        @Test(.enabled(if: dmaBuf.export && dmaBuf.import, "needs a GPU that exports and imports dma-bufs"))
        func exportRoundTripsWhereOffered() throws {
            let c = try makeCompositor()
            defer { c.shutdown() }
            let canvas = PixelSize(width: 16, height: 16)
            let out = try renderedOutput(c)
            let exported = try c.exportDmaBuf(output: out)
            defer { for p in exported.planes { close(p.fd) } }
            #expect(exported.width == 16 && !exported.planes.isEmpty)
            // Import it back as the secondary stream and draw it.
            try c.upload(DmaBufFrame(width: 16, height: 16, fourcc: exported.fourcc, modifier: exported.modifier,
                                     planes: exported.planes), role: .secondary)
            let img = try renderPreview(c, out, CompositionPlan(canvas: canvas, draws: [
                DrawDescription(role: .secondary, destination: PixelRect(size: canvas))]))
            #expect(img.rgba(8, 8).close(to: RGBA8(r: 40, g: 80, b: 120), within: 1))
        }

        @Test func fourccCodes() {
            #expect(DmaBufFrame.nv12 == 0x3231_564e)
            #expect(DmaBufFrame.fourccName(DmaBufFrame.abgr8888) == "AB24")
        }
    }
}
