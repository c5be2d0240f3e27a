import Foundation
import Testing
@testable import Diptych
import DiptychText
import DiptychGPU

/// The font shipped with the tests (DejaVu Sans, Tests/Fixtures/Fonts).
private let font = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/Fonts/DejaVuSans.ttf").path

/// Text overlays in a take (docs/record.md, "Text"): the template expanded
/// from the take's clock every frame and drawn where the renderer puts it;
/// bad input refused with one line naming it, exit 2 on the command line.
@Suite(.serialized, .enabled(if: TextSupport.unavailableReason == nil, "needs libfreetype.so.6 and libharfbuzz.so.0 (Debian: libfreetype6, libharfbuzz0b)"))
struct TextOverlayTakeTests {
    /// Each output frame shows its own timecode and frame number at 30 fps:
    /// inside the text's opaque box every pixel is the renderer's picture of
    /// the expected text (within ±1), on a faster-than-real-time embedded take.
    @Test func eachFrameShowsItsTimecode() throws {
        var c = EmbeddedConfiguration(canvas: PixelSize(width: 320, height: 180), frameRate: FrameRate(30))
        c.gpu = "software"
        c.preset = "ultrafast"
        let text = TextOverlay(text: "{timecode} #{frame}", x: 0.05, y: 0.1, size: 20, color: .white, font: font,
                               outlineWidth: 1, box: RGBAColor(r: 0.1, g: 0.2, b: 0.6), boxPadding: 4)
        c.take.texts = [text]
        let got = Collected()
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { got.add(rgba: $0) }))
        for i in 0..<5 {
            let pts = MediaTime(value: Int64(i), timescale: 30)
            try s.push(solidFrame(320, 180, (0, 0, 255), pts: pts), to: .secondary)
            try s.push(solidFrame(320, 180, (255, 0, 0), pts: pts), to: .primary)
        }
        _ = try s.finish()
        let frames = got.rgba
        #expect(frames.count == 5)
        let renderer = try TextRenderer(font: try FontFile(path: font), overlay: text)
        for (i, f) in frames.enumerated() {
            let want = try #require(try renderer.render("00:00:00:0\(i) #\(i)", canvas: c.canvas))
            let d = want.destination
            let px = want.image.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self)
            var worst = (0, "-")
            for y in 0..<d.height {
                for x in 0..<d.width where px[4 * (y * d.width + x) + 3] == 255 {   // the opaque box and what is on it
                    let o = 4 * (y * d.width + x)
                    let g = pixel(f, d.x + x, d.y + y)
                    let e = max(abs(g.0 - Int(px[o])), abs(g.1 - Int(px[o + 1])), abs(g.2 - Int(px[o + 2])))
                    if e > worst.0 { worst = (e, "(\(x), \(y)) \(g)") }
                }
            }
            #expect(worst.0 <= 1, "frame \(i): \(worst.1)")
        }
        // Frames 1 and 2 differ where their digits do.
        #expect(frames.count == 5 && pixelsDiffer(frames[1], frames[2]))
    }

    /// Over three seconds at 30 fps, a constant text is set once, `{time}`
    /// once a second of the wall clock and `{timecode}` every frame; a text
    /// that runs off the canvas is cut, not squeezed.
    @Test func setAgainOnlyWhenTheTextChanges() throws {
        let gpu = try GPUStage(makeCompositor: { () throws(GPUError) -> GPUCompositor in try GPUCompositor(selection: .software) }, warn: { _ in })
        defer { gpu.shutdown() }
        let texts = TakeTexts(fonts: [font: try FontFile(path: font)], take: "t")
        try texts.set([TextOverlay(text: "Camera 2", x: 0.1, y: 0.1, font: font), TextOverlay(text: "{time}", x: 0.5, y: 0.1, font: font),
                       TextOverlay(text: "{timecode}", x: 0.1, y: 0.5, font: font), TextOverlay(text: "{frame}", x: 0.95, y: 0.5, size: 100, font: font)],
                      output: 0, gpu: gpu)
        let rate = FrameRate(30), canvas = PixelSize(width: 320, height: 180)
        var last: [DrawDescription] = []
        for n in Int64(0)..<90 {
            let clock = TextClock(time: rate.time(ofFrame: n), rate: rate, wallClock: 1_000_000 + Double(n) / 30, take: "t")
            last = try texts.draws(output: 0, clock: clock, canvas: canvas, order: 2, gpu: gpu, warn: { Issue.record("\($0)") })
        }
        #expect(texts.setCounts(output: 0) == [1, 3, 90, 90])
        #expect(last.count == 4 && last.map(\.zIndex) == [1002, 1003, 1004, 1005])
        #expect(last.allSatisfy { $0.overlay! >= TakeTexts.firstID && $0.destination.maxX <= 320 && $0.destination.maxY <= 180 })
        // "89" at 100 pixels from x 304 runs off the right edge: cut there, one pixel a texel.
        #expect(last.count == 4 && last[3].destination.maxX == 320 && last[3].destination.x >= 304, "\(last.map(\.destination))")
    }

    /// A lost GPU context is rebuilt with the texts' pictures uploaded
    /// again: a constant text (never set again) shows on every frame.
    @Test func textsSurviveARebuiltContext() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4")
        let config = try takeConfig(secondary: "none", out: out, duration: 1,
                                    extra: ["--text", "X@0,0,40,color=00FF00,box=00FF00:16,font=\(font)"])
        let session = RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, simulateContextLossAtFrames: [20, 41]))
        let summary = try session.run()
        #expect(summary.gpuRebuilds == 2 && summary.frames == 60)
        let frames = try decodeAll(out).frames
        #expect(frames.count == 60)
        #expect(frames.allSatisfy { hue($0.frame, 8, 8) == .green }, "\(frames.map { hue($0.frame, 8, 8) })")
    }

    private func pixelsDiffer(_ a: VideoFrame, _ b: VideoFrame) -> Bool {
        for y in stride(from: 0, to: 60, by: 1) { for x in 0..<200 where !near(pixel(a, x, y), pixel(b, x, y), 8) { return true } }
        return false
    }

    /// A font that cannot be read, and a template's unknown field, refuse the
    /// take before it starts (exit 2, one line naming the input).
    @Test func badInputExitsTwoNamingIt() throws {
        let dir = Scratch(); defer { dir.remove() }
        let base = ["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--duration", "1", "--out", dir.path("t.mp4")]
        let missing = try runCLI(base + ["--text", "hello@0.1,0.1,24,font=/no/such/font.ttf"], in: dir.url.path)
        #expect(missing.status == 2, "\(missing.stderr)")
        #expect(missing.stderr.contains("texts[0].font '/no/such/font.ttf': cannot be read (No such file or directory)"), "\(missing.stderr)")
        let field = try runCLI(base + ["--text", "{clock}@0.1,0.1"], in: dir.url.path)
        #expect(field.status == 2)
        #expect(field.stderr.contains("--text '{clock}': unknown field {clock}"), "\(field.stderr)")
        let notFont = dir.path("notes.ttf")
        try Data("plain text".utf8).write(to: URL(fileURLWithPath: notFont))
        let junk = try runCLI(base + ["--text", "x@0,0,font=\(notFont)"], in: dir.url.path)
        #expect(junk.status == 2)
        #expect(junk.stderr.contains("is not a font FreeType reads"), "\(junk.stderr)")
        for r in [missing, field, junk] {
            #expect(r.stderr.split(separator: "\n").filter { $0.contains("texts") || $0.contains("--text") }.count == 1, "\(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("t.mp4")))
        // A font is a file the take reads: no output may write over it.
        try FileManager.default.copyItem(atPath: font, toPath: dir.path("f.ttf"))
        let over = try runCLI(["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--duration", "1",
                               "--text", "x@0,0,font=f.ttf", "--out", dir.path("f.ttf"), "--format", "mp4"], in: dir.url.path)
        #expect(over.status == 2 && over.stderr.contains("is also an input"), "\(over.stderr)")
        #expect(FileManager.default.contentsEqual(atPath: font, andPath: dir.path("f.ttf")))
    }

    /// A command-line take with a text writes its file (the text drawn on
    /// every frame through the encoder path).
    @Test func recordWithATextWritesItsFile() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:smpte:320x240@30", "--secondary", "none", "--duration", "1", "--out", dir.path("t.mp4"),
                            "--text", "{timecode}@0.05,0.8,24,box=00000080,font=\(font)", "--preview", dir.path("p.png")], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.path("t.mp4")))
    }
}
