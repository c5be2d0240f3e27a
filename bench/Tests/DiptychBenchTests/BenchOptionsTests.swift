import DiptychCore
import Testing
@testable import DiptychBench

@Suite struct BenchOptionsTests {
    @Test func quickDefaults() throws {
        let o = try #require(try BenchOptions.parse([]))
        #expect(o.layouts == [.pip, .sideBySide, .stacked, .primaryOnly])
        #expect(o.sizes == [.hd1080])
        #expect(o.formats == [.nv12, .rgba])
        #expect(o.e2eLayouts == [.pip, .sideBySide])
        #expect(o.stages == [.composite, .endToEnd])
    }

    @Test func fullIsTheWholeMatrix() throws {
        let o = try #require(try BenchOptions.parse(["--full"]))
        #expect(o.sizes.count == 3 && o.e2eSizes.count == 3 && o.e2eLayouts.count == 4)
    }

    @Test func listsAndValues() throws {
        let o = try #require(try BenchOptions.parse(["--layouts", "pip,stacked", "--sizes", "720p,640x360", "--formats", "rgba",
                                                    "--stages", "e2e", "--frames", "30", "--peers", "none", "--chart", "none"]))
        #expect(o.layouts == [.pip, .stacked] && o.e2eLayouts == [.pip, .stacked])
        #expect(o.sizes == [.hd720, PixelSize(width: 640, height: 360)])
        #expect(o.formats == [.rgba] && o.stages == [.endToEnd] && o.frames == 30 && o.peers.isEmpty && o.chart == nil)
        #expect(try BenchOptions.parse(["--help"]) == nil)
    }

    @Test func pairsAndPresets() throws {
        let o = try #require(try BenchOptions.parse(["--stages", "e2e", "--pairs", "24", "--preset", "ultrafast,veryfast"]))
        #expect(o.pairs == .search(max: 24) && o.e2eLayouts == [.pip] && o.e2eSizes == [.hd1080])
        #expect(o.presets == ["ultrafast", "veryfast"] && o.preset == "ultrafast" && o.minSpeed == 1)
        let l = try #require(try BenchOptions.parse(["--pairs", "8,2,4,2", "--layouts", "side-by-side", "--min-speed", "0.5"]))
        #expect(l.pairs == .counts([2, 4, 8]) && l.e2eLayouts == [.sideBySide] && l.minSpeed == 0.5)
        #expect(try BenchOptions.parse([])?.pairs == nil)
        #expect(try BenchOptions.parse(["--pair-runners", "diptych,ffmpeg-nvdec"])?.pairRunners == ["diptych", "ffmpeg-nvdec"])
    }

    @Test(arguments: [["--pairs", "0"], ["--pairs", "x"], ["--pairs", "2,,3"], ["--pairs", "999"], ["--min-speed", "0"],
                      ["--preset", "ultrafast,warp"], ["--pair-runners", "vlc"]])
    func badPairFlags(_ args: [String]) {
        #expect(throws: BenchUsageError.self) { _ = try BenchOptions.parse(args) }
    }

    @Test(arguments: [["--layouts", "diagonal"], ["--sizes", "721x480"], ["--formats", "yuyv"], ["--frames", "0"],
                      ["--frames"], ["--stages", "render"], ["--peers", "vlc"], ["--preset", "warp"], ["--bogus"],
                      ["--duration", "-1"], ["--gpu", "nowhere"]])
    func badFlagsAreOneLineErrors(_ args: [String]) {
        do {
            _ = try BenchOptions.parse(args)
            Issue.record("\(args) parsed")
        } catch {
            #expect(!error.message.contains("\n"))
            #expect(!error.message.isEmpty)
        }
    }
}
