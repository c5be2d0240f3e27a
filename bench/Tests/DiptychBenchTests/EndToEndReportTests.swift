import DiptychCore
import Testing
@testable import DiptychBench

/// The end-to-end stage's options, commands and tables: repeated runs
/// alternating with the peers, a mirrored secondary, memory and stage times.
@Suite struct EndToEndReportTests {
    @Test func repeatAndMirrorOptions() throws {
        let d = try #require(try BenchOptions.parse([]))
        #expect(d.repeats == 1 && d.mirror)
        let o = try #require(try BenchOptions.parse(["--stages", "e2e", "--repeat", "3", "--mirror", "off"]))
        #expect(o.repeats == 3 && !o.mirror)
        for bad in [["--repeat", "0"], ["--repeat", "x"], ["--repeat", "21"], ["--mirror", "yes"]] {
            #expect(throws: BenchUsageError.self) { try BenchOptions.parse(bad) }
        }
    }

    /// The server runner's line about its render threads, summed over contexts from `/metrics`.
    @Test func encodersLineNamesWhatTheTakesRan() {
        let takes: [[String: Any]] = [["id": "a", "encoder": "gpu-h264"], ["id": "b", "encoder": "libx264"], ["id": "c", "encoder": "gpu-h264"],
                                      ["id": "d"]]
        #expect(ServePairRunner.encodersLine(takes) == "encoders gpu-h264 × 2, libx264 × 1")
        #expect(ServePairRunner.encodersLine([["id": "a"]]) == nil)
    }

