import Foundation
import DiptychCore
import Testing
@testable import DiptychBench

/// The peers must write one frame per primary frame at 60 fps, with our geometry.
@Suite struct PeerCommandTests {
    static let inputs = EndToEndStage.Inputs(primary: "p.mp4", secondary: "s.mp4", primarySize: .hd1080,
                                             secondarySize: .hd720, frames: 600, note: nil)

    static func ffmpeg(_ layout: LayoutKind) -> [String] {
        let peers = Peers(options: BenchOptions())
        let plan = CompositeStage.plan(layout, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
        return peers.ffmpegArguments(layout: layout, plan: plan, inputs: inputs, out: "o.mp4")
    }

    @Test func stacksGetASixtyFPSSecondaryAndOutput() {
        for layout in [LayoutKind.sideBySide, .stacked] {
            let a = Self.ffmpeg(layout)
            let graph = a[a.firstIndex(of: "-filter_complex")! + 1]
            #expect(graph.contains("[1:v]fps=60,"), "\(graph)")
            #expect(graph.contains(layout == .sideBySide ? "hstack=inputs=2:shortest=1" : "vstack=inputs=2:shortest=1"))
            #expect(a.contains("-r") && a[a.firstIndex(of: "-r")! + 1] == "60")
        }
    }

    @Test func pipOverlaysAtOurInset() {
        let plan = CompositeStage.plan(.pip, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
        let inset = plan.draws.first { $0.role == .secondary }!.destination
        let a = Self.ffmpeg(.pip)
        let graph = a[a.firstIndex(of: "-filter_complex")! + 1]
        #expect(graph.contains("scale=\(inset.width):\(inset.height):flags=bilinear"))
        #expect(graph.contains("overlay=x=\(inset.x):y=\(inset.y)"))
        #expect(!a.contains("-r"))
        for flag in ["-preset", "-b:v", "-g", "-bf"] { #expect(a.contains(flag)) }
    }

    @Test func encoderThreadsOnlyWhenAskedFor() throws {
        #expect(!Self.ffmpeg(.pip).contains("-threads"))
        let o = try #require(try BenchOptions.parse(["--ffmpeg-encoder-threads", "2"]))
        let peers = Peers(options: o)
        let plan = CompositeStage.plan(.pip, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
        for a in [peers.ffmpegArguments(layout: .pip, plan: plan, inputs: Self.inputs, out: "o.mp4"),
                  peers.ffmpegCUDAArguments(plan: plan, inputs: Self.inputs, out: "o.mp4")] {
            let i = try #require(a.firstIndex(of: "-threads"))
            #expect(a[i + 1] == "2" && i > a.firstIndex(of: "libx264")! && i < a.firstIndex(of: "-movflags")!)
        }
        #expect(throws: BenchUsageError("--ffmpeg-encoder-threads '0': expected a whole number from 1 to 256")) {
            _ = try BenchOptions.parse(["--ffmpeg-encoder-threads", "0"])
        }
    }

    @Test func slicesReachOurTakesOnlyWhenAskedFor() throws {
        var c = PairCase(layout: .pip, inputs: Self.inputs, preset: "ultrafast", bitrate: 8_000_000, gop: 60, gpu: "auto",
                         workDir: "/tmp", encoder: .gpu)
        #expect(!PairRunners.takeArguments(c, "o.mp4", decoder: .auto).contains("--slices"))
        let o = try #require(try BenchOptions.parse(["--slices", "4"]))
        c.slices = o.slices
        let a = PairRunners.takeArguments(c, "o.mp4", decoder: .auto)
        let i = try #require(a.firstIndex(of: "--slices"))
        #expect(a[i + 1] == "4")
        // The server is sent the same take.
        #expect(try TakeConfiguration.parse(arguments: a).slices == 4)
        #expect(throws: BenchUsageError("--slices '0': expected 1 to 256")) { _ = try BenchOptions.parse(["--slices", "0"]) }
    }

    @Test func aServerSharesItsTakesBetweenTheGPUEncoderAndAnother() throws {
        let o = try #require(try BenchOptions.parse(["--pairs", "24", "--serve-gpu-takes", "2", "--encoder", "x264"]))
        #expect(o.serve.gpuTakes == 2 && o.encoder == .x264)
        #expect(try BenchOptions.parse([])?.serve.gpuTakes == nil)
        #expect(throws: BenchUsageError("--serve-gpu-takes: the other takes encode with --encoder's encoder, which is gpu here too (give --encoder x264 or auto)")) {
            _ = try BenchOptions.parse(["--serve-gpu-takes", "2", "--encoder", "gpu"])
        }
        #expect(throws: BenchUsageError("--serve-gpu-takes '-1': expected a whole number from 0 to \(PairCounts.limit)")) {
            _ = try BenchOptions.parse(["--serve-gpu-takes", "-1"])
        }
        let c = PairCase(layout: .pip, inputs: Self.inputs, preset: "ultrafast", bitrate: 8_000_000, gop: 60, gpu: "auto",
                         workDir: "/tmp", encoder: .x264)
        let runner = try #require(PairRunners.all(Peers(options: o), serve: o.serve).compactMap { $0 as? ServePairRunner }.first)
        // What each of a trial's takes is sent: the first two the GPU encoder, the third the case's.
        let sent = try (0..<3).map { i in
            try TakeConfiguration(jsonData: runner.configuration(runner.takeCase(c, i), "o\(i).mp4")).encoder
        }
        #expect(sent == [.gpu, .gpu, .x264])
        #expect(runner.summary.contains("the first 2 takes of a trial encoded on the GPU"))
    }

    @Test func theServeRunnersPassTheServersSettingsOn() throws {
        let o = try #require(try BenchOptions.parse(["--pairs", "4", "--serve-decode-nice", "0", "--serve-decode-cores", "6", "--serve-contexts", "2"]))
        let runner = try #require(PairRunners.all(Peers(options: o), serve: o.serve).compactMap { $0 as? ServePairRunner }.first)
        let c = PairCase(layout: .pip, inputs: Self.inputs, preset: "ultrafast", bitrate: 8_000_000, gop: 60, gpu: "auto", workDir: "/tmp")
        let a = runner.serveArguments(c, pairs: 4)
        for (flag, value) in [("--decode-nice", "0"), ("--decode-cores", "6"), ("--contexts", "2")] {
            let i = try #require(a.firstIndex(of: flag), "\(flag) in \(a)")
            #expect(a[i + 1] == value)
        }
        #expect(!a.contains("--encoder-threads"))
        #expect(throws: BenchUsageError("--serve-decode-nice '20': expected a whole number from 0 to 19")) {
            _ = try BenchOptions.parse(["--serve-decode-nice", "20"])
        }
    }

