import CFFmpeg
import DiptychCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The HLS side of `MediaWriter`: FFmpeg's `hls` muxer writes fragmented-MP4
/// segments (`HLSNaming`) and the live playlist; here the keyframes are put
/// where the muxer cuts, the playlist's entries are kept as the muxer
/// rewrites it (a sliding window drops the oldest), and a clean finish
/// replaces it with the complete VOD playlist.
extension MediaWriter {
    /// The muxer's options for an HLS output.
    func hlsOptions(_ hls: HLSState, into options: FFDictionary) {
        // hlsenc cuts at the first keyframe at or after n × hls_time from the
        // first packet (n counting the segments): the keyframes forced here
        // fall on those times (`HLSState.keyframeDue`).
        options.set("hls_time", hls.segmentTimeText)
        options.set("hls_list_size", String(hls.listSize))
        // Every segment kept: a live EVENT playlist. A window: a plain live one.
        if hls.listSize == 0 { options.set("hls_playlist_type", "event") }
        options.set("hls_segment_type", "fmp4")
        options.set("hls_fmp4_init_filename", SegmentNaming.lastComponent(HLSNaming.initPath(url)))
        options.set("hls_segment_filename", HLSNaming.segmentPattern(url))
        options.set("start_number", "1")
        // Each segment and each playlist is written to NAME.tmp and renamed
        // when whole; the playlist names a segment only once it is complete.
        // Segments are never deleted (no delete_segments).
        options.set("hls_flags", "independent_segments+temp_file")
    }

    /// Takes in the muxer's playlist if it has been rewritten since it was last read.
    /// (With every segment listed, the muxer's last playlist has them all: it is read at the end only.)
    func readPlaylistIfChanged(atEnd: Bool = false) {
        guard hls != nil, atEnd || hls!.listSize > 0 else { return }
        var st = stat()
        let file = hls!.playlistFile
        guard stat(file, &st) == 0 else { return }
        let stamp = [Int(st.st_ino), Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec), Int(st.st_size)]
        guard stamp != hls!.stamp else { return }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return }
        hls!.stamp = stamp
        hls!.take(text)
    }

    /// After the trailer: the playlist becomes the take's complete VOD
    /// playlist (every segment, `#EXT-X-PLAYLIST-TYPE:VOD`, `#EXT-X-ENDLIST`),
    /// written whole to NAME.tmp and renamed over the muxer's.
    func writeCompletePlaylist() throws(MediaError) {
        readPlaylistIfChanged(atEnd: true)
        guard let hls, let text = hls.vodPlaylist() else { return }
        let file = hls.playlistFile, temp = file + ".tmp"
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: temp)) } catch {
            unlink(temp)
            throw .writeFailed(path: file, detail: "writing the complete playlist: \(error)")
        }
        guard rename(temp, file) == 0 else {
            let e = errno
            unlink(temp)
            throw .writeFailed(path: file, detail: "writing the complete playlist: \(String(cString: strerror(e)))")
        }
    }
}

/// Where an HLS output stands: its segment length, the cuts the muxer will
/// make, and the playlist entries seen so far.
struct HLSState {
    /// The playlist as a file path (without `file:`).
    let playlistFile: String
    /// The segment length in microseconds (as the muxer reads `hls_time`).
    let segmentMicros: Int64
    /// Entries the live playlist keeps (0: all).
    let listSize: Int
    /// The video's time base: cut times are found in its ticks.
    let timeBase: AVRational
    /// Frames encoded here: the number of the next cut to force a keyframe at.
    private var encodeCut = 1
    /// Video muxed: the number of the next cut the muxer makes.
    private var muxCut = 1
    /// The playlist file as last read (inode, mtime, size).
    var stamp: [Int] = []
    /// The muxer's header lines, the target duration (the muxer's largest, or
    /// more where a segment needs it), and every entry seen (media sequence → lines).
    private var header: [String] = []
    private var target = 0
    private var entries: [Int: [String]] = [:]

