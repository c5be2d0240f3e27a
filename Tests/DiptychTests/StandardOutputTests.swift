import Foundation
import Testing
@testable import Diptych
import DiptychCore

/// What `diptych` writes to stdout (the usage, `--json`) must not be lost
/// silently: a failed write is one line on stderr and exit status 1. The
/// recording itself is kept, and a reader that goes away never ends a take.
@Suite(.serialized) struct StandardOutputTests {
    init() { _ = quietMedia }

    static let full = "diptych: cannot write to standard output: No space left on device\n"

    /// Runs `diptych args…` through bash with `redirect` appended (`> /dev/full`, `| true`).
    func shell(_ args: [String], _ redirect: String, in dir: String? = nil) throws -> CLIResult {
        let exe = try #require(diptychExecutable())
        return try run("/bin/bash", ["-c", "\"$0\" \"$@\" \(redirect)", exe.path] + args, in: dir)
    }

    @Test(arguments: [["--help"], ["help"], ["--version"], ["record", "--help"], ["demo", "--help"], ["probe", "--help"],
                      ["bench", "--help"], ["serve", "--help"]])
    func usageToAFullDiskExitsOne(args: [String]) throws {
        let r = try shell(args, "> /dev/full")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr == Self.full, "\(r.stderr)")
    }

    static let take = ["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--out", "take.mp4", "--duration", "1"]

    /// The JSON report is lost: exit 1 with one line saying so; the take is complete.
    @Test func jsonReportToAFullDiskExitsOneAndKeepsTheTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try shell(Self.take + ["--json"], "> /dev/full", in: dir.url.path)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.hasSuffix(Self.full) && r.stderr.components(separatedBy: "cannot write").count == 2, "\(r.stderr)")
        let frames = try decodeAll(dir.path("take.mp4")).frames
        #expect(frames.map(\.counter) == (0..<30).map { Optional($0) })
    }

    /// Without `--json` nothing goes to stdout: a full one does not matter.
    @Test func takeWithoutJSONWritesNothingToStdout() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try shell(Self.take, "> /dev/full", in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("cannot write"))
        #expect(try decodeAll(dir.path("take.mp4")).frames.count == 30)
    }

    /// `diptych record --json ... | true`: the reader of stdout is gone
    /// before the take starts; the take still runs to its end with every
    /// frame, then the lost report is reported (exit 1).
    @Test func closedStdoutNeverEndsATake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try shell(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:smpte:160x120@30",
                           "--out", "take.mp4", "--duration", "2", "--json"], "| true; exit ${PIPESTATUS[0]}", in: dir.url.path)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.hasSuffix("diptych: cannot write to standard output: Broken pipe\n"), "\(r.stderr)")
        #expect(try decodeAll(dir.path("take.mp4")).frames.count == 60)
    }
}
