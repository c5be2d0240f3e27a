import DiptychCore
import DiptychMedia

/// Where a server decodes a take whose request leaves `decoder` at `auto`
/// (docs/ARCHITECTURE.md, "Where a server decodes"). Beside the GPU encoder,
/// NVDEC's CUDA work slows every pass of the GL context, and a server holds
/// more takes decoding on the CPU while its cores have room; with libx264 the
/// cores are the encoder's, and NVDEC frees them. So a take that encodes on
/// the GPU, and whose inputs NVDEC would decode, is decoded on the CPU while
/// the takes placed there so far and this one fit the decode budget
/// (`diptych serve --decode-cores`); beyond it NVDEC decodes as before.
/// Pure: the same inputs give the same decision.
public enum DecodePlacement {
    /// What the server knows of its machine before any take opens.
    public struct Facts: Hashable, Sendable {
        /// Why NVDEC cannot decode on the server's GPU, or nil when it can.
        public var nvdecUnavailable: String?
        /// Whether `--encoder auto` encodes H.264 on the GPU here (no VA-API or NVENC first).
        public var autoEncodesOnGPU: Bool
        /// Cores the CPU-placed decoding may fill (0: none is placed).
        public var decodeCores: Double

        public init(nvdecUnavailable: String?, autoEncodesOnGPU: Bool, decodeCores: Double) {
            self.nvdecUnavailable = nvdecUnavailable; self.autoEncodesOnGPU = autoEncodesOnGPU; self.decodeCores = decodeCores
        }

        /// The cores placement may fill: the budget where NVDEC decodes, else 0.
        public var budget: Double { nvdecUnavailable == nil ? decodeCores : 0 }

        /// No NVDEC: every take decodes where its own choice says.
        public static let none = Facts(nvdecUnavailable: "no NVDEC", autoEncodesOnGPU: false, decodeCores: 0)
    }

    /// The outcome for one take: decoded on the CPU by the server's choice
    /// (`cpu` true), or left to the take's own choice, and why.
    public struct Decision: Hashable, Sendable, CustomStringConvertible {
        public var cpu: Bool
        public var reason: String
        public var description: String { (cpu ? "cpu" : "as asked") + " (\(reason))" }
    }

    /// Why a placed take's streams decode on the CPU (their decoder decisions).
    public static let streamReason = "the server decodes this take on the CPU (--decode-cores)"
    /// Why a moved take's streams left NVDEC (their fall backs, `requested`).
    public static let movedReason = "the server moved this take's decoding to the CPU (--decode-cores)"

    /// Megapixels a second the take's inputs decode at real time, where every
    /// input is a file the server probed in a codec NVDEC decodes
    /// (`DecoderPolicy.nvdecCodecs`, progressive); nil otherwise (a network
    /// source or camera, a pattern, switches): the take's own choice stands.
    public static func inputMegapixelsPerSecond(_ config: TakeConfiguration, primary: SourceInfo?, secondary: SourceInfo?) -> Double? {
        guard config.secondarySwitches.isEmpty, let primary else { return nil }
        var infos = [primary]
        if config.secondary != .none {
            guard let secondary else { return nil }
            infos.append(secondary)
        }
        guard infos.allSatisfy({ DecoderPolicy.nvdecCodecs.contains($0.codec) && $0.interlaced == nil }) else { return nil }
        return infos.reduce(0) { $0 + Double($1.size.width * $1.size.height) * $1.frameRate.fps / 1e6 }
    }

    /// Whether the take's main output encodes on the GPU: `--encoder gpu`,
    /// or `auto` where this server's GPU takes the GPU encoder and the take's
    /// libx264 settings are ones it is as good as (`SoftwareBaseline`).
    public static func encodesOnGPU(codec: VideoCodec, encoder: EncoderChoice, preset: String, facts: Facts) -> Bool {
        guard codec == .h264 else { return false }
        switch encoder {
        case .gpu: return true
        case .auto: return facts.autoEncodesOnGPU && SoftwareBaseline(preset: preset).gpuEncoderRefusal == nil
        default: return false
        }
    }

    /// The decision for a take asking for `choice`: `decodeCores` is what
    /// its inputs cost decoded on the CPU (the cost model's decode figure
    /// times their megapixels a second), `placed` what the running takes
    /// placed on the CPU cost. Nil where the server has nothing to decide
    /// (a decoder asked for, no NVDEC, an encoder on the CPU).
    public static func decide(choice: DecoderChoice, encodesOnGPU: Bool, decodeCores: Double, placed: Double,
                              facts: Facts) -> Decision? {
        guard choice == .auto, facts.nvdecUnavailable == nil, encodesOnGPU, decodeCores > 0 else { return nil }
        let budget = String(format: "%.2f of %.2f decode cores (--decode-cores)", placed, facts.decodeCores)
        if placed + decodeCores <= facts.decodeCores {
            return Decision(cpu: true, reason: String(
                format: "encoded on the GPU, decoded on the CPU while the cores have room: about %.2f cores, %@ in use",
                decodeCores, budget))
        }
        return Decision(cpu: false, reason: String(format: "NVDEC: about %.2f more cores would exceed the CPU's decode budget, %@ in use",
                                                   decodeCores, budget))
    }

    /// Which of the running takes NVDEC decodes by placement move to the
    /// CPU, once the takes placed there have measured what decoding costs
    /// (a burst of takes is placed by the calibration's figure, which may
    /// be far from the inputs'): `candidates`, oldest first, each with the
    /// cores its decoding would cost on the CPU at the measured figure,
    /// move while they and `placed` (the cores of the takes on the CPU now,
    /// at that figure) fit the budget; one that does not fit is passed over.
    public static func moves<T>(_ candidates: [(take: T, cores: Double)], placed: Double, facts: Facts) -> [(take: T, decision: Decision)] {
        guard facts.budget > 0 else { return [] }
        var placed = placed
        var out: [(take: T, decision: Decision)] = []
        for c in candidates where c.cores > 0 && placed + c.cores <= facts.decodeCores {
            out.append((c.take, Decision(cpu: true, reason: String(
                format: "encoded on the GPU, moved from NVDEC to the CPU once the placed takes measured their decoding: about %.2f cores, %.2f of %.2f decode cores (--decode-cores) in use",
                c.cores, placed, facts.decodeCores))))
            placed += c.cores
        }
        return out
    }
}
