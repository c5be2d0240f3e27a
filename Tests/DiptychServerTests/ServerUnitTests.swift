import DiptychCore
import Foundation
import Testing
@testable import DiptychServer
import Diptych
import DiptychMedia

/// The server's pure parts: routing, admission, access control, request bodies, latency, cost.
struct ServerUnitTests {
    @Test func routerMatchesParametersAndSaysWhatIsAllowed() throws {
        var r = Router()
        r.add("GET", "/v1/takes/{id}") { _, p in HTTPResponse(status: 200, body: Data((p["id"] ?? "").utf8)) }
        r.add("DELETE", "/v1/takes/{id}") { _, _ in HTTPResponse(status: 204, body: Data()) }
        r.add("POST", "/v1/takes/{id}/outputs") { _, p in HTTPResponse(status: 201, body: Data((p["id"] ?? "").utf8)) }
        let got = try r.handle(HTTPRequest(method: "GET", path: "/v1/takes/ab12"))
        #expect(got.status == 200 && String(decoding: got.body, as: UTF8.self) == "ab12")
        #expect(try r.handle(HTTPRequest(method: "POST", path: "/v1/takes/x/outputs/")).status == 201)
        #expect(throws: RequestError.notFound("/v1/takes: no such resource")) { try r.handle(HTTPRequest(method: "GET", path: "/v1/takes")) }
        do {
            _ = try r.handle(HTTPRequest(method: "PUT", path: "/v1/takes/ab12"))
            Issue.record("PUT was routed")
        } catch {
            #expect(error.status == 405)
            #expect(error.response.headers["Allow"] == "GET, DELETE")
        }
    }

    private let model = CostModel(cpuSecondsPerMegapixel: 0.02, gpuMsPerMegapixel: 5, source: "test")
    private let small = TakeLoad(width: 320, height: 180, fps: 30)      // 1.728 Mpx/s → 0.035 cores
    private let hd = TakeLoad(width: 1280, height: 720, fps: 30)        // 27.6 Mpx/s → 0.55 cores

