import Foundation
import Testing
@testable import Diptych
import DiptychCore

/// `diptych record --primary -` with a bad Y4M header: exit 2, one line saying what is wrong.
@Suite struct Y4MHeaderCLITests {
    @Test(arguments: [("YUV4MPEG2 W0 H0 F25:1 Ip A1:1 C420jpeg", "width W0 must be 1 to 16384"),
                      ("YUV4MPEG2 W99999999 H480 F25:1 Ip A1:1 C420jpeg", "width W99999999 must be 1 to 16384"),
                      ("YUV4MPEG2 W320 H240 F0:0 C420jpeg", "frame rate F0:0 must be two positive numbers N:D (F30:1, F30000:1001)"),
                      ("YUV4MPEG2 W320 H240 F30:0 C420jpeg", "frame rate F30:0 must be two positive numbers N:D (F30:1, F30000:1001)"),
                      ("YUV4MPEG2 W320 H240 F1:1000000 C420jpeg", "frame rate F1:1000000 must be 0.01 to 1000 fps"),
                      ("YUV4MPEG2 W320 H240 F1000000:1 C420jpeg", "frame rate F1000000:1 must be 0.01 to 1000 fps")])
    func badHeaderOnStdin(header: String, reason: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let input = dir.path("in.y4m"), out = dir.path("out.mp4")
        try Data((header + "\nFRAME\n").utf8).write(to: URL(fileURLWithPath: input))
        let stdin = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        let r = try runCLI(["record", "--primary", "-", "--out", out], in: dir.url.path, stdin: stdin)
        #expect(r.status == 2)
        #expect(r.stderr == "diptych: -: invalid Y4M header: \(reason)\n", "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}
