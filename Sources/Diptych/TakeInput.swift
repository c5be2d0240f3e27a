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
}

/// A `VideoSource` of DiptychMedia as a take input.
final class MediaInput: TakeInput, @unchecked Sendable {
    let source: any VideoSource
    init(_ source: any VideoSource) { self.source = source }
    var info: SourceInfo { source.info }
    var audioTrack: AudioTrack? { source.audioTrack }
    func next() throws(MediaError) -> InputFrame? { try source.nextInput() }
    func close() { source.close() }

    /// Opens `spec` (a file or URL, a pattern, standard input); a file's or
    /// URL's video is decoded as `decoding` says.
    static func open(_ spec: SourceSpec, duration: Double?, decoding: DecoderSettings = .cpu) throws(MediaError) -> MediaInput {
        MediaInput(try MediaSources.open(spec, duration: duration, decoding: decoding))
    }
}