    /// Every output of a take (its main output and each `alsoOut`) renders and encodes: the load counts them.
    @Test func loadCountsEveryEncodedOutput() throws {
        let one = TakeLoad(width: 1280, height: 720, fps: 30), three = TakeLoad(width: 1280, height: 720, fps: 30, encodes: 3)
        #expect(abs(three.megapixelsPerSecond - 3 * one.megapixelsPerSecond) < 1e-9)
        #expect(three.description == "1280x720 at 30 fps, 3 outputs" && one.description == "1280x720 at 30 fps")
        let saved = try JSONDecoder().decode(TakeLoad.self, from: Data(#"{"width": 1280, "height": 720, "fps": 30}"#.utf8))
        #expect(saved == one)
        #expect(try JSONDecoder().decode(TakeLoad.self, from: JSONEncoder().encode(three)) == three)
    }

    /// A ladder's outputs count at their own canvas and rate: main + each
    /// `alsoOut` (or added output) at its `size` and `rateDivisor`; a ladder
    /// fits where as many outputs of the take's canvas would not.
    @Test func loadCountsEachOutputAtItsOwnSizeAndRate() throws {
        var config = TakeConfiguration()
        config.extraOutputs = [OutputSpec(out: "a.mp4", encoding: OutputEncoding(size: PixelSize(width: 640, height: 360))),
                               OutputSpec(out: "b.mp4", encoding: OutputEncoding(size: PixelSize(width: 320, height: 180), rateDivisor: 2)),
                               OutputSpec(out: "c.mp4", encoding: OutputEncoding(bitrate: 1_000_000))]
        let ladder = TakeLoad(config, canvas: .hd720, fps: 30)
        let cases: [(load: TakeLoad, megapixelsPerSecond: Double, description: String)] = [
            (TakeLoad(width: 1280, height: 720, fps: 30), 27.648, "1280x720 at 30 fps"),
            (TakeLoad(width: 1280, height: 720, fps: 30, encodes: 3), 82.944, "1280x720 at 30 fps, 3 outputs"),
            (TakeLoad(width: 1920, height: 1080, fps: 30, outputs: [OutputLoad(width: 1280, height: 720, fps: 30),
                                                                   OutputLoad(width: 640, height: 360, fps: 15)]),
             62.208 + 27.648 + 3.456, "1920x1080 at 30 fps, 3 outputs (1280x720 at 30, 640x360 at 15)"),
            // 720p main, a 360p rung, a 180p rung at half the rate, one more at the take's canvas.
            (ladder, 27.648 + 6.912 + 0.864 + 27.648, "1280x720 at 30 fps, 4 outputs (640x360 at 30, 320x180 at 15, 1280x720 at 30)"),
        ]
        for c in cases {
            #expect(abs(c.load.megapixelsPerSecond - c.megapixelsPerSecond) < 1e-9, "\(c.load)")
            #expect(abs(c.load.megapixelsPerFrame - c.megapixelsPerSecond / c.load.fps) < 1e-9, "\(c.load)")
            #expect(c.load.description == c.description)
            #expect(try JSONDecoder().decode(TakeLoad.self, from: JSONEncoder().encode(c.load)) == c.load)
        }
        // Loads saved before each output had its own: `encodes` outputs of the take's canvas and rate.
        let old = try JSONDecoder().decode(TakeLoad.self, from: Data(#"{"width": 1280, "height": 720, "fps": 30, "encodes": 3}"#.utf8))
        #expect(old == cases[1].load && old.encodes == 3)
        // An added output's load in a take: its size at the take's rate over its divisor.
        #expect(cases[0].load.output(for: OutputSpec(out: "x.ts", encoding: OutputEncoding(size: PixelSize(width: 640, height: 360), rateDivisor: 3)))
                == OutputLoad(width: 640, height: 360, fps: 10))
        #expect(cases[0].load.output(for: OutputSpec(out: "x.ts")) == OutputLoad(width: 1280, height: 720, fps: 30))
        // Beside a running 720p take, a 720p ladder of three rungs fits; three 720p outputs do not.
        let cap = Capacity(cpuCores: 2)   // 1.8 usable
        var three = ladder
        three.outputs.removeLast()
        #expect(abs(three.megapixelsPerSecond - 35.424) < 1e-9)
        // It fits, at its own estimate: 35.424 Mpx/s at 0.02 CPU seconds and 5 GPU ms a megapixel.
        guard case .success(let fits) = Admission.decide(new: three, running: [hd], lagging: nil, active: 1, maxTakes: 32, model: model,
                                                         capacity: cap) else { Issue.record("three rungs refused"); return }
        #expect(abs(fits.cpuCores - 0.70848) < 1e-9 && abs(fits.gpuMsPerSecond - 177.12) < 1e-9, "\(fits)")
        guard case .failure(let e) = Admission.decide(new: cases[1].load, running: [hd], lagging: nil, active: 1, maxTakes: 32, model: model,
                                                      capacity: cap) else { Issue.record("three 720p outputs fit"); return }
        #expect(e.kind == "capacity" && e.description.hasPrefix("over capacity: 1280x720 at 30 fps, 3 outputs needs about 1.66 CPU cores"))
    }

    @Test func admissionFitsTakesIntoTheCapacity() {
        let cap = Capacity(cpuCores: 2)   // 1.8 usable
        func decide(_ new: TakeLoad, _ running: [TakeLoad], lagging: Lagging? = nil, max: Int = 32) -> Result<Admission.Estimate, Admission.Refusal> {
            Admission.decide(new: new, running: running, lagging: lagging, active: running.count, maxTakes: max, model: model, capacity: cap)
        }
        if case .success(let e) = decide(small, []) { #expect(abs(e.cpuCores - 0.03456) < 1e-9) } else { Issue.record("small refused") }
        #expect((try? decide(hd, [hd, hd]).get()) != nil)            // 1.66 ≤ 1.8
        guard case .failure(let e) = decide(hd, [hd, hd, hd]) else { Issue.record("a fourth 720p take fit"); return }
        #expect(e.requestError.status == 503 && e.kind == "capacity")
        #expect(e.description.hasPrefix("over capacity: 1280x720 at 30 fps needs about 0.55 CPU cores"))
        #expect((try? decide(small, [hd, hd, hd]).get()) != nil)      // a small one still fits
        guard case .failure(let m) = decide(small, [small], max: 1) else { Issue.record("max takes ignored"); return }
        #expect(m == .maxTakes(1) && m.kind == "max-takes" && m.description.contains("--max-takes"))
        guard case .failure(let l) = decide(small, [small], lagging: Lagging(id: "ab", realtimeFactor: 0.7)) else {
            Issue.record("a lagging take did not block"); return
        }
        #expect(l.kind == "lagging" && l.description == "take ab is running at 0.70x real time; no room for another take")
        let gpuBound = CostModel(cpuSecondsPerMegapixel: 0.001, gpuMsPerMegapixel: 20, source: "test")
        guard case .failure(let g) = Admission.decide(new: hd, running: [hd], lagging: nil, active: 1, maxTakes: 32,
                                                      model: gpuBound, capacity: cap) else { Issue.record("GPU ignored"); return }
        #expect(g.kind == "capacity" && g.requestError.status == 503 && g.description.hasPrefix("over GPU capacity"))
        #expect(Admission.encoderThreads(cores: 16, active: 0) == 16)
        #expect(Admission.encoderThreads(cores: 16, active: 3) == 4)
        #expect(Admission.encoderThreads(cores: 2, active: 7) == 1)
    }

    /// The exposition keeps each family's lines together, as the format asks,
    /// however the samples come (two takes' series are written take by take).
    @Test func metricsFamiliesAreGrouped() {
        var m = Metrics()
        for take in ["a", "b"] {
            m.sample("diptych_take_fps", "gauge", "fps", [("take", take)], 30)
            m.sample("diptych_take_frame_latency_seconds_bucket", "histogram", "latency", [("take", take), ("le", "0.1")], 1)
            m.sample("diptych_take_frame_latency_seconds_sum", "histogram", "", [("take", take)], 0.05)
            m.sample("diptych_take_frame_latency_seconds_count", "histogram", "", [("take", take)], 1)
            m.sample("diptych_take_frames_total", "counter", "frames", [("take", take)], 10)
        }
        let lines = m.out.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("# TYPE") } == ["# TYPE diptych_take_fps gauge",
            "# TYPE diptych_take_frame_latency_seconds histogram", "# TYPE diptych_take_frames_total counter"])
        // Each family's samples follow its TYPE line without another family's in between.
        var family = ""
        var seen: Set<String> = []
        for line in lines {
            if line.hasPrefix("# TYPE ") {
                family = String(line.split(separator: " ")[2])
                #expect(seen.insert(family).inserted, "\(family) declared twice")
            } else if !line.hasPrefix("# ") {
                #expect(line.hasPrefix(family), "\(line) outside its family \(family)")
            }
        }
    }

    /// `GET /v1/takes`' query: known names with checked values; anything else is refused by name.
    @Test func listQueryIsChecked() throws {
        #expect(try TakeRequests.listQuery([:]) == TakeRequests.ListQuery())
        #expect(try TakeRequests.listQuery(["state": "finished", "limit": "5", "after": "ab12"])
                == TakeRequests.ListQuery(state: .finished, limit: 5, after: "ab12"))
        for (args, named) in [(["limit": "1001"], "limit '1001'"), (["limit": "x"], "limit 'x'"), (["state": "gone"], "state 'gone'"),
                              (["after": ""], "after ''"), (["page": "2"], "query 'page'")] {
            #expect { try TakeRequests.listQuery(args) } throws: { ($0 as? RequestError)?.status == 400 && "\($0)".contains(named) }
        }
    }

    /// `/readyz`: not ready while draining, after a failed calibration, while calibrating, or when a take would be refused.
    @Test func readinessSaysWhyNot() {
        func unready(calibrated: Bool = true, failure: String? = nil, draining: Bool = false, refusal: Admission.Refusal? = nil) -> String? {
            Admission.unready(calibrated: calibrated, calibrationFailure: failure, draining: draining) { refusal }
        }
        #expect(unready() == nil)
        #expect(unready(calibrated: false) == "calibrating")
        #expect(unready(calibrated: false, failure: "no GPU") == "the start-up calibration failed: no GPU")
        #expect(unready(draining: true)?.hasPrefix("draining") == true)
        #expect(unready(refusal: .maxTakes(2)) == "no room for a take: at the limit of 2 takes running at once (--max-takes)")
    }

    /// A take that failed to start answers its request by the error's case, never by its text.
    @Test(arguments: [
        (SessionError.configuration(ConfigurationError(field: "bitrate", value: "x", reason: "not a number")), 400),
        (.source(.primary, .fileNotFound(path: "/x.mp4")), 400),
        (.source(.primary, .timedOut(path: "/tmp/fifo")), 504),
        (.output("rtmp://127.0.0.1:1/live", .writeFailed(path: "rtmp://127.0.0.1:1/live", detail: "Connection refused")), 502),
        (.output("srt://127.0.0.1:9/", .timedOut(path: "srt://127.0.0.1:9/")), 502),
        (.output("/tmp/x.mp4", .timedOut(path: "/tmp/x.mp4")), 500),
        (.refused(.thermalCritical(source: "test")), 503),
        (.refused(.storage(path: "/tmp", reason: "full")), 503),
        (.gpu(.contextLost), 500),
    ] as [(SessionError, Int)])
    func aFailedStartAnswersByItsCase(error: SessionError, status: Int) {
        let answer = SessionOutcome.answer(error)
        #expect(answer.status == status, "\(error) → \(answer)")
        #expect(!answer.description.isEmpty)
    }

    @Test func costMeterMeasuresCPUPerMegapixelOverItsWindow() {
        let meter = CostMeter(calibration: model, window: 10, minMegapixels: 20)
        meter.sample(time: 0, cpu: 100, takes: [.init(id: "a", megapixels: 0, gpuMs: 0)])
        meter.sample(time: 1, cpu: 100.2, takes: [.init(id: "a", megapixels: 10, gpuMs: 40)])
        #expect(meter.model == model)   // 10 Mpx: not enough yet
        // "a" ends; "b" starts: what "a" did stays counted.
        meter.sample(time: 2, cpu: 100.6, takes: [.init(id: "b", megapixels: 10, gpuMs: 60)])
        #expect(abs((meter.model?.cpuSecondsPerMegapixel ?? 0) - 0.03) < 1e-9)
        #expect(abs((meter.model?.gpuMsPerMegapixel ?? 0) - 5) < 1e-9)
        #expect(meter.megapixels == 20)
        // Before its calibration a meter has no model; a failed one says why.
        let pending = CostMeter()
        #expect(pending.model == nil)
        pending.calibrationFailed("calibration take failed: no GPU")
        guard case .failure(let e) = pending.waitForModel() else { Issue.record("a model from nothing"); return }
        #expect(e.status == 503 && e.description.contains("no GPU"))
    }

    /// The meter takes the CPU-placed decoding out, as the takes' clocks
    /// counted it, before dividing by output megapixels (admission charges it
    /// apart), and once enough was decoded that is the decode figure.
    @Test func costMeterTakesPlacedDecodingOut() throws {
        let calibration = CostModel(cpuSecondsPerMegapixel: 0.02, gpuMsPerMegapixel: 5, decodeCPUSecondsPerMegapixel: 0.001, source: "test")
        let meter = CostMeter(calibration: calibration, window: 10, minMegapixels: 20, minDecodedMegapixels: 200)
        meter.sample(time: 0, cpu: 10, takes: [.init(id: "a", megapixels: 0, gpuMs: 0)])
        // 20 output megapixels, 100 decoded on the CPU: 0.5 s of CPU, 0.1 of it decoding.
        meter.sample(time: 1, cpu: 10.5, takes: [.init(id: "a", megapixels: 20, gpuMs: 100, cpuDecodedMegapixels: 100, cpuDecodeSeconds: 0.1)])
        #expect(abs((meter.model?.cpuSecondsPerMegapixel ?? 0) - 0.02) < 1e-9)
        // Too little decoded to learn from: the calibration's figure stays.
        #expect(meter.model?.decodeCPUSecondsPerMegapixel == 0.001)
        // 300 decoded in the window, 0.9 s of it: 0.003 s a megapixel, and the rest of the CPU is the output's.
        meter.sample(time: 2, cpu: 11.4, takes: [.init(id: "a", megapixels: 40, gpuMs: 200, cpuDecodedMegapixels: 300, cpuDecodeSeconds: 0.9)])
        #expect(abs((meter.model?.decodeCPUSecondsPerMegapixel ?? 0) - 0.003) < 1e-9)
        #expect(abs((meter.model?.cpuSecondsPerMegapixel ?? 0) - 0.0125) < 1e-9)
        #expect(meter.model?.source.contains("decoding measured over 300 megapixels") == true)
        // A window with nothing placed keeps what was learned.
        meter.sample(time: 12, cpu: 11.9, takes: [.init(id: "b", megapixels: 20, gpuMs: 100)])
        #expect(abs((meter.model?.cpuSecondsPerMegapixel ?? 0) - 0.025) < 1e-9)
        #expect(abs((meter.model?.decodeCPUSecondsPerMegapixel ?? 0) - 0.003) < 1e-9)
        // A load with placed decoding costs both parts.
        var load = TakeLoad(width: 1000, height: 1000, fps: 10)
        load.cpuDecodeMegapixelsPerSecond = 50
        #expect(abs(calibration.cpuCores(load) - (0.2 + 0.05)) < 1e-9)
        #expect(try JSONDecoder().decode(TakeLoad.self, from: JSONEncoder().encode(load)) == load)
    }

    /// A server's decoders share the cores by stream: 2 to 16 frame threads each.
    @Test func decoderThreadsAreAShareOfTheCores() {
        #expect(Admission.decoderThreads(cores: 16, active: 0) == 8)
        #expect(Admission.decoderThreads(cores: 16, active: 1) == 4)
        #expect(Admission.decoderThreads(cores: 16, active: 20) == 2)
        #expect(Admission.decoderThreads(cores: 64, active: 0) == 16)
        #expect(Admission.decoderThreads(cores: 2, active: 0) == 2)
    }

    /// Running takes left to NVDEC move to the CPU, oldest first, while
    /// they fit the budget at the measured figure; one too large is passed over.
    @Test func decodeMovesFillTheBudgetInOrder() {
        let facts = DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 8)
        let moved = DecodePlacement.moves([("a", 2), ("b", 3.5), ("c", 1.5), ("d", 0.5)], placed: 3, facts: facts)
        #expect(moved.map(\.take) == ["a", "c", "d"])
        #expect(moved.allSatisfy { $0.decision.cpu })
        #expect(moved[1].decision.description == "cpu (encoded on the GPU, moved from NVDEC to the CPU once the placed takes measured their decoding: about 1.50 cores, 5.00 of 8.00 decode cores (--decode-cores) in use)")
        #expect(DecodePlacement.moves([("a", 1)], placed: 7.5, facts: facts).isEmpty)
        // No NVDEC, or no budget: nothing is the server's to move.
        #expect(DecodePlacement.moves([("a", 1)], placed: 0, facts: .none).isEmpty)
        #expect(DecodePlacement.moves([("a", 1)], placed: 0, facts: DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 0)).isEmpty)
    }

