import Testing
@testable import DiptychCore

@Suite struct GeometryAlignmentTests {
    @Test(arguments: [
        (1920, 1080, 1920, 1080), (1921, 1081, 1920, 1080), (1, 1, 2, 2), (3, 5, 2, 4), (0, 7, 0, 6), (-4, 2, 0, 2),
    ])
    func evenAlignedSizeRoundsDown(w: Int, h: Int, ew: Int, eh: Int) {
        #expect(size(w, h).evenAligned() == size(ew, eh))
        #expect(size(w, h).evenAligned().width % 2 == 0)
    }

    @Test(arguments: [(0.0, 0), (1.0, 2), (2.9, 2), (3.0, 4), (4.99, 4), (5.0, 6), (32.4, 32), (607.5, 608), (-3.0, -4)])
    func evenEdgeRoundsToNearestEven(v: Double, expected: Int) {
        #expect(PixelRect.evenEdge(v) == expected)
    }

    @Test func evenEdgesKeepNeighboursTouching() {
        // Two rects meeting at 960.5 both round that edge to 960.
        let a = PixelRect(evenEdgesMinX: 0, minY: 0, maxX: 960.5, maxY: 1080)
        let b = PixelRect(evenEdgesMinX: 960.5, minY: 0, maxX: 1921, maxY: 1080)
        #expect(a == rect(0, 0, 960, 1080))
        #expect(b.x == a.maxX)
        #expect(a.isEvenAligned && b.isEvenAligned)
        #expect(rect(3, 5, 7, 9).evenAligned() == rect(4, 6, 6, 8))
    }

    @Test func rectHelpers() {
        #expect(rect(0, 0, 100, 100).intersection(rect(50, 60, 100, 100)) == rect(50, 60, 50, 40))
        #expect(rect(0, 0, 10, 10).intersection(rect(10, 0, 10, 10)) == nil)
        #expect(rect(-10, -10, 30, 30).clamped(to: rect(0, 0, 16, 16)) == rect(0, 0, 16, 16))
        #expect(rect(0, 0, 0, 5).isEmpty)
        #expect(rect(480, 270, 960, 540).normalized(in: size(1920, 1080)) == nrect(0.25, 0.25, 0.5, 0.5))
        #expect(nrect(0.25, 0.25, 0.5, 0.5).evenPixelRect(in: size(1920, 1080)) == rect(480, 270, 960, 540))
        #expect(size(1080, 1920).shorterSide == 1080 && size(1080, 1920).isPortrait)
    }

    @Test(arguments: ["ff8000", "#FF8000", "ff800080"])
    func hexColour(text: String) throws {
        let c = try #require(RGBAColor(hex: text))
        #expect(c.r == 1 && approx(c.g, 128.0 / 255) && c.b == 0)
        #expect(c.hexString.hasPrefix("FF8000"))
        #expect(RGBAColor(hex: "zz") == nil)
    }
}

@Suite struct ContentModeTests {
    // docs/ARCHITECTURE.md, "Crop arithmetic": a 720×1280 stream in a 540×1920 column loses 25 % on each side.
    @Test func rule8ColumnCropsQuarterEachSide() {
        let crop = ContentMode.aspectFillCrop(content: size(720, 1280), destination: size(540, 1920))
        #expect(crop == nrect(0.25, 0, 0.5, 1))
    }

    @Test(arguments: [
        // content, destination, expected crop (exact binary fractions)
        (size(1920, 1080), size(1920, 1080), nrect(0, 0, 1, 1)),
        (size(1920, 1080), size(960, 1080), nrect(0.25, 0, 0.5, 1)),
        (size(1080, 1920), size(960, 1080), nrect(0, 0.18359375, 1, 0.6328125)),
        (size(1440, 1080), size(1920, 1080), nrect(0, 0.125, 1, 0.75)),
        (size(1080, 1920), size(1920, 1080), nrect(0, 0.341796875, 1, 0.31640625)),
        (size(1920, 1080), size(1080, 960), nrect(0.18359375, 0, 0.6328125, 1)),
    ])
    func fillCrop(content: PixelSize, destination: PixelSize, expected: NormalizedRect) {
        #expect(ContentMode.aspectFillCrop(content: content, destination: destination) == expected)
    }

    @Test func fitLetterboxesWithEvenEdges() {
        // 4:3 into 16:9: pillarbox, exact.
        let a = ContentMode.aspectFit.place(content: size(1440, 1080), in: rect(0, 0, 1920, 1080))
        #expect(a.destination == rect(240, 0, 1440, 1080))
        #expect(a.crop == .unit)
        // 16:9 into 9:16: letterbox; 607.5 rows → edges 656 and 1264.
        let b = ContentMode.aspectFit.place(content: size(1920, 1080), in: rect(0, 0, 1080, 1920))
        #expect(b.destination == rect(0, 656, 1080, 608))
        // The crop absorbs the half-row of rounding so pixels stay square.
        #expect(approx(b.crop.height, 1) && b.crop.width < 1 && approx(b.crop.width, 1080.0 * 1080 / (608 * 1920)))
    }
}
