#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The files of an HLS output beside its playlist: `live/index.m3u8` gives
/// the initialization segment `live/index-init.mp4` and the media segments
/// `live/index-0001.m4s`, `live/index-0002.m4s`, … (fragmented MP4, four
/// digits at least, more past 9999). FFmpeg's `hls` muxer writes each to
/// `NAME.tmp` first and renames it when it is whole.
public enum HLSNaming {
    /// The default segment length in seconds (`--segment-time` not given).
    public static let defaultSegmentTime = 2.0
    /// The playlist's name without `.m3u8` (the whole name when it has another ending).
    public static func stem(_ playlist: String) -> String {
        playlist.lowercased().hasSuffix(".m3u8") ? String(playlist.dropLast(5)) : playlist
    }

    /// The initialization segment (`index-init.mp4`), in the playlist's folder.
    public static func initPath(_ playlist: String) -> String { stem(playlist) + "-init.mp4" }

    /// Media segment `index` (from 1).
    public static func segmentPath(_ playlist: String, index: Int) -> String {
        let number = index < 10_000 ? String("000\(index)".suffix(4)) : String(index)
        return "\(stem(playlist))-\(number).m4s"
    }

    /// The muxer's `hls_segment_filename`: the segment path with the number
    /// as `%04d` (a `%` of the name itself doubled).
    public static func segmentPattern(_ playlist: String) -> String {
        stem(playlist).replacing("%", with: "%%") + "-%04d.m4s"
    }

    /// Whether `file` (a name in the playlist's folder, without the folder)
    /// is one the output writes: the playlist, its initialization segment,
    /// a media segment of any number, or one of those being written (`.tmp`).
    public static func isFile(_ file: String, of playlist: String) -> Bool {
        let name = file.hasSuffix(".tmp") ? String(file.dropLast(4)) : file
        let list = SegmentNaming.lastComponent(playlist)
        let s = SegmentNaming.lastComponent(stem(playlist))
        if name == list || name == s + "-init.mp4" { return true }
        guard name.hasPrefix(s + "-"), name.hasSuffix(".m4s"), name.count > s.count + 1 + 4 else { return false }
        let digits = name.dropFirst(s.count + 1).dropLast(4)
        return digits.count >= 4 && digits.allSatisfy { $0 >= "0" && $0 <= "9" }
    }

    /// A file already in the playlist's folder that the output would write
    /// (`isFile`): the first by name, with its folder; nil when there is none.
    public static func existingFile(of playlist: String) -> String? {
        let path = playlist.hasPrefix("file:") ? String(playlist.dropFirst(5)) : playlist
        let name = SegmentNaming.lastComponent(path)
        let folder = path.count > name.count ? String(path.dropLast(name.count)) : ""
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder)) ?? []
        return names.filter { isFile($0, of: name) }.sorted().first.map { folder + $0 }
    }
}
