import Foundation
import Testing
@testable import DiptychCore

@Suite struct PiPPlacementTests {
    @Test(arguments: [
        // dragged centre, expected corner (from bottom-right)
        (NormalizedPoint(x: 0.1, y: 0.1), PiPCorner.topLeft), (NormalizedPoint(x: 0.9, y: 0.2), .topRight),
        (NormalizedPoint(x: 0.3, y: 0.7), .bottomLeft), (NormalizedPoint(x: 0.51, y: 0.51), .bottomRight),
        (NormalizedPoint(x: 0.49, y: 0.01), .topLeft), (NormalizedPoint(x: -0.2, y: 1.3), .bottomLeft),
        // exactly on the middle lines: keep the current (bottom-right) side
        (NormalizedPoint(x: 0.5, y: 0.2), .topRight), (NormalizedPoint(x: 0.2, y: 0.5), .bottomLeft),
    ])
    func snapsToNearestCorner(center: NormalizedPoint, expected: PiPCorner) {
        let p = PiPPlacement(corner: .bottomRight, size: 0.25, margin: .pixels(40))
        let snapped = p.snap(draggedCenter: center, canvas: landscape)
        #expect(snapped.corner == expected)
        #expect(snapped.size == 0.25 && snapped.margin == .pixels(40))
    }

    /// Snapping picks the corner whose inset centre is nearest in pixels.
    @Test func snapAgreesWithPixelDistance() {
        let p = PiPPlacement(size: 0.3, margin: .pixels(32))
        for canvas in [landscape, portrait] {
            for i in 0..<9 { for j in 0..<9 {
                let c = NormalizedPoint(x: Double(i) / 8 + 0.01, y: Double(j) / 8 + 0.02)
                let nearest = PiPCorner.allCases.min { a, b in
                    func d(_ k: PiPCorner) -> Double {
                        let r = PiPPlacement(corner: k, size: 0.3, margin: .pixels(32)).insetRect(canvas: canvas, content: size(1280, 720))
                        let (cx, cy) = r.center
                        return pow(cx - c.x * Double(canvas.width), 2) + pow(cy - c.y * Double(canvas.height), 2)
                    }
                    return d(a) < d(b)
                }
                #expect(p.snap(draggedCenter: c, canvas: canvas).corner == nearest)
            } }
        }
    }

    @Test(arguments: PiPCorner.allCases)
    func insetRectSitsInItsCorner(corner: PiPCorner) {
        let r = PiPPlacement(corner: corner, size: 0.3, margin: .fraction(0.03)).insetRect(canvas: landscape, content: size(1280, 720))
        #expect(r.size == size(576, 324))
        #expect(r.x == (corner.isLeft ? 32 : 1920 - 32 - 576))
        #expect(r.y == (corner.isTop ? 32 : 1080 - 32 - 324))
        #expect(r.isEvenAligned)
    }

    @Test(arguments: [("24", PiPMargin.pixels(24)), ("24px", .pixels(24)), ("0.05", .fraction(0.05)), ("3%", .fraction(0.03))])
    func parsesMargins(text: String, expected: PiPMargin) throws {
        #expect(try PiPMargin.parse(text) == expected)
    }

    @Test func jsonRoundTripThroughDataAndFile() throws {
        let placement = PiPPlacement(corner: .topLeft, size: 0.22, margin: .pixels(18))
        let data = placement.jsonData()
        #expect(try PiPPlacement(jsonData: data) == placement)
        #expect(String(decoding: data, as: UTF8.self).contains(#""corner" : "top-left""#))

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pip-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try placement.save(toPath: path)
        #expect(try PiPPlacement.load(fromPath: path) == placement)
        // A snapped placement saved and reused keeps its corner.
        let snapped = placement.snap(draggedCenter: NormalizedPoint(x: 0.8, y: 0.8), canvas: landscape)
        try snapped.save(toPath: path)
        #expect(try PiPPlacement.load(fromPath: path).corner == .bottomRight)
        // Fraction margins survive too.
        let f = PiPPlacement(margin: .fraction(0.04))
        #expect(try PiPPlacement(jsonData: f.jsonData()) == f)
    }

    @Test func loadErrorsNameTheFile() throws {
        let missing = "/nonexistent/dir/pip.json"
        do { _ = try PiPPlacement.load(fromPath: missing); Issue.record("expected an error") } catch {
            #expect(error.value == missing && error.description.contains(missing))
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pip-bad-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(#"{"corner": "middle"}"#.utf8).write(to: URL(fileURLWithPath: path))
        do { _ = try PiPPlacement.load(fromPath: path); Issue.record("expected an error") } catch {
            #expect(error.value == path)
            #expect(error.reason.contains("corner"))
        }
    }
}
