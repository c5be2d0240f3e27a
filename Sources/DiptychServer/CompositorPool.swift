import Diptych
import DiptychCore
import DiptychGPU
import Foundation
import Synchronization

/// The GPU side every take of a server shares: a few root compositors, each
/// owning one EGL context and its render thread, and for each take a
/// compositor of its own in one of those contexts
/// (`GPUCompositor(sharingContextOf:)`: own outputs, textures and buffer
/// rings, no context switch between the takes of a context). Takes are
/// dealt to the contexts in turn.
///
/// After a context loss a take asks for a replacement naming the context
/// and generation its lost compositor came from; the first such request
/// builds a new root there (nothing old is reused), later ones from the same
/// generation get compositors in the new context. An old context lives until
/// the last compositor in it is shut down.
final class CompositorPool: Sendable {
    /// Where a compositor came from.
    struct Origin: Hashable, Sendable {
        var context: Int
        var generation: Int
    }

    private let selection: GPUSelection
    private let log: @Sendable (String) -> Void
    private struct State {
        var roots: [GPUCompositor?]
        var generations: [Int]
        var next = 0
    }
    private let state: Mutex<State>
    /// The GPU in use (from the first context).
    let info: GPUInfo
    /// What every frame of the first context's compositor does (`/healthz`).
    let plan: GPUPlan

    /// Contexts to share out when `--contexts` is not given: one (on a GPU
    /// contexts time-slice it; on a software rasterizer the contexts' render
    /// threads take turns, `SoftwareTurn`).
    static let defaultContexts = 1

    init(selection: GPUSelection, contexts: Int?, log: @escaping @Sendable (String) -> Void) throws(GPUError) {
        self.selection = selection
        self.log = log
        let first = try GPUCompositor(selection: selection, log: log)
        info = first.info
        plan = first.plan
        let n = max(1, contexts ?? Self.defaultContexts)
        var roots: [GPUCompositor?] = [first]
        for _ in 1..<n {
            do { roots.append(try GPUCompositor(selection: selection)) } catch {
                for r in roots { r?.shutdown() }
                throw error
            }
        }
        state = Mutex(State(roots: roots, generations: Array(repeating: 0, count: n)))
        log("GPU: \(n) shared context\(n == 1 ? "" : "s") for the takes")
        // On a hardware GPU the GPU encoder's programs are compiled now, on
        // each context's render thread before takes need them: cold, the
        // first take encoding on the GPU spent about 15 s compiling them
        // there, holding every take of its context (the H200, NVIDIA's
        // compiler). A software renderer compiles them at its first GPU
        // encoder, as before (nothing is waiting on its render thread yet).
        if !first.info.isSoftware {
            for case let (c, root?) in roots.enumerated() {
                JoinableThread.detached(name: "diptych.h264prep") {
                    do {
                        let seconds = try root.prepareGPUEncoder()
                        log("GPU: the GPU encoder's programs ready in context \(c) (\(String(format: "%.1f", seconds)) s)")
                    } catch {
                        log("GPU: the GPU encoder's programs did not compile in context \(c): \(error)")
                    }
                }
            }
        }
    }

    /// What decode placement needs of this GPU: NVDEC on the first
    /// context's CUDA device, and `--encoder auto`'s plan here.
    func placementFacts(decodeCores: Double) -> DecodePlacement.Facts {
        let root = state.withLock { $0.roots.first ?? nil }
        let nvdec = root.map { EncoderForecast.nvdecUnavailable(gpu: $0) } ?? "the GPU is shut down"
        return DecodePlacement.Facts(nvdecUnavailable: nvdec, autoEncodesOnGPU: EncoderForecast.autoEncodesOnGPU(gpu: info),
                                     decodeCores: decodeCores)
    }

    var contexts: Int { state.withLock { $0.roots.count } }
    /// Context replacements after losses, over all contexts.
    var generation: Int { state.withLock { $0.generations.reduce(0, +) } }

    /// A compositor in a shared context, and where it came from. `replacing`
    /// names a compositor whose context was lost. A take encoding on the GPU
    /// gets the compute pass and no direct copy (what the GPU encoder reads),
    /// as `diptych record --encoder gpu` does, whatever the root draws with.
    func make(replacing lost: Origin?, gpuEncoder: Bool = false) throws(GPUError) -> (GPUCompositor, Origin) {
        let (selection, log) = (self.selection, self.log)
        return try state.withLock { (s) throws(GPUError) -> (GPUCompositor, Origin) in
            guard !s.roots.isEmpty else { throw .shutDown }
            let c: Int
            if let lost, lost.context < s.roots.count { c = lost.context } else { c = s.next % s.roots.count; s.next += 1 }
            if s.roots[c] == nil || (lost != nil && lost == Origin(context: c, generation: s.generations[c])) {
                s.roots[c]?.shutdown()
                s.roots[c] = nil
                s.roots[c] = try GPUCompositor(selection: selection, log: log)
                s.generations[c] += 1
                log("GPU: context \(c) replaced (generation \(s.generations[c])) after a context loss")
            }
            guard let root = s.roots[c] else { throw .shutDown }
            let compositor = gpuEncoder ? try GPUCompositor(sharingContextOf: root, directCopy: .off, pass: .compute)
                                        : try GPUCompositor(sharingContextOf: root, directCopy: true)
            return (compositor, Origin(context: c, generation: s.generations[c]))
        }
    }

    /// How busy each context's render thread has been so far (`/metrics`),
    /// in context order; a context being replaced counts nothing.
    var renderThreadLoads: [RenderThreadLoad] {
        state.withLock { $0.roots.map { $0?.renderThreadLoad ?? RenderThreadLoad() } }
    }

    /// Releases the roots; each context ends when the last take's compositor in it does.
    func shutdown() {
        state.withLock { s in
            for r in s.roots { r?.shutdown() }
            s.roots = []
        }
    }
}
