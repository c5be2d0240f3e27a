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

    @Test func nvdecStage() throws {
        let o = try #require(try BenchOptions.parse(["--stages", "nvdec", "--streams", "8", "--frames", "300"]))
        #expect(o.stages == [.nvdec] && o.streams == 8 && o.frames == 300)
        #expect(try BenchOptions.parse([])?.streams == 16)
        #expect(throws: BenchUsageError("--streams '0': expected 1 to 256")) { _ = try BenchOptions.parse(["--streams", "0"]) }
        #expect(try BenchOptions.parse(["--stages", "nvdec", "--contexts", "2"])?.contexts == 2)
        #expect(try BenchOptions.parse([])?.contexts == 1)
        #expect(throws: BenchUsageError("--contexts '17': expected 1 to 16")) { _ = try BenchOptions.parse(["--contexts", "17"]) }
        #expect(throws: BenchUsageError("--stages 'gpu': expected composite, e2e or nvdec")) { _ = try BenchOptions.parse(["--stages", "gpu"]) }
        #expect(try BenchOptions.parse(["--pair-runners", "diptych,diptych-cpu"])?.pairRunners == ["diptych", "diptych-cpu"])
        #expect(try BenchOptions.parse(["--stages", "e2e,nvdec", "--frame-batch", "8"])?.frameBatch == 8)
    }

    /// The nvdec stage's flags where that stage does not run are refused, not ignored.
    @Test(arguments: [(["--stages", "e2e", "--frame-batch", "8"], "--frame-batch", "e2e"),
                      (["--contexts", "2"], "--contexts", "composite, e2e"),
                      (["--stages", "composite", "--streams", "8"], "--streams", "composite")])
    func nvdecFlagsNeedTheNvdecStage(_ args: [String], _ flag: String, _ stages: String) {
        #expect(throws: BenchUsageError("\(flag) sets the nvdec stage, which --stages does not run here (\(stages)); add nvdec to --stages")) {
            _ = try BenchOptions.parse(args)
        }
    }

    /// The decode check's PSNR: identical planes read 99 dB, one code off everywhere 48.13 dB.
    @Test func psnrOfYUVPlanes() {
        let a = VideoFrame.allocate(width: 16, height: 8, format: .i420), b = VideoFrame.allocate(width: 16, height: 8, format: .nv12)
        #expect(PSNR.planes(a, b) == [99, 99, 99])
        let c = VideoFrame.allocate(width: 16, height: 8, format: .nv12)
        let uv = c.planes[1].storage.mutableBase.advanced(by: c.planes[1].offset).assumingMemoryBound(to: UInt8.self)
        for i in 0..<(16 * 4) where i % 2 == 1 { uv[i] = 1 }
        let p = PSNR.planes(a, c)
        #expect(p[0] == 99 && p[1] == 99 && abs(p[2] - 48.13) < 0.01)
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
