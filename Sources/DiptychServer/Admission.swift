import Foundation

/// One output's share of a take's load: the pixels it renders and encodes
/// a second (its canvas × its frame rate).
public struct OutputLoad: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var fps: Double
    public init(width: Int, height: Int, fps: Double) { self.width = width; self.height = height; self.fps = fps }
    public var megapixelsPerSecond: Double { Double(width) * Double(height) * fps / 1e6 }
    public var description: String { "\(width)x\(height) at \(String(format: "%g", fps))" }
}

/// What running a take at real time asks of the machine: the pixels per
/// second its outputs render and encode, each at its own canvas and rate
/// (the main output at the take's canvas and the primary's rate; an
/// `alsoOut` or added output at its own `size` and rate divisor, else the
/// take's). Costs scale with it.
public struct TakeLoad: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The main output: the take's canvas and rate.
    public var width: Int
    public var height: Int
    public var fps: Double
    /// The other outputs (`alsoOut`, then those added while it runs), each its own size and rate.
    public var outputs: [OutputLoad]
    /// Input megapixels a second the server placed on the CPU's decoders
    /// (`DecodePlacement`); 0 where the take's own decoder choice stands.
    public var cpuDecodeMegapixelsPerSecond: Double = 0
    /// Outputs encoded, the main one included.
    public var encodes: Int { 1 + outputs.count }

    /// A take whose `encodes` outputs all render and encode its canvas at its rate.
    public init(width: Int, height: Int, fps: Double, encodes: Int = 1) {
        self.init(width: width, height: height, fps: fps,
                  outputs: Array(repeating: OutputLoad(width: width, height: height, fps: fps), count: max(1, encodes) - 1))
    }

    public init(width: Int, height: Int, fps: Double, outputs: [OutputLoad]) {
        self.width = width; self.height = height; self.fps = fps; self.outputs = outputs
    }

    /// The load of one more output of this take: `size` (nil: the take's
    /// canvas) at the take's rate divided by `rateDivisor`.
    public func output(width w: Int? = nil, height h: Int? = nil, rateDivisor: Int = 1) -> OutputLoad {
        OutputLoad(width: w ?? width, height: h ?? height, fps: fps / Double(max(1, rateDivisor)))
    }

    public var megapixelsPerSecond: Double {
        outputs.reduce(Double(width) * Double(height) * fps / 1e6) { $0 + $1.megapixelsPerSecond }
    }

    /// Megapixels the outputs render and encode for one frame of the take's
    /// clock (an output at half the rate counts half its canvas).
    public var megapixelsPerFrame: Double { fps > 0 ? megapixelsPerSecond / fps : 0 }

    /// `1920x1080 at 30 fps`; with more outputs, `..., 3 outputs` and, where
    /// one is not the take's canvas and rate, each (`1280x720 at 30, 640x360 at 15`).
    public var description: String {
        let main = "\(width)x\(height) at \(String(format: "%g", fps)) fps"
        guard !outputs.isEmpty else { return main }
        let same = OutputLoad(width: width, height: height, fps: fps)
        let own = outputs.allSatisfy { $0 == same } ? "" : " (\(outputs.map(\.description).joined(separator: ", ")))"
        return main + ", \(encodes) outputs" + own
    }

    private enum CodingKeys: String, CodingKey { case width, height, fps, encodes, outputs, cpuDecodeMegapixelsPerSecond }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(width, forKey: .width)
        try c.encode(height, forKey: .height)
        try c.encode(fps, forKey: .fps)
        try c.encode(encodes, forKey: .encodes)
        try c.encode(outputs, forKey: .outputs)
        if cpuDecodeMegapixelsPerSecond > 0 { try c.encode(cpuDecodeMegapixelsPerSecond, forKey: .cpuDecodeMegapixelsPerSecond) }
    }

    /// Loads saved before `outputs` existed read as `encodes` outputs of the
    /// take's canvas and rate; before `encodes` existed, as one output.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let w = try c.decode(Int.self, forKey: .width), h = try c.decode(Int.self, forKey: .height), fps = try c.decode(Double.self, forKey: .fps)
        if let outputs = try c.decodeIfPresent([OutputLoad].self, forKey: .outputs) {
            self.init(width: w, height: h, fps: fps, outputs: outputs)
        } else {
            self.init(width: w, height: h, fps: fps, encodes: try c.decodeIfPresent(Int.self, forKey: .encodes) ?? 1)
        }
        cpuDecodeMegapixelsPerSecond = try c.decodeIfPresent(Double.self, forKey: .cpuDecodeMegapixelsPerSecond) ?? 0
    }
}

/// Measured cost per output megapixel: process CPU seconds (everything the
/// takes run: decode, upload copies, llvmpipe, the encoder) and GPU
/// milliseconds (the take compositors' passes on the shared render thread);
/// and, apart, CPU seconds per input megapixel the server placed on the
/// CPU's decoders (`TakeLoad.cpuDecodeMegapixelsPerSecond`).
public struct CostModel: Hashable, Sendable, Codable {
    public var cpuSecondsPerMegapixel: Double
    public var gpuMsPerMegapixel: Double
    /// libavcodec's CPU seconds per decoded H.264 megapixel (the calibration's decode; 0: not measured).
    public var decodeCPUSecondsPerMegapixel: Double
    /// Where the figures come from (the start-up calibration take, or a window of running takes).
    public var source: String

    public init(cpuSecondsPerMegapixel: Double, gpuMsPerMegapixel: Double, decodeCPUSecondsPerMegapixel: Double = 0, source: String) {
        self.cpuSecondsPerMegapixel = cpuSecondsPerMegapixel; self.gpuMsPerMegapixel = gpuMsPerMegapixel
        self.decodeCPUSecondsPerMegapixel = decodeCPUSecondsPerMegapixel; self.source = source
    }

    public func cpuCores(_ load: TakeLoad) -> Double {
        cpuSecondsPerMegapixel * load.megapixelsPerSecond + decodeCores(load)
    }
    /// The cores the take's CPU-placed decoding needs at real time.
    public func decodeCores(_ load: TakeLoad) -> Double { decodeCPUSecondsPerMegapixel * load.cpuDecodeMegapixelsPerSecond }
    /// The cores the CPU-placed decoding of all `loads` needs at real time.
    public func decodeCores(of loads: some Sequence<TakeLoad>) -> Double { loads.reduce(0) { $0 + decodeCores($1) } }
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

    /// Frame threads of each CPU decoder of a take joining `active` others:
    /// its two streams' share of the cores, between 2 and 16. A server's many
    /// streams are its parallelism; a frame thread more than a stream needs
    /// costs CPU (eight 1080p60 decodes at once on two cores took 20–29 %
    /// more CPU time with 16 frame threads each than with 2, libavcodec
    /// 5.1), and 2 still decode a 4K60 stream on a server core.
    public static func decoderThreads(cores: Int, active: Int) -> Int {
        min(16, max(fewestDecoderThreads, cores / (2 * max(1, active + 1))))
    }
    /// The fewest frame threads a server's CPU decoder has (a busy server's).
    public static let fewestDecoderThreads = 2
}
