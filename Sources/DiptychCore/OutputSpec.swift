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
    /// `--segment-time SECONDS` (the main output only): the file is split
    /// into `segmentPath(out, index:)` files of about this length; nil: one
    /// file. HLS: the segment length (nil: `HLSNaming.defaultSegmentTime`).
    public var segmentTime: Double?
    /// `--hls-list-size N` (an HLS main output only): segments the live
    /// playlist lists; nil or 0: all.
    public var hlsListSize: Int?
    /// Images drawn over this output's streams (JSON `overlays` of an `alsoOut` entry).
    public var overlays: [ImageOverlay] = []
    /// Texts drawn over this output's streams (JSON `texts` of an `alsoOut` entry).
    public var texts: [TextOverlay] = []

    public init(out: String, format: ContainerFormat? = nil, layout: Layout? = nil, segmentTime: Double? = nil, hlsListSize: Int? = nil,
                overlays: [ImageOverlay] = [], texts: [TextOverlay] = []) {
        self.out = out; self.format = format; self.layout = layout; self.segmentTime = segmentTime; self.hlsListSize = hlsListSize
        self.overlays = overlays; self.texts = texts
    }

    /// The container: `format` when given, else inferred from `out`.
    public var container: ContainerFormat? { format ?? ContainerFormat.infer(from: out) }
}

/// One file of a split output: its path, its frames, and where it lies on
/// the take's timeline (each file's own timestamps start at 0).
public struct WrittenSegment: Sendable, Codable, Hashable {
    public var path: String
    public var frames: Int
    /// Seconds from the take's start to the file's first frame.
    public var start: Double
    /// Seconds of video the file holds.
    public var duration: Double

    public init(path: String, frames: Int, start: Double, duration: Double) {
        self.path = path; self.frames = frames; self.start = start; self.duration = duration
    }
}

/// The names of a split recording's files (`--segment-time`): `take.mp4`
/// gives `take-0001.mp4`, `take-0002.mp4`, … (four digits at least, more
/// past 9999); a name without an extension gets the number at its end.
public enum SegmentNaming {
    /// The file of segment `index` (from 1) of output `out`.
    public static func path(_ out: String, index: Int) -> String {
        let number = index < 10_000 ? String("000\(index)".suffix(4)) : String(index)
        let (stem, ext) = split(out)
        return "\(stem)-\(number)\(ext)"
    }

    /// Whether `file` (a name in the folder of `out`, without the folder) is
    /// a segment of `out` of any number: what a split take would write over.
    public static func isSegment(_ file: String, of out: String) -> Bool {
        let (stem, ext) = split(lastComponent(out))
        guard file.hasPrefix(stem + "-"), file.hasSuffix(ext), file.count > stem.count + 1 + ext.count else { return false }
        let digits = file.dropFirst(stem.count + 1).dropLast(ext.count)
        return digits.count >= 4 && digits.allSatisfy { $0 >= "0" && $0 <= "9" }
    }

    /// The last component of a path (`/a/b/take.mp4` → `take.mp4`).
    public static func lastComponent(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? path
    }

    /// `take.mp4` → (`take`, `.mp4`); `dir.v2/take` → (`dir.v2/take`, ``).
    private static func split(_ out: String) -> (stem: String, ext: String) {
        let name = lastComponent(out)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (out, "") }
        let ext = String(name[dot...])
        return (String(out.dropLast(ext.count)), ext)
    }
}
