import Foundation
import Synchronization
import DiptychCore
import DiptychMedia

/// Outputs opened and closed beside the render loop, so a receiver that
/// accepts a connection and never answers, or one that stopped reading,
/// delays only its own output, never the frames of the others
/// (docs/ARCHITECTURE.md, "Several outputs"). Each open or close runs on a
/// thread of its own, bounded by the output's network timeout; the render
/// loop takes the opened outputs at its next frame (`takeOpened`), and
/// finalize waits for every one still under way (`settle`).
final class OutputHandovers: Sendable {
    /// An output whose sink has opened (or failed to), waiting to be attached by the render loop.
    struct Opened {
        let spec: OutputSpec
        let result: Result<any TakeOutput, MediaError>
        let reply: @Sendable (Result<Int, SessionError>) -> Void
    }

    private struct State {
        var opened: [Opened] = []
        var closed: [OutputSummary] = []
        /// The threads under way, and those done but not yet joined.
        var running: [Int: JoinableThread] = [:]
        var done: [JoinableThread] = []
        var nextID = 0
    }
    private let state = Mutex(State())

    /// Runs `body` on a thread of its own, joined once it has ended.
    private func spawn(_ body: @escaping @Sendable () -> Void) {
        state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            // The lock is held until the thread is registered, so its end always finds it.
            s.running[id] = JoinableThread { [self] in
                body()
                state.withLock { s in if let t = s.running.removeValue(forKey: id) { s.done.append(t) } }
            }
        }
    }

    /// Joins the threads that have ended.
    private func reap() {
        let ended = state.withLock { s -> [JoinableThread] in defer { s.done = [] }; return s.done }
        ended.forEach { $0.join() }
    }

    /// Opens an output with `open` on a thread of its own.
    func open(spec: OutputSpec, reply: @escaping @Sendable (Result<Int, SessionError>) -> Void,
              _ open: @escaping @Sendable () throws(MediaError) -> any TakeOutput) {
        spawn { [self] in
            let result: Result<any TakeOutput, MediaError>
            do throws(MediaError) { result = .success(try open()) } catch { result = .failure(error) }
            state.withLock { $0.opened.append(Opened(spec: spec, result: result, reply: reply)) }
        }
    }

    /// The outputs opened since the last call (render loop, each frame).
    func takeOpened() -> [Opened] {
        reap()
        return state.withLock { s in defer { s.opened = [] }; return s.opened }
    }

    /// Completes `stage` (its queued frames encoded, its file or stream
    /// finished) on a thread of its own; `summarize` makes its summary,
    /// which goes to `reply` and is returned by `settle`.
    func close(_ stage: EncoderStage, summarize: @escaping @Sendable (MediaError?) -> OutputSummary,
               reply: (@Sendable (OutputSummary) -> Void)? = nil) {
        spawn { [self] in
            let s = summarize(stage.finish())
            state.withLock { $0.closed.append(s) }
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
            let pending = state.withLock { Array($0.running.values) + $0.done }
            if pending.isEmpty { break }
            pending.forEach { $0.join() }
            state.withLock { s in
                s.running = s.running.filter { r in !pending.contains { $0 === r.value } }
                s.done.removeAll { d in pending.contains { $0 === d } }
            }
        }
        for o in takeOpened() {
            if case .success(let sink) = o.result { try? sink.finish() }
            o.reply(.failure(ended))
        }
        return state.withLock { $0.closed }
    }
}
