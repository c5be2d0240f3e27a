import DiptychCore
import DiptychMedia

/// An input stream a take reads, on its reader thread: a decoded file, pipe
/// or synthetic pattern (`MediaInput`), or a host's pushes (`PushSource`).
/// The take does not know which: everything downstream sees `InputFrame`s.
protocol TakeInput: AnyObject, Sendable {
    var info: SourceInfo { get }
    /// The input's audio, for passthrough (nil when none).
    var audioTrack: AudioTrack? { get }
    /// The next frame, or nil at the end of the stream. Blocks.
    func next() throws(MediaError) -> InputFrame?
    /// Releases the input. Idempotent; `next` returns nil afterwards.
    func close()
    /// Makes a `next` blocked on a silent network source return (with an
    /// error); any thread. Inputs that never block on the network do nothing.
    func interrupt()
}

extension TakeInput {
    func interrupt() {}
}

/// A `VideoSource` of DiptychMedia as a take input.
///
/// 4:2:0 pictures of an odd width or height (a 321x241 file, a pattern, a
/// Y4M stream) lose their last column or row here, so the take sees even
/// sizes throughout: the GPU's and the encoder's 4:2:0 need them.
final class MediaInput: TakeInput, Sendable {
    let source: any VideoSource
    init(_ source: any VideoSource) { self.source = source }
    var info: SourceInfo {
        var i = source.info
        if i.pixelFormat.isYUV { i.size = PixelSize(width: i.size.width & ~1, height: i.size.height & ~1) }
        return i
    }
    var audioTrack: AudioTrack? { source.audioTrack }
    func next() throws(MediaError) -> InputFrame? { try source.nextInput().map(Self.evenSized) }

    /// `frame` with a 4:2:0 CPU picture of odd size cropped to the even size below it.
    static func evenSized(_ frame: InputFrame) -> InputFrame {
        guard case .cpu(var v) = frame.payload, v.format.isYUV, v.width % 2 != 0 || v.height % 2 != 0,
              v.width > 1, v.height > 1 else { return frame }
        v.width &= ~1
        v.height &= ~1
        var f = frame
        f.payload = .cpu(v)
        return f
    }
    func close() { source.close() }
    func interrupt() { (source as? FileSource)?.interrupt() }

    /// Opens `spec` (a file or URL, a pattern, standard input); a file's or
    /// URL's video is decoded as `decoding` says. Frames too small to
    /// composite (`MediaSources.sizeProblem`) are refused here.
    static func open(_ spec: SourceSpec, duration: Double?, decoding: DecoderSettings = .cpu,
                     opening: SourceOpening = .commandLine) throws(MediaError) -> MediaInput {
        let source = try MediaSources.open(spec, duration: duration, decoding: decoding, opening: opening)
        if let why = MediaSources.sizeProblem(source.info.size) {
            source.close()
            throw .unsupportedFormat(path: source.info.name, detail: why)
        }
        return MediaInput(source)
    }
}
