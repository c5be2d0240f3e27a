import DiptychGPU
import Foundation

/// The GPU side every take of a server shares: one root compositor owns the
/// EGL context and its render thread, and each take gets a compositor of
/// its own in that context (`GPUCompositor(sharingContextOf:)`: own outputs,
/// textures and buffer rings, no context switch between takes).
///
/// After a context loss a take asks for a replacement naming the generation
/// its lost compositor came from; the first such request builds a new root
/// (nothing old is reused), later ones from the same generation get
/// compositors in the new context. The old context lives until the last
/// compositor in it is shut down.
final class CompositorPool: @unchecked Sendable {
    private let selection: GPUSelection
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var root: GPUCompositor?
    private var _generation = 0
    /// How many times the shared context has been replaced after a loss.
    var generation: Int { lock.withLock { _generation } }
    /// The GPU in use (from the first context).
    let info: GPUInfo

    init(selection: GPUSelection, log: @escaping @Sendable (String) -> Void) throws(GPUError) {
        self.selection = selection
        self.log = log
        let r = try GPUCompositor(selection: selection, log: log)
        root = r
        info = r.info
    }

    /// A compositor in the shared context and the generation it belongs to.
    /// `replacing` is the generation of a compositor whose context was lost.
    func make(replacing lost: Int?) throws(GPUError) -> (GPUCompositor, generation: Int) {
        lock.lock(); defer { lock.unlock() }
        if root == nil || (lost != nil && lost == _generation) {
            root?.shutdown()
            root = nil
            let r = try GPUCompositor(selection: selection, log: log)
            root = r
            _generation += 1
            log("GPU: new shared context (generation \(_generation)) after a context loss")
        }
        guard let root else { throw .shutDown }
        return (try GPUCompositor(sharingContextOf: root, directCopy: true), _generation)
    }

    /// Releases the root; the context ends when the last take's compositor does.
    func shutdown() {
        lock.lock(); defer { lock.unlock() }
        root?.shutdown()
        root = nil
    }
}
