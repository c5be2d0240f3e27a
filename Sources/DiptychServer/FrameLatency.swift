import DiptychCore

/// Frame latency of one take: from the render loop taking a primary frame
/// to its output frame being written, matched by timestamp. Keeps the last
/// `recent` latencies for percentiles and a cumulative Prometheus histogram.
/// A value type, not synchronized.
struct FrameLatency: Sendable {
    /// Histogram bucket bounds, seconds.
    static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
    private var taken: [MediaTime: Double] = [:]
    private var recentSamples: [Double] = []
    private var next = 0
    let recent: Int
    private(set) var bucketCounts = [Int](repeating: 0, count: FrameLatency.bounds.count)
    private(set) var count = 0
    private(set) var sum = 0.0
    /// Frames taken and not yet written (in the GPU, the readback or the encoder queue).
    var inFlight: Int { taken.count }

    init(recent: Int = 1024) { self.recent = recent }

    mutating func primaryTaken(_ pts: MediaTime, at time: Double) {
        // A frame never written (dropped by a context rebuild, say) must not pile up.
        if taken.count > 4096 { taken.removeAll() }
        taken[pts] = time
    }

    mutating func written(_ pts: MediaTime, at time: Double) {
        guard let start = taken.removeValue(forKey: pts) else { return }
        let s = max(0, time - start)
        if recentSamples.count < recent { recentSamples.append(s) } else { recentSamples[next] = s }
        next = (next + 1) % recent
        count += 1
        sum += s
        for (i, b) in Self.bounds.enumerated() where s <= b { bucketCounts[i] += 1 }
    }

    /// Nearest-rank percentile of the recent latencies (seconds), nil before any.
    func percentile(_ p: Double) -> Double? {
        guard !recentSamples.isEmpty else { return nil }
        return CostBudget.nearestRankPercentile(recentSamples, p)
    }
}
