import DiptychCore
import DiptychOptions
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// N takes in one `diptych serve` process: the server is started and
/// calibrated first (a long-running server's start-up is not a take's), then
/// the N takes are POSTed at once with the configuration `diptych record`
/// gets from the process runner's command line. A take's time runs from its
/// POST to the first poll that sees it finished; the server's CPU time and
/// resident memory while the takes ran are shared out evenly between them.
/// The server's log and the takes as last seen (`GET /v1/takes`) are kept in
/// the work directory (`diptych-serve-PRESET-N.log`, `…-takes.json`).
struct ServePairRunner: PairRunner {
    let decoder: DecoderChoice
    var settings = ServeRunnerSettings()
    var executable: String? = PairRunners.diptychExecutable()
    static let pollInterval = 0.1

    var name: String { decoder == .cpu ? "diptych-serve-cpu" : "diptych-serve" }
    var summary: String {
        "one diptych serve holding every take (one GL context, pairs batched per render-thread hop): "
            + (decoder == .cpu ? "CPU decode" : "the server's decode placement (takes encoding on the GPU decoded on the CPU while --decode-cores holds them, NVDEC beyond; NVDEC where the GPU has it for the rest, else CPU)") + ", GPU composite, "
            + (settings.gpuTakes.map { "the first \($0) takes of a trial encoded on the GPU, the rest with --encoder's encoder" } ?? "--encoder's encoder (by default auto's: libx264, or the GPU encoder at ultrafast on a GPU without VA-API or NVENC)")
            + ", fragmented MP4"
    }

    /// Take `i`'s case: the GPU encoder for the first `gpuTakes`.
    func takeCase(_ c: PairCase, _ i: Int) -> PairCase {
        guard let gpuTakes = settings.gpuTakes, i < gpuTakes else { return c }
        var g = c
        g.encoder = .gpu
        return g
    }

    func serveArguments(_ c: PairCase, pairs: Int) -> [String] {
        // Admission is set wide open: the benchmark measures what the takes get, not what the server would admit
        // (takes posted at once run slower while they start, and a take under 0.9× would refuse the later ones).
        ["serve", "--listen", "127.0.0.1:0", "--gpu", c.gpu, "--cores", "4096", "--gpu-ms", "1000000", "--max-takes", "\(pairs)",
         "--refuse-below", "0"]
            + settings.serveFlags
    }

