import Foundation
import Testing
import DiptychCore
import DiptychMedia

/// The font shipped with the tests (DejaVu Sans, Tests/Fixtures/Fonts).
private let font = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/Fonts/DejaVuSans.ttf").path

/// Text overlays on a server (docs/server.md; docs/record.md, "Text"): a
/// font is an input (400 naming it), and a PATCH of `texts` or `overlays`
/// takes effect at one frame boundary.
@Suite(.serialized) struct ServeTextTests {
    /// A green box appears with a PATCH: every frame before one frame is
    /// the red primary there, every frame from it on green; bad texts are 400.
    @Test func patchChangesTextsAtOneFrame() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:solid-ff0000:320x180@30", "secondary": "none", "out": "texts.mp4", "preset": "ultrafast", "audio": "none",
            "texts": [["text": "{frame}", "x": 0.5, "y": 0.5, "size": 20, "font": font]]]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 30 }

        let missing = try server.request("PATCH", "/v1/takes/\(id)", json(["texts": [["text": "a", "x": 0, "y": 0, "font": "/no/such/font.ttf"]]]))
        #expect(missing.status == 400 && missing.error.contains("texts[0].font") && missing.error.contains("cannot be read"), "\(missing.text)")
        let field = try server.request("PATCH", "/v1/takes/\(id)", json(["texts": [["text": "{clock}", "x": 0, "y": 0]]]))
        #expect(field.status == 400 && field.error.contains("texts[0].text") && field.error.contains("unknown field {clock}"), "\(field.text)")

        let before = frames(try server.take(id))
        let box: [String: Any] = ["text": "X", "x": 0, "y": 0, "size": 40, "font": font, "color": "00FF00", "box": ["color": "00FF00", "padding": 20]]
        let patched = try server.request("PATCH", "/v1/takes/\(id)", json(["texts": [box]]))
        #expect(patched.status == 200, "\(patched.text)")
        // The take's view shows the texts as they are now.
        let shown = try #require((try server.take(id)["configuration"] as? [String: Any])?["texts"] as? [[String: Any]])
        #expect(shown.count == 1 && shown.first?["text"] as? String == "X", "\(shown)")
        let after = try server.waitForTake(id) { frames($0) >= before + 30 }
        let deleted = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(deleted.status == 200, "\(deleted.text)")

        let decoded = try decodeAll(dir.path("texts.mp4"))
        let corner = decoded.map { hue($0, 12, 12) }
        let first = try #require(corner.firstIndex(of: .green), "the text never showed")
        #expect(corner[..<first].allSatisfy { $0 == .red })
        #expect(corner[first...].allSatisfy { $0 == .green })
        #expect(first >= before && first <= frames(after), "shown from \(first), PATCH between \(before) and \(frames(after))")
    }

    /// A PATCH of `overlays` removes the take's image at one frame: every
    /// frame before it shows the green image in the corner, every frame from
    /// it the red primary; an image the take did not read, or more than
    /// eight overlays with the texts, is 400.
    @Test func patchChangesImageOverlaysAtOneFrame() throws {
        let dir = Scratch(); defer { dir.remove() }
        let storage = FrameStorage(zeroedCount: 8 * 8 * 4)
        let p = storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        for i in 0..<64 { p[4 * i + 1] = 255; p[4 * i + 3] = 255 }
        try PNGWriter.write(VideoFrame(width: 8, height: 8, format: .rgba, planes: [FramePlane(storage: storage, stride: 32)], pts: .zero),
                            to: dir.path("green.png"))
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let logo: [String: Any] = ["image": dir.path("green.png"), "rect": ["x": 0, "y": 0, "width": 0.25, "height": 0.25]]
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:solid-ff0000:320x180@30", "secondary": "none", "out": "images.mp4", "preset": "ultrafast", "audio": "none",
            "overlays": [logo], "texts": [["text": "{frame}", "x": 0.5, "y": 0.5, "size": 20, "font": font]]]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 30 }

        let unread = try server.request("PATCH", "/v1/takes/\(id)", json(["overlays": [["image": dir.path("other.png"), "rect": logo["rect"]!]]]))
        #expect(unread.status == 400 && unread.error.contains("overlays[0].image") && unread.error.contains("read when it started"), "\(unread.text)")
        let many = try server.request("PATCH", "/v1/takes/\(id)", json(["overlays": Array(repeating: logo, count: 8)]))
        #expect(many.status == 400 && many.error.contains("at most 8"), "\(many.text)")

        let before = frames(try server.take(id))
        let patched = try server.request("PATCH", "/v1/takes/\(id)", json(["overlays": [Any]()]))
        #expect(patched.status == 200, "\(patched.text)")
        let configuration = try #require(try server.take(id)["configuration"] as? [String: Any])
        #expect((configuration["overlays"] as? [Any] ?? []).isEmpty && (configuration["texts"] as? [Any])?.count == 1, "\(configuration)")
        let after = try server.waitForTake(id) { frames($0) >= before + 30 }
        #expect(try server.request("DELETE", "/v1/takes/\(id)").status == 200)

        let corner = try decodeAll(dir.path("images.mp4")).map { hue($0, 12, 12) }
        let first = try #require(corner.firstIndex(of: .red), "the image never went")
        #expect(first > 0 && corner[..<first].allSatisfy { $0 == .green })
        #expect(corner[first...].allSatisfy { $0 == .red })
        #expect(first >= before && first <= frames(after), "gone from \(first), PATCH between \(before) and \(frames(after))")
    }

    /// A text's font on a server with an input root: a relative path from
    /// under it, one outside refused before the take starts.
    @Test func fontsStayUnderTheInputRoot() throws {
        let dir = Scratch(); defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("in"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: font, toPath: dir.path("in/f.ttf"))
        let server = try ServeProcess(["--input-root", dir.path("in")], in: dir.path); defer { server.stop() }
        let outside = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x180@30", "out": "o.mp4", "duration": 1,
                                                                     "texts": [["text": "a", "x": 0, "y": 0, "font": font]]]))
        #expect(outside.status == 400 && outside.error.contains("texts[0].font") && outside.error.contains("outside the input root"), "\(outside.text)")
        let ok = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x180@30", "out": "ok.mp4", "duration": 1,
                                                                "preset": "ultrafast", "audio": "none",
                                                                "texts": [["text": "{take}", "x": 0.1, "y": 0.1, "font": "f.ttf"]]]))
        #expect(ok.status == 201, "\(ok.text)")
        let id = try #require(ok.json["id"] as? String)
        try server.waitForTake(id) { state($0) == "finished" }
        #expect(try decodeAll(dir.path("ok.mp4")).count == 30)
    }
}
