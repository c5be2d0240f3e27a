import Foundation
import DiptychCore
import DiptychMedia

/// Outputs opened and closed beside the render loop, so a receiver that
/// accepts a connection and never answers, or one that stopped reading,
/// delays only its own output, never the frames of the others
/// (docs/ARCHITECTURE.md, "Several outputs"). Each open or close runs on a
/// thread of its own, bounded by the output's network timeout; the render
/// loop takes the opened outputs at its next frame (`takeOpened`), and
/// finalize waits for every one still under way (`settle`).
final class OutputHandovers: @unchecked Sendable {
    /// An output whose sink has opened (or failed to), waiting to be attached by the render loop.
    struct Opened {
        let spec: OutputSpec
        let result: Result<any TakeOutput, MediaError>
        let reply: @Sendable (Result<Int, SessionError>) -> Void
    }

    private let lock = NSLock()
    private var opened: [Opened] = []
    private var closed: [OutputSummary] = []
    /// The threads under way, and those done but not yet joined.
    private var running: [Int: JoinableThread] = [:]
    private var done: [JoinableThread] = []
    private var nextID = 0

    /// Runs `body` on a thread of its own, joined once it has ended.
    private func spawn(_ body: @escaping @Sendable () -> Void) {
        lock.lock(); defer { lock.unlock() }
        let id = nextID
        nextID += 1
        // The lock is held until the thread is registered, so its end always finds it.
        running[id] = JoinableThread { [self] in
            body()
            lock.withLock { if let t = running.removeValue(forKey: id) { done.append(t) } }
        }
    }

    /// Joins the threads that have ended.
    private func reap() {
        let ended = lock.withLock { () -> [JoinableThread] in defer { done = [] }; return done }
        ended.forEach { $0.join() }
    }

    /// Opens an output with `open` on a thread of its own.
    func open(spec: OutputSpec, reply: @escaping @Sendable (Result<Int, SessionError>) -> Void,
              _ open: @escaping @Sendable () throws(MediaError) -> any TakeOutput) {
        spawn { [self] in
            let result: Result<any TakeOutput, MediaError>
            do throws(MediaError) { result = .success(try open()) } catch { result = .failure(error) }
            lock.withLock { opened.append(Opened(spec: spec, result: result, reply: reply)) }
        }
    }

    /// The outputs opened since the last call (render loop, each frame).
    func takeOpened() -> [Opened] {
        reap()
        return lock.withLock { defer { opened = [] }; return opened }
    }

    /// Completes `stage` (its queued frames encoded, its file or stream
    /// finished) on a thread of its own; `summarize` makes its summary,
    /// which goes to `reply` and is returned by `settle`.
    func close(_ stage: EncoderStage, summarize: @escaping @Sendable (MediaError?) -> OutputSummary,
               reply: (@Sendable (OutputSummary) -> Void)? = nil) {
        spawn { [self] in
            let s = summarize(stage.finish())
            lock.withLock { closed.append(s) }
            reply?(s)
        }
    }

    /// Finishes a sink that opened but will not be attached, on a thread of its own.
    func discard(_ sink: any TakeOutput) {
        spawn { try? sink.finish() }
    }

    /// Waits for every open and close under way; outputs opened too late to
    /// be attached are finished and refused with `ended`. Returns the
    /// summaries of the outputs closed, in the order they closed.
    func settle(ended: SessionError) -> [OutputSummary] {
        while true {
            let pending = lock.withLock { Array(running.values) + done }
            if pending.isEmpty { break }
            pending.forEach { $0.join() }
            lock.withLock {
                running = running.filter { r in !pending.contains { $0 === r.value } }
                done.removeAll { d in pending.contains { $0 === d } }
            }
        }
        for o in takeOpened() {
            if case .success(let sink) = o.result { try? sink.finish() }
            o.reply(.failure(ended))
        }
        return lock.withLock { closed }
    }
}
