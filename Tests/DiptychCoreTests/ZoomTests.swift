import Testing
@testable import DiptychCore

/// Per-stream zoom: the centre 1/zoom of what the layout shows, in the same destination.
@Suite struct ZoomTests {
    static let canvas = PixelSize(width: 1280, height: 720)
    static let stream = StreamGeometry(sensorSize: PixelSize(width: 1280, height: 720))

    @Test(arguments: [(1.0, NormalizedRect.unit), (2.0, NormalizedRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5)),
                      (4.0, NormalizedRect(x: 0.375, y: 0.375, width: 0.25, height: 0.25))])
    func zoomCropsTheCentre(zoom: Double, crop: NormalizedRect) {
        var l = Layout.primaryOnly
        l.primaryZoom = zoom
        let d = l.resolve(canvas: Self.canvas, primary: Self.stream, secondary: nil).draws[0]
        #expect(d.destination == PixelRect(size: Self.canvas))
        #expect(d.crop == crop)
    }

    @Test func zoomAppliesOnTopOfTheLayoutsCrop() {
        // Side by side: each 640x720 half shows the middle 0.5625 of a 16:9 stream; zoom 2 halves that.
        var l = Layout.sideBySide
        l.secondaryZoom = 2
        let plan = l.resolve(canvas: Self.canvas, primary: Self.stream, secondary: Self.stream)
        let p = plan.draws.first { $0.role == .primary }!, s = plan.draws.first { $0.role == .secondary }!
        #expect(abs(s.crop.width - p.crop.width / 2) < 1e-12 && abs(s.crop.height - 0.5) < 1e-12)
        #expect(abs((s.crop.x + s.crop.width / 2) - 0.5) < 1e-12)
    }

    @Test func upsamplingIsReported() {
        var l = Layout.pip()
        l.secondaryZoom = 3
        let small = PixelSize(width: 320, height: 180)
        let plan = l.resolve(canvas: Self.canvas, primary: Self.stream, secondary: StreamGeometry(sensorSize: small))
        let up = plan.zoomUpsampling(layout: l, uprightSizes: [.primary: Self.canvas, .secondary: small])
        #expect(up.count == 1 && up[0].role == .secondary && up[0].scale > 1)
        // Without zoom nothing is reported, however the layout scales.
        #expect(Layout.pip().resolve(canvas: Self.canvas, primary: Self.stream, secondary: StreamGeometry(sensorSize: small))
            .zoomUpsampling(layout: .pip(), uprightSizes: [.secondary: small]).isEmpty)
    }

    @Test(arguments: [0.5, 9.0, Double.nan])
    func outOfRangeZoomIsInvalid(zoom: Double) {
        var l = Layout()
        l.secondaryZoom = zoom
        #expect(l.validationError()?.field == "--zoom-secondary")
    }
}
