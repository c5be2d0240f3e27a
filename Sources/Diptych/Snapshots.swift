import DiptychCore
import DiptychGPU
import Foundation

/// Why a snapshot did not come.
public enum SnapshotFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// No frame of that output was drawn within the wait.
    case timedOut(seconds: Double)
    /// The take ended (or had not started drawing) before a frame came.
    case ended
    /// The render target could not be read.
    case unreadable(String)

    public var description: String {
        switch self {
        case .timedOut(let s): "no frame of the output was drawn within \(s) s"
        case .ended: "the take ended before a frame was drawn"
        case .unreadable(let why): "the output's render target could not be read: \(why)"
        }
    }
}

/// Snapshots of a running take's outputs (`SessionHooks.snapshots`): a
/// caller asks for output N's next drawn frame and waits, bounded; the
/// render loop answers from the output's render target as RGBA (the target
/// the encoder's frames and the preview come from) and only while someone
/// waits, so a take nobody asks costs nothing. Callers wait on any thread;
/// `answer` runs on the take's render loop.
public final class SnapshotRequests: Sendable {
    private struct State {
        /// Who waits, for which output.
        var pending: [(id: Int, output: Int)] = []
        /// Answers not yet taken by their waiters.
        var answers: [Int: Result<VideoFrame, SnapshotFailure>] = [:]
        var closed = false
        var nextID = 0
    }
    private let state = Condition(State())

    public init() {}

    /// Output `output`'s next drawn frame (RGBA), waiting at most `timeout` seconds.
    public func next(output: Int, timeout: Double) -> Result<VideoFrame, SnapshotFailure> {
        let id = state.withLock { s -> Int? in
            guard !s.closed else { return nil }
            s.nextID += 1
            s.pending.append((s.nextID, output))
            return s.nextID
        }
        guard let id else { return .failure(.ended) }
        let answer = state.wait(until: { $0.answers[id] != nil }, timeout: timeout) { s, answered -> Result<VideoFrame, SnapshotFailure>? in
            if answered { return s.answers.removeValue(forKey: id) }
            if let i = s.pending.firstIndex(where: { $0.id == id }) {
                s.pending.remove(at: i)
                return .failure(.timedOut(seconds: timeout))
            }
            return nil   // being answered now: the answer follows
        }
        if let answer { return answer }
        return state.wait(until: { $0.answers[id] != nil }) { s, _ in s.answers.removeValue(forKey: id) ?? .failure(.ended) }
    }

    /// Whether anyone waits for output `output` (the render loop asks before reading).
    func wanted(output: Int) -> Bool { state.withLock { $0.pending.contains { $0.output == output } } }

    /// Reads output `output`'s target once for everyone waiting for it.
    func answer(output: Int, read: () throws(GPUError) -> VideoFrame?) {
        let waiting = state.withLock { s -> [Int] in
            let w = s.pending.filter { $0.output == output }.map(\.id)
            s.pending.removeAll { $0.output == output }
            return w
        }
        guard !waiting.isEmpty else { return }
        let result: Result<VideoFrame, SnapshotFailure>
        do throws(GPUError) {
            if let f = try read() { result = .success(f) } else { result = .failure(.unreadable("no frame in the target")) }
        } catch {
            result = .failure(.unreadable("\(error)"))
        }
        state.update { s in for id in waiting { s.answers[id] = result } }
    }

    /// The take ended: everyone waiting is told so, and later callers at once.
    func close() {
        state.update { s in
            s.closed = true
            for p in s.pending { s.answers[p.id] = .failure(.ended) }
            s.pending = []
        }
    }
}

/// The render loop's side of `SnapshotRequests`.
final class SnapshotTap: RenderTap, Sendable {
    let requests: SnapshotRequests
    init(_ requests: SnapshotRequests) { self.requests = requests }
    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int) {
        guard requests.wanted(output: key) else { return }
        requests.answer(output: key) { () throws(GPUError) in try gpu.previewRGBA(output: target) }
    }
}
