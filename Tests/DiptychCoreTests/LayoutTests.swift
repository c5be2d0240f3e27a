import Testing
import Foundation
@testable import DiptychCore

/// One expected draw: role, destination, crop.
struct ExpectedDraw: Sendable {
    var role: StreamRole, destination: PixelRect, crop: NormalizedRect
    init(_ role: StreamRole, _ destination: PixelRect, _ crop: NormalizedRect = .unit) {
        self.role = role; self.destination = destination; self.crop = crop
    }
}

struct LayoutCase: Sendable, CustomTestStringConvertible {
    var name: String
    var layout: Layout
    var canvas: PixelSize
    var primary: StreamGeometry?
    var secondary: StreamGeometry?
    var expected: [ExpectedDraw]   // painting order
    var testDescription: String { name }
}

let landscape = size(1920, 1080), portrait = size(1080, 1920)
let s169 = stream(1920, 1080), s43 = stream(1440, 1080), s916 = stream(1080, 1920)

let layoutCases: [LayoutCase] = [
    // Side by side on 16:9: two 960×1080 columns.
    LayoutCase(name: "sbs 16:9 canvas, 16:9 + 16:9", layout: .sideBySide, canvas: landscape, primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 960, 1080), nrect(0.25, 0, 0.5, 1)),
                          .init(.secondary, rect(960, 0, 960, 1080), nrect(0.25, 0, 0.5, 1))]),
    LayoutCase(name: "sbs 16:9 canvas, 4:3 + 9:16", layout: .sideBySide, canvas: landscape, primary: s43, secondary: s916,
               expected: [.init(.primary, rect(0, 0, 960, 1080), nrect(1.0 / 6, 0, 2.0 / 3, 1)),
                          .init(.secondary, rect(960, 0, 960, 1080), nrect(0, 0.18359375, 1, 0.6328125))]),
    // docs/ARCHITECTURE.md, "Crop arithmetic": 720×1280 into a 540×1920 column of a portrait canvas.
    LayoutCase(name: "sbs 9:16 canvas, crop arithmetic column", layout: .sideBySide, canvas: portrait,
               primary: stream(720, 1280), secondary: stream(720, 1280),
               expected: [.init(.primary, rect(0, 0, 540, 1920), nrect(0.25, 0, 0.5, 1)),
                          .init(.secondary, rect(540, 0, 540, 1920), nrect(0.25, 0, 0.5, 1))]),
    LayoutCase(name: "stacked 9:16 canvas, 16:9 + 9:16", layout: .stacked, canvas: portrait, primary: s169, secondary: s916,
               expected: [.init(.primary, rect(0, 0, 1080, 960), nrect(0.18359375, 0, 0.6328125, 1)),
                          .init(.secondary, rect(0, 960, 1080, 960), nrect(0, 0.25, 1, 0.5))]),
    LayoutCase(name: "stacked 16:9 canvas, 16:9 + 4:3", layout: .stacked, canvas: landscape, primary: s169, secondary: s43,
               expected: [.init(.primary, rect(0, 0, 1920, 540), nrect(0, 0.25, 1, 0.5)),
                          .init(.secondary, rect(0, 540, 1920, 540), nrect(0, 0.3125, 1, 0.375))]),
    // PiP: inset's shorter side = 0.3 × 1080 = 324; margin 0.03 × 1080 = 32.4 → 32.
    LayoutCase(name: "pip 16:9 canvas, 16:9 inset", layout: .pip(), canvas: landscape, primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 1920, 1080)), .init(.secondary, rect(1312, 724, 576, 324))]),
    LayoutCase(name: "pip 16:9 canvas, 4:3 inset", layout: .pip(), canvas: landscape, primary: s169, secondary: s43,
               expected: [.init(.primary, rect(0, 0, 1920, 1080)), .init(.secondary, rect(1456, 724, 432, 324))]),
    LayoutCase(name: "pip 16:9 canvas, 9:16 primary and inset", layout: .pip(), canvas: landscape, primary: s916, secondary: s916,
               expected: [.init(.primary, rect(0, 0, 1920, 1080), nrect(0, 0.341796875, 1, 0.31640625)),
                          .init(.secondary, rect(1564, 472, 324, 576))]),
    LayoutCase(name: "pip 9:16 canvas, 9:16 inset top-left",
               layout: .pip(PiPPlacement(corner: .topLeft)), canvas: portrait, primary: s916, secondary: s916,
               expected: [.init(.primary, rect(0, 0, 1080, 1920)), .init(.secondary, rect(32, 32, 324, 576))]),
    LayoutCase(name: "pip 9:16 canvas, 16:9 inset bottom-left, 24 px margin",
               layout: .pip(PiPPlacement(corner: .bottomLeft, margin: .pixels(24))), canvas: portrait, primary: s916, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 1080, 1920)), .init(.secondary, rect(24, 1572, 576, 324))]),
    LayoutCase(name: "pip 9:16 canvas, 4:3 inset top-right", layout: .pip(PiPPlacement(corner: .topRight)), canvas: portrait,
               primary: s169, secondary: s43,
               expected: [.init(.primary, rect(0, 0, 1080, 1920), nrect(0.341796875, 0, 0.31640625, 1)),
                          .init(.secondary, rect(616, 32, 432, 324))]),
    // The inset follows the UPRIGHT aspect: a 1920×1080 sensor rotated 90° is a 9:16 inset.
    LayoutCase(name: "pip inset uses upright aspect", layout: .pip(), canvas: landscape, primary: s169,
               secondary: stream(1920, 1080, .r90, mirrored: true),
               expected: [.init(.primary, rect(0, 0, 1920, 1080)), .init(.secondary, rect(1564, 472, 324, 576))]),
    // A size that cannot fit is scaled down into canvas − 2 × margin.
    LayoutCase(name: "pip oversize inset clamps", layout: .pip(PiPPlacement(corner: .topLeft, size: 1, margin: .pixels(20))),
               canvas: landscape, primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 1920, 1080)), .init(.secondary, rect(20, 20, 1848, 1040), nrect(0.5 - 1848.0 * 1080 / (1920 * 1040) / 2, 0, 1848.0 * 1080 / (1920 * 1040), 1))]),
    LayoutCase(name: "swap: secondary is the big one", layout: Layout(kind: .pip, swapRoles: true), canvas: landscape,
               primary: s169, secondary: s169,
               expected: [.init(.secondary, rect(0, 0, 1920, 1080)), .init(.primary, rect(1312, 724, 576, 324))]),
    LayoutCase(name: "swap side by side", layout: Layout(kind: .sideBySide, swapRoles: true), canvas: landscape,
               primary: s169, secondary: s169,
               expected: [.init(.secondary, rect(0, 0, 960, 1080), nrect(0.25, 0, 0.5, 1)),
                          .init(.primary, rect(960, 0, 960, 1080), nrect(0.25, 0, 0.5, 1))]),
    LayoutCase(name: "primary only", layout: .primaryOnly, canvas: portrait, primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 1080, 1920), nrect(0.341796875, 0, 0.31640625, 1))]),
    LayoutCase(name: "secondary only", layout: .secondaryOnly, canvas: landscape, primary: s169, secondary: s43,
               expected: [.init(.secondary, rect(0, 0, 1920, 1080), nrect(0, 0.125, 1, 0.75))]),
    // Rule 11 fallbacks.
    LayoutCase(name: "no secondary → primary full canvas", layout: .pip(), canvas: landscape, primary: s43, secondary: nil,
               expected: [.init(.primary, rect(0, 0, 1920, 1080), nrect(0, 0.125, 1, 0.75))]),
    LayoutCase(name: "secondary-only without secondary → primary", layout: .secondaryOnly, canvas: landscape, primary: s169,
               secondary: nil, expected: [.init(.primary, rect(0, 0, 1920, 1080))]),
    LayoutCase(name: "no primary → secondary full canvas", layout: .sideBySide, canvas: landscape, primary: nil, secondary: s169,
               expected: [.init(.secondary, rect(0, 0, 1920, 1080))]),
    LayoutCase(name: "no streams → background only", layout: .stacked, canvas: landscape, primary: nil, secondary: nil, expected: []),
    // Odd canvas: rounded down to even; odd stream sizes still give even destinations.
    LayoutCase(name: "odd canvas 1921x1081 side by side", layout: .sideBySide, canvas: size(1921, 1081),
               primary: stream(1281, 721), secondary: stream(1281, 721),
               expected: [.init(.primary, rect(0, 0, 960, 1080), nrect(0.5 - 960.0 * 721 / (1281.0 * 1080) / 2, 0, 960.0 * 721 / (1281.0 * 1080), 1)),
                          .init(.secondary, rect(960, 0, 960, 1080), nrect(0.5 - 960.0 * 721 / (1281.0 * 1080) / 2, 0, 960.0 * 721 / (1281.0 * 1080), 1))]),
    LayoutCase(name: "side by side with odd half width (1084 → 542 + 542)", layout: .sideBySide, canvas: size(1084, 600),
               primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 542, 600), nrect(0.5 - 542.0 * 1080 / (1920.0 * 600) / 2, 0, 542.0 * 1080 / (1920.0 * 600), 1)),
                          .init(.secondary, rect(542, 0, 542, 600), nrect(0.5 - 542.0 * 1080 / (1920.0 * 600) / 2, 0, 542.0 * 1080 / (1920.0 * 600), 1))]),
    // Aspect-fit letterboxes on the background.
    LayoutCase(name: "fit: 9:16 column in side by side", layout: Layout(kind: .sideBySide, contentMode: .aspectFit),
               canvas: landscape, primary: s916, secondary: s169,
               expected: [.init(.primary, rect(176, 0, 608, 1080), nrect(0, 0.5 - 1080.0 * 1080 / (608.0 * 1920) / 2, 1, 1080.0 * 1080 / (608.0 * 1920))),
                          .init(.secondary, rect(960, 270, 960, 540))]),
    LayoutCase(name: "fit: 4:3 primary only pillarboxed", layout: Layout(kind: .primaryOnly, contentMode: .aspectFit),
               canvas: landscape, primary: s43, secondary: nil, expected: [.init(.primary, rect(240, 0, 1440, 1080))]),
    // Custom rectangles, normalized.
    LayoutCase(name: "custom", layout: .custom(primary: nrect(0, 0, 0.5, 1), secondary: nrect(0.5, 0.25, 0.5, 0.5)),
               canvas: landscape, primary: s169, secondary: s169,
               expected: [.init(.primary, rect(0, 0, 960, 1080), nrect(0.25, 0, 0.5, 1)),
                          .init(.secondary, rect(960, 270, 960, 540))]),
    LayoutCase(name: "custom with one role left out", layout: .custom(primary: nil, secondary: nrect(0.1, 0.1, 0.5, 0.5)),
               canvas: landscape, primary: s169, secondary: s169,
               expected: [.init(.secondary, rect(192, 108, 960, 540))]),
]