    @Test func renderThreadLineFromMetrics() throws {
        let metrics = """
            # TYPE diptych_gpu_render_thread_busy_seconds_total counter
            diptych_gpu_render_thread_busy_seconds_total{context="0"} 6
            diptych_gpu_render_thread_busy_seconds_total{context="1"} 2
            diptych_gpu_render_thread_items_total{context="0"} 3000
            diptych_gpu_render_thread_items_total{context="1"} 1000
            diptych_gpu_render_thread_wakeups_total{context="0"} 500
            diptych_gpu_render_thread_wakeups_total{context="1"} 500
            diptych_gpu_render_thread_phase_seconds_total{context="0",phase="fence"} 4
            diptych_gpu_render_thread_phase_seconds_total{context="0",phase="cuda_copy"} 0
            diptych_gpu_render_thread_phase_seconds_total{context="1",phase="dispatch"} 0.4
            """
        let line = try #require(ServePairRunner.renderThreadLine(metrics, seconds: 10))
        #expect(line == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100)", "\(line)")
        #expect(ServePairRunner.renderThreadLine("diptych_frames_total 3\n", seconds: 10) == nil)
        // Less what the render threads did before the trial (the server's calibration).
        let before = """
            diptych_gpu_render_thread_busy_seconds_total{context="0"} 4
            diptych_gpu_render_thread_items_total{context="0"} 2000
            diptych_gpu_render_thread_wakeups_total{context="0"} 500
            diptych_gpu_render_thread_phase_seconds_total{context="0",phase="fence"} 3
            """
        #expect(ServePairRunner.renderThreadLine(metrics, since: before, seconds: 10)
                == "render threads 40 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 0.500, dispatch 0.200)")
        // With the threads' CPU time: per item too, less the time before.
        let withCPU = metrics + "\ndiptych_gpu_render_thread_cpu_seconds_total{context=\"0\"} 3\ndiptych_gpu_render_thread_cpu_seconds_total{context=\"1\"} 1\n"
        #expect(ServePairRunner.renderThreadLine(withCPU, since: before + "\ndiptych_gpu_render_thread_cpu_seconds_total{context=\"0\"} 2\n", seconds: 10)
                == "render threads 40 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 0.500, dispatch 0.200), 1.000 CPU ms an item")
        // A counter of both contexts, as /metrics gives it.
        func counter(_ name: String, _ first: Double, _ second: Double) -> String {
            "\ndiptych_gpu_render_thread_\(name)_total{context=\"0\"} \(first)\ndiptych_gpu_render_thread_\(name)_total{context=\"1\"} \(second)\n"
        }
        // With the batches timed on the GPU: its time a batch and idle before one.
        let withGPU = metrics + counter("gpu_batches", 60, 40) + counter("gpu_batch_seconds", 0.3, 0.1) + counter("gpu_idle_seconds", 0.1, 0)
        #expect(ServePairRunner.renderThreadLine(withGPU, seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch, idle 1.000 ms before one (20 % of the GPU's time)")
        // And the batches' parts: uploads, the GPU encoder, the dispatches between them; counts of 0 leave the line as above.
        let withParts = withGPU + counter("gpu_upload_seconds", 0.03, 0.02) + counter("gpu_encoder_seconds", 0.25, 0.05)
        #expect(ServePairRunner.renderThreadLine(withParts, seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch (uploads 0.500, dispatches 0.500, the GPU encoder 3.000), idle 1.000 ms before one (20 % of the GPU's time)")
        // With the GPU encoder's pictures: how many a batch, and its time a picture.
        #expect(ServePairRunner.renderThreadLine(withParts + counter("gpu_encoded_pictures", 500, 250), seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch (uploads 0.500, dispatches 0.500, the GPU encoder 3.000 (7.5 pictures, 0.400 ms a picture)),"
                + " idle 1.000 ms before one (20 % of the GPU's time)")
        // With its passes' split: each pass's time a picture, longest first, passes that took none left out.
        let passes = """

            diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context="0",pass="deblock"} 0.1
            diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context="1",pass="deblock"} 0.05
            diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context="0",pass="search"} 0.075
            diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context="0",pass="intra"} 0
            """
        #expect(ServePairRunner.renderThreadLine(withParts + counter("gpu_encoded_pictures", 500, 250) + passes, seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch (uploads 0.500, dispatches 0.500, the GPU encoder 3.000 (7.5 pictures, 0.400 ms a picture;"
                + " passes, ms a picture: deblock 0.200, search 0.100)), idle 1.000 ms before one (20 % of the GPU's time)")
        // With its batches that had IDRs: how many a second.
        #expect(ServePairRunner.renderThreadLine(withParts + counter("gpu_encoded_pictures", 500, 250) + passes + counter("gpu_encoder_idr_batches", 12, 3),
                                                 seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch (uploads 0.500, dispatches 0.500, the GPU encoder 3.000 (7.5 pictures, 0.400 ms a picture;"
                + " passes, ms a picture: deblock 0.200, search 0.100; 1.5 batches a second with IDRs)), idle 1.000 ms before one (20 % of the GPU's time)")
        #expect(ServePairRunner.renderThreadLine(withGPU + counter("gpu_upload_seconds", 0, 0) + counter("gpu_encoder_seconds", 0, 0), seconds: 10)
                == "render threads 80 % busy, 4.0 items a wake-up, 2.000 busy ms an item (fence 1.000, dispatch 0.100);"
                + " GPU 4.000 ms a batch, idle 1.000 ms before one (20 % of the GPU's time)")
    }

    @Test func mirroredSecondaryForEveryProgram() {
        var options = BenchOptions()
        options.workDir = "/w"
        let stage = EndToEndStage(options: options, log: { _ in })
        let inputs = PeerCommandTests.inputs
        #expect(stage.ourArguments(layout: .pip, inputs: inputs, out: "o.mp4").contains("--mirror-secondary"))
        let peers = Peers(options: options)
        let ff = peers.command(.ffmpeg, layout: .pip, inputs: inputs)
        let graph = ff.arguments[ff.arguments.firstIndex(of: "-filter_complex")! + 1]
        #expect(graph.contains("scale=576:324:flags=bilinear,hflip[s]"), "\(graph)")
        #expect(peers.command(.gstreamer, layout: .pip, inputs: inputs).arguments.contains("method=horizontal-flip"))
        options.mirror = false
        #expect(!EndToEndStage(options: options, log: { _ in }).ourArguments(layout: .pip, inputs: inputs, out: "o.mp4")
            .contains("--mirror-secondary"))
        #expect(!Peers(options: options).command(.ffmpeg, layout: .pip, inputs: inputs).arguments.joined().contains("hflip"))
    }

    /// `--keyframe-interval`: ours and every peer's keyframe interval, a second by default.
    @Test func keyframeIntervalForEveryProgram() throws {
        let d = try #require(try BenchOptions.parse([]))
        #expect(d.keyframeInterval == 1 && d.gop == 60)
        var options = try #require(try BenchOptions.parse(["--stages", "e2e", "--keyframe-interval", "20"]))
        #expect(options.gop == 1200)
        options.workDir = "/w"
        let inputs = PeerCommandTests.inputs
        let ours = EndToEndStage(options: options, log: { _ in }).ourArguments(layout: .pip, inputs: inputs, out: "o.mp4")
        #expect(ours[ours.firstIndex(of: "--keyframe-interval")! + 1] == "20.0", "\(ours)")
        let ff = Peers(options: options).command(.ffmpeg, layout: .pip, inputs: inputs).arguments
        #expect(ff[ff.firstIndex(of: "-g")! + 1] == "1200", "\(ff)")
        #expect(Peers(options: options).command(.gstreamer, layout: .pip, inputs: inputs).arguments.contains("key-int-max=1200"))
        for bad in [["--keyframe-interval", "0"], ["--keyframe-interval", "x"], ["--keyframe-interval", "3601"], ["--keyframe-interval", "0.01"]] {
            #expect(throws: BenchUsageError.self) { try BenchOptions.parse(bad) }
        }
    }

    static func run(_ fps: Double, rss: Double, stages: StageTimes? = nil) -> RunFigures {
        RunFigures(frames: 600, seconds: 600 / fps, fps: fps, cpuMsPerFrame: 12, peakRSSMiB: rss, minorFaults: 1000,
                   rssGrowthMiB: 0.5, loadAverage: 1.5, stageMsPerFrame: stages)
    }

    @Test func mediansRangesMemoryAndStages() {
        var st = StageTimes()
        st.decode = 5; st.render = 0.4; st.convert = 0.6; st.encode = 5.3; st.mux = 0.03; st.other = 0.67
        let ours = [Self.run(150, rss: 280, stages: st), Self.run(170, rss: 282, stages: st), Self.run(160, rss: 281, stages: st)]
        var r = EndToEndStage.summarize(ours, layout: .pip, inputs: PeerCommandTests.inputs)
        #expect(r.fps == 160 && r.peakRSSMiB == 281 && r.stageMsPerFrame == st)
        var p = PeerResult(peer: .ffmpeg, fps: 140, frames: 600, cpuMsPerFrame: 11, ratio: 1.15, command: "ffmpeg …")
        p.runs = [Self.run(130, rss: 190), Self.run(140, rss: 190), Self.run(150, rss: 190)]
        p.ratioRange = [1.07, 1.21]
        p.peakRSSMiB = 190
        p.memoryRatio = 281.0 / 190
        r.peers = [p]
        r.preset = "ultrafast"
        let machine = MachineInfo(cpu: "cpu", cores: 2, memoryGiB: 1, os: "Linux", gpu: nil, ffmpeg: nil, gstreamer: nil)
        let md = Report.markdown(BenchReport(date: "now", command: "diptych bench", machine: machine, results: [r]))
        #expect(md.contains("| pip | 1920x1080 | ultrafast | 3 | 160.0 (150.0–170.0) | 140.0 (130.0–150.0) | 1.15× (1.07–1.21) |"))
        #expect(md.contains("| 281 · 190 · – | 1.48× |"))
        #expect(md.contains("| pip | 1920x1080 | ultrafast | 5.00 | 0.40 | 0.60 | 5.30 | 0.03 | 0.67 | 12.00 |"))
        #expect(median([3, 1, 2]) == 2 && median([4, 1, 2, 3]) == 2.5 && median([]) == nil)
    }
}
