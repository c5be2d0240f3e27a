import CFFmpeg
import DiptychCore

/// What one input of the take's audio reads now: a source's audio track and
/// where its timestamps land on the take's timeline (take time = track time + `offset`,
/// the same shift as the source's video frames).
public struct AudioFeed {
    public var track: AudioTrack
    public var offset: MediaTime
    public init(track: AudioTrack, offset: MediaTime) { self.track = track; self.offset = offset }
}

/// The take's audio (docs/ARCHITECTURE.md, "Take audio"): each heard role's
/// source audio decoded and brought to 48 kHz stereo (`aresample`,
/// `aformat`), put on the take's timeline, through libavfilter's
/// `aresample=async` (gaps filled, overlaps trimmed, by timestamp) and
/// `volume`, summed by `amix` when both roles are heard, and encoded to AAC
/// once for every output. A role whose source changes (a hot swap, a
/// reconnect, a failover) is fed from the new source's track at the new
/// source's shift; a role with no audio (none, lost, held, or a source
/// without an audio stream) is fed silence, so the mix never waits on it.
/// A role with audio that is late is waited for `lag` seconds of take time.
///
/// Packets come out on two hubs: `liveTrack` on the take's own timeline (live
/// outputs) and `fileTrack` with the times live outputs held frames taken
/// out (files pause, docs/ARCHITECTURE.md, "Live outputs"). Each output
/// reads a `branch()` of one. Used by one thread (the take's render loop).
public final class AudioMixer {
    public static let sampleRate: Int32 = 48_000
    /// Take seconds a role with audio may be behind the video before the gap is filled with silence.
    public static let lag = 1.0
    public let liveTrack: AudioTrack
    public let fileTrack: AudioTrack
    /// What the track carries, for the log and summary (`aac, mix of primary 0 dB + secondary -6 dB`).
    public let label: String

    private let graph: FFAudioGraph
    private let encoder: FFCodecContext
    private let inputs: [Input]
    private let log: (String) -> Void
    /// Take-time ranges (samples) when live outputs held frames: files skip them.
    private var holds: [(start: Int64, end: Int64)] = []
    /// The end of the last packet on the files' timeline (their packets keep increasing).
    private var fileEnd = Int64.min
    private var failed = false
    private var ended = false
    private let frame = FFFrame()
    private let packet = FFPacket()

    /// One role's input: the track it decodes now and how far it has been fed.
    private final class Input {
        let name: String
        var track: ObjectIdentifier?
        var decoder: FFCodecContext?
        var timeBase = AVRational(num: 1, den: 1)
        var converter: FFAudioGraph?
        var converterFormat: FFAudioGraph.Format?
        /// Take time fed so far, in samples at `sampleRate`.
        var fed: Int64 = 0
        /// Where the next frame without a timestamp starts (the track's time base).
        var nextPTS: Int64?
        init(name: String) { self.name = name }
    }

