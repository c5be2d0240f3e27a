import DiptychCore
import DiptychMedia
import Synchronization

/// Where the server decodes one take's inputs, by its own choice, and what
/// that has cost (docs/ARCHITECTURE.md, "Where a server decodes"): the
/// placement admission decided, a move from NVDEC to the CPU made later
/// (`TakeRegistry.moveDecodingWhereCoresHaveRoom`), the clock of its CPU
/// decoding and its decoders' frame threads. Thread-safe.
final class TakeDecoding: Sendable {
    /// Where admission placed the decoding, when the server decided (`DecodePlacement`).
    let admitted: DecodePlacement.Decision?
    /// Megapixels a second the inputs decode at, where the server decides
    /// where they decode (`DecodePlacement.inputMegapixelsPerSecond`); else 0.
    let inputMegapixelsPerSecond: Double
    /// Frame threads of each CPU decoder (`Admission.decoderThreads`); nil for one a core.
    let threads: Int?
    /// The nice value of each CPU decoder's threads (`--decode-nice`); nil for the process's.
    let nice: Int?
    /// The CPU seconds of the decoding the server placed or moved on the CPU.
    let clock = DecodeCPUClock()
    private let move = DecoderMove()
    /// The move, once made: why, and, once the first stream has moved, the
    /// take's frames written and the clock then (what is counted starts there).
    private let moved = Mutex<(decision: DecodePlacement.Decision, since: (written: Int, clockSeconds: Double)?)?>(nil)

    init(admitted: DecodePlacement.Decision? = nil, inputMegapixelsPerSecond: Double = 0, threads: Int? = nil, nice: Int? = nil) {
        self.admitted = admitted
        self.inputMegapixelsPerSecond = admitted == nil ? 0 : inputMegapixelsPerSecond
        self.threads = threads
        self.nice = nice
    }

    /// Where the take decodes now by the server's choice: where it was placed, or moved since.
    var current: DecodePlacement.Decision? { moved.withLock { $0?.decision } ?? admitted }

    /// Whether the server may move the decoding to the CPU: NVDEC decodes it by placement, and it has not moved.
    var movable: Bool { leftToNVDEC && moved.withLock { $0 == nil } }

    /// Admission left the decoding to NVDEC, where the server decides where inputs decode.
    private var leftToNVDEC: Bool { admitted?.cpu == false && inputMegapixelsPerSecond > 0 }

    /// Input megapixels a second decoded on the CPU by the server's choice (admission charges them).
    var cpuMegapixelsPerSecond: Double { current?.cpu == true ? inputMegapixelsPerSecond : 0 }

    /// Moves the decoding to the CPU: each stream NVDEC decodes goes on on
    /// the CPU from its next keyframe. False when it is not movable (any more).
    func moveToCPU(_ decision: DecodePlacement.Decision) -> Bool {
        guard leftToNVDEC else { return false }
        let made = moved.withLock { m -> Bool in
            guard m == nil else { return false }
            m = (decision, nil)
            return true
        }
        if made { move.request(DecodePlacement.movedReason) }
        return made
    }

    /// A stream's decoder settings as the server decides them: frame
    /// threads and their nice value; a placed take on the CPU, counted by the clock; one left to
    /// NVDEC movable later, counted from its first stream that moves
    /// (`written`: the take's frames written then).
    func settings(_ settings: DecoderSettings, written: @escaping @Sendable () -> Int) -> DecoderSettings {
        var s = admitted?.cpu == true ? settings.onCPU(because: DecodePlacement.streamReason) : settings
        s.cpuThreads = threads
        s.cpuNice = nice
        guard let admitted else { return s }
        s.cpuClock = clock
        if !admitted.cpu {
            s.move = move
            let told = settings.onFallback
            s.onFallback = { [self] f in
                told(f)
                guard f.requested == true else { return }
                let (frames, seconds) = (written(), clock.seconds)
                moved.withLock { m in if m != nil, m?.since == nil { m?.since = (frames, seconds) } }
            }
        }
        return s
    }

    /// Frames decoded on the CPU by the server's choice out of `written`,
    /// and the CPU seconds they took: all of a placed take's, a moved take's
    /// since its first stream moved, none otherwise.
    func counted(written: Int) -> (frames: Int, seconds: Double) {
        if admitted?.cpu == true { return (written, clock.seconds) }
        guard let since = moved.withLock({ $0?.since }) else { return (0, 0) }
        return (written - since.written, clock.seconds - since.clockSeconds)
    }
}