@Suite struct LayoutResolveTests {
    @Test(arguments: layoutCases)
    func resolvesExactRectsAndCrops(_ c: LayoutCase) {
        let plan = c.layout.resolve(canvas: c.canvas, primary: c.primary, secondary: c.secondary)
        #expect(plan.canvas == c.canvas.evenAligned())
        #expect(plan.draws.count == c.expected.count)
        for (draw, e) in zip(plan.draws, c.expected) {
            #expect(draw.role == e.role)
            #expect(draw.destination == e.destination)
            #expect(approx(draw.crop, e.crop), "crop \(draw.crop) ≠ \(e.crop)")
            #expect(draw.destination.isEvenAligned)
        }
    }

    @Test func pipInsetStyleAndZOrder() {
        var layout = Layout.pip()
        layout.insetStyle = DrawStyle(opacity: 0.9, cornerRadius: 24, borderWidth: 4, borderColor: .white)
        layout.background = RGBAColor(r: 0.1, g: 0.2, b: 0.3)
        let plan = layout.resolve(canvas: landscape, primary: s169, secondary: s169)
        #expect(plan.background == RGBAColor(r: 0.1, g: 0.2, b: 0.3))
        #expect(plan.draws.map(\.zIndex) == [0, 1])
        let inset = plan.draws[1]
        #expect(inset.opacity == 0.9 && inset.cornerRadius == 24 && inset.borderWidth == 4)
        #expect(plan.draws[0].cornerRadius == 0 && plan.draws[0].borderWidth == 0 && plan.draws[0].opacity == 1)

        layout.zOrder = .primaryOnTop
        let flipped = layout.resolve(canvas: landscape, primary: s169, secondary: s169)
        #expect(flipped.draws.map(\.role) == [.secondary, .primary])
    }

