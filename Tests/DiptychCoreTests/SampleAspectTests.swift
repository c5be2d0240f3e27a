import Testing
@testable import DiptychCore

struct AspectCase: Sendable, CustomTestStringConvertible {
    var sensor: PixelSize, sar: (Int, Int), rotation: Rotation
    var upright: PixelSize, aspect: PixelSize
    var testDescription: String { "\(sensor) SAR \(sar.0):\(sar.1) \(rotation.rawValue)°" }
    var geometry: StreamGeometry {
        StreamGeometry(sensorSize: sensor, orientation: Orientation(rotation: rotation),
                       sampleAspect: SampleAspectRatio(width: sar.0, height: sar.1))
    }
}

/// Non-square pixels (anamorphic SD video): layouts and point mapping follow
/// the picture as it is meant to be seen, not its stored pixel grid.
@Suite struct SampleAspectTests {
    static let cases: [AspectCase] = [
        // PAL CIF at 4:3: 352·128/117 = 385.09 → 385.
        AspectCase(sensor: size(352, 288), sar: (128, 117), rotation: .r0, upright: size(385, 288), aspect: size(45056, 33696)),
        AspectCase(sensor: size(352, 288), sar: (128, 117), rotation: .r90, upright: size(288, 385), aspect: size(33696, 45056)),
        // NTSC DV at 4:3: tall pixels stretch the height, never shrink the width.
        AspectCase(sensor: size(720, 480), sar: (8, 9), rotation: .r0, upright: size(720, 540), aspect: size(5760, 4320)),
        AspectCase(sensor: size(720, 480), sar: (8, 9), rotation: .r270, upright: size(540, 720), aspect: size(4320, 5760)),
        // PAL 16:9 and HDV.
        AspectCase(sensor: size(720, 576), sar: (64, 45), rotation: .r0, upright: size(1024, 576), aspect: size(46080, 25920)),
        AspectCase(sensor: size(1440, 1080), sar: (4, 3), rotation: .r180, upright: size(1920, 1080), aspect: size(5760, 3240)),
        // Square pixels: unchanged, and unreduced or unknown ratios are square.
        AspectCase(sensor: size(1920, 1080), sar: (1, 1), rotation: .r90, upright: size(1080, 1920), aspect: size(1080, 1920)),
        AspectCase(sensor: size(1280, 720), sar: (3, 3), rotation: .r0, upright: size(1280, 720), aspect: size(1280, 720)),
        AspectCase(sensor: size(1280, 720), sar: (0, 1), rotation: .r0, upright: size(1280, 720), aspect: size(1280, 720)),
    ]

    @Test(arguments: cases)
    func uprightSizeAppliesThePixelShape(c: AspectCase) {
        #expect(c.geometry.uprightSize == c.upright)
        #expect(c.geometry.uprightAspect == c.aspect)
    }

    @Test func ratiosAreKeptInLowestTerms() {
        #expect(SampleAspectRatio(width: 256, height: 234) == SampleAspectRatio(width: 128, height: 117))
        #expect(SampleAspectRatio(width: 2, height: 2).isSquare)
        #expect(SampleAspectRatio(width: -4, height: 3) == .square)
        #expect(SampleAspectRatio(width: 128, height: 117).description == "128:117")
    }

    /// The inset of a 352×288 SAR 128:117 stream is ≈ 289×216 (288×216 on
    /// even edges), not the 264×216 its stored grid would give.
    @Test func pipInsetFollowsTheShownAspect() {
        let layout = Layout.pip(PiPPlacement(corner: .topLeft, size: 0.3, margin: .pixels(0)))
        let canvas = size(1280, 720)
        let cif = StreamGeometry(width: 352, height: 288, sampleAspect: SampleAspectRatio(width: 128, height: 117))
        let plan = layout.resolve(canvas: canvas, primary: stream(1280, 720), secondary: cif)
        #expect(plan.draws[1].destination == rect(0, 0, 288, 216))
        // The fill crop only absorbs the even-pixel rounding: 288/216 against 45056/33696.
        let w = Double(288 * 33696) / Double(45056 * 216)
        #expect(approx(plan.draws[1].crop, nrect((1 - w) / 2, 0, w, 1)))
        let square = layout.resolve(canvas: canvas, primary: stream(1280, 720), secondary: stream(352, 288))
        #expect(square.draws[1].destination == rect(0, 0, 264, 216))
    }

    /// Aspect fill crops by the shown aspect: 720×480 at 8:9 is exactly 4:3,
    /// so in a 640×720 half it keeps the middle two thirds of its width.
    @Test func aspectFillCropUsesTheShownAspect() {
        let dv = StreamGeometry(width: 720, height: 480, sampleAspect: SampleAspectRatio(width: 8, height: 9))
        let plan = Layout.sideBySide.resolve(canvas: size(1280, 720), primary: dv, secondary: stream(1280, 720))
        #expect(plan.draws[0].destination == rect(0, 0, 640, 720))
        #expect(approx(plan.draws[0].crop, nrect(1.0 / 6, 0, 2.0 / 3, 1)))
    }

    /// Aspect fit: HDV 1440×1080 at 4:3 is 16:9 and fills a 1920×1080 canvas
    /// without bars (the stored grid would be pillarboxed to 1440 wide).
    @Test func aspectFitUsesTheShownAspect() {
        var layout = Layout.primaryOnly
        layout.contentMode = .aspectFit
        let hdv = StreamGeometry(width: 1440, height: 1080, sampleAspect: SampleAspectRatio(width: 4, height: 3))
        let plan = layout.resolve(canvas: .hd1080, primary: hdv, secondary: nil)
        #expect(plan.draws[0].destination == rect(0, 0, 1920, 1080) && plan.draws[0].crop == .unit)
        let grid = layout.resolve(canvas: .hd1080, primary: stream(1440, 1080), secondary: nil)
        #expect(grid.draws[0].destination == rect(240, 0, 1440, 1080))
    }

    /// Point mapping through an anamorphic inset: canvas ⇄ sensor round trips,
    /// and the inset's centre and edges are the sensor's.
    @Test(arguments: [Rotation.r0, .r90], [false, true])
    func pointMappingThroughAnamorphicInset(rotation: Rotation, mirrored: Bool) throws {
        let cif = StreamGeometry(width: 352, height: 288, rotation: rotation, mirrored: mirrored,
                                 sampleAspect: SampleAspectRatio(width: 128, height: 117))
        let canvas = size(1280, 720)
        let plan = Layout.pip(PiPPlacement(corner: .bottomRight, size: 0.3, margin: .pixels(20)))
            .resolve(canvas: canvas, primary: stream(1280, 720), secondary: cif)
        let inset = plan.draws[1]
        #expect(inset.role == .secondary)
        let centre = NormalizedPoint(x: (Double(inset.destination.x) + Double(inset.destination.width) / 2) / 1280,
                                     y: (Double(inset.destination.y) + Double(inset.destination.height) / 2) / 720)
        let hit = try #require(plan.hitTest(canvasPoint: centre))
        #expect(hit.role == .secondary && approx(hit.sensorPoint, NormalizedPoint(x: 0.5, y: 0.5)))
        for p in [NormalizedPoint(x: 0.2, y: 0.3), NormalizedPoint(x: 0.7, y: 0.9), NormalizedPoint(x: 0.5, y: 0.02)] {
            let onCanvas = try #require(plan.canvasPoint(for: .secondary, sensorPoint: p))
            let back = try #require(plan.hitTest(canvasPoint: onCanvas))
            #expect(back.role == .secondary && approx(back.sensorPoint, p, 1e-9))
        }
    }
}
