/// The verdict of a `CostBudget`.
public enum CostVerdict: Hashable, Sendable {
    /// Fewer samples than the window needs; keep measuring.
    case measuring(samples: Int, needed: Int)
    /// The configuration fits: `percentileCost` ≤ `limit` (seconds).
    case accept(percentileCost: Double, limit: Double)
    /// Over budget: go back to the previous configuration (docs/ARCHITECTURE.md, "Cost budget and rollback").
    case rollBack(percentileCost: Double, limit: Double)
}

/// Whether a configuration can be sustained, decided by measurement
/// (docs/ARCHITECTURE.md, "Cost budget and rollback": apply, measure, roll back when over budget).
///
/// Per-frame cost samples (GPU time, upload time, encode time, in seconds)
/// are compared with the frame interval times a headroom factor: the
/// configuration is accepted when the `percentile` (nearest-rank) of the
/// last `window` samples is at most `frameInterval × headroom`. Deterministic:
/// the same samples always give the same verdict.
///
/// A value type, not synchronized: one owner records and asks.
public struct CostBudget: Hashable, Sendable {
    /// Seconds available per output frame (1/60 for 60 fps).
    public var frameInterval: Double
    /// Fraction of the interval a stage may use (0 < headroom ≤ 1; default 0.8).
    public var headroom: Double
    /// Samples judged (the most recent ones; default 60).
    public var window: Int
    /// Percentile judged, 0 < p ≤ 1 (default 0.95).
    public var percentile: Double
    private(set) var samples: [Double] = []

    public init(frameInterval: Double, headroom: Double = 0.8, window: Int = 60, percentile: Double = 0.95) {
        precondition(frameInterval > 0 && headroom > 0 && window > 0 && percentile > 0 && percentile <= 1,
                     "CostBudget parameters must be positive (percentile ≤ 1)")
        self.frameInterval = frameInterval; self.headroom = headroom; self.window = window; self.percentile = percentile
    }
    public init(frameRate: FrameRate, headroom: Double = 0.8, window: Int = 60, percentile: Double = 0.95) {
        self.init(frameInterval: frameRate.frameDuration.seconds, headroom: headroom, window: window, percentile: percentile)
    }

    /// The most cost per frame allowed, in seconds.
    public var limit: Double { frameInterval * headroom }
    /// Samples currently in the window.
    public var sampleCount: Int { samples.count }

    /// Adds one frame's measured cost (seconds); keeps the last `window`.
    public mutating func record(_ seconds: Double) {
        samples.append(seconds)
        if samples.count > window { samples.removeFirst(samples.count - window) }
    }
    /// Forgets all samples (after applying a new configuration).
    public mutating func reset() { samples.removeAll() }

    /// The verdict on the samples recorded so far.
    public var verdict: CostVerdict {
        CostBudget.evaluate(samples: samples, window: window, percentile: percentile, limit: limit)
    }

    /// The pure decision: `.measuring` until `window` samples, then accept
    /// or roll back on the nearest-rank `percentile` of the last `window`.
    public static func evaluate(samples: [Double], window: Int, percentile: Double, limit: Double) -> CostVerdict {
        guard samples.count >= window else { return .measuring(samples: samples.count, needed: window) }
        let p = nearestRankPercentile(Array(samples.suffix(window)), percentile)
        return p <= limit ? .accept(percentileCost: p, limit: limit) : .rollBack(percentileCost: p, limit: limit)
    }

    /// Nearest-rank percentile: the smallest sample such that at least
    /// `p × count` samples are ≤ it (p95 of 1...100 is 95; p95 of 20 samples
    /// is the 19th smallest).
    public static func nearestRankPercentile(_ values: [Double], _ p: Double) -> Double {
        precondition(!values.isEmpty, "percentile of no samples")
        let sorted = values.sorted()
        let rank = Int((p * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}

/// A configuration change on trial (docs/ARCHITECTURE.md, "Cost budget and rollback"): holds the previous
/// configuration and the candidate, records costs while the candidate runs,
/// and settles on one. Generic over the configuration value.
public struct BudgetedChange<Configuration> {
    public enum State {
        case trial
        case committed
        case rolledBack
    }
    public let previous: Configuration
    public let candidate: Configuration
    public private(set) var budget: CostBudget
    public private(set) var state: State = .trial

    public init(previous: Configuration, candidate: Configuration, budget: CostBudget) {
        self.previous = previous; self.candidate = candidate
        var b = budget
        b.reset()
        self.budget = b
    }

    /// The configuration to run now: the candidate during the trial and once
    /// committed, the previous one after a roll-back.
    public var active: Configuration { state == .rolledBack ? previous : candidate }

    /// Records one frame's cost while on trial and settles when the window is
    /// full; returns the verdict. Samples after settling are ignored.
    @discardableResult
    public mutating func record(_ seconds: Double) -> CostVerdict {
        guard state == .trial else { return budget.verdict }
        budget.record(seconds)
        let v = budget.verdict
        switch v {
        case .measuring: break
        case .accept: state = .committed
        case .rollBack: state = .rolledBack
        }
        return v
    }
}
extension BudgetedChange: Sendable where Configuration: Sendable {}
extension BudgetedChange.State: Sendable, Hashable {}
