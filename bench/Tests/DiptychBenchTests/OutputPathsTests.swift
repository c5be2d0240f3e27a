import Foundation
import Testing
@testable import DiptychBench

/// `--json`, `--chart` and `--sheet` are checked before anything runs; a
/// write that still fails at the end is one line.
@Suite struct OutputPathsTests {
    static let tiny = ["--stages", "composite", "--frames", "2", "--layouts", "pip", "--sizes", "320x240", "--formats", "rgba", "--peers", "none"]

    static let folder: String = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-bench-paths-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }()

    static let refused: [([String], String)] = [
        (["--json", "/nonexistent/x.json"], "--json '/nonexistent/x.json': no such folder"),
        (["--json", folder], "--json '\(folder)': is a folder"),
        (["--json", ""], "--json '': is empty"),
        (["--json", "/dev/null/x.json"], "--json '/dev/null/x.json': no such folder"),
        (["--chart", "/nonexistent/c.svg"], "--chart '/nonexistent/c.svg': no such folder"),
        (["--chart", folder], "--chart '\(folder)': is a folder"),
        (["--sheet", "/nonexistent/s.png"], "--sheet '/nonexistent/s.png': no such folder"),
        (["--sheet", "/dev/null"], "--sheet '/dev/null': is not a regular file"),
    ]

    @Test(arguments: zip(refused.map(\.0), refused.map(\.1)))
    func badOutputPathIsRefused(_ extra: [String], _ message: String) throws {
        let o = try #require(try BenchOptions.parse(Self.tiny + extra))
        #expect(throws: BenchUsageError(message)) { try o.checkOutputPaths() }
    }

    @Test func writableAndUnwrittenPathsPass() throws {
        let ok = try #require(try BenchOptions.parse(Self.tiny + ["--json", Self.folder + "/r.json", "--chart", Self.folder + "/c.svg",
                                                                  "--sheet", Self.folder + "/s.png"]))
        try ok.checkOutputPaths()
        // A JSON file may be a device (written in place); `none` writes nothing.
        try #require(try BenchOptions.parse(Self.tiny + ["--json", "/dev/null", "--chart", "none", "--sheet", "none"])).checkOutputPaths()
        // The sheet is a composite-stage output: another stage never writes it.
        try #require(try BenchOptions.parse(["--stages", "nvdec", "--sheet", "/nonexistent/s.png", "--chart", "/nonexistent/c.svg"]))
            .checkOutputPaths()
    }

    /// A default path that cannot be written says how to go without it.
    @Test func defaultPathNamesTheWayOut() {
        #expect(BenchOptions.refusal("--chart", "bench-fps.svg", "cannot write in its folder (Permission denied)").message
                == "--chart 'bench-fps.svg': cannot write in its folder (Permission denied) (the default; --chart none writes none)")
        #expect(BenchOptions.refusal("--sheet", "x.png", "no such folder").message == "--sheet 'x.png': no such folder")
    }

    /// The whole command exits 2 at once, before any stage runs.
    @Test(arguments: refused.map(\.0))
    func runRefusesBeforeMeasuring(_ extra: [String]) {
        let start = Date()
        // The outputs not under test go to a scratch folder, should a check let the run go on.
        let scratch = ["--chart", Self.folder + "/run.svg", "--sheet", Self.folder + "/run.png"]
        #expect(DiptychBench.run(arguments: Self.tiny + scratch + extra) == 2)
        #expect(Date().timeIntervalSince(start) < 2)
    }

    /// A write that fails at the end (a full disk) is one line naming the option and the path.
    @Test func endOfRunWriteFailureIsOneLine() throws {
        for path in ["/dev/full", "/nonexistent/x.json"] {
            do {
                try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
                Issue.record("\(path) written")
            } catch {
                let line = BenchOptions.writeFailure("--json", path, error)
                #expect(line.hasPrefix("--json '\(path)': cannot write ("), "\(line)")
                #expect(!line.contains("\n") && !line.contains("Error Domain"), "\(line)")
            }
        }
    }
}
