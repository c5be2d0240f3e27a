import Foundation
import Testing
@testable import Diptych
import DiptychCore

/// HLS outputs (`--out DIR/index.m3u8`): fragmented-MP4 segments of
/// `--segment-time`, a live playlist that becomes the complete VOD playlist
/// at the end, read back with FFmpeg and GStreamer.
@Suite(.serialized) struct HLSOutputTests {
    init() { _ = quietMedia }

    /// A playlist's entries (duration, URI), whether it is ended, its type and media sequence.
    struct Playlist {
        var entries: [(duration: Double, uri: String)] = []
        var ended = false
        var type: String?
        var sequence: Int?
        var lines: [String] = []

        init(_ path: String) throws {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            lines = text.split(separator: "\n").map(String.init)
            var duration: Double?
            for line in lines {
                if line.hasPrefix("#EXTINF:") { duration = Double(line.dropFirst(8).prefix { $0 != "," }) }
                else if line == "#EXT-X-ENDLIST" { ended = true }
                else if line.hasPrefix("#EXT-X-PLAYLIST-TYPE:") { type = String(line.dropFirst(21)) }
                else if line.hasPrefix("#EXT-X-MEDIA-SEQUENCE:") { sequence = Int(line.dropFirst(22)) }
                else if !line.hasPrefix("#") { entries.append((duration ?? .nan, line)); duration = nil }
            }
        }
    }