    @Test func primaryOnlyReadsOneInput() {
        let a = Self.ffmpeg(.primaryOnly)
        #expect(a.filter { $0 == "-i" }.count == 1)
    }

    @Test func gstreamerResamplesTheSecondaryToSixty() {
        let peers = Peers(options: BenchOptions())
        let plan = CompositeStage.plan(.sideBySide, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
        let a = peers.gstArguments(plan: plan, inputs: Self.inputs, out: "o.mp4")
        #expect(a.contains("videorate"))
        #expect(a.contains("video/x-raw,format=I420,width=1920,height=1080,framerate=60/1"))
        #expect(a.contains("speed-preset=ultrafast") && a.contains("bframes=0"))
        #expect(a.filter { $0.hasPrefix("sink_1::xpos=") } == ["sink_1::xpos=\(plan.draws[1].destination.x)"])
    }
}

@Suite struct ReportTests {
    static func report() -> BenchReport {
        var r = BenchResult(stage: .endToEnd, layout: "pip", canvas: "1920x1080", input: "files", frames: 600, seconds: 10,
                            fps: 60, realtime60: 1, cpuMsPerFrame: 20)
        r.path = "plan: pass=fragment shortcut=direct-copy staging=mapped pictures=textures cuda-frames=none readback=mapped fences=egl"
        r.peers = [PeerResult(peer: .ffmpeg, fps: 120, frames: 600, cpuMsPerFrame: 12, ratio: 0.5),
                   PeerResult(peer: .gstreamer, note: "gst-launch-1.0 not installed: skipped")]
        let machine = MachineInfo(cpu: "cpu", cores: 2, memoryGiB: 1, os: "Linux", gpu: "llvmpipe", ffmpeg: nil, gstreamer: nil)
        return BenchReport(date: "now", command: "diptych bench", machine: machine, results: [r])
    }

    @Test func tableHasPeersRatiosAndNotes() {
        let md = Report.markdown(Self.report())
        #expect(md.contains("| e2e | pip | 1920x1080 | files | fragment (direct copy where a plan allows it) | 60.0 | 1.00 |"))
        #expect(md.contains("120.0 (0.50×)"))
        #expect(md.contains("skipped"))
        #expect(md.contains("gstreamer pip 1920x1080: gst-launch-1.0 not installed: skipped"))
    }

    @Test func chartIsOneSVGWithEveryBar() throws {
        let svg = Report.svg(Self.report())
        #expect(svg.hasPrefix("<svg") && svg.hasSuffix("</svg>\n"))
        #expect(svg.contains("diptych 60.0") && svg.contains("ffmpeg 120.0") && svg.contains("60 fps") && svg.contains("log scale"))
        // Log scale: 60 and 120 fps bars differ by log10(2) of the width per decade, not by a factor of two.
        let widths = svg.matches(of: /<rect x="330.0" y="[0-9.]+" width="([0-9.]+)"/).compactMap { Double($0.1) }
        let decades = log10(1000.0 / 1.0)   // the axis spans 1 to 1000 fps here (the decade below 10, the smallest it starts at)
        #expect(widths.count >= 2 && abs((widths[1] - widths[0]) - log10(2) / decades * 520) < 1, "\(widths)")
    }

    @Test func contactSheetTilesEveryLayoutWithItsLabel() throws {
        let frames = (0..<4).map { i in (label: "pip \(i)", frame: VideoFrame.allocate(width: 640, height: 360, format: .rgba)) }
        let sheet = try #require(Report.contactSheet(frames, tileWidth: 320))
        #expect(sheet.width == 2 * 320 + 3 * 8 && sheet.height == 2 * 180 + 3 * 8 && sheet.format == .rgba)
        // The black tiles (allocate zero-fills) get white label pixels only inside each label's box.
        let d = sheet.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self)
        func white(_ x0: Int, _ y0: Int, _ w: Int, _ h: Int) -> Int {
            var n = 0
            for y in y0..<y0 + h { for x in x0..<x0 + w where d[(y * sheet.width + x) * 4] == 255 { n += 1 } }
            return n
        }
        let box = (w: TileFont.width("PIP 0", scale: 2) + 8, h: TileFont.height * 2 + 8)
        for k in 0..<4 {
            let ox = 8 + (k % 2) * (320 + 8) + 8, oy = 8 + (k / 2) * (180 + 8) + 8
            #expect(white(ox, oy, box.w, box.h) > 40, "tile \(k) has no label")
            #expect(white(ox + box.w, oy + box.h, 320 - 8 - box.w, 180 - 8 - box.h) == 0)
        }
    }
}