    @Test func orientationTravelsWithEachDraw() {
        let p = stream(1920, 1080, .r90), s = stream(1280, 720, .r270, mirrored: true)
        let plan = Layout.stacked.resolve(canvas: portrait, primary: p, secondary: s)
        #expect(plan.draws[0].orientation == Orientation(rotation: .r90))
        #expect(plan.draws[1].orientation == Orientation(rotation: .r270, mirrored: true))
        // Upright 1080×1920 in a 1080×960 cell: keep the middle half of the height.
        #expect(plan.draws[0].crop == nrect(0, 0.25, 1, 0.5))
    }

    static let odd: [StreamGeometry] = [stream(1281, 721), stream(719, 1279, .r90), stream(641, 479, .r180, mirrored: true), stream(3, 5)]
    @Test(arguments: LayoutKind.allCases, [landscape, portrait, size(1282, 722), size(720, 1280)])
    func everyDestinationIsEvenAndInsideTheCanvas(kind: LayoutKind, canvas: PixelSize) {
        for p in Self.odd { for s in Self.odd { for mode in ContentMode.allCases {
            var layout = Layout(kind: kind, contentMode: mode)
            layout.custom = CustomRects(primary: nrect(0.013, 0.021, 0.61, 0.77), secondary: nrect(0.333, 0.5, 0.667, 0.5))
            let plan = layout.resolve(canvas: canvas, primary: p, secondary: s)
            #expect(!plan.draws.isEmpty)
            for d in plan.draws {
                #expect(d.destination.isEvenAligned, "\(kind) \(d.destination)")
                #expect(d.destination.x >= 0 && d.destination.y >= 0)
                #expect(d.destination.maxX <= canvas.width && d.destination.maxY <= canvas.height)
                #expect(d.crop.x >= 0 && d.crop.y >= 0 && d.crop.maxX <= 1 + 1e-12 && d.crop.maxY <= 1 + 1e-12)
            }
        } } }
    }

