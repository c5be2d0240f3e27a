import DiptychCore
import DiptychMedia
import Foundation

/// Reads media through DiptychMedia (libavformat/libavcodec): what a
/// source delivers, and how many frames an output file holds.
enum MediaProbe {
    /// Size and rate of a regular file or synthetic source, opened and closed
    /// again; nil for network sources, devices and pipes (opening them here
    /// would take frames from the take) and on error.
    static func info(_ spec: SourceSpec) -> SourceInfo? {
        switch spec {
        case .testPattern(let name, let size, let rate):
            return SourceInfo(name: "testsrc:\(name)", size: size, frameRate: rate)
        case .url(let u) where !u.contains("://") && isRegularFile(u):
            guard let s = try? MediaSources.open(spec) else { return nil }
            defer { s.close() }
            return s.info
        default:
            return nil
        }
    }

    /// `info`, for a source a request names as `field`, checked against
    /// the server's `policy` first: a source the policy refuses, a path that
    /// does not exist, a folder, or a file that is not media the take could
    /// read is the request's mistake (400), found before the take is admitted.
    /// Network sources and FIFOs are checked but not opened (nil).
    static func checked(_ spec: SourceSpec, field: String, policy: SourcePolicy) throws(RequestError) -> SourceInfo? {
        switch spec {
        case .none: return nil
        case .stdin: throw .badRequest("\(field) '-': a server take cannot read standard input")
        case .testPattern:
            do { let s = try MediaSources.open(spec); s.close() } catch { throw .badRequest("\(field): \(error)") }
            return info(spec)
        case .url(let u):
            guard let path = try checkAllowed(spec, field: field, policy: policy) else { return nil }
            var st = stat()
            guard stat(path, &st) == 0 else { throw .badRequest("\(field) '\(u)': no such file") }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: throw .badRequest("\(field) '\(u)': is a folder, not a media file")
            case S_IFREG: break
            default: return nil
            }
            do {
                let s = try MediaSources.open(spec, opening: SourceOpening(policy: policy)); defer { s.close() }
                return s.info
            } catch { throw .badRequest("\(field): \(error)") }
        }
    }

    /// Refuses (400) a source the policy does not allow, without opening it.
    /// Returns a file source's resolved path (nil for others).
    @discardableResult
    static func checkAllowed(_ spec: SourceSpec, field: String, policy: SourcePolicy) throws(RequestError) -> String? {
        do { return try MediaSources.checkAllowed(spec, policy: policy) } catch {
            if case .fileNotFound = error { throw .badRequest("\(field) '\(spec)': no such file") }
            throw .badRequest("\(field): \(error)")
        }
    }

    /// Refuses (400) a source whose frames are too small to composite.
    static func checkSize(_ info: SourceInfo, field: String) throws(RequestError) {
        if let why = MediaSources.sizeProblem(info.size) { throw .badRequest("\(field) '\(info.name)': \(why)") }
    }

    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// Decodes `path` and counts its frames (stopping after `budget` seconds
    /// of decoding). A file cut short by a crash is read up to its last
    /// complete fragment.
    static func countFrames(_ path: String, budget: Double = 10) -> RecoveredOutput {
        guard FileManager.default.fileExists(atPath: path) else {
            return RecoveredOutput(frames: 0, durationSeconds: 0, decodable: false, note: "the output file does not exist")
        }
        let source: any VideoSource
        do { source = try MediaSources.open(.url(path)) } catch {
            return RecoveredOutput(frames: 0, durationSeconds: 0, decodable: false, note: "\(error)")
        }
        defer { source.close() }
        let start = Date()
        var frames = 0
        var end = 0.0
        let step = source.info.frameRate.frameDuration.seconds
        do {
            while let f = try source.nextFrame() {
                frames += 1
                end = max(end, f.pts.seconds + step)
                if Date().timeIntervalSince(start) > budget {
                    return RecoveredOutput(frames: frames, durationSeconds: end, decodable: true,
                                           note: "counted the first \(frames) frames in \(Int(budget)) s")
                }
            }
        } catch {
            return RecoveredOutput(frames: frames, durationSeconds: end, decodable: frames > 0,
                                   note: "decoding stopped after \(frames) frames: \(error)")
        }
        return RecoveredOutput(frames: frames, durationSeconds: end, decodable: frames > 0, note: nil)
    }

    /// The same for an HLS output. The playlist a crash left is a live one
    /// (no `#EXT-X-ENDLIST`): a reader would start near its end and wait for
    /// more. Its segments are counted through an ended copy in the temporary
    /// folder that names them by their full paths.
    static func countFrames(hlsPlaylist out: String, budget: Double = 10) -> RecoveredOutput {
        guard let text = try? String(contentsOfFile: out, encoding: .utf8) else { return countFrames(out, budget: budget) }
        let folder = URL(fileURLWithPath: out).deletingLastPathComponent().path
        func absolute(_ uri: Substring) -> String {
            uri.hasPrefix("/") || uri.contains("://") ? String(uri) : folder + "/" + uri
        }
        var lines: [String] = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            let map = "#EXT-X-MAP:URI=\""
            if line.hasPrefix(map), let end = line.dropFirst(map.count).firstIndex(of: "\"") {
                return map + absolute(line[line.index(line.startIndex, offsetBy: map.count)..<end]) + line[end...]
            }
            return line.isEmpty || line.hasPrefix("#") ? String(line) : absolute(line)
        }
        if !lines.contains("#EXT-X-ENDLIST") { lines.append("#EXT-X-ENDLIST") }
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-recovery-\(UUID().uuidString).m3u8").path
        guard FileManager.default.createFile(atPath: copy, contents: Data(lines.joined(separator: "\n").utf8)) else {
            return RecoveredOutput(frames: 0, durationSeconds: 0, decodable: false, note: "cannot write a copy of the playlist to read it")
        }
        defer { try? FileManager.default.removeItem(atPath: copy) }
        var counted = countFrames(copy, budget: budget)
        counted.note = counted.note?.replacingOccurrences(of: copy, with: out)
        return counted
    }

    /// The same for a split output (`--segment-time`): its files `out-0001`,
    /// `out-0002`, … counted one after another, within one `budget`.
    static func countFrames(segmentsOf out: String, budget: Double = 10) -> RecoveredOutput {
        let start = Date()
        var total = RecoveredOutput(frames: 0, durationSeconds: 0, decodable: false, note: nil)
        var files = 0
        while FileManager.default.fileExists(atPath: SegmentNaming.path(out, index: files + 1)) {
            files += 1
            let left = budget - Date().timeIntervalSince(start)
            guard left > 0 else { total.note = "counted the first \(files - 1) files in \(Int(budget)) s"; break }
            let one = countFrames(SegmentNaming.path(out, index: files), budget: left)
            total.frames += one.frames
            total.durationSeconds += one.durationSeconds
            total.decodable = total.decodable || one.decodable
            if let note = one.note { total.note = "\(SegmentNaming.path(out, index: files)): \(note)"; break }
        }
        if files == 0 { total.note = "no file of the split output exists" }
        else if total.note == nil { total.note = "\(files) files" }
        return total
    }
}
