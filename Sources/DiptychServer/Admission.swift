import Foundation

/// What running a take at real time asks of the machine: its output pixels
/// per second (canvas × frame rate). Costs scale with it.
public struct TakeLoad: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var fps: Double
    /// Outputs encoded (the main output and every `alsoOut`): each renders and encodes the canvas.
    public var encodes: Int
    public init(width: Int, height: Int, fps: Double, encodes: Int = 1) {
        self.width = width; self.height = height; self.fps = fps; self.encodes = max(1, encodes)
    }
    public var megapixelsPerSecond: Double { Double(width) * Double(height) * fps * Double(encodes) / 1e6 }
    public var description: String {
        "\(width)x\(height) at \(String(format: "%g", fps)) fps" + (encodes > 1 ? ", \(encodes) outputs" : "")
    }

    private enum CodingKeys: String, CodingKey { case width, height, fps, encodes }
    /// Loads saved before `encodes` existed read as one output.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(width: try c.decode(Int.self, forKey: .width), height: try c.decode(Int.self, forKey: .height),
                  fps: try c.decode(Double.self, forKey: .fps), encodes: try c.decodeIfPresent(Int.self, forKey: .encodes) ?? 1)
    }
}

/// Measured cost per output megapixel: process CPU seconds (everything the
/// takes run: decode, upload copies, llvmpipe, the encoder) and GPU
/// milliseconds (the take compositors' passes on the shared render thread).
public struct CostModel: Hashable, Sendable, Codable {
    public var cpuSecondsPerMegapixel: Double
    public var gpuMsPerMegapixel: Double
    /// Where the figures come from (the start-up calibration take, or a window of running takes).
    public var source: String

    public func cpuCores(_ load: TakeLoad) -> Double { cpuSecondsPerMegapixel * load.megapixelsPerSecond }
    public func gpuMsPerSecond(_ load: TakeLoad) -> Double { gpuMsPerMegapixel * load.megapixelsPerSecond }
}

/// What admission may fill: CPU cores and render-thread/GPU milliseconds
/// per second, each times `headroom`.
public struct Capacity: Hashable, Sendable, Codable {
    public var cpuCores: Double
    public var gpuMsPerSecond: Double = 1000
    public var headroom: Double = 0.9
    public init(cpuCores: Double, gpuMsPerSecond: Double = 1000, headroom: Double = 0.9) {
        self.cpuCores = cpuCores; self.gpuMsPerSecond = gpuMsPerSecond; self.headroom = headroom
    }

    private enum CodingKeys: String, CodingKey { case cpuCores, gpuMsPerSecond, headroom }

    /// JSON has no infinity: an unlimited GPU budget (a software rasterizer's) is `null`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(cpuCores, forKey: .cpuCores)
        if gpuMsPerSecond.isFinite { try c.encode(gpuMsPerSecond, forKey: .gpuMsPerSecond) } else { try c.encodeNil(forKey: .gpuMsPerSecond) }
        try c.encode(headroom, forKey: .headroom)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        cpuCores = try c.decode(Double.self, forKey: .cpuCores)
        gpuMsPerSecond = try c.decodeIfPresent(Double.self, forKey: .gpuMsPerSecond) ?? .infinity
        headroom = try c.decode(Double.self, forKey: .headroom)
    }
}

/// A running take that has fallen behind real time.
public struct Lagging: Hashable, Sendable {
    public var id: String
    public var realtimeFactor: Double
    public init(id: String, realtimeFactor: Double) { self.id = id; self.realtimeFactor = realtimeFactor }
}

/// Admission by measured cost, not by hope (docs/ARCHITECTURE.md): a new
/// take is admitted only when the running takes plus its estimate fit the
/// capacity at real time, and no running take is already
/// behind real time. Pure: the same inputs give the same decision.
public enum Admission {
    public struct Estimate: Hashable, Sendable, Codable {
        public var cpuCores: Double
        public var gpuMsPerSecond: Double
    }

    /// Why a take (or an output) is refused: every case is 503, and the
    /// metrics count each kind apart (`kind`).
    public enum Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        case maxTakes(Int)
        case lagging(Lagging)
        /// Over the CPU or the GPU budget; the message names the load and the figures.
        case overCPU(String)
        case overGPU(String)

        /// The refusal's label in `/metrics` (`diptych_refusals_total{reason=…}`).
        public var kind: String {
            switch self {
            case .maxTakes: "max-takes"
            case .lagging: "lagging"
            case .overCPU, .overGPU: "capacity"
            }
        }

        public var description: String {
            switch self {
            case .maxTakes(let n): "at the limit of \(n) takes running at once (--max-takes)"
            case .lagging(let l): String(format: "take %@ is running at %.2fx real time; no room for another take", l.id, l.realtimeFactor)
            case .overCPU(let m), .overGPU(let m): m
            }
        }

        public var requestError: RequestError { .unavailable(description) }
    }

    public static func decide(new: TakeLoad, running: [TakeLoad], lagging: Lagging?, active: Int, maxTakes: Int,
                              model: CostModel, capacity: Capacity) -> Result<Estimate, Refusal> {
        if active >= maxTakes { return .failure(.maxTakes(maxTakes)) }
        if let l = lagging { return .failure(.lagging(l)) }
        let estimate = Estimate(cpuCores: model.cpuCores(new), gpuMsPerSecond: model.gpuMsPerSecond(new))
        let usedCPU = running.reduce(0) { $0 + model.cpuCores($1) }
        let cpuLimit = capacity.cpuCores * capacity.headroom
        if usedCPU + estimate.cpuCores > cpuLimit {
            return .failure(.overCPU(String(
                format: "over capacity: %@ needs about %.2f CPU cores at real time; %@ %.2f of %.2f (%g cores × %.0f %%), cost %@",
                new.description, estimate.cpuCores, takes(running.count), usedCPU, cpuLimit, capacity.cpuCores,
                capacity.headroom * 100, model.source)))
        }
        let usedGPU = running.reduce(0) { $0 + model.gpuMsPerSecond($1) }
        let gpuLimit = capacity.gpuMsPerSecond * capacity.headroom
        if usedGPU + estimate.gpuMsPerSecond > gpuLimit {
            return .failure(.overGPU(String(
                format: "over GPU capacity: %@ needs about %.0f ms of GPU time per second; %@ %.0f of %.0f, cost %@",
                new.description, estimate.gpuMsPerSecond, takes(running.count), usedGPU, gpuLimit, model.source)))
        }
        return .success(estimate)
    }

    /// Whether the server takes work now (`GET /readyz`): nil when it does,
    /// else why not: calibrating, the calibration failed, draining, or a
    /// take of the calibration's size (`probe`) would be refused. Pure.
    public static func unready(calibrated: Bool, calibrationFailure: String?, draining: Bool,
                               probe: () -> Refusal?) -> String? {
        if draining { return "draining: the server is shutting down" }
        if let why = calibrationFailure { return "the start-up calibration failed: \(why)" }
        if !calibrated { return "calibrating" }
        if let refusal = probe() { return "no room for a take: \(refusal)" }
        return nil
    }

    private static func takes(_ n: Int) -> String { n == 1 ? "1 running take uses" : "\(n) running takes use" }

    /// Encoder threads for a take joining `active` others: a fair share of
    /// the cores, at least one, so the encoders together stay near the core count.
    public static func encoderThreads(cores: Int, active: Int) -> Int {
        max(1, cores / max(1, active + 1))
    }
}
