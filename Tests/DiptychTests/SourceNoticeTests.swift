import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

/// The log says how inputs are processed: interlaced input deinterlaced,
/// non-square pixels shown at their aspect.
@Suite struct SourceNoticeTests {
    init() { _ = quietMedia }

    @Test func recordLogsDeinterlacingAndPixelShape() throws {
        let dir = Scratch(); defer { dir.remove() }
        let interlaced = dir.path("il.mp4"), cif = dir.path("cif.mp4"), out = dir.path("out.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=50", "-t", "1", "-vf", "tinterlace=mode=interleave_top",
                         "-pix_fmt", "yuv420p", "-c:v", "libx264", "-flags", "+ilme+ildct", "-top", "1", interlaced])
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=352x288:rate=25", "-t", "1", "-vf", "setsar=128/117:max=1000",
                         "-pix_fmt", "yuv420p", "-c:v", "libx264", cif])
        let r = try runCLI(["record", "--primary", interlaced, "--secondary", cif, "--out", out], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("primary: interlaced (top field first), deinterlaced with bwdif before compositing"), "\(r.stderr)")
        #expect(r.stderr.contains("secondary: pixels 128:117 (SAR), shown as 385x288"), "\(r.stderr)")
        let probe = try FileSource(url: out)
        #expect(probe.info.interlaced == nil)
    }
}
