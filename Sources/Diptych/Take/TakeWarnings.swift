import Foundation
import Synchronization

/// A take's warnings: each is logged (`warning: …`) as it happens and kept
/// for the summary, whichever thread says it (the render loop, a reader, a
/// decoder falling back, the GPU stage), so `--json` holds every warning
/// stderr showed.
final class TakeWarnings: Sendable {
    private let lines = Mutex<[String]>([])
    private let log: @Sendable (String) -> Void

    init(log: @escaping @Sendable (String) -> Void) { self.log = log }

    func add(_ message: String) {
        lines.withLock { $0.append(message) }
        log("warning: \(message)")
    }

    var all: [String] { lines.withLock { $0 } }
}
