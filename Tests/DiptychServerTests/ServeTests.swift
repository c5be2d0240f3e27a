import DiptychCore
import DiptychMedia
import Foundation
import Testing

/// The GPU encoder's passes as /metrics splits its time (`RenderThreadLoad.encoderPasses`).
private let gpuEncoderPasses = ["search", "refine", "subpel", "choose", "inter", "intraP", "intra", "probe", "deblock", "finish", "cavlc", "scan", "gather"]

/// `diptych serve` as users run it: a real process on a free loopback port,
/// driven over HTTP, its files checked by decoding them.
@Suite(.serialized) struct ServeTests {
    init() { MediaLibraries.setLogLevel(.error) }

    /// Eight takes posted at once each write the frames their primary
    /// dictates: 2 s of a 30 fps counter → frames 0…59, in order.
    @Test func eightTakesAtOnce() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        final class Ids: @unchecked Sendable { let lock = NSLock(); var ids: [Int: String] = [:]; var statuses: [Int: Int] = [:] }
        let got = Ids()
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let body = json(["primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@15",
                             "out": "take\(i).mp4", "duration": 2, "preset": "ultrafast"])
            let a = try? server.request("POST", "/v1/takes", body)
            got.lock.withLock { got.statuses[i] = a?.status ?? -1; got.ids[i] = a?.json["id"] as? String }
        }
        #expect(got.statuses.values.allSatisfy { $0 == 201 }, "\(got.statuses) \(server.stderr.text)")
        #expect(Set(got.ids.values).count == 8)
        for (i, id) in got.ids.sorted(by: { $0.key < $1.key }) {
            let t = try server.waitForTake(id) { state($0) == "finished" }
            #expect(frames(t) == 60)
            let decoded = try decodeAll(dir.path("take\(i).mp4"))
            #expect(decoded.map { CounterPattern.decode(frame: $0) } == (0..<60).map { Optional($0) }, "take \(i)")
            let summary = try #require(t["summary"] as? [String: Any])
            #expect(summary["frames"] as? Int == 60)
            #expect(summary["secondaryFramesShown"] as? Int == 30)
        }
        let list = try server.request("GET", "/v1/takes").json["takes"] as? [[String: Any]]
        #expect(list?.count == 8)
        let metrics = try server.request("GET", "/metrics").text
        #expect(metrics.contains("diptych_takes{state=\"finished\"} 8"), "\(metrics)")
        #expect(metrics.contains("diptych_frames_total 480"))
        #expect(metrics.contains("diptych_http_responses_total{code=\"201\"} 8"))
        #expect(metrics.contains("diptych_build_info{version=\"") && metrics.contains("diptych_draining 0"), "\(metrics)")
        // No NVDEC on a software renderer: no decode budget.
        #expect(metrics.contains("diptych_decode_budget_cpu_cores 0\n"), "\(metrics)")
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds",
                     "diptych_capacity_free_cpu_cores", "diptych_decode_placed_cpu_cores"] {
            #expect(metrics.split(separator: "\n").contains { $0.hasPrefix(name + " ") }, "\(name) missing: \(metrics)")
        }
        // The shared contexts' render threads ran the takes' frames: busy, woken, by phase.
        func total(_ name: String) -> Double {
            metrics.split(separator: "\n").filter { $0.hasPrefix(name + "{") }.compactMap { Double($0.split(separator: " ").last!) }.reduce(0, +)
        }
        #expect(total("diptych_gpu_render_thread_items_total") >= 480, "\(metrics)")
        #expect(total("diptych_gpu_render_thread_wakeups_total") > 0)
        #expect(total("diptych_gpu_render_thread_busy_seconds_total") > 0)
        #expect(total("diptych_gpu_render_thread_phase_seconds_total") > 0)
        // The batches' GPU time (none here: llvmpipe's takes copy their frames directly, outside frame batches).
        for name in ["diptych_gpu_render_thread_gpu_batches_total", "diptych_gpu_render_thread_gpu_batch_seconds_total",
                     "diptych_gpu_render_thread_gpu_idle_seconds_total", "diptych_gpu_render_thread_gpu_upload_seconds_total",
                     "diptych_gpu_render_thread_gpu_encoder_seconds_total", "diptych_gpu_render_thread_gpu_encoded_pictures_total",
                     "diptych_gpu_render_thread_gpu_encoder_idr_batches_total"] {
            #expect(metrics.split(separator: "\n").contains { $0.hasPrefix(name + "{context=\"0\"} ") }, "\(name) missing")
        }
        for pass in gpuEncoderPasses {
            #expect(metrics.split(separator: "\n").contains { $0.hasPrefix("diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context=\"0\",pass=\"\(pass)\"} ") },
                    "\(pass) missing")
        }
        // Prometheus text format: comments, or `name{label="value",…} number`.
        let sample = try Regex(#"^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eInfNa]+$"#)
        for line in metrics.split(separator: "\n") where !line.hasPrefix("# HELP ") && !line.hasPrefix("# TYPE ") {
            #expect(line.wholeMatch(of: sample) != nil, "\(line)")
        }
    }

    /// Prometheus's own checker accepts `/metrics` while several takes run
    /// (their per-take series interleaved by the takes' threads) and after
    /// they finish: `promtool check metrics` (Debian's `prometheus`).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"),
                   "needs promtool (Debian's prometheus package; scripts/setup installs it)"))
    func promtoolAcceptsTheMetrics() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        var ids: [String] = []
        for i in 0..<3 {
            let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@15",
                                                                "out": "p\(i).mp4", "duration": 3, "realtime": "on", "preset": "ultrafast"]))
            #expect(a.status == 201, "\(a.text)")
            ids.append(try #require(a.json["id"] as? String))
        }
        for id in ids { _ = try server.waitForTake(id) { ($0["frames"] as? Int ?? 0) > 5 } }
        func check(_ when: String, running: Bool) throws {
            let metrics = try server.request("GET", "/metrics").text
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
            p.arguments = ["check", "metrics"]
            let input = Pipe(), output = Pipe()
            p.standardInput = input; p.standardOutput = output; p.standardError = output
            try p.run()
            input.fileHandleForWriting.write(Data(metrics.utf8))
            try input.fileHandleForWriting.close()
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus == 0 && said.isEmpty, "promtool, \(when): \(said)\n\(metrics)")
            if running { #expect(metrics.contains("diptych_take_"), "\(when): no per-take series in \(metrics)") }
        }
        try check("three takes running", running: true)
        // Take views read each take's GPU time without a hop to the render thread.
        for _ in 0..<20 { #expect(try server.request("GET", "/v1/takes").status == 200) }
        for id in ids { _ = try server.waitForTake(id) { state($0) == "finished" } }
        try check("after the takes", running: false)
        // The render thread's calls from other threads, by the method that made them (addOutput at least, once a take).
        let metrics = try server.request("GET", "/metrics").text
        #expect(metrics.contains("diptych_gpu_render_thread_calls_total{context=\"0\",call=\"addOutput(canvas:matrix:range:)\"}"),
                "\(metrics.split(separator: "\n").filter { $0.contains("render_thread_call") })")
        // The views and cost samples made none; the compositor of each take (and of the calibration's) read its figures once as it ended (`stats`).
        let statsCalls = metrics.split(separator: "\n").first { $0.hasPrefix("diptych_gpu_render_thread_calls_total{context=\"0\",call=\"stats\"} ") }
            .flatMap { Double($0.split(separator: " ").last!) } ?? 0
        #expect(statsCalls <= Double(ids.count + 1), "\(statsCalls) statistics hops for \(ids.count) takes and the calibration")
    }

    /// `GET /v1/takes/{id}/snapshot`: the main output's current composite as
    /// a PNG of the canvas (the red primary full frame, the blue inset in
    /// the bottom-right corner); bad queries 400, an output the take does
    /// not have 404, a take that is not recording 409.
    @Test func snapshotIsTheCurrentComposite() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:solid-ff0000:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@15",
            "out": "snap.mp4", "alsoOut": [["out": "also.mp4"]], "duration": 30, "realtime": "on", "preset": "ultrafast"]))
        let id = try #require(created.json["id"] as? String, "\(created.text)")
        _ = try server.waitForTake(id) { frames($0) > 3 }
        let snap = try server.request("GET", "/v1/takes/\(id)/snapshot")
        #expect(snap.status == 200 && snap.body.starts(with: [0x89, 0x50, 0x4e, 0x47]), "\(snap.status) \(snap.text.prefix(200))")
        try snap.body.write(to: URL(fileURLWithPath: dir.path("snap.png")))
        let picture = try #require(try decodeAll(dir.path("snap.png")).first)
        #expect(picture.width == 320 && picture.height == 180)
        func rgb(_ x: Int, _ y: Int) -> [Int] {
            guard picture.format == .rgba || picture.format == .bgra else { return hue(picture, x, y) == .red ? [255, 0, 0] : [0, 0, 255] }
            let p = picture.planes[0].baseAddress + y * picture.planes[0].stride + x * 4
            let c = (0..<3).map { Int(p.load(fromByteOffset: $0, as: UInt8.self)) }
            return picture.format == .rgba ? c : c.reversed()
        }
        let (corner, inset) = (rgb(20, 20), rgb(300, 160))
        #expect(corner[0] > 200 && corner[1] < 50 && corner[2] < 50 && inset[2] > 200 && inset[0] < 50, "\(picture.format) \(corner) \(inset)")
        #expect(try server.request("GET", "/v1/takes/\(id)/snapshot?output=0&format=png").status == 200)
        // The declared extra output is output 1, as the take's `outputs` list it.
        let also = try server.request("GET", "/v1/takes/\(id)/snapshot?output=1")
        #expect(also.status == 200 && also.body.starts(with: [0x89, 0x50, 0x4e, 0x47]), "\(also.status) \(also.text.prefix(200))")
        #expect(try server.request("GET", "/v1/takes/\(id)/snapshot?format=jpeg").status == 400)
        #expect(try server.request("GET", "/v1/takes/\(id)/snapshot?size=1").status == 400)
        let missing = try server.request("GET", "/v1/takes/\(id)/snapshot?output=3")
        #expect(missing.status == 404 && missing.error.contains("no output 3"), "\(missing.text)")
        #expect(try server.request("GET", "/v1/takes/nosuchtake/snapshot").status == 404)
        // Ended here, not by its duration: a loaded machine may take seconds over the requests above.
        let ended = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(ended.status == 200 && state(ended.json) == "finished", "\(ended.text)")
        let over = try server.request("GET", "/v1/takes/\(id)/snapshot")
        #expect(over.status == 409 && over.error.contains("finished"), "\(over.text)")
    }

    /// A PATCH half-way switches PiP to side by side at one frame: every
    /// frame before it shows the primary (red) right of centre, every frame
    /// from it on the secondary (blue). A switch then hot-swaps the
    /// secondary (green). Frozen fields get 409, bad ones 400.
    @Test func patchSwitchesLayoutAtOneFrame() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:solid-ff0000:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30",
            "out": "layout.mp4", "preset": "ultrafast", "audio": "none"]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 30 }

        let frozen = try server.request("PATCH", "/v1/takes/\(id)", json(["size": "640x360"]))
        #expect(frozen.status == 409 && frozen.error.hasPrefix("size:"), "\(frozen.text)")
        let audio = try server.request("PATCH", "/v1/takes/\(id)", json(["audio": "primary"]))
        #expect(audio.status == 409 && audio.error.hasPrefix("audio:"), "\(audio.text)")
        let badKind = try server.request("PATCH", "/v1/takes/\(id)", json(["layout": ["kind": "diagonal"]]))
        #expect(badKind.status == 400 && badKind.error.contains("layout.kind"), "\(badKind.text)")
        let unknown = try server.request("PATCH", "/v1/takes/\(id)", json(["frobnicate": 1]))
        #expect(unknown.status == 400 && unknown.error.contains("frobnicate"), "\(unknown.text)")

        let before = frames(try server.take(id))
        let patched = try server.request("PATCH", "/v1/takes/\(id)", json(["layout": ["kind": "side-by-side"]]))
        #expect(patched.status == 200, "\(patched.text)")
        #expect((patched.json["layout"] as? [String: Any])?["kind"] as? String == "side-by-side")
        let after = try server.waitForTake(id) { frames($0) >= before + 60 }
        let switched = try server.request("POST", "/v1/takes/\(id)/switch", json(["role": "secondary", "source": "testsrc:solid-00ff00:160x90@30"]))
        #expect(switched.status == 202, "\(switched.text)")
        try server.waitForTake(id) { frames($0) >= frames(after) + 60 }
        let deleted = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(deleted.status == 200 && state(deleted.json) == "finished", "\(deleted.text)")
        #expect((deleted.json["summary"] as? [String: Any])?["hotSwaps"] as? Int == 1)

        let decoded = try decodeAll(dir.path("layout.mp4"))
        #expect(decoded.count == frames(deleted.json))
        let right = decoded.map { hue($0, 240, 90) }
        let firstSideBySide = try #require(right.firstIndex { $0 != .red }, "the layout never changed")
        #expect(right[..<firstSideBySide].allSatisfy { $0 == .red })
        #expect(firstSideBySide >= before && firstSideBySide <= frames(after), "switched at \(firstSideBySide), PATCH between \(before) and \(frames(after))")
        // From that frame on: the secondary on the right (blue, then green after the swap), the primary on the left.
        let rest = right[firstSideBySide...]
        let firstGreen = try #require(rest.firstIndex(of: .green), "the secondary never switched")
        #expect(rest[..<firstGreen].allSatisfy { $0 == .blue })
        #expect(rest[firstGreen...].allSatisfy { $0 == .green })
        #expect(decoded[firstSideBySide...].allSatisfy { hue($0, 80, 90) == .red })
    }

    /// Bad requests get their status and a one-line reason naming the input.
    @Test func badRequestsAreRefusedWithReasons() throws {
        let dir = Scratch(); defer { dir.remove() }
        let root = dir.path("out")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Data("not media\n".utf8).write(to: URL(fileURLWithPath: dir.path("notes.txt")))
        try FileManager.default.createSymbolicLink(atPath: dir.path("out/link.mp4"), withDestinationPath: dir.path("outside.mp4"))
        let server = try ServeProcess(["--output-root", root, "--max-body", "4096"], in: dir.path); defer { server.stop() }
        let cases: [(String, String, String?, Int, String)] = [
            ("POST", "/v1/takes", "{\"primary\": ", 400, "not valid JSON"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "a.mp4", "frobnicate": 1]), 400, "frobnicate"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "a.mp4", "size": "12x0"]), 400, "size"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "a.mp4", "bitrate": -5]), 400, "bitrate"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "a.mp4", "bitrate": 1]), 400, "bitrate '1'"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "a.mp4", "preset": "bogus"]), 400, "preset 'bogus'"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "a.mp4", "encoder": "gpu", "codec": "hevc"]), 400,
             "encodes H.264 only, not --codec hevc"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "a.mp4", "qp": 99]), 400, "expected a quantizer 0 to 51"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "a.mp4", "layout": ["kind": "stacked", "pip": ["size": 5]]]),
             400, "layout.pip.size"),
            ("POST", "/v1/takes", json(["primary": "/nonexistent/cam.mp4", "size": "320x180", "out": "a.mp4"]), 400, "/nonexistent/cam.mp4"),
            ("POST", "/v1/takes", json(["primary": "-", "out": "a.mp4"]), 400, "standard input"),
            // A missing or unreadable primary is the request's mistake, found before admission.
            ("POST", "/v1/takes", json(["primary": "/nonexistent/cam.mp4", "out": "a.mp4"]), 400, "primary '/nonexistent/cam.mp4': no such file"),
            ("POST", "/v1/takes", json(["primary": dir.path("notes.txt"), "out": "a.mp4"]), 400, "primary: "),
            ("POST", "/v1/takes", json(["primary": "testsrc:nonexist", "out": "a.mp4"]), 400, "nonexist"),
            // Numbers beyond an integer: 400 naming the field, never a crash.
            ("POST", "/v1/takes", #"{"primary": "testsrc:smpte", "out": "a.mp4", "size": {"width": 1e30, "height": 240}}"#, 400, "size.width"),
            ("POST", "/v1/takes", #"{"primary": "testsrc:smpte", "out": "a.mp4", "layout": {"pip": {"margin": 1e30}}}"#, 400,
             "layout.pip.margin"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "link.mp4"]), 400, "symbolic link"),
            ("POST", "/v1/takes", #"{"primary": "testsrc:smpte", "out": "nul\u0000.mp4"}"#, 400, "control characters"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "../escape.mp4"]), 400, "'..'"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "/tmp/elsewhere.mp4"]), 400, "outside the output root"),
            ("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "pipe:1"]), 400, "out 'pipe:1'"),
            ("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@60", "size": "7680x4320", "out": "big.mp4"]), 503,
             "over capacity"),
            ("POST", "/v1/takes", String(repeating: " ", count: 5000), 413, "limit"),
            ("GET", "/v1/takes/nosuchtake", nil, 404, "nosuchtake"),
            ("DELETE", "/v1/takes/nosuchtake", nil, 404, "nosuchtake"),
            ("PATCH", "/v1/takes/nosuchtake", json(["layout": ["kind": "pip"]]), 404, "nosuchtake"),
            ("PUT", "/v1/takes", "{}", 405, "PUT"),
            ("GET", "/v2/nothing", nil, 404, "/v2/nothing"),
        ]
        for (method, path, body, status, named) in cases {
            let a = try server.request(method, path, body)
            #expect(a.status == status, "\(method) \(path) \(body ?? ""): \(a.status) \(a.text)")
            #expect(a.error.contains(named), "\(method) \(path): \(a.text)")
            #expect(!a.error.isEmpty && !a.error.contains("\n"))
            #expect(!a.error.hasPrefix("--"), "a request's field is named as in its JSON: \(a.error)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("out/big.mp4")))
        let metrics = try server.request("GET", "/metrics").text
        #expect(metrics.contains("diptych_admission_refusals_total{reason=\"capacity\"} 1"), "\(metrics)")
        // A small take is admitted beside the refused big one, and lands under the root.
        let ok = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "small.mp4", "duration": 1]))
        #expect(ok.status == 201, "\(ok.text)")
        try server.waitForTake(ok.json["id"] as? String ?? "") { state($0) == "finished" }
        #expect(try decodeAll(dir.path("out/small.mp4")).count == 30)
        #expect(!FileManager.default.fileExists(atPath: dir.path("outside.mp4")))
        // A finished take's recording is not written over by the next take.
        let again = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "small.mp4", "duration": 1]))
        #expect(again.status == 409 && again.error.contains("holds the recording of take"), "\(again.text)")
        #expect(try decodeAll(dir.path("out/small.mp4")).count == 30)
    }

    /// Ended takes beyond --keep-finished leave memory, their recordings still
    /// protected; the list pages (`state`, `limit`, `after`); a repeated
    /// Idempotency-Key returns the take it made instead of another.
    @Test func boundedStatePagingAndIdempotency() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--keep-finished", "2"], in: dir.path); defer { server.stop() }
        var ids: [String] = []
        for i in 0..<3 {
            let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "t\(i).mp4",
                                                                  "duration": 0.5, "preset": "ultrafast"]))
            #expect(a.status == 201, "\(a.text)")
            let id = try #require(a.json["id"] as? String)
            try server.waitForTake(id) { state($0) == "finished" }
            ids.append(id)
        }
        // The oldest left memory once the others ended.
        let listed = try server.request("GET", "/v1/takes").json["takes"] as? [[String: Any]] ?? []
        #expect(listed.compactMap { $0["id"] as? String } == [ids[1], ids[2]], "\(listed)")
        let gone = try server.request("GET", "/v1/takes/\(ids[0])")
        #expect(gone.status == 404 && gone.error.contains("--keep-finished"), "\(gone.text)")
        let over = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "t0.mp4", "duration": 0.5]))
        #expect(over.status == 409 && over.error.contains("holds the recording of take \(ids[0])"), "\(over.text)")
        // Pages.
        let first = try server.request("GET", "/v1/takes?limit=1").json
        #expect((first["takes"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[1]] && first["next"] as? String == ids[1])
        let second = try server.request("GET", "/v1/takes?limit=1&after=\(ids[1])").json
        #expect((second["takes"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[2]] && second["next"] == nil)
        #expect((try server.request("GET", "/v1/takes?state=failed").json["takes"] as? [Any])?.isEmpty == true)
        for (query, named) in [("bogus=1", "query 'bogus'"), ("limit=0", "limit '0'"), ("state=done", "state 'done'"), ("after=nope", "after 'nope'")] {
            let bad = try server.request("GET", "/v1/takes?\(query)")
            #expect(bad.status == 400 && bad.error.contains(named), "\(query): \(bad.text)")
        }
        // The same key twice: one take.
        let body = json(["primary": "testsrc:counter:320x180@30", "out": "k.mp4", "duration": 0.5, "preset": "ultrafast"])
        let k1 = try server.request("POST", "/v1/takes", body, headers: ["Idempotency-Key": "take-k"])
        let k2 = try server.request("POST", "/v1/takes", body, headers: ["Idempotency-Key": "take-k"])
        #expect(k1.status == 201 && k2.status == 200, "\(k1.text) \(k2.text)")
        #expect(k1.json["id"] as? String == k2.json["id"] as? String)
        let badKey = try server.request("POST", "/v1/takes", body, headers: ["Idempotency-Key": "has space"])
        #expect(badKey.status == 400 && badKey.error.contains("Idempotency-Key"), "\(badKey.text)")
        try server.waitForTake(k1.json["id"] as? String ?? "") { state($0) == "finished" }
    }

    /// A non-loopback address without a token refuses to start: exit 2, one line.
    @Test func nonLoopbackWithoutTokenExitsTwo() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path, listen: "0.0.0.0:0", waitForListening: false)
        #expect(server.waitForExit() == 2)
        let lines = server.stderr.text.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("--token-file"), "\(server.stderr.text)")
    }

    /// Two contexts run takes on a software renderer too (llvmpipe's
    /// contexts, which race in Mesa, take turns: `SoftwareTurn`): four takes
    /// dealt to both each write the frames their primary dictates, in order,
    /// and both contexts' render threads ran items.
    @Test func twoContextsOnASoftwareRenderer() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--contexts", "2"], in: dir.path); defer { server.stop() }
        var ids: [String] = []
        for i in 0..<4 {
            let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "secondary": "testsrc:smpte:160x90@15",
                                                                  "out": "t\(i).mp4", "duration": 2, "preset": "ultrafast"]))
            #expect(a.status == 201, "\(a.text)")
            if let id = a.json["id"] as? String { ids.append(id) }
        }
        #expect(ids.count == 4)
        for (i, id) in ids.enumerated() {
            let t = try server.waitForTake(id) { state($0) == "finished" }
            #expect(frames(t) == 60)
            let decoded = try decodeAll(dir.path("t\(i).mp4"))
            #expect(decoded.map { CounterPattern.decode(frame: $0) } == (0..<60).map { Optional($0) }, "take \(i)")
        }
        let metrics = try server.request("GET", "/metrics").text
        for context in 0..<2 {
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("diptych_gpu_render_thread_items_total{context=\"\(context)\"} ") }
            #expect((line?.split(separator: " ").last.flatMap { Double($0) } ?? 0) > 0, "context \(context): \(metrics)")
        }
    }

    /// --encoder-threads gives every take the same encoder threads (not a
    /// share of the cores that shrinks as takes join); a bad count exits 2.
    @Test func encoderThreadsForEveryTake() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess(["--encoder-threads", "3"], in: dir.path); defer { server.stop() }
        var ids: [String] = []
        for i in 0..<2 {
            let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "t\(i).mp4",
                                                                  "duration": 1, "preset": "ultrafast"]))
            #expect(a.status == 201, "\(a.text)")
            if let id = a.json["id"] as? String { ids.append(id) }
        }
        for id in ids {
            let t = try server.waitForTake(id) { state($0) == "finished" }
            #expect((t["cost"] as? [String: Any])?["encoderThreads"] as? Int == 3, "\(t)")
            #expect(frames(t) == 30)
        }
        for bad in ["0", "x", "257"] {
            let failed = try ServeProcess(["--encoder-threads", bad], in: dir.path, waitForListening: false)
            #expect(failed.waitForExit() == 2)
            #expect(failed.stderr.text.contains("--encoder-threads '\(bad)': must be a whole number from 1 to 256"), "\(failed.stderr.text)")
        }
    }

    /// A take encoding on the GPU gets a compositor of the compute pass in
    /// the shared context, whatever the root draws with (llvmpipe's is the
    /// fragment pass): it runs, and its file decodes, where it was refused
    /// with a 500 before.
    @Test func gpuEncodedTakeRunsInTheSharedContext() throws {
        let dir = Scratch(); defer { dir.remove() }
        // The GPU encoder's reconstructed pictures, for the decoded ones to be checked against.
        let reconstructions = dir.path("reconstructions")
        try FileManager.default.createDirectory(atPath: reconstructions, withIntermediateDirectories: true)
        let server = try ServeProcess([], in: dir.path, environment: ["DIPTYCH_GPU_ENCODER_RECONSTRUCTION": reconstructions])
        defer { server.stop() }
        let a = try server.request("POST", "/v1/takes", json(["primary": "testsrc:counter:320x180@30", "out": "g.mp4",
                                                              "duration": 1, "encoder": "gpu"]))
        #expect(a.status == 201, "\(a.text)")
        guard let id = a.json["id"] as? String else { Issue.record("no take id: \(a.text)"); return }
        let t = try server.waitForTake(id) { state($0) == "finished" }
        #expect(frames(t) == 30, "\(t)")
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
        probe.arguments = ["-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0",
                           dir.path + "/g.mp4"]
        let out = Pipe(); probe.standardOutput = out
        try probe.run(); probe.waitUntilExit()
        #expect(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "h264,30")
        // Every picture decodes to the encoder's own reconstruction, byte for byte.
        let dumps = try FileManager.default.contentsOfDirectory(atPath: reconstructions).filter { $0.hasSuffix("-320x180.nv12") }
        try #require(dumps.count == 1, "\(dumps)")
        let decode = Process()
        decode.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        decode.arguments = ["-v", "error", "-i", dir.path + "/g.mp4", "-f", "rawvideo", "-pix_fmt", "nv12", "-"]
        let pictures = Pipe(); decode.standardOutput = pictures
        try decode.run()
        let decoded = pictures.fileHandleForReading.readDataToEndOfFile()
        decode.waitUntilExit()
        let reconstructed = try Data(contentsOf: URL(fileURLWithPath: reconstructions + "/" + dumps[0]))
        #expect(decoded.count == 30 * 320 * 180 * 3 / 2 && decoded == reconstructed,
                "decoded \(decoded.count) bytes, reconstructed \(reconstructed.count)")
        // The GPU encoder's time in the context that ran it, split by its passes: the IDR's intra pass, the P pictures'
        // inter pass, the raster-order pass of both; the parts add up to the whole.
        let m = try server.request("GET", "/metrics").text
        func value(_ series: String) -> Double? {
            m.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
        }
        let context = try #require(["0", "1"].first { (value("diptych_gpu_render_thread_gpu_encoded_pictures_total{context=\"\($0)\"}") ?? 0) > 0 },
                                   "no context counted GPU-encoded pictures: \(m)")
        let encoder = try #require(value("diptych_gpu_render_thread_gpu_encoder_seconds_total{context=\"\(context)\"}"))
        var passes: [String: Double] = [:]
        for pass in gpuEncoderPasses {
            passes[pass] = value("diptych_gpu_render_thread_gpu_encoder_pass_seconds_total{context=\"\(context)\",pass=\"\(pass)\"}")
        }
        #expect(encoder > 0 && abs(passes.values.reduce(0, +) - encoder) <= encoder * 1e-6, "\(passes) against \(encoder)")
        #expect(passes["intra"]! > 0 && passes["inter"]! > 0 && passes["deblock"]! > 0, "\(passes)")
        // The batches with the IDR (the take's first picture): as many as ran the intra pass, at least one.
        let idrBatches = try #require(value("diptych_gpu_render_thread_gpu_encoder_idr_batches_total{context=\"\(context)\"}"))
        #expect(idrBatches >= 1, "\(m)")
    }

    /// With --token-file every route but /healthz needs the bearer token.
    @Test func requestsWithoutTheTokenGet401() throws {
        let dir = Scratch(); defer { dir.remove() }
        try "s3cret-token-for-tests\n".write(toFile: dir.path("token"), atomically: true, encoding: .utf8)
        let server = try ServeProcess(["--token-file", dir.path("token")], in: dir.path); defer { server.stop() }
        let none = try server.request("GET", "/v1/takes")
        #expect(none.status == 401 && none.error.contains("Bearer"), "\(none.text)")
        let wrong = try server.request("GET", "/v1/takes", token: "s3cret-token-for-test")
        #expect(wrong.status == 401)
        let post = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte", "out": "x.mp4"]))
        #expect(post.status == 401)
        #expect(!FileManager.default.fileExists(atPath: dir.path("x.mp4")))
        #expect(try server.request("GET", "/v1/takes", token: "s3cret-token-for-tests").status == 200)
        let health = try server.request("GET", "/healthz")
        #expect(health.status == 200)
        // The server's GPU plan, as a value and as its line.
        let plan = try #require(health.json["plan"] as? [String: Any], "\(health.text)")
        #expect(plan["pass"] as? String == "fragment" && plan["staging"] != nil && plan["readback"] != nil, "\(plan)")
        #expect((health.json["planLine"] as? String)?.hasPrefix("plan: pass=fragment ") == true, "\(health.text)")
    }
}

