import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The CPU seconds one take's decoding has cost so far: the threads its CPU
/// decoders start (FFmpeg's frame and slice threads, found as the decoder
/// opens: `opening`) and the reading threads' time while they decode (`add`).
/// A decoder reads its threads one last time before they end (`retire`), so
/// what they did stays counted and a thread id used again later is not.
/// A server gives one to each take it decodes on the CPU by its own choice
/// (docs/ARCHITECTURE.md, "Where a server decodes"), and learns from them what
/// decoding costs on its machine and its inputs. Any thread may call any method.
public final class DecodeCPUClock: Sendable {
    private struct State {
        var live: [Int32: Double] = [:]
        var done = 0.0
        var adopted = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// CPU seconds so far, the live threads read now.
    public var seconds: Double {
        state.withLock { s in
            for (tid, last) in s.live { s.live[tid] = StageClock.cpuSeconds(ofThread: tid) ?? last }
            return s.live.values.reduce(s.done, +)
        }
    }

    /// How many decoder threads it has counted (those that ended included).
    public var threads: Int { state.withLock { $0.adopted } }

    /// The threads it counts that have not ended.
    package var liveThreads: [Int32] { state.withLock { Array($0.live.keys) } }

    /// Adds `seconds` of a reading thread's time spent decoding.
    public func add(_ seconds: Double) {
        guard seconds > 0 else { return }
        state.withLock { $0.done += seconds }
    }

    /// Counts the threads `tids` from now on (their whole CPU time).
    func adopt(_ tids: [Int32]) {
        state.withLock { s in
            for t in tids { s.live[t] = StageClock.cpuSeconds(ofThread: t) ?? 0 }
            s.adopted += tids.count
        }
    }

    /// Reads the threads `tids` a last time (they are about to end) and stops reading them.
    public func retire(_ tids: [Int32]) {
        state.withLock { s in
            for t in tids {
                guard let last = s.live.removeValue(forKey: t) else { continue }
                s.done += StageClock.cpuSeconds(ofThread: t) ?? last
            }
        }
    }

    /// Runs `open` (a decoder opening) with the calling thread named for
    /// the decode stage and a tag of its own (`CodecThreads.opening`), and
    /// counts from now on the threads it started. Returns those threads.
    public func opening<E: Error>(_ open: () throws(E) -> Void) throws(E) -> [Int32] {
        let started = try CodecThreads.opening(.decode, open)
        adopt(started)
        return started
    }
}
