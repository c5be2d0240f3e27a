import Synchronization

/// A request, made on any thread, that the streams NVDEC decodes under one
/// take's settings (`DecoderSettings.move`) go on on the CPU: a server's
/// decode placement moves a running take there once its cores prove to
/// have room (docs/ARCHITECTURE.md, "Where a server decodes"). Each stream
/// moves at its next keyframe: NVDEC is drained of the frames it holds and
/// a CPU decoder starts at that keyframe where it closes its GOP, or decodes
/// again from the keyframe before where it opens one (`GOPStart`), so no
/// frame is lost or decoded twice. The stream's `DecoderFallback` says when
/// (`requested`). Thread-safe.
public final class DecoderMove: Sendable {
    private let reason = Mutex<String?>(nil)

    public init() {}

    /// Asks for the move, saying why; the first reason stays.
    public func request(_ why: String) { reason.withLock { if $0 == nil { $0 = why } } }

    /// Why the move was asked for, or nil while it is not.
    public var requested: String? { reason.withLock { $0 } }
}
