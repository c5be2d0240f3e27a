import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// The sample aspect ratio a real file states reaches the layout.
@Suite struct SampleAspectSourceTests {
    init() { _ = quietFFmpeg }

    @Test(arguments: ["mp4", "mkv", "ts"])
    func anamorphicFileReportsItsPixelShape(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("cif.\(ext)")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=352x288:rate=25", "-t", "1", "-vf", "setsar=128/117:max=1000",
                                        "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let src = try FileSource(url: p)
        let sar = SampleAspectRatio(width: 128, height: 117)
        #expect(src.info.size == PixelSize(width: 352, height: 288))
        #expect(src.info.sampleAspect == sar)
        #expect(src.info.description.contains("SAR 128:117 (shown 385x288)"), "\(src.info)")
        let frames = try readAll(src)
        #expect(frames.count == 25)
        #expect(frames.allSatisfy { $0.sampleAspect == sar && $0.width == 352 })
        // The geometry a session builds from it: shown 385×288, an inset ≈ 289×216.
        let g = src.info.geometry(orientation: .identity)
        #expect(g.uprightSize == PixelSize(width: 385, height: 288))
        let plan = Layout.pip(PiPPlacement(corner: .topLeft, size: 0.3, margin: .pixels(0)))
            .resolve(canvas: .hd720, primary: StreamGeometry(sensorSize: .hd720), secondary: g)
        #expect(plan.draws[1].destination.size == PixelSize(width: 288, height: 216))
    }

    @Test func squarePixelsStaySquare() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("square.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=352x288:rate=25", "-t", "0.2",
                                        "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.sampleAspect.isSquare)
        #expect(try #require(try src.nextFrame()).sampleAspect.isSquare)
        #expect(src.info.geometry(orientation: .identity).uprightSize == PixelSize(width: 352, height: 288))
    }
}
