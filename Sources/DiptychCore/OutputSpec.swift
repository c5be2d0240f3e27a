/// One more output of a take (`--also-out`, the server's added outputs):
/// where it goes and the layout it is drawn with. It shares the take's
/// stream textures and canvas; its render target and encoder are its own.
public struct OutputSpec: Hashable, Sendable {
    /// A file or URL (`.mp4`, `.mkv`, `.ts`, `rtmp://`, `srt://`).
    public var out: String
    /// nil: inferred from `out`.
    public var format: ContainerFormat?
    /// nil: the take's own layout (and its changes).
    public var layout: Layout?

    public init(out: String, format: ContainerFormat? = nil, layout: Layout? = nil) {
        self.out = out; self.format = format; self.layout = layout
    }

    /// The container: `format` when given, else inferred from `out`.
    public var container: ContainerFormat? { format ?? ContainerFormat.infer(from: out) }
}