    init(playlist: String, segmentTime: Double, listSize: Int, timeBase: AVRational) {
        playlistFile = playlist.hasPrefix("file:") ? String(playlist.dropFirst(5)) : playlist
        segmentMicros = max(1, Int64((segmentTime * 1_000_000).rounded()))
        self.listSize = listSize
        self.timeBase = timeBase
    }

    /// `hls_time` exactly as `segmentMicros`.
    var segmentTimeText: String {
        let frac = String("00000\(segmentMicros % 1_000_000)".suffix(6))
        return "\(segmentMicros / 1_000_000).\(frac)"
    }

    /// The first tick (on the output's timeline, from 0) at or after cut `n`.
    func cutTicks(_ n: Int) -> Int64 {
        let num = Int128(n) * Int128(segmentMicros) * Int128(timeBase.den)
        let den = Int128(timeBase.num) * 1_000_000
        return Int64((num + den - 1) / den)
    }

    /// Whether the frame at `t` is to be made a keyframe: the first frame at
    /// or after the next cut (later cuts it passes are skipped).
    mutating func keyframeDue(at t: Int64) -> Bool {
        guard t >= cutTicks(encodeCut) else { return false }
        while cutTicks(encodeCut) <= t { encodeCut += 1 }
        return true
    }

    /// A keyframe muxed at `pts`: the muxer begins a segment there if it is due.
    mutating func muxedKeyframe(at pts: Int64) {
        if pts >= cutTicks(muxCut) { muxCut += 1 }
    }

    /// Video muxed up to `end` waits for a keyframe to begin the next segment.
    func awaitsCut(_ end: Int64) -> Bool { end >= cutTicks(muxCut) }

    /// Keeps the entries of a playlist the muxer wrote (with those seen before).
    mutating func take(_ text: String) {
        var sequence = 0
        var head: [String] = []
        var pending: [String] = []
        var inEntries = false
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = String(raw).trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line == "#EXT-X-ENDLIST" { continue }
            if line.hasPrefix("#EXT-X-MEDIA-SEQUENCE:") { sequence = Int(line.dropFirst(22)) ?? 0; continue }
            if line.hasPrefix("#EXT-X-TARGETDURATION:") { target = max(target, Int(line.dropFirst(22)) ?? 0); continue }
            if line.hasPrefix("#EXT-X-PLAYLIST-TYPE:") { continue }
            if line.hasPrefix("#EXTINF:") {
                inEntries = true
                // A segment's duration rounded to the nearest second may not exceed the target duration.
                if let d = Double(line.dropFirst(8).prefix { $0 != "," }), d.isFinite, d >= 0, d < 1e9 {
                    target = max(target, Int(d.rounded(.toNearestOrAwayFromZero)))
                }
            }
            if !inEntries { head.append(line); continue }
            pending.append(line)
            if !line.hasPrefix("#") {
                entries[sequence] = pending
                pending = []
                sequence += 1
            }
        }
        if !head.isEmpty { header = head }
    }

    /// The complete playlist: every entry seen, marked VOD and ended; nil before any.
    func vodPlaylist() -> String? {
        guard let first = entries.keys.min(), let last = entries.keys.max() else { return nil }
        var lines: [String] = []
        var typed = false
        for line in header {
            lines.append(line)
            if line.hasPrefix("#EXT-X-VERSION:") || (line == "#EXTM3U" && !header.contains { $0.hasPrefix("#EXT-X-VERSION:") }) {
                lines += ["#EXT-X-TARGETDURATION:\(target)", "#EXT-X-MEDIA-SEQUENCE:\(first)", "#EXT-X-PLAYLIST-TYPE:VOD"]
                typed = true
            }
        }
        guard typed else { return nil }
        for s in first...last { lines += entries[s] ?? [] }
        lines.append("#EXT-X-ENDLIST")
        return lines.joined(separator: "\n") + "\n"
    }
}
