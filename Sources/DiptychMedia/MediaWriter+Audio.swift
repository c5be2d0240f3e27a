import CFFmpeg
import DiptychCore

/// The audio side of `MediaWriter`: passthrough or AAC re-encoding, kept
/// within the video written so far.
extension MediaWriter {
    /// Adds the audio stream: the track's codec copied when the container
    /// carries it, else AAC.
    func addAudioStream(_ audio: AudioTrack, to out: FFOutputContext, globalHeader: Bool) throws(MediaError) {
        let st: UnsafeMutablePointer<AVStream>
        do { st = try out.newStream() } catch { throw .writeFailed(path: url, detail: "audio stream: \(error)") }
        audioStream = st
        // The take's own AAC (`AudioMixer`) is copied into every container Diptych writes (MPEG-TS
        // makes ADTS from its extradata); a source's track only where the muxer says it carries it.
        if audio.label != nil || avformat_query_codec(out.raw.pointee.oformat, audio.codecID, FF_COMPLIANCE_NORMAL) == 1 {
            avcodec_parameters_copy(st.pointee.codecpar, audio.parameters.raw)
            st.pointee.codecpar.pointee.codec_tag = 0
            st.pointee.time_base = audio.timeBase
            audioDescription = audio.label ?? "copy \(audio.codecName)"
        } else {
            let t = try AudioTranscoder(track: audio, globalHeader: globalHeader, output: url)
            do { try t.encoder.copyParameters(to: st.pointee.codecpar) } catch {
                throw .writeFailed(path: url, detail: "audio stream: \(error)")
            }
            st.pointee.time_base = t.encoder.raw.pointee.time_base
            audioTranscoder = t
            audioDescription = "aac (re-encoded from \(audio.codecName))"
        }
    }

    /// Writes audio packets from the writer's `AudioTrack` (copied or re-encoded).
    /// Packets past the video written so far wait; at `finish()` those beyond
    /// the last video frame are dropped, so audio never outlasts the video.
    /// `write(_:)` calls this itself with whatever the source has queued.
    public func writeAudio(_ packets: [AudioPacket]) throws(MediaError) {
        guard audioStream != nil else { return }
        pendingAudio.append(contentsOf: packets)
        try writePendingAudio(until: videoEnd)
    }

    /// At the end of the take: what the source still holds, then the encoder's tail.
    func finishAudio() throws(MediaError) {
        if let audioTrack { pendingAudio.append(contentsOf: audioTrack.drain()) }
        try writePendingAudio(until: videoEnd)
        pendingAudio.removeAll()
        if let t = audioTranscoder, let st = audioStream {
            try writeAll(try t.flush(), stream: st, from: t.encoder.raw.pointee.time_base)
        }
        try writeHeldAudio(before: .max)
    }

    /// A split output: the held audio packets that begin before `end` (video
    /// ticks on the take's timeline) go to the current file, with its start
    /// taken off. Audio is held until the video muxed has passed it, so each
    /// packet lands in the file its time falls in (the video's cut is a
    /// keyframe not yet known when the audio comes).
    func writeHeldAudio(before end: Int64) throws(MediaError) {
        guard let split, let st = audioStream else { return }
        var i = 0
        while i < split.heldAudio.count {
            let (p, tb) = split.heldAudio[i]
            if p.raw.pointee.pts != avNoPTS, end != .max,
               av_rescale_q(p.raw.pointee.pts, tb, videoTimeBase) >= end { break }
            i += 1
            let shift = av_rescale_q(split.start, videoTimeBase, tb)
            if p.raw.pointee.pts != avNoPTS { p.raw.pointee.pts -= shift }
            if p.raw.pointee.dts != avNoPTS { p.raw.pointee.dts -= shift }
            p.raw.pointee.stream_index = st.pointee.index
            p.raw.pointee.pos = -1
            av_packet_rescale_ts(p.raw, tb, st.pointee.time_base)
            try mux(p.raw, "audio packet")
            audioPacketsWritten += 1
        }
        self.split?.heldAudio.removeFirst(i)
    }

    private func writePendingAudio(until endTicks: Int64) throws(MediaError) {
        guard output != nil, let st = audioStream, let track = audioTrack else { pendingAudio.removeAll(); return }
        guard let origin = timestampOrigin else { return }  // audio waits for the first video frame
        let end = videoTimeBase.mediaTime(endTicks)
        let shift = av_rescale_q(origin.value, AVRational(num: 1, den: origin.timescale), track.timeBase)
        var i = 0
        while i < pendingAudio.count {
            let a = pendingAudio[i]
            guard let sourcePTS = a.pts else { i += 1; continue }
            let pts = sourcePTS - origin
            if pts >= end { break }
            i += 1
            // Skip audio wholly before the first video frame.
            if pts + a.duration <= .zero { continue }
            if let t = audioTranscoder {
                try writeAll(try t.transcode(a, origin: origin), stream: st, from: t.encoder.raw.pointee.time_base)
            } else {
                let copy: FFPacket
                do { copy = try FFPacket(referencing: a.packet) } catch { throw .writeFailed(path: url, detail: "audio packet: \(error)") }
                if copy.raw.pointee.pts != avNoPTS { copy.raw.pointee.pts -= shift }
                if copy.raw.pointee.dts != avNoPTS { copy.raw.pointee.dts -= shift }
                try writeAudioPacket(copy, stream: st, from: track.timeBase)
            }
        }
        pendingAudio.removeFirst(i)
    }

    private func writeAll(_ packets: [FFPacket], stream: UnsafeMutablePointer<AVStream>, from tb: AVRational) throws(MediaError) {
        for p in packets { try writeAudioPacket(p, stream: stream, from: tb) }
    }

    private func writeAudioPacket(_ p: FFPacket, stream: UnsafeMutablePointer<AVStream>, from tb: AVRational) throws(MediaError) {
        if split != nil {
            split!.heldAudio.append((p, tb))
            return try writeHeldAudio(before: muxedVideoEnd)
        }
        p.raw.pointee.stream_index = stream.pointee.index
        p.raw.pointee.pos = -1
        av_packet_rescale_ts(p.raw, tb, stream.pointee.time_base)
        try mux(p.raw, "audio packet")
        audioPacketsWritten += 1
    }
}
