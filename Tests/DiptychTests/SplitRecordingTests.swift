import Foundation
import Testing
@testable import Diptych
import DiptychCore

/// `--segment-time`: a take split into whole files, read back with FFmpeg
/// and GStreamer.
@Suite(.serialized) struct SplitRecordingTests {
    init() { _ = quietMedia }

    /// One stream's packets as ffprobe reads them: pts and duration in seconds, keyframe flag.
    struct Packet { var pts: Double; var duration: Double; var key: Bool }

    static func packets(_ path: String, _ stream: String) throws -> [Packet] {
        let r = try run("/usr/bin/ffprobe", ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time,duration_time,flags",
                                             "-of", "csv=p=0", path])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: "\n").map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            return Packet(pts: Double(f[0]) ?? .nan, duration: Double(f[1]) ?? 0, key: f.count > 2 && f[2].hasPrefix("K"))
        }
    }

    /// Frames of the video stream, decoded and counted by ffprobe (`-count_frames`).
    static func countedFrames(_ path: String) throws -> Int {
        let r = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                                             "stream=nb_read_frames", "-of", "csv=p=0", path])
        return Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// The file decodes to its end with FFmpeg stopping at any error, and with GStreamer.
    static func decodesCleanly(_ path: String) throws {
        let ff = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        #expect(ff.status == 0 && ff.stderr.isEmpty, "ffmpeg \(path): \(ff.stderr)")
        // Every stream decoded to its end (playbin: demuxer and decoders as a player picks them).
        let gst = try run("/usr/bin/gst-launch-1.0", ["-q", "playbin", "uri=file://\(path)", "video-sink=fakesink", "audio-sink=fakesink"])
        #expect(gst.status == 0, "gst-launch \(path): \(gst.stdout) \(gst.stderr)")
    }

    static func makeInput(_ dir: Scratch, seconds: Int = 6) throws -> String {
        let input = dir.path("in.mp4")
        try makeFixture(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                         "-t", "\(seconds)", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-shortest", input])
        return input
    }

    /// A 6 s take with audio split every 2 s gives three files whose frames
    /// add up exactly to the unsplit take's; each file starts at 0 with a
    /// keyframe and its place on the take's timeline is in the summary, so
    /// its video and audio packets are the whole take's, none lost or twice.
    @Test(.timeLimit(.minutes(2)), arguments: ["mp4", "mkv"])
    func splitTakeAddsUpToTheWholeTake(ext: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let input = try Self.makeInput(dir)
        let common = ["record", "--primary", input, "--preset", "ultrafast", "--json"]
        let whole = try runCLI(common + ["--out", "whole.\(ext)"], in: dir.url.path)
        #expect(whole.status == 0, "\(whole.stderr)")
        let split = try runCLI(common + ["--out", "take.\(ext)", "--segment-time", "2"], in: dir.url.path)
        #expect(split.status == 0, "\(split.stderr)")
        let wholeSummary = try JSONDecoder().decode(TakeSummary.self, from: Data(whole.stdout.utf8))
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(split.stdout.utf8))
        #expect(wholeSummary.segments == nil)
        let segments = try #require(summary.segments)
        #expect(segments.map(\.path) == ["take-0001", "take-0002", "take-0003"].map { "\($0).\(ext)" })
        #expect(!FileManager.default.fileExists(atPath: dir.path("take.\(ext)")))

        let wholeFrames = try Self.countedFrames(dir.path("whole.\(ext)"))
        #expect(wholeFrames == 180 && wholeSummary.frames == 180)
        let counted = try segments.map { try Self.countedFrames(dir.path($0.path)) }
        #expect(counted == [60, 60, 60], "frames of each file")
        #expect(counted.reduce(0, +) == wholeFrames && summary.frames == wholeFrames)
        #expect(segments.map(\.frames) == counted)

        // Video: every file starts at 0 with a keyframe, frames one after another;
        // on the take's timeline the files follow on without a gap or overlap.
        let tolerance = ext == "mkv" ? 0.0006 : 1e-6  // Matroska keeps milliseconds
        let frame = 1.0 / 30
        var next = 0.0
        var audio: [Double] = []
        for (i, s) in segments.enumerated() {
            let path = dir.path(s.path)
            #expect(abs(s.start - next) < 1e-9, "segment \(i + 1) starts where the one before ends")
            let video = try Self.packets(path, "v").sorted { $0.pts < $1.pts }
            #expect(video.first?.key == true && abs(video.first!.pts) < 1e-9)
            for (k, p) in video.enumerated() { #expect(abs(p.pts - Double(k) * frame) < tolerance, "\(s.path) frame \(k) at \(p.pts)") }
            #expect(abs(s.duration - Double(video.count) * frame) < 1e-9)
            next = s.start + s.duration
            // Audio packets onto the take's timeline.
            audio += try Self.packets(path, "a").map { s.start + $0.pts }
            try Self.decodesCleanly(path)
        }
        #expect(abs(next - 6) < 1e-9)

        // Audio: the same packets as the whole take's, each in the file its time
        // falls in. The MP4 muxer puts a file's first audio packet at the file's
        // 0 (fragmented MP4 has no edit list): up to one AAC frame early.
        let wholeAudio = try Self.packets(dir.path("whole.\(ext)"), "a").map(\.pts)
        #expect(audio.count == wholeAudio.count && audio.count > 250, "\(audio.count) audio packets split, \(wholeAudio.count) whole")
        let aacFrame = 1024.0 / 48000
        let firsts = Set(segments.dropFirst().map { s in
            audio.firstIndex { $0 >= s.start - 1e-9 } ?? -1
        })
        for (k, (a, w)) in zip(audio, wholeAudio).enumerated() {
            if firsts.contains(k) {
                #expect(a <= w + tolerance && w - a < aacFrame, "first audio packet of a file at \(a), whole take's at \(w)")
            } else {
                #expect(abs(a - w) < tolerance, "audio packet \(k) at \(a), whole take's at \(w)")
            }
        }
    }

    /// With the GPU encoder the cut asks it for an IDR: a keyframe interval
    /// of 10 s still gives files of about a second (a few pictures over,
    /// those the encoder had in flight), each starting with a keyframe.
    @Test(.timeLimit(.minutes(3)))
    func gpuEncodedTakeIsCutNearTheSegmentTime() throws {
        let dir = Scratch(); defer { dir.remove() }
        let reconstructions = try ReconstructionFolder(in: dir)
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "4",
                            "--encoder", "gpu", "--gpu", "software", "--keyframe-interval", "10", "--audio", "none",
                            "--out", "take.mp4", "--segment-time", "1", "--json"], in: dir.url.path, environment: reconstructions.environment)
        try #require(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        let segments = try #require(summary.segments)
        // The files one after another decode to the encoder's reconstruction (the IDRs the cuts asked for included).
        try reconstructions.expectDecoded(segments.map { dir.path($0.path) }, width: 320, height: 240)
        #expect(segments.count == 4, "\(segments.map { ($0.path, $0.frames) })")
        #expect(segments.map(\.frames).reduce(0, +) == 120)
        for s in segments.dropLast() {
            #expect(s.frames >= 30 && s.frames <= 36, "\(s.path): \(s.frames) frames, for 30 at 1 s")
        }
        for s in segments {
            let video = try Self.packets(dir.path(s.path), "v")
            #expect(video.first?.key == true, "\(s.path) starts with a keyframe")
            try Self.decodesCleanly(dir.path(s.path))
        }
    }

    /// A split take killed with SIGKILL keeps every finished file whole
    /// (its length in its header) and the current one as a killed take does.
    @Test(.timeLimit(.minutes(3)))
    func killedSplitTakeKeepsFinishedSegments() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--realtime", "on",
                            "--out", "take.mp4", "--segment-time", "1"], in: dir.url.path, signal: SIGKILL, after: 0.7, once: {
                               ((try? FileManager.default.contentsOfDirectory(atPath: dir.url.path)) ?? []).filter { $0.hasPrefix("take-") }.count >= 3
                           })
        #expect(r.signalled)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.hasPrefix("take-") }.sorted()
        #expect(files.count >= 3, "\(files)")
        var counter = 0
        for (i, name) in files.enumerated() {
            let path = dir.path(name)
            // The current file holds the fragments completed before the kill
            // (none, when it was opened less than a second before).
            let frames = i < files.count - 1 ? try decodeAll(path).frames : ((try? decodeAll(path).frames) ?? [])
            if i < files.count - 1 {
                // Finished: one second, whole, its length in the header (GStreamer reads it).
                #expect(frames.count == 30, "\(name): \(frames.count) frames")
                let gst = try run("/usr/bin/gst-discoverer-1.0", [path])
                #expect(gst.status == 0 && gst.stdout.contains("Duration: 0:00:01.000000000"), "\(name): \(gst.stdout)")
                try Self.decodesCleanly(path)
            }
            // Every frame of the take once, in order, across the files.
            #expect(frames.map(\.counter) == (counter..<counter + frames.count).map { Optional($0) }, "\(name)")
            counter += frames.count
        }
        #expect(counter >= 60)
    }

    /// A file named as one of the take's segments is never written over: the
    /// take does not start (exit 2, one line naming the file).
    @Test func existingSegmentIsRefused() throws {
        let dir = Scratch(); defer { dir.remove() }
        let existing = dir.path("take-0002.mp4")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "1",
                            "--out", "take.mp4", "--segment-time", "2"], in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("take-0002.mp4 exists already"), "\(r.stderr)")
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        #expect(!FileManager.default.fileExists(atPath: dir.path("take-0001.mp4")))
    }

    /// Bad values, and outputs that cannot be split: exit 2, one line naming the option, no file.
    @Test(arguments: [
        (["--out", "take.mp4", "--segment-time", "0"], "--segment-time '0': must be a positive number"),
        (["--out", "take.mp4", "--segment-time", "-2"], "--segment-time '-2': must be a positive number"),
        (["--out", "take.mp4", "--segment-time", "ten"], "--segment-time 'ten': must be a number of seconds"),
        (["--out", "take.ts", "--segment-time", "2"], "--segment-time '2': splits MP4 and Matroska files"),
        (["--out", "rtmp://127.0.0.1:1/live/key", "--segment-time", "2"], "--segment-time '2': splits MP4 and Matroska files"),
    ])
    func badValuesExitTwo(args: [String], named: String) throws {
        try expectRefusedWritingNothing(args, naming: named)
    }

    /// An `--also-out` splits as `--out` does (`--also-segment-time`, JSON
    /// `segmentTime`), at its own size beside a main output written whole,
    /// and an HLS `--also-out` takes its own segment length and playlist
    /// size: each file whole and decoded by FFmpeg and GStreamer, the
    /// summary's outputs listing the split one's files.
    @Test(.timeLimit(.minutes(2)))
    func alsoOutSplitsAndSetsItsHLSSegments() throws {
        let dir = Scratch(); defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("live"), withIntermediateDirectories: true)
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "3", "--preset", "ultrafast",
                            "--audio", "none", "--out", "main.mp4",
                            "--also-out", "part.mkv", "--also-segment-time", "1", "--also-size", "160x120",
                            "--also-out", "live/index.m3u8", "--also-segment-time", "1", "--also-hls-list-size", "2", "--json"],
                           in: dir.url.path)
        try #require(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.segments == nil && summary.frames == 90)
        let split = try #require(summary.outputs.first { $0.output == "part.mkv" })
        let files = try #require(split.segments)
        #expect(files.map(\.path) == ["part-0001.mkv", "part-0002.mkv", "part-0003.mkv"] && files.map(\.frames) == [30, 30, 30])
        #expect(files.map(\.start) == [0, 1, 2] && split.frames == 90)
        #expect(!FileManager.default.fileExists(atPath: dir.path("part.mkv")))
        for f in files {
            #expect(try Self.countedFrames(dir.path(f.path)) == 30)
            let size = try run("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "stream=width,height", "-of", "csv=p=0",
                                                   dir.path(f.path)])
            #expect(size.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "160,120")
            #expect(try Self.packets(dir.path(f.path), "v").first?.key == true)
            try Self.decodesCleanly(dir.path(f.path))
        }
        #expect(try Self.countedFrames(dir.path("main.mp4")) == 90)
        // The HLS output: one-second segments, all listed once the take is over.
        let playlist = try String(contentsOfFile: dir.path("live/index.m3u8"), encoding: .utf8)
        #expect(playlist.contains("#EXT-X-TARGETDURATION:1\n") && playlist.contains("#EXT-X-ENDLIST"), "\(playlist)")
        #expect(playlist.split(separator: "\n").filter { $0.hasSuffix(".m4s") } == ["index-0001.m4s", "index-0002.m4s", "index-0003.m4s"], "\(playlist)")
        #expect(try HLSOutputTests.playlistFrames(dir.path("live/index.m3u8")) == 90)
        try HLSOutputTests.gstreamerPlays(dir.path("live/index.m3u8"))
    }

    /// An `--also-out`'s segments: bad values and outputs that cannot be
    /// split, a file of its names already there, another output named as
    /// one of its files: exit 2, one line naming the option, nothing written.
    @Test(arguments: [
        (["--out", "a.mp4", "--also-out", "b.ts", "--also-segment-time", "2"], "--also-segment-time '2': splits MP4 and Matroska files"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-segment-time", "0"], "--also-segment-time '0': must be a positive number"),
        (["--out", "a.mp4", "--also-out", "b.mp4", "--also-hls-list-size", "3"], "--also-hls-list-size '3': applies to an HLS --also-out (.m3u8) only"),
        (["--out", "a.mp4", "--also-segment-time", "2"], "--also-segment-time '2': comes after the --also-out it applies to"),
        (["--out", "take-0001.mp4", "--also-out", "take.mp4", "--also-segment-time", "1"],
         "--also-out 'take.mp4': its files would include take-0001.mp4"),
    ])
    func alsoOutSegmentsRefused(args: [String], named: String) throws {
        try expectRefusedWritingNothing(args, naming: named)
    }

    @Test func alsoOutSegmentsRefusedFromJSON() throws {
        let dir = Scratch(); defer { dir.remove() }
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: dir.path("part-0002.mp4")))
        for (entry, named) in [(#""segmentTime": 0"#, "alsoOut[0].segmentTime: '0': must be a positive number"),
                               (#""segmentTime": "soon""#, "alsoOut[0].segmentTime: 'soon': must be a number of seconds"),
                               (#""hlsListSize": -1"#, "alsoOut[0].hlsListSize: expected a whole number from 0 to 1000000"),
                               (#""segmentTime": 2"#, "--also-out 'part.mp4': \(dir.path("part-0002.mp4")) exists already")] {
            let json = #"{"primary": "testsrc:counter:320x240@30", "duration": 1, "out": "a.mp4", "alsoOut": [{"out": "part.mp4", "# + entry + "}]}"
            try Data(json.utf8).write(to: URL(fileURLWithPath: dir.path("take.json")))
            let r = try runCLI(["record", "--config", "take.json"], in: dir.url.path)
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(named), "\(entry): \(r.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted() == ["part-0002.mp4", "take.json"])
        }
        #expect(try String(contentsOfFile: dir.path("part-0002.mp4"), encoding: .utf8) == "keep me")
    }

    /// The `--config` JSON key and the names of the files.
    @Test func namesAndJSON() throws {
        #expect(SegmentNaming.path("take.mp4", index: 1) == "take-0001.mp4")
        #expect(SegmentNaming.path("/a.b/take.mkv", index: 12_345) == "/a.b/take-12345.mkv")
        #expect(SegmentNaming.path("/a.b/take", index: 2) == "/a.b/take-0002")
        #expect(SegmentNaming.isSegment("take-0007.mp4", of: "/x/take.mp4"))
        #expect(!SegmentNaming.isSegment("take-7.mp4", of: "/x/take.mp4") && !SegmentNaming.isSegment("take-0007.mkv", of: "take.mp4"))
        let dir = Scratch(); defer { dir.remove() }
        let config = dir.path("take.json")
        try Data(#"{"primary": "testsrc:counter:320x240@30", "out": "take.mp4", "segmentTime": 0.5, "duration": 1}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let r = try runCLI(["record", "--config", config, "--json", "--preset", "ultrafast"], in: dir.url.path)
        #expect(r.status == 0, "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.segments?.map(\.frames) == [15, 15])
    }
}