    /// The calibration's decode figure: a real clip encoded by libx264 and
    /// decoded by libavcodec, in CPU seconds per megapixel (a few thousandths on a server core).
    @Test func calibrationMeasuresTheDecodeCost() throws {
        let cost = try Calibration.decodeCost()
        #expect(cost > 0 && cost < 0.1, "\(cost) CPU s per megapixel")
    }

    /// Decode placement: only a take left at `auto` that encodes on the GPU,
    /// on a server with NVDEC, and only while the budget holds it.
    @Test func decodePlacementFillsTheBudgetThenLeavesNVDEC() throws {
        let facts = DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 8)
        let placed = try #require(DecodePlacement.decide(choice: .auto, encodesOnGPU: true, decodeCores: 0.5, placed: 7.5, facts: facts))
        #expect(placed.cpu && placed.description.hasPrefix("cpu (encoded on the GPU, decoded on the CPU while the cores have room"))
        let full = try #require(DecodePlacement.decide(choice: .auto, encodesOnGPU: true, decodeCores: 0.5, placed: 7.6, facts: facts))
        #expect(!full.cpu && full.reason.hasPrefix("NVDEC: about 0.50 more cores would exceed"))
        // Nothing to decide: a decoder asked for, an encoder on the CPU, no NVDEC, no budget.
        #expect(DecodePlacement.decide(choice: .nvdec, encodesOnGPU: true, decodeCores: 0.5, placed: 0, facts: facts) == nil)
        #expect(DecodePlacement.decide(choice: .cpu, encodesOnGPU: true, decodeCores: 0.5, placed: 0, facts: facts) == nil)
        #expect(DecodePlacement.decide(choice: .auto, encodesOnGPU: false, decodeCores: 0.5, placed: 0, facts: facts) == nil)
        #expect(DecodePlacement.decide(choice: .auto, encodesOnGPU: true, decodeCores: 0.5, placed: 0, facts: .none) == nil)
        let none = DecodePlacement.Facts(nvdecUnavailable: nil, autoEncodesOnGPU: true, decodeCores: 0)
        #expect(DecodePlacement.decide(choice: .auto, encodesOnGPU: true, decodeCores: 0.5, placed: 0, facts: none)?.cpu == false)
        // Which takes encode on the GPU: asked for, or auto where it is as good (ultrafast) on a GPU that takes it.
        #expect(DecodePlacement.encodesOnGPU(codec: .h264, encoder: .gpu, preset: "veryfast", facts: .none))
        #expect(DecodePlacement.encodesOnGPU(codec: .h264, encoder: .auto, preset: "ultrafast", facts: facts))
        #expect(!DecodePlacement.encodesOnGPU(codec: .h264, encoder: .auto, preset: "veryfast", facts: facts))
        #expect(!DecodePlacement.encodesOnGPU(codec: .h264, encoder: .auto, preset: "ultrafast", facts: .none))
        #expect(!DecodePlacement.encodesOnGPU(codec: .hevc, encoder: .auto, preset: "ultrafast", facts: facts))
        #expect(!DecodePlacement.encodesOnGPU(codec: .h264, encoder: .x264, preset: "ultrafast", facts: facts))
    }

    @Test func decodeCoresOptionIsChecked() throws {
        #expect(try ServeOptions.parse(["--decode-cores", "6"]).decodeCores == 6)
        #expect(try ServeOptions.parse(["--decode-cores=0"]).decodeCores == 0)
        #expect(try ServeOptions.parse([]).decodeCores == nil)
        #expect(throws: ServerError.badUsage("--decode-cores '-1': must be a number of cores from 0 to 4096")) {
            _ = try ServeOptions.parse(["--decode-cores", "-1"])
        }
    }

    @Test func decodeNiceOptionIsCheckedAndReachesEveryCPUDecoder() throws {
        #expect(try ServeOptions.parse([]).decodeNice == 10)
        #expect(try ServeOptions.parse(["--decode-nice", "0"]).decodeNice == 0)
        #expect(try ServeOptions.parse(["--decode-nice=19"]).decodeNice == 19)
        for bad in ["20", "-1", "low"] {
            #expect(throws: ServerError.badUsage("--decode-nice '\(bad)': must be a whole number from 0 to 19")) {
                _ = try ServeOptions.parse(["--decode-nice", bad])
            }
        }
        // A take's decoders get it whether or not the server placed its decoding, on the CPU from the start or after a move.
        let s = TakeDecoding(threads: 2, nice: 10).settings(.cpu, written: { 0 })
        #expect(s.cpuNice == 10 && s.cpuThreads == 2)
        #expect(s.onCPU(because: "a move").cpuNice == 10)
        #expect(TakeDecoding().settings(.cpu, written: { 0 }).cpuNice == nil)
    }

    @Test func refuseBelowOptionIsChecked() throws {
        #expect(try ServeOptions.parse([]).refuseBelow == 0.9)
        #expect(try ServeOptions.parse(["--refuse-below", "0"]).refuseBelow == 0)
        #expect(try ServeOptions.parse(["--refuse-below=0.5"]).refuseBelow == 0.5)
        #expect(throws: ServerError.badUsage("--refuse-below '1.5': must be a speed from 0 to 1 (× real time)")) {
            _ = try ServeOptions.parse(["--refuse-below", "1.5"])
        }
        #expect(throws: ServerError.badUsage("--refuse-below 'fast': must be a speed from 0 to 1 (× real time)")) {
            _ = try ServeOptions.parse(["--refuse-below", "fast"])
        }
    }

    /// The inputs placement counts: files in codecs NVDEC decodes, every one probed.
    @Test func placementCountsProbedNVDECInputs() {
        var config = TakeConfiguration()
        config.secondary = .url("b.mp4")
        let hd = SourceInfo(name: "a.mp4", size: PixelSize(width: 1920, height: 1080), frameRate: FrameRate(60), codec: "h264")
        let small = SourceInfo(name: "b.mp4", size: PixelSize(width: 1280, height: 720), frameRate: FrameRate(30), codec: "hevc")
        let both = DecodePlacement.inputMegapixelsPerSecond(config, primary: hd, secondary: small) ?? 0
        #expect(abs(both - (124.416 + 27.648)) < 1e-9)
        #expect(DecodePlacement.inputMegapixelsPerSecond(config, primary: hd, secondary: nil) == nil)
        var prores = small
        prores.codec = "prores"
        #expect(DecodePlacement.inputMegapixelsPerSecond(config, primary: hd, secondary: prores) == nil)
        config.secondary = .none
        #expect(DecodePlacement.inputMegapixelsPerSecond(config, primary: hd, secondary: nil).map { abs($0 - 124.416) < 1e-9 } == true)
    }

    @Test func bearerTokensCompareWholly() {
        let t = BearerToken("abc123")
        #expect(t.accepts(authorization: "Bearer abc123"))
        #expect(t.accepts(authorization: "bearer abc123"))
        #expect(!t.accepts(authorization: "Bearer abc12"))
        #expect(!t.accepts(authorization: "Bearer abc1234"))
        #expect(!t.accepts(authorization: "Basic abc123"))
        #expect(!t.accepts(authorization: nil))
        #expect(BearerToken.constantTimeEqual(Array("x".utf8), Array("x".utf8)))
        #expect(!BearerToken.constantTimeEqual([], Array(repeating: 0, count: 256)))
    }

    @Test func outputRootConfinesPaths() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-root-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("out").path, withDestinationPath: "/tmp")
        let root = try OutputRoot(dir.path)
        #expect(try root.confine("sub/a.mp4", field: "out").get() == root.path + "/sub/a.mp4")
        #expect(try root.confine(root.path + "/a.mp4", field: "out").get() == root.path + "/a.mp4")
        #expect(try root.confine("rtmp://host/live/key", field: "out").get() == "rtmp://host/live/key")
        for bad in ["../a.mp4", "sub/../../a.mp4", "/etc/a.mp4", "out/a.mp4", "file:/etc/a.mp4", "pipe:1"] {
            guard case .failure(let e) = root.confine(bad, field: "out") else { Issue.record("\(bad) allowed"); continue }
            #expect(e.status == 400 && e.description.hasPrefix("out '\(bad)'"))
        }
    }

    @Test func listenAddressesAndLoopback() throws {
        #expect(try ListenAddress(parsing: "127.0.0.1:8737").isLoopback)
        #expect(try ListenAddress(parsing: "[::1]:0").isLoopback)
        #expect(try ListenAddress(parsing: "localhost:0").isLoopback)
        #expect(try !ListenAddress(parsing: "0.0.0.0:80").isLoopback)
        #expect(try !ListenAddress(parsing: "[::]:80").isLoopback)
        for bad in ["8737", "127.0.0.1", "127.0.0.1:99999", ":80", "[::1]80"] {
            #expect(throws: ServerError.self) { try ListenAddress(parsing: bad) }
        }
    }

    @Test func patchesMergeIntoTheLayoutAndRefuseFrozenFields() throws {
        var current = Layout()
        current.pip.corner = .topLeft
        let l = try TakeRequests.patch(Data(#"{"layout": {"pip": {"size": 0.25}}}"#.utf8), current: current).layout
        #expect(l.pip.corner == .topLeft && l.pip.size == 0.25 && l.kind == .pip)
        let c = try TakeRequests.patch(Data(#"{"layout": {"kind": "side-by-side", "swapRoles": true}, "transition": {"ms": 400, "easing": "ease-out"}}"#.utf8), current: l)
        let s = c.layout
        #expect(s.kind == .sideBySide && s.swapRoles && s.pip.size == 0.25)
        #expect(c.transition == LayoutTransition(milliseconds: 400, easing: .easeOut))
        #expect(try TakeRequests.patch(Data(#"{"layout": {}}"#.utf8), current: l).transition == nil)
        // Texts and overlays alone leave the layout as it is.
        let t = try TakeRequests.patch(Data(#"{"texts": [{"text": "{timecode}", "x": 0.1, "y": 0.9}], "overlays": []}"#.utf8), current: l)
        #expect(!t.changesLayout && t.layout == l && t.texts?.first?.text == "{timecode}" && t.overlays == [])
        let cases: [(String, Int, String)] = [
            (#"{"size": "640x360"}"#, 409, "size:"), (#"{"audio": "none"}"#, 409, "audio:"),
            (#"{"bitrate": "5M"}"#, 409, "bitrate:"), (#"{"sise": "640x360"}"#, 400, "sise"),
            (#"{"layout": {"knd": "pip"}}"#, 400, "layout.knd"), (#"{"layout": {"pip": {"corner": "middle"}}}"#, 400, "layout.pip.corner"),
            (#"{"layout": {"pip": {"size": 3}}}"#, 400, "layout.pip.size"), (#"[1]"#, 400, "object"), (#"{"#, 400, "JSON"),
            (#"{"layout": {}, "transition": {"ms": 400, "easing": "bounce"}}"#, 400, "transition.easing"),
            (#"{"layout": {}, "transition": {"ms": -1}}"#, 400, "transition.ms"),
            (#"{"layout": {}, "transition": {"ms": 20000}}"#, 400, "transition.ms"),
            (#"{"layout": {}, "transition": {"easing": "linear"}}"#, 400, "transition.ms"),
            (#"{"layout": {}, "transition": {"ms": 400, "speed": 2}}"#, 400, "transition.speed"),
            (#"{"transition": {"ms": 400}}"#, 400, "nothing to change"),
            (#"{"texts": [{"text": "a"}]}"#, 400, "texts[0]"), (#"{"texts": [{"text": "{nope}", "x": 0, "y": 0}]}"#, 400, "texts[0].text"),
            (#"{"overlays": [{"image": "a.png"}]}"#, 400, "overlays[0].rect"), (#"{"overlays": {}}"#, 400, "overlays"),
            (#"{"layout": {}, "layoutSchedule": []}"#, 409, "layoutSchedule:"),
        ]
        for (body, status, named) in cases {
            do {
                _ = try TakeRequests.patch(Data(body.utf8), current: current)
                Issue.record("\(body) accepted")
            } catch {
                #expect(error.status == status, "\(body): \(error)")
                #expect(error.description.contains(named), "\(body): \(error)")
            }
        }
        // Validation errors name the JSON field of the option table.
        #expect(TakeRequests.describe(ConfigurationError(field: "--keyframe-interval", value: "0", reason: "r")) == "keyframeInterval '0': r")
        #expect(TakeRequests.describe(ConfigurationError(field: "--pip-size", value: "3", reason: "r")) == "layout.pip.size '3': r")
    }

    @Test func frameLatencyMatchesFramesByTimestamp() {
        var f = FrameLatency(recent: 4)
        for i in 0..<6 { f.primaryTaken(MediaTime(value: Int64(i), timescale: 30), at: Double(i)) }
        #expect(f.inFlight == 6)
        for i in 0..<6 { f.written(MediaTime(value: Int64(i), timescale: 30), at: Double(i) + 0.003 * Double(i + 1)) }
        f.written(MediaTime(value: 99, timescale: 30), at: 100)   // never taken: ignored
        #expect(f.inFlight == 0 && f.count == 6)
        #expect(abs((f.percentile(0.5) ?? 0) - 0.012) < 1e-9)   // recent: 9, 12, 15, 18 ms
        #expect(abs((f.percentile(0.99) ?? 0) - 0.018) < 1e-9)
        #expect(f.bucketCounts[0] == 1 && f.bucketCounts[1] == 3 && f.bucketCounts[2] == 6)   // ≤5 ms, ≤10 ms, ≤25 ms
    }

    @Test func stopSignalEndsASleepAtOnce() {
        let signal = StopSignal()
        #expect(signal.sleep(0.01))   // not stopped: the interval runs out, go on
        let began = ProcessInfo.processInfo.systemUptime
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var goOn = true
        let sleeper = Thread { goOn = signal.sleep(30); done.signal() }
        sleeper.start()
        Thread.sleep(forTimeInterval: 0.05)
        signal.stop()
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(!goOn)
        #expect(ProcessInfo.processInfo.systemUptime - began < 5)   // not the 30 s it asked for
        #expect(!signal.sleep(30))   // after stop, at once
        #expect(signal.isStopped)
    }
}
