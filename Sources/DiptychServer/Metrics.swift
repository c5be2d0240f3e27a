import Foundation
import DiptychCore
import DiptychGPU

/// `GET /metrics` in the Prometheus text exposition format (version 0.0.4).
/// Per-take series are written for active takes only, so finished takes
/// do not grow the output without bound; totals cover every take. Every
/// family's lines come together, in the order families were first
/// sampled, however the samples were taken (the format asks for one group
/// a family); values are in base units (seconds).
struct Metrics {
    private var families: [String] = []
    private var lines: [String: String] = [:]

    /// The exposition so far.
    var out: String { families.map { lines[$0]! }.joined() }

    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private mutating func family(_ name: String, _ type: String, _ help: String) {
        guard lines[name] == nil else { return }
        families.append(name)
        lines[name] = "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    private static func escape(_ v: String) -> String {
        v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func number(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        if v == v.rounded() && abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }

    mutating func sample(_ name: String, _ type: String, _ help: String, _ labels: [(String, String)] = [], _ value: Double) {
        let f = type == "histogram" && (name.hasSuffix("_bucket") || name.hasSuffix("_sum") || name.hasSuffix("_count"))
            ? String(name[..<name.lastIndex(of: "_")!]) : name
        family(f, type, help)
        let l = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        lines[f]! += "\(name)\(l) \(Self.number(value))\n"
    }

    /// The process's own figures from `/proc/self` (Prometheus's standard
    /// `process_*` names): CPU seconds, resident and virtual bytes, open
    /// descriptors, start time (seconds since the epoch); nil where unreadable.
    struct Process {
        var cpuSeconds: Double
        var residentBytes: Double?
        var virtualBytes: Double?
        var openFDs: Double?
        var startTime: Double?

        static func current(cpuSeconds: Double) -> Process {
            var p = Process(cpuSeconds: cpuSeconds)
            let page = Double(sysconf(Int32(_SC_PAGESIZE)))
            if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
                let f = statm.split(separator: " ")
                if f.count > 1 { p.virtualBytes = Double(f[0]).map { $0 * page }; p.residentBytes = Double(f[1]).map { $0 * page } }
            }
            p.openFDs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { Double($0.count) }
            // Field 22 of /proc/self/stat: start time in clock ticks after boot; boot time from /proc/stat's btime.
            if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = stat.lastIndex(of: ")"),
               let sys = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
               let bline = sys.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }), let boot = Double(bline.dropFirst(6)) {
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 19, let ticks = Double(fields[19]) { p.startTime = boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK))) }
            }
            return p
        }
    }

    /// The whole exposition for the server's takes.
    static func render(takes: [(TakeSnapshot, GPUTotals)], admitted: Int, refusals: [String: Int],
                       model: CostModel?, capacity: Capacity, megapixels: Double, responses: [Int: Int],
                       version: String = "", draining: Bool = false, process: Process? = nil, retiredFrames: Int = 0,
                       webhooks: Webhooks.Counts? = nil, renderThreads: [RenderThreadLoad] = [], decodeBudget: Double = 0) -> String {
        var m = Metrics()
        m.sample("diptych_build_info", "gauge", "The running build (always 1).", [("version", version)], 1)
        m.sample("diptych_draining", "gauge", "1 while the server finalizes its takes to stop (SIGTERM), else 0.", [], draining ? 1 : 0)
        if let process {
            m.sample("process_cpu_seconds_total", "counter", "User and system CPU time of the process, seconds.", [], process.cpuSeconds)
            if let v = process.residentBytes { m.sample("process_resident_memory_bytes", "gauge", "Resident memory, bytes.", [], v) }
            if let v = process.virtualBytes { m.sample("process_virtual_memory_bytes", "gauge", "Virtual memory, bytes.", [], v) }
            if let v = process.openFDs { m.sample("process_open_fds", "gauge", "Open file descriptors.", [], v) }
            if let v = process.startTime { m.sample("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, seconds.", [], v) }
        }
        for (code, n) in responses.sorted(by: { $0.key < $1.key }) {
            m.sample("diptych_http_responses_total", "counter", "HTTP responses sent, by status.", [("code", String(code))], Double(n))
        }
        if let w = webhooks {
            for (outcome, n) in [("delivered", w.delivered), ("failed", w.failed), ("dropped", w.dropped)] {
                m.sample("diptych_webhook_events_total", "counter",
                         "Events by what became of them at the webhook receivers (summed over receivers).", [("outcome", outcome)], Double(n))
            }
            m.sample("diptych_webhook_retries_total", "counter", "Webhook attempts made again after a failure.", [], Double(w.retries))
            m.sample("diptych_webhook_queued_events", "gauge", "Events waiting to be delivered to webhook receivers.", [], Double(w.queued))
        }
        for (i, load) in renderThreads.enumerated() {
            let c = [("context", String(i))]
            m.sample("diptych_gpu_render_thread_busy_seconds_total", "counter",
                     "Wall time the shared context's render thread spent running GL work, waits inside GL calls included.", c, load.busySeconds)
            m.sample("diptych_gpu_render_thread_cpu_seconds_total", "counter", "CPU time of the shared context's render thread.", c, load.cpuSeconds)
            m.sample("diptych_gpu_render_thread_items_total", "counter", "Frames and other calls the render thread ran.", c, Double(load.items))
            m.sample("diptych_gpu_render_thread_wakeups_total", "counter",
                     "Times the render thread woke to run what was queued (items over wake-ups: frames recorded together).", c, Double(load.wakeups))
            m.sample("diptych_gpu_render_thread_gpu_batches_total", "counter",
                     "Frame batches of the render thread timed on the GPU (timer queries).", c, Double(load.gpuBatches))
            m.sample("diptych_gpu_render_thread_gpu_batch_seconds_total", "counter",
                     "GPU time from a timed batch's first command to its last.", c, load.gpuBatchSeconds)
            m.sample("diptych_gpu_render_thread_gpu_idle_seconds_total", "counter",
                     "GPU time between one timed batch's last command and the next one's first (idle as far as this context goes).", c,
                     load.gpuIdleSeconds)
            m.sample("diptych_gpu_render_thread_gpu_upload_seconds_total", "counter",
                     "Of the timed batches' GPU time, their uploads' and copies' (from a batch's first command to its first dispatch).", c,
                     load.gpuUploadSeconds)
            m.sample("diptych_gpu_render_thread_gpu_encoder_seconds_total", "counter",
                     "Of the timed batches' GPU time, the GPU encoder's (from its first command to the batch's last).", c,
                     load.gpuEncoderSeconds)
            m.sample("diptych_gpu_render_thread_gpu_encoded_pictures_total", "counter",
                     "Pictures the GPU encoder encoded in the timed batches (its seconds over these: GPU time a picture).", c,
                     Double(load.gpuEncodedPictures))
            m.sample("diptych_gpu_render_thread_gpu_encoder_idr_batches_total", "counter",
                     "Of the timed batches with GPU-encoded pictures, those with IDR pictures (each runs one intra pass for all its IDRs).", c,
                     Double(load.gpuEncoderIDRBatches))
            for pass in RenderThreadLoad.encoderPasses {
                m.sample("diptych_gpu_render_thread_gpu_encoder_pass_seconds_total", "counter",
                         "Of the GPU encoder's time in the timed batches, each pass's (from the end of the pass before; the interpolation counts with the search).",
                         c + [("pass", pass)], load.gpuEncoderPassSeconds[pass] ?? 0)
            }
            for phase in RenderPhase.allCases {
                m.sample("diptych_gpu_render_thread_phase_seconds_total", "counter",
                         "Render thread busy time by phase (poll is part of begin; fence, checks and the encoder_ phases of finish).",
                         c + [("phase", phase.name.replacingOccurrences(of: " ", with: "_"))], load.phaseSeconds[phase.name] ?? 0)
            }
            for (call, n) in load.calls.sorted(by: { $0.key < $1.key }) {
                m.sample("diptych_gpu_render_thread_call_seconds_total", "counter",
                         "Of the other_calls phase, each compositor method's calls that hopped to the render thread: their busy time.",
                         c + [("call", call)], n.seconds)
                m.sample("diptych_gpu_render_thread_calls_total", "counter",
                         "Of the other_calls phase, each compositor method's calls that hopped to the render thread: how many.",
                         c + [("call", call)], Double(n.count))
            }
        }
        let byState = Dictionary(grouping: takes, by: { $0.0.state })
        for s in TakeState.allCases {
            m.sample("diptych_takes", "gauge", "Takes by state.", [("state", s.rawValue)], Double(byState[s]?.count ?? 0))
        }
        m.sample("diptych_admissions_total", "counter", "Takes admitted.", [], Double(admitted))
        for reason in ["capacity", "lagging", "max-takes"] {
            m.sample("diptych_admission_refusals_total", "counter", "Takes refused by admission, by reason.",
                     [("reason", reason)], Double(refusals[reason] ?? 0))
        }
        m.sample("diptych_frames_total", "counter", "Output frames written by all takes.", [],
                 Double(retiredFrames + takes.reduce(0) { $0 + $1.0.written }))
        m.sample("diptych_output_megapixels_total", "counter", "Output megapixels of all takes (the cost meter's measure).", [], megapixels)
        m.sample("diptych_capacity_cpu_cores", "gauge", "CPU cores admission may fill.", [], capacity.cpuCores * capacity.headroom)
        let active = takes.filter { $0.0.state.isActive }
        if let model {
            m.sample("diptych_cost_cpu_seconds_per_megapixel", "gauge", "Measured CPU seconds per output megapixel.", [],
                     model.cpuSecondsPerMegapixel)
            m.sample("diptych_cost_gpu_seconds_per_megapixel", "gauge", "Measured GPU seconds per output megapixel.", [],
                     model.gpuMsPerMegapixel / 1000)
            let load = active.reduce(0) { $0 + model.cpuCores($1.0.load) }
            m.sample("diptych_load_cpu_cores", "gauge", "CPU cores the active takes need at real time (estimate).", [], load)
            m.sample("diptych_capacity_free_cpu_cores", "gauge", "CPU cores admission may still fill.", [],
                     max(0, capacity.cpuCores * capacity.headroom - load))
            m.sample("diptych_cost_decode_cpu_seconds_per_megapixel", "gauge",
                     "CPU seconds per decoded megapixel charged to takes the server decodes on the CPU: what they measured, or before that the calibration's (0: not measured).", [],
                     model.decodeCPUSecondsPerMegapixel)
            m.sample("diptych_decode_placed_cpu_cores", "gauge",
                     "CPU cores the active takes the server decodes on the CPU instead of NVDEC are charged for decoding (estimate).", [],
                     model.decodeCores(of: active.map(\.0.load)))
        }
        m.sample("diptych_decode_budget_cpu_cores", "gauge",
                 "CPU cores the takes the server decodes on the CPU instead of NVDEC may fill (--decode-cores; 0 without NVDEC).", [], decodeBudget)
        for (s, gpu) in active {
            let t = [("take", s.id)]
            m.sample("diptych_take_frames_total", "counter", "Output frames written.", t, Double(s.written))
            m.sample("diptych_take_fps", "gauge", "Output frames per wall second since the take started.", t, s.figures.fps)
            m.sample("diptych_take_realtime_factor", "gauge", "Media seconds per wall second since the take started.", t,
                     s.figures.realtimeFactor)
            m.sample("diptych_take_secondary_repeated_total", "counter", "Secondary frames shown again (held).", t,
                     Double(s.figures.secondaryRepeated))
            m.sample("diptych_take_secondary_dropped_total", "counter", "Secondary frames dropped.", t,
                     Double(s.figures.secondaryDropped))
            m.sample("diptych_take_frames_in_flight", "gauge",
                     "Frames taken from the primary and not yet written (GPU, readback and encoder queue).", t,
                     Double(s.latency.inFlight))
            for source in s.figures.sources {
                let r = t + [("role", source.role)]
                m.sample("diptych_take_source_lost", "gauge",
                         "1 while the role has lost its source and reopens it (or tries its list), else 0.", r, source.lost ? 1 : 0)
                if let index = source.index {
                    m.sample("diptych_take_source_index", "gauge", "The place in its priority list of the source a role shows (0: the first).",
                             r, Double(index))
                }
                for reason in [SourceSwitchReason.reconnect, .failover, .failback] {
                    let n = s.figures.sourceSwitches.filter { $0.role == source.role && $0.reason == reason }.count
                    m.sample("diptych_take_source_switches_total", "counter", "Changes of a role's source, by reason (reconnect, failover, failback).",
                             r + [("reason", reason.rawValue)], Double(n))
                }
            }
            if let ms = gpu.msPerFrame {
                m.sample("diptych_take_gpu_seconds_per_frame", "gauge", "GPU pass time (upload, composite, NV12) per frame.", t, ms / 1000)
            }
            for (i, b) in FrameLatency.bounds.enumerated() {
                m.sample("diptych_take_frame_latency_seconds_bucket", "histogram",
                         "Primary frame taken by the render loop to its output frame written.",
                         t + [("le", number(b))], Double(s.latency.bucketCounts[i]))
            }
            m.sample("diptych_take_frame_latency_seconds_bucket", "histogram", "", t + [("le", "+Inf")], Double(s.latency.count))
            m.sample("diptych_take_frame_latency_seconds_sum", "histogram", "", t, s.latency.sum)
            m.sample("diptych_take_frame_latency_seconds_count", "histogram", "", t, Double(s.latency.count))
        }
        return m.out
    }
}