    /// A mix of `names` (the roles heard, in order) at `gains` decibels each.
    public init(names: [String], gains: [Double], log: @escaping (String) -> Void) throws(MediaError) {
        precondition(!names.isEmpty && names.count == gains.count)
        self.log = log
        inputs = names.map(Input.init)
        let rate = Self.sampleRate
        let format = FFAudioGraph.Format(sampleRate: rate, sampleFormat: AV_SAMPLE_FMT_FLTP, layout: "stereo",
                                         timeBase: AVRational(num: 1, den: rate))
        var chains: [String] = []
        for (i, g) in gains.enumerated() {
            let volume = g == 0 ? "anull" : "volume=volume=\(g)dB:precision=float"
            chains.append("[in\(i)]aresample=async=1:min_hard_comp=0.010,\(volume)[a\(i)]")
        }
        let out = "aformat=sample_fmts=fltp:sample_rates=\(rate):channel_layouts=stereo[out]"
        let mix = names.count == 1 ? "[a0]\(out)"
            : names.indices.map { "[a\($0)]" }.joined() + "amix=inputs=\(names.count):normalize=0:duration=longest:dropout_transition=0,\(out)"
        let description = (chains + [mix]).joined(separator: ";")
        let fail: (String) -> MediaError = { .encoderFailed(encoder: "aac", detail: "the take's audio: \($0)") }
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_AAC) else { throw fail("FFmpeg lacks the AAC encoder") }
        do {
            encoder = try FFCodecContext(codec)
            let e = encoder.raw
            e.pointee.sample_rate = rate
            e.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
            av_channel_layout_default(&e.pointee.ch_layout, 2)
            e.pointee.bit_rate = 160_000
            e.pointee.time_base = AVRational(num: 1, den: rate)
            // Every container gets the AudioSpecificConfig as extradata (MPEG-TS makes ADTS from it).
            e.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER)
            try encoder.open()
        } catch { throw fail("cannot open the AAC encoder: \(error.message)") }
        do {
            graph = try FFAudioGraph(inputs: Array(repeating: format, count: names.count), filters: description,
                                     frameSize: encoder.raw.pointee.frame_size > 0 ? encoder.raw.pointee.frame_size : 1024)
        } catch { throw fail("cannot build the filter graph \(description): \(error.message)") }
        let heard = zip(names, gains).map { "\($0) \(Self.decibels($1))" }
        label = "aac 48 kHz stereo, " + (names.count == 1 ? "the \(heard[0])" : "mix of " + heard.joined(separator: " + "))
        do {
            liveTrack = try AudioTrack(hubFor: encoder, label: label)
            fileTrack = try AudioTrack(hubFor: encoder, label: label)
        } catch { throw fail("\(error.message)") }
    }

    static func decibels(_ g: Double) -> String {
        (g == g.rounded() ? String(Int(g)) : String(format: "%.1f", g)) + " dB"
    }

    /// Feeds every input up to take time `t` (the video's): what each
    /// role's feed holds, silence for a role with none (or late by more than
    /// `lag`), then publishes the AAC packets ready. `feeds` follows the order of the names.
    public func advance(to t: MediaTime, feeds: [AudioFeed?]) {
        guard !failed, !ended else { return }
        let target = t.converted(to: Self.sampleRate).value
        for (i, input) in inputs.enumerated() {
            feed(input, index: i, feeds.indices.contains(i) ? feeds[i] : nil, until: target, final: false)
        }
        drain()
    }

    /// Live outputs held frames over `[t, t + duration)` of the take: files skip that audio.
    public func hold(at t: MediaTime, duration: MediaTime) {
        let s = t.converted(to: Self.sampleRate).value, e = (t + duration).converted(to: Self.sampleRate).value
        if let last = holds.last, s <= last.end { holds[holds.count - 1].end = max(last.end, e) } else { holds.append((s, e)) }
    }

    /// The take ended at `end`: the feeds' last audio, silence up to `end`,
    /// then the graph and the encoder flushed and the hubs ended.
    public func finish(at end: MediaTime, feeds: [AudioFeed?]) {
        guard !ended else { return }
        if !failed {
            let target = end.converted(to: Self.sampleRate).value
            for (i, input) in inputs.enumerated() {
                feed(input, index: i, feeds.indices.contains(i) ? feeds[i] : nil, until: target, final: true)
                do { try graph.push(nil, to: i) } catch { fail("ending input \(input.name): \(error.message)") }
            }
            drain()
            _ = encoder.send(nil as UnsafeMutablePointer<AVFrame>?)
            receive()
        }
        ended = true
        liveTrack.markEnded()
        fileTrack.markEnded()
    }

    // MARK: Inputs

    private func feed(_ input: Input, index: Int, _ feed: AudioFeed?, until target: Int64, final: Bool) {
        var limit = target
        if let feed {
            let id = ObjectIdentifier(feed.track)
            if input.track != id { open(input, feed.track) }
            if input.decoder != nil {
                for p in feed.track.drain() { decode(p, input, index: index, offset: feed.offset) }
                if !feed.track.ended && !final { limit = target - Int64(Self.lag * Double(Self.sampleRate)) }
            } else {
                _ = feed.track.drain()
            }
        } else if input.track != nil {
            input.track = nil
            input.decoder = nil
            input.converter = nil
        }
        if input.fed < limit { silence(index, input, to: limit) }
    }

    /// Starts decoding `track` for `input` (a new source for its role).
    private func open(_ input: Input, _ track: AudioTrack) {
        input.track = ObjectIdentifier(track)
        input.decoder = nil
        input.converter = nil
        input.converterFormat = nil
        input.nextPTS = nil
        guard let codec = avcodec_find_decoder(track.codecID) else {
            log("\(input.name) audio (\(track.codecName)): no decoder; silence instead")
            return
        }
        do {
            let d = try FFCodecContext(decoding: track.parameters.raw, codec: codec)
            d.raw.pointee.pkt_timebase = track.timeBase
            try d.open()
            input.decoder = d
            input.timeBase = track.timeBase
        } catch {
            log("\(input.name) audio (\(track.codecName)): cannot open its decoder (\(error.message)); silence instead")
        }
    }

    private func decode(_ p: AudioPacket, _ input: Input, index: Int, offset: MediaTime) {
        guard let d = input.decoder else { return }
        let r = d.send(p.packet)
        if r < 0 && r != averrorEAGAIN { return }   // a damaged packet: skipped
        while d.receive(frame) == 0 {
            defer { frame.unref() }
            var ts = frame.raw.pointee.best_effort_timestamp
            if ts == avNoPTS { ts = frame.raw.pointee.pts }
            if ts == avNoPTS { ts = input.nextPTS ?? 0 }
            let rate = frame.raw.pointee.sample_rate
            guard rate > 0, frame.raw.pointee.nb_samples > 0 else { continue }
            input.nextPTS = ts + av_rescale_q(Int64(frame.raw.pointee.nb_samples), AVRational(num: 1, den: rate), input.timeBase)
            // On the take's timeline, in the source's samples.
            frame.raw.pointee.pts = av_rescale_q(ts, input.timeBase, AVRational(num: 1, den: rate)) + offset.converted(to: rate).value
            convert(frame, input, index: index)
        }
    }

    /// Brings a decoded frame to 48 kHz stereo (`aresample`, `aformat`) and into the mix.
    private func convert(_ f: FFFrame, _ input: Input, index: Int) {
        let format = FFAudioGraph.Format(of: f.raw, timeBase: AVRational(num: 1, den: f.raw.pointee.sample_rate))
        if input.converter == nil || input.converterFormat != format {
            do {
                input.converter = try FFAudioGraph(inputs: [format],
                    filters: "[in0]aresample=\(Self.sampleRate),aformat=sample_fmts=fltp:channel_layouts=stereo[out]")
                input.converterFormat = format
            } catch {
                log("\(input.name) audio (\(format.arguments)): cannot be converted (\(error.message)); silence instead")
                input.decoder = nil
                return
            }
        }
        guard let c = input.converter else { return }
        do { try c.push(f) } catch { return }
        let out = FFFrame()
        while c.pull(into: out) == 0 {
            let start = out.raw.pointee.pts, end = start + Int64(out.raw.pointee.nb_samples)
            // Wholly before what was fed already (silence stood in for it): dropped.
            if end <= input.fed { out.unref(); continue }
            do { try graph.push(out, to: index) } catch { fail("input \(input.name): \(error.message)"); return }
            input.fed = end
        }
    }

    private func silence(_ index: Int, _ input: Input, to limit: Int64) {
        while input.fed < limit {
            let n = Int32(min(limit - input.fed, 4800))
            let f = FFFrame()
            f.raw.pointee.nb_samples = n
            f.raw.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
            f.raw.pointee.sample_rate = Self.sampleRate
            av_channel_layout_default(&f.raw.pointee.ch_layout, 2)
            guard av_frame_get_buffer(f.raw, 0) >= 0 else { fail("out of memory"); return }
            av_samples_set_silence(f.raw.pointee.extended_data, 0, n, 2, AV_SAMPLE_FMT_FLTP)
            f.raw.pointee.pts = input.fed
            do { try graph.push(f, to: index) } catch { fail("input \(input.name): \(error.message)"); return }
            input.fed += Int64(n)
        }
    }

    // MARK: Output

    private func drain() {
        while !failed, graph.pull(into: frame) == 0 {
            let r = encoder.send(frame.raw)
            frame.unref()
            if r < 0 { fail("the AAC encoder: \(avErrorString(r))"); return }
            receive()
        }
    }

    private func receive() {
        while encoder.receive(packet) == 0 {
            let p = FFPacket(moving: packet.raw)
            if let copy = try? FFPacket(referencing: p), let mapped = fileTime(copy) { fileTrack.publish(mapped) }
            liveTrack.publish(p)
        }
    }

    /// The packet on the files' timeline (the held times taken out); nil
    /// when it falls in a hold, or before the end of one already written
    /// (audio the source gave beyond its last frame before the hold began).
    private func fileTime(_ p: FFPacket) -> FFPacket? {
        guard p.raw.pointee.pts != avNoPTS else { return p }
        let pts = p.raw.pointee.pts
        var shift: Int64 = 0
        for h in holds {
            if pts >= h.end { shift += h.end - h.start; continue }
            if pts >= h.start { return nil }
            break
        }
        let mapped = pts - shift
        if mapped < fileEnd { return nil }
        fileEnd = mapped + max(1, p.raw.pointee.duration)
        p.raw.pointee.pts = mapped
        if p.raw.pointee.dts != avNoPTS { p.raw.pointee.dts -= shift }
        return p
    }

    private func fail(_ why: String) {
        guard !failed else { return }
        failed = true
        log("the take's audio stopped: \(why)")
    }
}