    /// One segment as a file of its own: the initialization segment and the
    /// media segment one after the other (a fragmented MP4 any reader takes).
    static func standalone(_ dir: Scratch, _ folder: String, _ segment: String, init name: String = "index-init.mp4") throws -> String {
        let out = dir.path("whole-\(segment).mp4")
        var data = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(name)"))
        data.append(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(segment)")))
        try data.write(to: URL(fileURLWithPath: out))
        return out
    }

    /// Video frames of a playlist, decoded and counted by ffprobe (which lists
    /// the stream under its program too: the counts are the same).
    static func playlistFrames(_ path: String, _ extra: [String] = []) throws -> Int {
        let r = try run("/usr/bin/ffprobe", ["-v", "error"] + extra + ["-count_frames", "-select_streams", "v",
                                                                    "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        let counts = Set(r.stdout.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) })
        #expect(r.status == 0 && counts.count == 1, "ffprobe \(path): \(r.stdout) \(r.stderr)")
        return counts.first ?? -1
    }

    /// FFmpeg decodes the file to its end, stopping at any error.
    static func ffmpegDecodes(_ path: String, _ extra: [String] = []) throws {
        let ff = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror"] + extra + ["-i", path, "-f", "null", "-"])
        #expect(ff.status == 0 && ff.stderr.isEmpty, "ffmpeg \(path): \(ff.stderr)")
    }

    /// GStreamer plays every stream to its end (playbin, as a player would).
    static func gstreamerPlays(_ path: String) throws {
        let gst = try run("/usr/bin/gst-launch-1.0", ["-q", "playbin", "uri=file://\(path)", "video-sink=fakesink", "audio-sink=fakesink"],
                          timeout: 60)
        #expect(gst.status == 0, "gst-launch \(path): \(gst.stdout) \(gst.stderr)")
    }

    /// A take of `seconds` with audio, in segments of `segment` seconds: ⌈seconds / segment⌉
    /// segments, each starting with a keyframe at its time, whose frames add up to
    /// the take's with timestamps following on; the playlist at the end is the
    /// complete VOD one, which FFmpeg and GStreamer play whole.
    @Test(.timeLimit(.minutes(3)), arguments: [(6.0, "2"), (5.0, "2"), (7.0, "2.5")])
    func takeIsCutIntoWholeSegments(seconds: Double, segment: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let input = try SplitRecordingTests.makeInput(dir, seconds: 7)
        let live = dir.path("live")
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        let r = try runCLI(["record", "--primary", input, "--preset", "ultrafast", "--duration", "\(seconds)", "--json",
                            "--out", "live/index.m3u8", "--segment-time", segment], in: dir.url.path)
        try #require(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        let frames = Int(seconds * 30)
        #expect(summary.frames == frames)

        let playlist = try Playlist(dir.path("live/index.m3u8"))
        let length = Double(segment)!
        let count = Int((seconds / length).rounded(.up))
        #expect(playlist.entries.map(\.uri) == (1...count).map { String(format: "index-%04d.m4s", $0) }, "\(playlist.lines)")
        #expect(playlist.type == "VOD" && playlist.sequence == 1 && playlist.lines.last == "#EXT-X-ENDLIST", "\(playlist.lines)")
        let target = playlist.lines.first { $0.hasPrefix("#EXT-X-TARGETDURATION:") }.flatMap { Int($0.dropFirst(22)) }
        #expect(target == Int(length.rounded(.toNearestOrAwayFromZero)), "\(playlist.lines)")
        // Only the playlist, the initialization segment and the segments: no temporary file left.
        let files = try FileManager.default.contentsOfDirectory(atPath: live).sorted()
        #expect(files == (["index-init.mp4", "index.m3u8"] + playlist.entries.map(\.uri)).sorted(), "\(files)")

        // Each segment: frames counted by ffprobe, a keyframe first, at the
        // segment's time on the take's timeline, frames one after another.
        let frame = 1.0 / 30
        var counted: [Int] = []
        var next = 0.0
        var audioEnd = 0.0
        for (i, entry) in playlist.entries.enumerated() {
            let file = try Self.standalone(dir, live, entry.uri)
            let n = try SplitRecordingTests.countedFrames(file)
            counted.append(n)
            let video = try SplitRecordingTests.packets(file, "v").sorted { $0.pts < $1.pts }
            #expect(video.count == n)
            #expect(video.first?.key == true, "\(entry.uri) starts with a keyframe")
            #expect(abs((video.first?.pts ?? -1) - next) < 1e-6, "\(entry.uri) starts at \(video.first?.pts ?? -1), the one before ended at \(next)")
            #expect(abs((video.first?.pts ?? -1) - Double(i) * length) < frame, "\(entry.uri) starts at its time")
            for (k, p) in video.enumerated() { #expect(abs(p.pts - (next + Double(k) * frame)) < 1e-6, "\(entry.uri) frame \(k) at \(p.pts)") }
            #expect(abs(entry.duration - Double(n) * frame) < 1e-3, "\(entry.uri): EXTINF \(entry.duration) for \(n) frames")
            next += Double(n) * frame
            let audio = try SplitRecordingTests.packets(file, "a")
            #expect(!audio.isEmpty, "\(entry.uri) has audio")
            audioEnd = max(audioEnd, audio.map { $0.pts + $0.duration }.max() ?? 0)
            try Self.ffmpegDecodes(file)
        }
        let whole = Int(length * 30)
        #expect(counted.dropLast().allSatisfy { $0 == whole }, "frames of each segment: \(counted)")
        #expect(counted.reduce(0, +) == frames, "frames of each segment: \(counted)")
        #expect(abs(audioEnd - seconds) < 0.05, "audio ends at \(audioEnd)")

        // The playlist as players read it.
        let path = dir.path("live/index.m3u8")
        #expect(try Self.playlistFrames(path) == frames)
        try Self.ffmpegDecodes(path)
        try Self.gstreamerPlays(path)
        let gst = try run("/usr/bin/gst-discoverer-1.0", [path])
        let shown = String(format: "Duration: 0:00:%02d.%03d", Int(seconds), Int((seconds - seconds.rounded(.down)) * 1000))
        #expect(gst.status == 0 && gst.stdout.contains(shown) && gst.stdout.contains("Live: no"), "\(gst.stdout)")
    }

    /// `--hls-list-size 2`: while the take runs the playlist lists the last two
    /// segments (a live playlist, no end); every segment stays on disk, and the
    /// finished playlist lists them all.
    @Test(.timeLimit(.minutes(3)))
    func slidingWindowWhileLiveCompleteAtTheEnd() throws {
        let dir = Scratch(); defer { dir.remove() }
        let exe = try #require(diptychExecutable())
        let p = Process()
        p.executableURL = exe
        p.arguments = ["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--realtime", "on", "--duration", "6",
                       "--preset", "ultrafast", "--out", "index.m3u8", "--segment-time", "1", "--hls-list-size", "2"]
        p.currentDirectoryURL = dir.url
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        var seen: [[String]] = []
        while p.isRunning {
            if let list = try? Playlist(dir.path("index.m3u8")), list.lines.last != "#EXT-X-ENDLIST" {
                if seen.last != list.entries.map(\.uri) {
                    seen.append(list.entries.map(\.uri))
                    #expect(list.entries.count <= 2 && list.type == nil && !list.ended, "\(list.lines)")
                    #expect(list.sequence == Int(list.entries.first.map { $0.uri.dropFirst(6).prefix(4) } ?? "") , "\(list.lines)")
                }
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        // The window moved on segment by segment; the last live one before the end holds the fourth and fifth.
        #expect(seen.count >= 3 && seen.last == ["index-0004.m4s", "index-0005.m4s"], "\(seen)")
        let done = try Playlist(dir.path("index.m3u8"))
        #expect(done.entries.map(\.uri) == (1...6).map { String(format: "index-%04d.m4s", $0) }, "\(done.lines)")
        #expect(done.type == "VOD" && done.sequence == 1 && done.lines.last == "#EXT-X-ENDLIST")
        #expect(done.entries.allSatisfy { abs($0.duration - 1) < 1e-6 })
        #expect(try Self.playlistFrames(dir.path("index.m3u8")) == 180)
        try Self.gstreamerPlays(dir.path("index.m3u8"))
    }

    /// A take killed with SIGKILL leaves a live playlist naming only whole
    /// segments: each decodes on its own (FFmpeg, GStreamer), together they
    /// hold the take's first frames in order, and FFmpeg plays the playlist
    /// from its first segment; with an end added GStreamer plays it too.
    @Test(.timeLimit(.minutes(3)))
    func killedTakeLeavesAPlayablePlaylist() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--realtime", "on",
                            "--preset", "ultrafast", "--out", "index.m3u8", "--segment-time", "1"],
                           in: dir.url.path, signal: SIGKILL, after: 0.7,
                           once: { occurrences(of: ".m4s", in: dir.path("index.m3u8")) >= 2 })
        #expect(r.signalled)
        let path = dir.path("index.m3u8")
        let playlist = try Playlist(path)
        #expect(!playlist.ended && playlist.type == "EVENT", "\(playlist.lines)")
        #expect(playlist.entries.count >= 2, "\(playlist.lines)")
        #expect(playlist.entries.map(\.uri) == (1...playlist.entries.count).map { String(format: "index-%04d.m4s", $0) })
        var counter = 0
        for entry in playlist.entries {
            let file = try Self.standalone(dir, dir.url.path, entry.uri)
            try Self.ffmpegDecodes(file)
            try Self.gstreamerPlays(file)
            let frames = try decodeAll(file).frames
            #expect(frames.count == 30, "\(entry.uri): \(frames.count) frames")
            #expect(frames.map(\.counter) == (counter..<counter + frames.count).map { Optional($0) }, "\(entry.uri)")
            counter += frames.count
        }
        // A live playlist: players start near its end unless told otherwise, and wait for more.
        let live = ["-live_start_index", "0", "-m3u8_hold_counters", "1"]
        try Self.ffmpegDecodes(path, live)
        #expect(try Self.playlistFrames(path, live) == counter)
        let ended = dir.path("ended.m3u8")
        try (String(contentsOfFile: path, encoding: .utf8) + "#EXT-X-ENDLIST\n").write(toFile: ended, atomically: true, encoding: .utf8)
        try Self.gstreamerPlays(ended)
        #expect(try Self.playlistFrames(ended) == counter)
    }

    /// The GPU encoder is asked for an IDR where a segment is due: with a
    /// keyframe interval of 10 s each segment still begins a few pictures
    /// at most after its time (n seconds: the muxer cuts at the first
    /// keyframe at or after n × the segment time from the start).
    @Test(.timeLimit(.minutes(3)))
    func gpuEncodedTakeIsCutNearTheSegmentTime() throws {
        let dir = Scratch(); defer { dir.remove() }
        let reconstructions = try ReconstructionFolder(in: dir)
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "4",
                            "--encoder", "gpu", "--gpu", "software", "--keyframe-interval", "10", "--audio", "none",
                            "--out", "index.m3u8", "--segment-time", "1"], in: dir.url.path, environment: reconstructions.environment)
        try #require(r.status == 0, "\(r.stderr)")
        try reconstructions.expectDecoded([dir.path("index.m3u8")], width: 320, height: 240)
        let playlist = try Playlist(dir.path("index.m3u8"))
        #expect(playlist.entries.count == 4, "\(playlist.lines)")
        var total = 0
        for (i, entry) in playlist.entries.enumerated() {
            let file = try Self.standalone(dir, dir.url.path, entry.uri)
            let video = try SplitRecordingTests.packets(file, "v")
            #expect(video.first?.key == true, "\(entry.uri) starts with a keyframe")
            let start = video.map(\.pts).min() ?? -1
            #expect(start >= Double(i) - 1e-6 && start <= Double(i) + 0.2, "\(entry.uri) begins at \(start) s")
            #expect(abs(start - Double(total) / 30) < 1e-6, "\(entry.uri) begins where the one before ends")
            total += video.count
        }
        #expect(total == 120)
        try Self.ffmpegDecodes(dir.path("index.m3u8"))
    }

    /// A file the output would write (the playlist, its initialization
    /// segment, a segment of any number, or one of those half-written) is
    /// never written over: the take does not start (exit 2, one line naming it).
    @Test(arguments: ["index.m3u8", "index-init.mp4", "index-0007.m4s", "index-12345.m4s", "index-0001.m4s.tmp", "index.m3u8.tmp"])
    func existingFileIsRefused(name: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let existing = dir.path(name)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "1",
                            "--out", "index.m3u8"], in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("\(name) exists already"), "\(r.stderr)")
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == [name])
    }

    /// Another output's files in the same folder are no obstacle.
    @Test func otherPlaylistsFilesAreLeftAlone() throws {
        let dir = Scratch(); defer { dir.remove() }
        for name in ["other.m3u8", "other-init.mp4", "other-0001.m4s", "index-x.m4s", "index-001.m4s"] {
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: dir.path(name)))
        }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "1",
                            "--preset", "ultrafast", "--out", "index.m3u8"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        // The default segment length: 2 s.
        #expect(try Playlist(dir.path("index.m3u8")).entries.map(\.uri) == ["index-0001.m4s"])
        #expect(try String(contentsOfFile: dir.path("other-0001.m4s"), encoding: .utf8) == "keep me")
    }

    /// Bad values, and a list size for an output that is not HLS: exit 2, one line naming the option, no file.
    @Test(arguments: [
        (["--out", "index.m3u8", "--hls-list-size", "-1"], "--hls-list-size '-1': must be a whole number of segments"),
        (["--out", "index.m3u8", "--hls-list-size", "ten"], "--hls-list-size 'ten': must be a whole number of segments"),
        (["--out", "index.m3u8", "--hls-list-size", "1.5"], "--hls-list-size '1.5': must be a whole number of segments"),
        (["--out", "take.mp4", "--hls-list-size", "3"], "--hls-list-size '3': applies to an HLS --out (.m3u8) only"),
        (["--out", "index.m3u8", "--segment-time", "0"], "--segment-time '0': must be a positive number"),
        (["--out", "index.m3u8", "--segment-time", "-2"], "--segment-time '-2': must be a positive number"),
    ])
    func badValuesExitTwo(args: [String], named: String) throws {
        try expectRefusedWritingNothing(args, naming: named)
    }

    /// `--format hls` on a name without `.m3u8`, the `--config` JSON keys, and the names.
    @Test func formatJSONAndNames() throws {
        #expect(HLSNaming.segmentPath("live/index.m3u8", index: 1) == "live/index-0001.m4s")
        #expect(HLSNaming.segmentPath("a.b/index.m3u8", index: 12_345) == "a.b/index-12345.m4s")
        #expect(HLSNaming.initPath("live/index.m3u8") == "live/index-init.mp4")
        #expect(HLSNaming.segmentPattern("/x/100%/index.m3u8") == "/x/100%%/index-%04d.m4s")
        #expect(HLSNaming.isFile("index-0007.m4s", of: "/x/index.m3u8") && !HLSNaming.isFile("index-7.m4s", of: "/x/index.m3u8"))
        let dir = Scratch(); defer { dir.remove() }
        let plain = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "2",
                                "--preset", "ultrafast", "--format", "hls", "--out", "stream", "--segment-time", "1"], in: dir.url.path)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(try Playlist(dir.path("stream")).entries.map(\.uri) == ["stream-0001.m4s", "stream-0002.m4s"])
        let config = dir.path("take.json")
        try Data(#"{"primary": "testsrc:counter:320x240@30", "out": "index.m3u8", "segmentTime": 0.5, "hlsListSize": 1, "duration": 1}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let r = try runCLI(["record", "--config", config, "--json", "--preset", "ultrafast"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        let list = try Playlist(dir.path("index.m3u8"))
        #expect(list.entries.map(\.uri) == ["index-0001.m4s", "index-0002.m4s"] && list.entries.allSatisfy { abs($0.duration - 0.5) < 1e-6 })
        #expect(try Self.playlistFrames(dir.path("index.m3u8")) == 30)
    }
}