    @Test(arguments: [("pip", LayoutKind.pip), ("side-by-side", .sideBySide), ("stacked", .stacked),
                      ("primary-only", .primaryOnly), ("secondary-only", .secondaryOnly), ("PIP", .pip)])
    func parsesLayoutNames(text: String, kind: LayoutKind) throws {
        #expect(try LayoutKind.parse(text) == kind)
    }

    @Test(arguments: ["grid", "custom", "", "side_by_side"])
    func rejectsUnknownLayoutNames(text: String) {
        #expect(throws: ConfigurationError.self) { try LayoutKind.parse(text) }
        do { _ = try LayoutKind.parse(text) } catch {
            #expect(error.field == "--layout" && error.value == text)
            #expect(error.description.hasPrefix("--layout '\(text)': unknown layout"))
        }
    }

    @Test func layoutJSONRoundTripAndDefaults() throws {
        var layout = Layout(kind: .custom, pip: PiPPlacement(corner: .topLeft, size: 0.25, margin: .pixels(16)),
                            custom: CustomRects(primary: .unit, secondary: nrect(0.6, 0.6, 0.3, 0.3)),
                            swapRoles: true, zOrder: .secondaryOnTop, contentMode: .aspectFit,
                            background: RGBAColor(r: 0, g: 0.5, b: 1), insetStyle: DrawStyle(opacity: 0.5, cornerRadius: 8))
        let data = try JSONEncoder().encode(layout)
        #expect(try JSONDecoder().decode(Layout.self, from: data) == layout)
        let partial = try JSONDecoder().decode(Layout.self, from: Data(#"{"kind":"stacked","background":"FF0000"}"#.utf8))
        layout = Layout(kind: .stacked, background: RGBAColor(r: 1, g: 0, b: 0))
        #expect(partial == layout)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Layout.self, from: Data(#"{"kind":"grid"}"#.utf8)) }
    }

    @Test func validationNamesTheField() {
        #expect(Layout.pip(PiPPlacement(size: 0)).validationError()?.field == "--pip-size")
        #expect(Layout.pip(PiPPlacement(margin: .fraction(0.6))).validationError()?.field == "--pip-margin")
        #expect(Layout.custom(primary: nrect(0.5, 0, 0.6, 1), secondary: nil).validationError()?.field == "layout.custom.primary")
        #expect(Layout.custom(primary: nil, secondary: nil).validationError()?.field == "layout.custom")
        #expect(Layout(insetStyle: DrawStyle(opacity: 2)).validationError()?.field == "layout.insetStyle.opacity")
        #expect(Layout.pip().validationError() == nil)
    }
}
