import Testing
@testable import DiptychCore

struct MappingCase: Sendable, CustomTestStringConvertible {
    var rotation: Rotation, mirrored: Bool, kind: LayoutKind
    var testDescription: String { "\(rotation.rawValue)° \(mirrored ? "mirrored" : "plain") \(kind)" }
    static let all: [MappingCase] = Rotation.allCases.flatMap { r in
        [false, true].flatMap { m in LayoutKind.allCases.map { MappingCase(rotation: r, mirrored: m, kind: $0) } }
    }
    var layout: Layout {
        var l = Layout(kind: kind)
        l.custom = CustomRects(primary: nrect(0, 0, 0.7, 0.8), secondary: nrect(0.55, 0.6, 0.4, 0.35))
        return l
    }
    var primary: StreamGeometry { stream(1920, 1080, rotation, mirrored: mirrored) }
    /// The secondary turned a further 90° and mirrored the other way, so the two differ.
    var secondary: StreamGeometry {
        stream(1280, 720, Rotation(degrees: rotation.rawValue + 90)!, mirrored: !mirrored)
    }
}

@Suite struct PointMappingTests {
    /// docs/ARCHITECTURE.md, "Explicit orientation": portrait canvas, rotation 90: primary (u, v) = (y, 1 − x).
    @Test(arguments: [(0.25, 0.1), (0.5, 0.5), (0.9, 0.3), (0.05, 0.95)])
    func rule7PortraitPrimary(x: Double, y: Double) throws {
        let plan = Layout.primaryOnly.resolve(canvas: portrait, primary: stream(1920, 1080, .r90), secondary: nil)
        #expect(plan.draws.first?.crop == .unit)
        let hit = try #require(plan.hitTest(canvasPoint: NormalizedPoint(x: x, y: y)))
        #expect(hit.role == .primary)
        #expect(approx(hit.sensorPoint, NormalizedPoint(x: y, y: 1 - x)))
    }

    /// docs/ARCHITECTURE.md, "Explicit orientation": portrait canvas, rotation 90, mirrored secondary: (u, v) = (y, x).
    @Test(arguments: [(0.25, 0.1), (0.5, 0.5), (0.9, 0.3), (0.05, 0.95)])
    func rule7PortraitMirroredSecondary(x: Double, y: Double) throws {
        let plan = Layout.secondaryOnly.resolve(canvas: portrait, primary: stream(1920, 1080, .r90),
                                                secondary: stream(1920, 1080, .r90, mirrored: true))
        let hit = try #require(plan.hitTest(canvasPoint: NormalizedPoint(x: x, y: y)))
        #expect(hit.role == .secondary)
        #expect(approx(hit.sensorPoint, NormalizedPoint(x: y, y: x)))
        let back = try #require(plan.canvasPoint(for: .secondary, sensorPoint: NormalizedPoint(x: y, y: x)))
        #expect(approx(back, NormalizedPoint(x: x, y: y)))
    }

    /// Rule 7 inside a PiP: the tap lands on the mirrored selfie inset.
    @Test func rule7TapOnPortraitInset() throws {
        let plan = Layout.pip(PiPPlacement(corner: .topLeft, margin: .pixels(0)))
            .resolve(canvas: portrait, primary: stream(1920, 1080, .r90), secondary: stream(1920, 1080, .r90, mirrored: true))
        let inset = plan.draws[1]
        #expect(inset.destination == rect(0, 0, 324, 576) && inset.crop == .unit)
        // Centre-left of the inset: local (0.25, 0.5) → sensor (y, x) = (0.5, 0.25).
        let p = NormalizedPoint(x: 81.0 / 1080, y: 288.0 / 1920)
        let hit = try #require(plan.hitTest(canvasPoint: p))
        #expect(hit.role == .secondary && approx(hit.sensorPoint, NormalizedPoint(x: 0.5, y: 0.25)))
        // Outside the inset the primary is hit, rotation 90: (y, 1 − x).
        let q = NormalizedPoint(x: 0.75, y: 0.5)
        let hit2 = try #require(plan.hitTest(canvasPoint: q))
        #expect(hit2.role == .primary && approx(hit2.sensorPoint, NormalizedPoint(x: 0.5, y: 0.25)))
    }

    /// Crops are respected: the "Crop arithmetic" column shows sensor x 0.25...0.75 only.
    @Test func croppedAwayPointsAreNil() throws {
        let plan = Layout.sideBySide.resolve(canvas: portrait, primary: stream(720, 1280), secondary: stream(720, 1280))
        #expect(plan.canvasPoint(for: .primary, sensorPoint: NormalizedPoint(x: 0.1, y: 0.5)) == nil)
        #expect(plan.canvasPoint(for: .primary, sensorPoint: NormalizedPoint(x: 0.9, y: 0.5)) == nil)
        let p = try #require(plan.canvasPoint(for: .primary, sensorPoint: NormalizedPoint(x: 0.3, y: 0.5)))
        #expect(approx(p, NormalizedPoint(x: 0.05, y: 0.5)))   // (0.3 − 0.25) / 0.5 × 540 / 1080
        let s = try #require(plan.canvasPoint(for: .secondary, sensorPoint: NormalizedPoint(x: 0.75, y: 1)))
        #expect(approx(s, NormalizedPoint(x: 1, y: 1)))        // crop edge maps to the canvas edge
        #expect(plan.hitTest(canvasPoint: NormalizedPoint(x: 0.75, y: 0.5))?.role == .secondary)
    }