    func command(for c: PairCase, output: String) -> String {
        let body = (try? configuration(c, output)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
        let flat = body.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        return ChildCommand(executable: executable ?? "diptych", arguments: serveArguments(c, pairs: 0).map { $0 == "0" ? "N" : $0 },
                            stdoutPath: "", stderrPath: "").shown + "; then N× POST /v1/takes at once: " + flat
            + (settings.gpuTakes.map { " (the first \($0) with \"encoder\": \"gpu\")" } ?? "")
    }

    /// The encoders the takes ran, as the server last listed them (`encoder`
    /// of each take): what `--encoder auto` took, named beside the figures.
    static func encodersLine(_ takes: [[String: Any]]) -> String? {
        let names = takes.compactMap { $0["encoder"] as? String }
        guard !names.isEmpty else { return nil }
        let counts = Dictionary(names.map { ($0, 1) }, uniquingKeysWith: +)
        return "encoders " + counts.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ")
    }

    func unavailable(for c: PairCase) -> String? {
        executable == nil ? "the diptych executable was not found" : nil
    }

    func configuration(_ c: PairCase, _ out: String) throws -> Data {
        try TakeConfiguration.parse(arguments: PairRunners.takeArguments(c, out, decoder: decoder)).jsonData()
    }

    func run(pairs: Int, case c: PairCase, outputs: [String], deadline: Double) throws -> [TakeOutcome] {
        guard let executable else { throw BenchRunError("the diptych executable was not found") }
        let bodies = try outputs.enumerated().map { i, out in try configuration(takeCase(c, i), out) }
        let base = "\(c.workDir)/serve-\(getpid())-\(pairs)"
        let server = ChildCommand(executable: executable, arguments: serveArguments(c, pairs: pairs),
                                  stdoutPath: base + ".stdout", stderrPath: base + ".stderr")
        let pid: pid_t
        do throws(ChildGroup.SpawnError) { pid = try ChildGroup.spawn(server) } catch { throw BenchRunError(error.description) }
        var exited = false
        defer {
            if !exited { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
            try? FileManager.default.removeItem(atPath: base + ".stdout")
            try? FileManager.default.removeItem(atPath: base + ".stderr")
        }
        func failure(_ what: String) -> BenchRunError {
            let tail = ChildGroup.tail(base + ".stderr")
            return BenchRunError("diptych serve: \(what)" + (tail.isEmpty ? "" : " (\(tail))"))
        }
        let client = try Self.started(pid: pid, stdout: base + ".stdout", failure: failure)

        // The takes, all at once.
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        let cpu0 = Self.cpuSeconds(pid) ?? 0
        let metrics0 = try? client.get("/metrics")
        let t0 = now()
        let ids = Locked([String?](repeating: nil, count: pairs)), errors = Locked([String?](repeating: nil, count: pairs))
        let posted = Locked([Double](repeating: t0, count: pairs))
        DispatchQueue.concurrentPerform(iterations: pairs) { i in
            posted.with { $0[i] = now() }
            do throws(ServeClient.Failure) {
                let answer = try client.post("/v1/takes", json: bodies[i])
                let id = ((try? JSONSerialization.jsonObject(with: answer)) as? [String: Any])?["id"] as? String
                if let id { ids.with { $0[i] = id } } else { errors.with { $0[i] = "POST /v1/takes: no id in the answer" } }
            } catch { errors.with { $0[i] = error.description } }
        }
        // Poll until every take has ended or the deadline.
        var ended = [Double?](repeating: nil, count: pairs), states = [String](repeating: "", count: pairs)
        var takeErrors = [String?](repeating: nil, count: pairs)
        var samples: [Double] = [], nextSample = t0
        var lastList: [[String: Any]] = []
        let idList = ids.with { $0 }
        while now() - t0 < deadline + 1 {
            let t = now()
            if t >= nextSample { if let r = ChildGroup.residentPages(pid) { samples.append(r * page / 1_048_576) }; nextSample += ChildGroup.sampleInterval }
            let list = (try? client.object("/v1/takes"))?["takes"] as? [[String: Any]] ?? []
            if !list.isEmpty { lastList = list }
            let byID = Dictionary(list.compactMap { v in (v["id"] as? String).map { ($0, v) } }, uniquingKeysWith: { a, _ in a })
            for i in 0..<pairs where ended[i] == nil {
                guard let id = idList[i], let v = byID[id], let state = v["state"] as? String else { continue }
                states[i] = state
                if state == "finished" || state == "failed" { ended[i] = t; takeErrors[i] = v["error"] as? String }
            }
            if (0..<pairs).allSatisfy({ ended[$0] != nil || idList[$0] == nil }) { break }
            usleep(useconds_t(Self.pollInterval * 1e6))
        }
        let cpu = (Self.cpuSeconds(pid) ?? cpu0) - cpu0
        let metrics = try? client.get("/metrics")
        let wall = now() - t0
        // The server finalizes whatever still runs and exits.
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        exited = true
        // Kept beside the outputs: the server's log and the takes as last seen.
        let kept = "\(c.workDir)/\(name)-\(c.preset)-\(pairs)"
        try? FileManager.default.removeItem(atPath: kept + ".log")
        try? FileManager.default.copyItem(atPath: base + ".stderr", toPath: kept + ".log")
        if let data = try? JSONSerialization.data(withJSONObject: ["takes": lastList], options: [.prettyPrinted, .sortedKeys]) {
            try? data.write(to: URL(fileURLWithPath: kept + "-takes.json"))
        }
        if let metrics {
            try? metrics.write(to: URL(fileURLWithPath: kept + "-metrics.txt"))
            if let line = Self.renderThreadLine(String(decoding: metrics, as: UTF8.self), since: metrics0.map { String(decoding: $0, as: UTF8.self) },
                                                seconds: wall) {
                FileHandle.standardError.write(Data("\(name) \(pairs) pairs: \(line)\n".utf8))
            }
        }
        if let line = Self.encodersLine(lastList) { FileHandle.standardError.write(Data("\(name) \(pairs) pairs: \(line)\n".utf8)) }
        // Each take's summary counts the whole process while it ran: the longest-lived one's, shared out.
        let stages = lastList.compactMap { v -> StageTimes? in
            guard let sum = v["summary"] as? [String: Any], let st = sum["cpuStages"],
                  let data = try? JSONSerialization.data(withJSONObject: st) else { return nil }
            return try? JSONDecoder().decode(StageTimes.self, from: data)
        }.max { $0.total < $1.total }

        let share = Double(max(1, pairs))
        let peak = (samples.max() ?? 0) / share
        let shared = samples.map { $0 / share }
        let growth = ChildOutcome(status: 0, killed: false, seconds: 0, cpuSeconds: 0, peakRSSMiB: 0, rssSamples: shared, stderrTail: "").rssGrowthMiB
        let starts = posted.with { $0 }, postErrors = errors.with { $0 }
        return (0..<pairs).map { i in
            var why: String?
            if let e = postErrors[i] { why = e }
            else if ended[i] == nil { why = "still running after \(String(format: "%.1f", deadline)) s (state \(states[i]))" }
            else if states[i] != "finished" { why = "failed: \(takeErrors[i] ?? "no error given")" }
            return TakeOutcome(output: outputs[i], seconds: why == nil ? ended[i]! - starts[i] : nil, cpuSeconds: cpu / share,
                               peakRSSMiB: peak, rssGrowthMiB: growth, rssSamplesMiB: shared, failure: why,
                               cpuStages: stages.map { st in
                                   var each = StageTimes()
                                   for k in PipelineStage.allCases { each[k] = st[k] / share }
                                   return each
                               })
        }
    }

    /// What the server's render threads did over a trial of `seconds`, from
    /// its `/metrics` at the end less those at the start (`since`: the
    /// start-up calibration is not the trial's): busy share, frames and
    /// calls a wake-up, busy milliseconds an item by phase and, where the
    /// server gives it, CPU milliseconds an item (nil without those families).
    static func renderThreadLine(_ metrics: String, since start: String? = nil, seconds: Double) -> String? {
        var total: [String: Double] = [:], phases: [String: Double] = [:], passes: [String: Double] = [:]
        for (text, sign) in [(metrics, 1.0), (start ?? "", -1.0)] {
            for line in text.split(separator: "\n") where line.hasPrefix("diptych_gpu_render_thread_") {
                guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
                let key = line[..<space]
                let name = String(key.prefix { $0 != "{" })
                if name == "diptych_gpu_render_thread_phase_seconds_total", let r = key.range(of: "phase=\"") {
                    phases[String(key[r.upperBound...].prefix { $0 != "\"" }), default: 0] += sign * v
                } else if name == "diptych_gpu_render_thread_gpu_encoder_pass_seconds_total", let r = key.range(of: "pass=\"") {
                    passes[String(key[r.upperBound...].prefix { $0 != "\"" }), default: 0] += sign * v
                } else {
                    total[name, default: 0] += sign * v
                }
            }
        }
        guard let busy = total["diptych_gpu_render_thread_busy_seconds_total"], let items = total["diptych_gpu_render_thread_items_total"],
              let wakeups = total["diptych_gpu_render_thread_wakeups_total"], items > 0, wakeups > 0, seconds > 0 else { return nil }
        let byPhase = phases.filter { $0.value > 0 }.sorted { $0.value > $1.value }
            .map { "\($0.key) \(String(format: "%.3f", $0.value * 1000 / items))" }.joined(separator: ", ")
        // The threads' CPU time beside their busy time: a thread blocked in the driver may spin or sleep.
        let cpu = total["diptych_gpu_render_thread_cpu_seconds_total"].map { String(format: ", %.3f CPU ms an item", $0 * 1000 / items) } ?? ""
        // Where the server times its batches on the GPU: the GPU's time a batch (its uploads and copies, the
        // dispatches and readbacks after them, and the GPU encoder's part, where the counts are there, with its pictures a
        // batch and its time a picture), and idle before one.
        var gpu = ""
        if let n = total["diptych_gpu_render_thread_gpu_batches_total"], n > 0, let run = total["diptych_gpu_render_thread_gpu_batch_seconds_total"],
           let idle = total["diptych_gpu_render_thread_gpu_idle_seconds_total"] {
            // A part's counter where it counted anything.
            func part(_ name: String) -> Double? { total["diptych_gpu_render_thread_gpu_\(name)_total"].flatMap { $0 > 0 ? $0 : nil } }
            let uploads = part("upload_seconds"), encoder = part("encoder_seconds")
            var parts: [String] = []
            if let uploads { parts.append(String(format: "uploads %.3f", uploads * 1000 / n)) }
            if uploads != nil || encoder != nil {
                parts.append(String(format: "dispatches %.3f", (run - (uploads ?? 0) - (encoder ?? 0)) * 1000 / n))
            }
            if let encoder {
                let pictures = part("encoded_pictures")
                // Its passes' GPU time a picture, longest first, where the server splits it.
                let split = pictures.map { p in
                    passes.filter { $0.value > 0 }.sorted { $0.value > $1.value }
                        .map { "\($0.key) \(String(format: "%.3f", $0.value * 1000 / p))" }.joined(separator: ", ")
                } ?? ""
                // Batches with IDRs a second (each runs an intra wavefront), where the server counts them.
                let idr = total["diptych_gpu_render_thread_gpu_encoder_idr_batches_total"].map { String(format: "; %.1f batches a second with IDRs", $0 / seconds) } ?? ""
                parts.append(String(format: "the GPU encoder %.3f", encoder * 1000 / n)
                             + (pictures.map { String(format: " (%.1f pictures, %.3f ms a picture", $0 / n, encoder * 1000 / $0) } ?? "")
                             + (pictures == nil ? "" : (split.isEmpty ? "" : "; passes, ms a picture: " + split) + idr + ")"))
            }
            gpu = String(format: "; GPU %.3f ms a batch", run * 1000 / n) + (parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")")
                + String(format: ", idle %.3f ms before one (%.0f %% of the GPU's time)", idle * 1000 / n, run + idle > 0 ? idle / (run + idle) * 100 : 0)
        }
        return String(format: "render threads %.0f %% busy, %.1f items a wake-up, %.3f busy ms an item (", busy / seconds * 100, items / wakeups,
                      busy * 1000 / items) + byPhase + ")" + cpu + gpu
    }

    /// Waits for the server's address on its standard output, then for its
    /// start-up calibration (`/healthz` gives a cost model), up to 60 s.
    static func started(pid: pid_t, stdout: String, failure: (String) -> BenchRunError) throws -> ServeClient {
        let t0 = now()
        var client: ServeClient?
        while now() - t0 < 60 {
            var st: Int32 = 0
            if waitpid(pid, &st, WNOHANG) == pid { throw failure("exited at start-up (status \(ChildGroup.exitCode(st)))") }
            if client == nil, let text = try? String(contentsOfFile: stdout, encoding: .utf8),
               let r = text.range(of: "listening on http://") {
                let address = text[r.upperBound...].prefix { !$0.isNewline }
                if text[r.upperBound...].contains("\n") { client = ServeClient(base: "http://" + address) }
            }
            if let client, let health = try? client.object("/healthz"), health["cost"] is [String: Any] { return client }
            usleep(50_000)
        }
        throw failure(client == nil ? "no address on its output after 60 s" : "not calibrated after 60 s")
    }

    /// utime + stime of a running process (`/proc/PID/stat` fields 14 and 15).
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// A value shared by the POST threads.
final class Locked<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func with<R>(_ body: (inout T) -> R) -> R { lock.lock(); defer { lock.unlock() }; return body(&value) }
}

/// How the serve runners run `diptych serve` (`diptych bench --serve-…`); nil: the server's default.
public struct ServeRunnerSettings: Sendable, Equatable {
    /// `diptych serve --encoder-threads` (nil: the server's share of the cores).
    public var encoderThreads: Int?
    /// `diptych serve --contexts`.
    public var contexts: Int?
    /// `diptych serve --decode-cores`.
    public var decodeCores: Int?
    /// `diptych serve --decode-nice`.
    public var decodeNice: Int?
    /// The first this many takes of a trial encode on the GPU (`--encoder
    /// gpu`), the rest with the case's encoder (nil: every take with the case's).
    public var gpuTakes: Int?

    public init() {}

    /// The server's flags these settings give.
    var serveFlags: [String] {
        [("--encoder-threads", encoderThreads), ("--contexts", contexts), ("--decode-cores", decodeCores), ("--decode-nice", decodeNice)]
            .flatMap { flag, value in value.map { [flag, "\($0)"] } ?? [] }
    }
}
