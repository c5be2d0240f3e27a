import Foundation

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

    /// The whole exposition for the server's takes.
    static func render(takes: [(TakeSnapshot, GPUTotals)], admitted: Int, refusals: [String: Int],
                       model: CostModel?, capacity: Capacity, megapixels: Double, responses: [Int: Int]) -> String {
        var m = Metrics()
        for (code, n) in responses.sorted(by: { $0.key < $1.key }) {
            m.sample("diptych_http_responses_total", "counter", "HTTP responses sent, by status.", [("code", String(code))], Double(n))
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
                 Double(takes.reduce(0) { $0 + $1.0.written }))
        m.sample("diptych_output_megapixels_total", "counter", "Output megapixels of all takes (the cost meter's measure).", [], megapixels)
        m.sample("diptych_capacity_cpu_cores", "gauge", "CPU cores admission may fill.", [], capacity.cpuCores * capacity.headroom)
        let active = takes.filter { $0.0.state.isActive }
        if let model {
            m.sample("diptych_cost_cpu_seconds_per_megapixel", "gauge", "Measured CPU seconds per output megapixel.", [],
                     model.cpuSecondsPerMegapixel)
            m.sample("diptych_cost_gpu_seconds_per_megapixel", "gauge", "Measured GPU seconds per output megapixel.", [],
                     model.gpuMsPerMegapixel / 1000)
            m.sample("diptych_load_cpu_cores", "gauge", "CPU cores the active takes need at real time (estimate).", [],
                     active.reduce(0) { $0 + model.cpuCores($1.0.load) })
        }
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