    @Test func backgroundAndOutsideMissAndTransparentDrawsAreSkipped() {
        let fit = Layout(kind: .primaryOnly, contentMode: .aspectFit).resolve(canvas: landscape, primary: s43, secondary: nil)
        #expect(fit.hitTest(canvasPoint: NormalizedPoint(x: 0.05, y: 0.5)) == nil)       // pillarbox bar
        #expect(fit.hitTest(canvasPoint: NormalizedPoint(x: 1.2, y: 0.5)) == nil)
        var layout = Layout.pip()
        layout.insetStyle.opacity = 0
        let plan = layout.resolve(canvas: landscape, primary: s169, secondary: s169)
        #expect(plan.hitTest(canvasPoint: NormalizedPoint(x: 0.9, y: 0.9))?.role == .primary)
        #expect(plan.canvasPoint(for: .secondary, sensorPoint: NormalizedPoint(x: 0.5, y: 0.5)) == nil)
        #expect(Layout.primaryOnly.resolve(canvas: landscape, primary: s169, secondary: s169)
            .canvasPoint(for: .secondary, sensorPoint: NormalizedPoint(x: 0.5, y: 0.5)) == nil)
    }

    /// canvas → (role, sensor) → canvas is the identity on every visible point,
    /// for every rotation × mirror × layout, on a landscape and a portrait canvas.
    @Test(arguments: MappingCase.all)
    func canvasRoundTrip(_ c: MappingCase) throws {
        for canvas in [landscape, portrait] {
            let plan = c.layout.resolve(canvas: canvas, primary: c.primary, secondary: c.secondary)
            var hits = 0
            for i in 0..<12 { for j in 0..<12 {
                let p = NormalizedPoint(x: (Double(i) + 0.5) / 12, y: (Double(j) + 0.5) / 12)
                guard let hit = plan.hitTest(canvasPoint: p) else {
                    #expect(c.kind == .custom, "only custom layouts leave gaps at \(p)")
                    continue
                }
                hits += 1
                #expect(hit.sensorPoint.x >= 0 && hit.sensorPoint.x <= 1 && hit.sensorPoint.y >= 0 && hit.sensorPoint.y <= 1)
                let back = try #require(plan.canvasPoint(for: hit.role, sensorPoint: hit.sensorPoint))
                #expect(approx(back, p), "\(c.testDescription) \(canvas): \(p) → \(hit.sensorPoint) → \(back)")
            } }
            #expect(hits > 0)
        }
    }

    /// sensor → canvas → sensor is the identity wherever the point is shown and on top.
    @Test(arguments: MappingCase.all)
    func sensorRoundTrip(_ c: MappingCase) {
        for canvas in [landscape, portrait] {
            let plan = c.layout.resolve(canvas: canvas, primary: c.primary, secondary: c.secondary)
            for role in StreamRole.allCases {
                for i in 0..<10 { for j in 0..<10 {
                    let s = NormalizedPoint(x: (Double(i) + 0.5) / 10, y: (Double(j) + 0.5) / 10)
                    guard let p = plan.canvasPoint(for: role, sensorPoint: s) else { continue }
                    #expect(p.x >= 0 && p.x <= 1 && p.y >= 0 && p.y <= 1)
                    guard let hit = plan.hitTest(canvasPoint: p), hit.role == role else { continue }   // under an inset
                    #expect(approx(hit.sensorPoint, s), "\(c.testDescription) \(role): \(s) → \(p) → \(hit.sensorPoint)")
                } }
            }
        }
    }

    /// The mapping agrees with the orientation: a full-canvas, uncropped draw
    /// maps canvas (x, y) to exactly `sensorPoint(fromUpright: (x, y))`.
    @Test(arguments: Rotation.allCases, [false, true])
    func fullCanvasMatchesOrientation(rotation: Rotation, mirrored: Bool) throws {
        let g = stream(1920, 1080, rotation, mirrored: mirrored)
        let plan = Layout.primaryOnly.resolve(canvas: g.uprightSize, primary: g, secondary: nil)
        #expect(plan.draws[0].crop == .unit)
        for p in [NormalizedPoint(x: 0.1, y: 0.2), NormalizedPoint(x: 0.8, y: 0.35), NormalizedPoint(x: 0.5, y: 0.9)] {
            let hit = try #require(plan.hitTest(canvasPoint: p))
            #expect(approx(hit.sensorPoint, g.orientation.sensorPoint(fromUpright: p)))
        }
    }
}

@Suite struct LocalToSensorTransformTests {
    /// The single uv transform a shader uses agrees with the point mapping.
    @Test(arguments: Rotation.allCases, [false, true])
    func agreesWithPointMapping(rotation: Rotation, mirrored: Bool) {
        let d = DrawDescription(role: .primary, destination: rect(100, 40, 540, 960), crop: nrect(0.25, 0.1, 0.5, 0.7),
                                orientation: Orientation(rotation: rotation, mirrored: mirrored))
        let m = d.localToSensor
        for s in stride(from: 0.0, through: 1.0, by: 0.125) { for t in stride(from: 0.0, through: 1.0, by: 0.25) {
            let expected = d.sensorPoint(canvasPixelX: 100 + s * 540, y: 40 + t * 960)
            #expect(approx(m.apply(NormalizedPoint(x: s, y: t)), expected, 1e-12))
        } }
    }

    @Test func rotation90Matrix() {
        // Rule 7: rotation 90 maps upright (x, y) to sensor (y, 1 − x).
        let d = DrawDescription(role: .primary, destination: rect(0, 0, 1080, 1920), orientation: Orientation(rotation: .r90))
        #expect(d.localToSensor == AffineTransform2D(m11: 0, m12: -1, m21: 1, m22: 0, tx: 0, ty: 1))
        #expect(d.localToSensor.columnMajor3x3 == [0, -1, 0, 1, 0, 0, 0, 1, 1])
        #expect(DrawDescription(role: .primary, destination: rect(0, 0, 2, 2)).localToSensor == .identity)
    }
}
