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
public final class SnapshotRequests: @unchecked Sendable {
    private final class Pending {
        let output: Int
        var result: Result<VideoFrame, SnapshotFailure>?
        let done = DispatchSemaphore(value: 0)
        init(output: Int) { self.output = output }
    }
    private let lock = NSLock()
    private var pending: [Pending] = []
    private var closed = false

    public init() {}

    /// Output `output`'s next drawn frame (RGBA), waiting at most `timeout` seconds.
    public func next(output: Int, timeout: Double) -> Result<VideoFrame, SnapshotFailure> {
        let p = Pending(output: output)
        let open = lock.withLock { () -> Bool in
            guard !closed else { return false }
            pending.append(p)
            return true
        }
        guard open else { return .failure(.ended) }
        if p.done.wait(timeout: .now() + timeout) == .timedOut {
            // Answered between the timeout and here: take that answer.
            let stillWaiting = lock.withLock { () -> Bool in
                guard let i = pending.firstIndex(where: { $0 === p }) else { return false }
                pending.remove(at: i)
                return true
            }
            if stillWaiting { return .failure(.timedOut(seconds: timeout)) }
            p.done.wait()
        }
        return p.result ?? .failure(.ended)
    }

    /// Whether anyone waits for output `output` (the render loop asks before reading).
    func wanted(output: Int) -> Bool { lock.withLock { pending.contains { $0.output == output } } }

    /// Reads output `output`'s target once for everyone waiting for it.
    func answer(output: Int, read: () throws(GPUError) -> VideoFrame?) {
        let waiting = lock.withLock { () -> [Pending] in
            let w = pending.filter { $0.output == output }
            pending.removeAll { $0.output == output }
            return w
        }
        guard !waiting.isEmpty else { return }
        let result: Result<VideoFrame, SnapshotFailure>
        do throws(GPUError) {
            if let f = try read() { result = .success(f) } else { result = .failure(.unreadable("no frame in the target")) }
        } catch {
            result = .failure(.unreadable("\(error)"))
        }
        for p in waiting { p.result = result; p.done.signal() }
    }

    /// The take ended: everyone waiting is told so, and later callers at once.
    func close() {
        let waiting = lock.withLock { () -> [Pending] in
            closed = true
            defer { pending = [] }
            return pending
        }
        for p in waiting { p.result = .failure(.ended); p.done.signal() }
    }
}

/// The render loop's side of `SnapshotRequests`.
final class SnapshotTap: RenderTap, @unchecked Sendable {
    let requests: SnapshotRequests
    init(_ requests: SnapshotRequests) { self.requests = requests }
    func rendered(gpu: GPUCompositor, target: OutputID, output key: Int, pts: MediaTime, index: Int) {
        guard requests.wanted(output: key) else { return }
        requests.answer(output: key) { () throws(GPUError) in try gpu.previewRGBA(output: target) }
    }
}