/// Outputs added to a running take over HTTP: a file with its own layout,
/// and an RTMP stream to a real receiver that is then killed.
@Suite(.serialized) struct ServeOutputsTests {
    init() { MediaLibraries.setLogLevel(.error) }

    /// Outputs with their own encoding over HTTP: an `alsoOut` rung and an
    /// added one, each shown with its fields, admitted at its own size and
    /// rate, written at its size; bad values are 400s naming the field.
    @Test func outputsWithTheirOwnEncodingOverHTTP() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30", "out": "main.mp4",
            "preset": "ultrafast", "audio": "none",
            "alsoOut": [["out": "half.mp4", "size": "160x90", "bitrate": "200k", "rateDivisor": 2]]]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        let outputs = created.json["outputs"] as? [[String: Any]] ?? []
        #expect(outputs.count == 2 && outputs[0]["size"] == nil, "\(outputs)")
        let rung = outputs.count == 2 ? outputs[1] : [:]
        #expect(rung["size"] as? String == "160x90" && rung["bitrate"] as? Int == 200_000 && rung["rateDivisor"] as? Int == 2
                && rung["frameRate"] as? Double == 15, "\(rung)")
        // Admission's load: the main output at the take's canvas and rate, the rung at its own.
        let load = (created.json["cost"] as? [String: Any])?["load"] as? [String: Any] ?? [:]
        let loads = load["outputs"] as? [[String: Any]] ?? []
        #expect(load["width"] as? Int == 320 && load["encodes"] as? Int == 2 && loads.count == 1
                && loads.first?["width"] as? Int == 160 && loads.first?["fps"] as? Double == 15, "\(load)")
        try server.waitForTake(id) { frames($0) >= 15 }

        for (body, field) in [(["out": "bad.ts", "size": "161x90"], "output.size"), (["out": "bad.ts", "rateDivisor": 0], "output.rateDivisor"),
                              (["out": "bad.ts", "bitrate": "fast"], "output.bitrate"), (["out": "bad.ts", "preset": "turbo"], "output.preset"),
                              (["out": "bad.ts", "sizes": "160x90"], "output.sizes")] as [([String: Any], String)] {
            let bad = try server.request("POST", "/v1/takes/\(id)/outputs", json(body))
            #expect(bad.status == 400 && bad.error.contains(field) && !bad.error.contains("\n"), "\(body): \(bad.text)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("bad.ts")))
        let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "small.ts", "size": "96x54", "bitrate": "100k"]))
        #expect(added.status == 201, "\(added.text)")
        let index = try #require(added.json["index"] as? Int)
        let listed = try server.take(id)["outputs"] as? [[String: Any]] ?? []
        #expect(listed.contains { $0["index"] as? Int == index && $0["size"] as? String == "96x54" && $0["bitrate"] as? Int == 100_000 },
                "\(listed)")
        let more = try server.take(id)
        try server.waitForTake(id) { frames($0) >= frames(more) + 30 }
        let removed = try server.request("DELETE", "/v1/takes/\(id)/outputs/\(index)")
        #expect(removed.status == 200 && removed.json["canvas"] as? String == "96x54" && removed.json["frameRate"] as? String == "30"
                && removed.json["bitrate"] as? Int == 100_000, "\(removed.text)")
        let ended = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(ended.status == 200 && state(ended.json) == "finished", "\(ended.text)")
        let summaries = (ended.json["summary"] as? [String: Any])?["outputs"] as? [[String: Any]] ?? []
        #expect(summaries.contains { ($0["output"] as? String)?.hasSuffix("half.mp4") == true && $0["frameRate"] as? String == "15" },
                "\(summaries)")

        let main = try decodeAll(dir.path("main.mp4")), half = try decodeAll(dir.path("half.mp4")), small = try decodeAll(dir.path("small.ts"))
        #expect(main.first?.size == PixelSize(width: 320, height: 180) && half.first?.size == PixelSize(width: 160, height: 90)
                && small.first?.size == PixelSize(width: 96, height: 54))
        // The rung takes every other frame of the take's, at the take's times.
        #expect(half.count == (main.count + 1) / 2, "\(half.count) frames at half the rate of \(main.count)")
        #expect(zip(half, half.dropFirst()).allSatisfy { abs(($1.pts - $0.pts).seconds - 2.0 / 30) < 1e-6 })
        #expect(small.count >= 30, "\(small.count) frames in the added output")
    }

    /// A split `alsoOut` (`segmentTime`) and a split added output: their
    /// files are claimed while the take runs (another take may not write
    /// them), and their summaries list them.
    @Test func splitOutputsBesideTheMainOneOverHTTP() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "out": "main.mp4", "preset": "ultrafast", "audio": "none",
            "alsoOut": [["out": "part.mkv", "segmentTime": 1, "size": "160x90"]]]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        let outputs = created.json["outputs"] as? [[String: Any]] ?? []
        #expect(outputs.count == 2 && outputs.last?["segmentTime"] as? Double == 1, "\(outputs)")
        try server.waitForTake(id) { frames($0) >= 15 }
        let clash = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "part-0002.mkv"]))
        #expect(clash.status == 409 && clash.error.contains("a file of its split output"), "\(clash.text)")
        let bad = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "x.ts", "segmentTime": 1]))
        #expect(bad.status == 400 && bad.error.contains("output.segmentTime"), "\(bad.text)")
        let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "added.mp4", "segmentTime": 0.5]))
        #expect(added.status == 201, "\(added.text)")
        let index = try #require(added.json["index"] as? Int)
        let mid = try server.take(id)
        try server.waitForTake(id) { frames($0) >= frames(mid) + 40 }
        let addedClash = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "added-0001.mp4"]))
        #expect(addedClash.status == 409, "\(addedClash.text)")
        let removed = try server.request("DELETE", "/v1/takes/\(id)/outputs/\(index)")
        let removedFiles = removed.json["segments"] as? [[String: Any]] ?? []
        #expect(removed.status == 200 && removedFiles.count >= 2 && (removedFiles.first?["path"] as? String)?.hasSuffix("/added-0001.mp4") == true,
                "\(removed.text)")
        let ended = try server.request("DELETE", "/v1/takes/\(id)")
        let summaries = (ended.json["summary"] as? [String: Any])?["outputs"] as? [[String: Any]] ?? []
        let part = summaries.first { ($0["output"] as? String)?.hasSuffix("part.mkv") == true }
        let files = part?["segments"] as? [[String: Any]] ?? []
        #expect(files.count >= 1 && (files.first?["path"] as? String)?.hasSuffix("part-0001.mkv") == true, "\(summaries)")
        #expect(files.allSatisfy { FileManager.default.fileExists(atPath: dir.path(($0["path"] as? String).map { SegmentNaming.lastComponent($0) } ?? "")) })
        // A finished take's files are its recording: no new take writes over them.
        let reuse = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "part-0001.mkv"]))
        #expect(reuse.status == 409, "\(reuse.text)")
    }

    @Test func outputsAddedAndRemovedOverHTTP() throws {
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path); defer { server.stop() }
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:solid-ff0000:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30",
            "out": "main.mp4", "preset": "ultrafast", "audio": "none"]))
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        try server.waitForTake(id) { frames($0) >= 15 }

        let bad = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "/nonexistent/dir/x.mp4"]))
        #expect(bad.status == 400 && bad.error.contains("/nonexistent/dir/x.mp4"), "\(bad.text)")
        let unknown = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "y.ts", "lay": 1]))
        #expect(unknown.status == 400 && unknown.error.contains("output.lay"), "\(unknown.text)")
        let added = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "added.ts", "layout": ["kind": "side-by-side"]]))
        #expect(added.status == 201 && added.json["index"] as? Int == 1, "\(added.text)")
        let index = try #require(added.json["index"] as? Int)
        // No output, extra output or preview of any take writes over a file a running take writes.
        for (path, body) in [("/v1/takes/\(id)/outputs", json(["out": "main.mp4"])), ("/v1/takes/\(id)/outputs", json(["out": "added.ts"])),
                             ("/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "other.mp4", "preview": "main.mp4"])),
                             ("/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "other.mp4", "alsoOut": [["out": "added.ts"]]]))] {
            let clash = try server.request("POST", path, body)
            #expect(clash.status == 409 && clash.error.contains("is writing it"), "\(path) \(body): \(clash.text)")
        }
        // A receiver that is not there: 502, and the take goes on.
        let gone = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "rtmp://127.0.0.1:\(freePort())/live/none"]))
        #expect(gone.status == 502 && gone.error.contains("Connection refused"), "\(gone.text)")
        let unknownSource = try server.request("POST", "/v1/takes/\(id)/switch", json(["role": "secondary", "source": "testsrc:nonexist"]))
        #expect(unknownSource.status == 400 && unknownSource.error.contains("nonexist"), "\(unknownSource.text)")

        // An RTMP receiver that receives frames, then goes away: the take goes on.
        let port = freePort()
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        receiver.arguments = ["-loglevel", "error", "-nostdin", "-y", "-analyzeduration", "500000", "-listen", "1",
                              "-i", "rtmp://127.0.0.1:\(port)/live/x",
                              "-c", "copy", "-flush_packets", "1", dir.path("rtmp.ts")]
        try receiver.run()
        // The receiver listens once it has started (later on a loaded machine): until then the add is refused, 502.
        var stream = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "rtmp://127.0.0.1:\(port)/live/x"]))
        for _ in 0..<40 where stream.status == 502 && stream.error.contains("Connection refused") {
            Thread.sleep(forTimeInterval: 0.25)
            stream = try server.request("POST", "/v1/takes/\(id)/outputs", json(["out": "rtmp://127.0.0.1:\(port)/live/x"]))
        }
        #expect(stream.status == 201, "\(stream.text)")
        var received = 0
        for _ in 0..<150 where received < 20_000 {
            Thread.sleep(forTimeInterval: 0.1)
            received = (try? FileManager.default.attributesOfItem(atPath: dir.path("rtmp.ts"))[.size] as? Int) ?? 0
        }
        let mid = try server.take(id)
        if receiver.isRunning { kill(receiver.processIdentifier, SIGKILL) }
        receiver.waitUntilExit()
        let later = try server.waitForTake(id) { frames($0) >= frames(mid) + 45 }
        #expect(state(later) == "recording")
        #expect(try decodeAll(dir.path("rtmp.ts")).count > 10, "the RTMP receiver got frames")

        let listed = try server.take(id)["outputs"] as? [[String: Any]] ?? []
        #expect(listed.contains { ($0["url"] as? String)?.hasSuffix("added.ts") == true && $0["index"] as? Int == index }, "\(listed)")
        let removed = try server.request("DELETE", "/v1/takes/\(id)/outputs/\(index)")
        #expect(removed.status == 200 && (removed.json["output"] as? String)?.hasSuffix("added.ts") == true, "\(removed.text)")
        #expect((removed.json["frames"] as? Int ?? 0) > 20)
        // The removed output's file holds a recording: no other take writes over it.
        let reuse = try server.request("POST", "/v1/takes", json(["primary": "testsrc:smpte:320x240@30", "out": "added.ts"]))
        #expect(reuse.status == 409, "\(reuse.text)")
        let missing = try server.request("DELETE", "/v1/takes/\(id)/outputs/7")
        #expect(missing.status == 404, "\(missing.text)")
        let ended = try server.request("DELETE", "/v1/takes/\(id)")
        #expect(ended.status == 200 && state(ended.json) == "finished", "\(ended.text)")

        let side = try decodeAll(dir.path("added.ts"))
        #expect(side.count > 20)
        #expect(side.allSatisfy { hue($0, 240, 90) == .blue && hue($0, 80, 90) == .red })
        let main = try decodeAll(dir.path("main.mp4"))
        #expect(main.count == frames(ended.json))
        #expect(main.allSatisfy { hue($0, 160, 90) == .red })
    }
}

/// A TCP socket bound to a free port on 127.0.0.1 (the caller closes it).
func loopbackSocket() -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
}

/// A free TCP port on 127.0.0.1 (bound and released).
func freePort() -> Int {
    let (fd, port) = loopbackSocket()
    close(fd)
    return port
}
