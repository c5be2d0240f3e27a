import DiptychCore
import DiptychGPU
import DiptychMedia

/// What a take plugs in at its two ends: where its streams come from and
/// where its outputs go. `diptych record` and the server use `TakeIO.media`
/// (files, URLs, patterns, standard input; `MediaWriter` outputs); an
/// embedding host supplies its push sources and its callbacks. Nothing
/// between the two ends knows which.
struct TakeIO: Sendable {
    /// Opens the stream of `role` (the take's configured spec, or a hot swap's),
    /// decoding it as `DecoderSettings` say, within what `SourceOpening` allows.
    var openInput: @Sendable (StreamRole, SourceSpec, _ duration: Double?, DecoderSettings, SourceOpening) throws(MediaError) -> any TakeInput
    /// Opens output `index` (0 is `--out`, then `--also-out` in order).
    /// `origin` is the output's zero on the take's timeline (nil: its first frame);
    /// `cancel`, when flipped, stops an open in progress (a reconnect the take no longer waits for).
    var openOutput: @Sendable (_ index: Int, OutputSpec, VideoEncoderSettings, AudioTrack?, _ origin: MediaTime?,
                               _ cancel: OpenCancel?) throws(MediaError) -> any TakeOutput
    /// Readers of the render target after each frame (callbacks).
    var taps: [any RenderTap & Sendable] = []
    /// Both streams' timestamps are on one clock (pushed frames).
    var sharedClock = false
    /// Whether `--out` names a file or URL (an embedded session without a
    /// file has only callbacks: there is no path to check).
    var outputIsNamed = true
    /// Whether a take with no frames at all is a failure (a host may push none).
    var emptyTakeFails = true
    /// Told once the take runs (GPU and outputs open), before the first frame.
    var started: @Sendable (GPUInfo) -> Void = { _ in }
    /// Told the take's zero on the inputs' own timeline, at its first frame.
    var timelineOrigin: @Sendable (MediaTime) -> Void = { _ in }
    /// Told first thing in finalize, whatever ended the take.
    var ending: @Sendable (StopReason) -> Void = { _ in }

    /// Files, URLs, synthetic patterns and standard input in; `MediaWriter`s out.
    static let media = TakeIO(
        openInput: { _, spec, duration, decoding, opening throws(MediaError) in
            try MediaInput.open(spec, duration: duration, decoding: decoding, opening: opening)
        },
        openOutput: { _, spec, video, audio, origin, cancel throws(MediaError) in
            // The GPU encoder's plan: the output takes its access units (SPS and PPS from the first keyframe).
            if video.encoder == .gpu {
                return try MediaWriter(url: spec.out, container: spec.container, preEncoded: PreEncodedVideo(settings: video),
                                       audio: audio, timestampOrigin: origin, cancel: cancel, segmentTime: spec.segmentTime,
                                       hlsListSize: spec.hlsListSize)
            }
            return try MediaWriter(url: spec.out, container: spec.container, video: video, audio: audio, timestampOrigin: origin, cancel: cancel,
                                   segmentTime: spec.segmentTime, hlsListSize: spec.hlsListSize)
        })
}
