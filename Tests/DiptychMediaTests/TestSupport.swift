import Foundation
import Testing
import CFFmpeg
import DiptychCore
@testable import DiptychMedia

/// A fresh temporary directory, removed when the value is dropped... by the caller's `defer`.
struct TempDir {
    let url: URL
    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-media-\(safe)-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ file: String) -> String { url.appendingPathComponent(file).path }
    /// Removes the directory (kept when DIPTYCH_KEEP_TEST_FILES is set, for debugging).
    func remove() {
        if ProcessInfo.processInfo.environment["DIPTYCH_KEEP_TEST_FILES"] != nil { return }
        try? FileManager.default.removeItem(at: url)
    }
}

/// Quiets FFmpeg's per-take encoder summaries once per test process.
let quietFFmpeg: Void = MediaLibraries.setLogLevel(.error)

enum FFmpegCLI {
    /// Runs the `ffmpeg` command-line tool (fixtures only; our code never shells out).
    @discardableResult
    static func run(_ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"] + args
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// A file of `seconds` of FFmpeg's test pattern (`size`, 30 fps, H.264) and a 440 Hz tone (48 kHz, `audioCodec`), made by the `ffmpeg` tool.
func makeAVFile(_ path: String, size: String = "320x240", seconds: Int = 2, audioCodec: String = "aac") throws {
    try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=\(size):rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                    "-t", "\(seconds)", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-c:a", audioCodec, path]) == 0)
}

/// What libavformat/libavcodec see in a written file.
struct ProbedFile {
    var streams: [(type: String, codec: String)] = []
    var durationSeconds: Double?
    var videoStreamDuration: Double?
    var videoStart: Double?
    var audioStart: Double?
    var frames: [VideoFrame] = []
    var counters: [Int?] = []
    /// Indices (in file order) of the video packets flagged as keyframes.
    var keyframePackets: [Int] = []
    var error: MediaError?

    var videoPTS: [MediaTime] { frames.map(\.pts) }

    /// Demuxes `path` for stream info, then decodes every video frame with `FileSource`
    /// (libavcodec), reading the counter of each.
    init(path: String, keepFrames: Bool = false) {
        _ = quietFFmpeg
        var fmt: UnsafeMutablePointer<AVFormatContext>? = nil
        if avformat_open_input(&fmt, path, nil, nil) >= 0, avformat_find_stream_info(fmt, nil) >= 0, let f = fmt {
            for i in 0..<Int(f.pointee.nb_streams) {
                let st = f.pointee.streams[i]!
                let par = st.pointee.codecpar!
                let type = par.pointee.codec_type == AVMEDIA_TYPE_VIDEO ? "video" : par.pointee.codec_type == AVMEDIA_TYPE_AUDIO ? "audio" : "other"
                streams.append((type, String(cString: avcodec_get_name(par.pointee.codec_id))))
                if st.pointee.start_time != diptych_av_nopts_value() {
                    let start = Double(st.pointee.start_time) * av_q2d(st.pointee.time_base)
                    if type == "video" { videoStart = start } else if type == "audio" { audioStart = start }
                }
                if type == "video", st.pointee.duration > 0 {
                    videoStreamDuration = Double(st.pointee.duration) * av_q2d(st.pointee.time_base)
                }
            }
            if f.pointee.duration > 0 { durationSeconds = Double(f.pointee.duration) / Double(AV_TIME_BASE) }
            let pkt = av_packet_alloc()
            var index = 0
            while av_read_frame(f, pkt) >= 0 {
                if f.pointee.streams[Int(pkt!.pointee.stream_index)]!.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO {
                    if pkt!.pointee.flags & AV_PKT_FLAG_KEY != 0 { keyframePackets.append(index) }
                    index += 1
                }
                av_packet_unref(pkt)
            }
            var p = pkt
            av_packet_free(&p)
        }
        avformat_close_input(&fmt)
        do {
            let src = try FileSource(url: path)
            while let frame = try src.nextFrame() {
                counters.append(CounterPattern.decode(frame: frame))
                if keepFrames || frames.count < 100_000 { frames.append(frame) }
            }
            src.close()
        } catch {
            self.error = error
        }
    }
}

extension MediaTime {
    static func frames(_ k: Int, _ rate: FrameRate) -> MediaTime { rate.time(ofFrame: Int64(k)) }
}

/// Reads all frames of a source (bounded, so a bug cannot hang a test).
func readAll(_ source: any VideoSource, limit: Int = 10_000) throws(MediaError) -> [VideoFrame] {
    var out: [VideoFrame] = []
    while out.count < limit, let f = try source.nextFrame() { out.append(f) }
    return out
}

/// Luma of pixel (x, y) of a YUV frame.
func luma(_ f: VideoFrame, _ x: Int, _ y: Int) -> UInt8 {
    f.planes[0].baseAddress.load(fromByteOffset: y * f.planes[0].stride + x, as: UInt8.self)
}

/// Asserts `body` throws a MediaError and returns it.
func expectMediaError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> MediaError? {
    do { try body() } catch let e as MediaError { return e } catch {
        Issue.record("expected a MediaError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
    Issue.record("expected a MediaError", sourceLocation: sourceLocation)
    return nil
}

/// Top-level ISO BMFF boxes of an MP4 file, in order (`ftyp`, `moov`, `moof`, `mdat`, ...).
func topLevelBoxes(_ path: String) throws -> [String] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    var boxes: [String] = []
    var offset = 0
    while offset + 8 <= data.count {
        var size = data[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        let type = String(decoding: data[offset + 4..<offset + 8], as: UTF8.self)
        if size == 1, offset + 16 <= data.count { size = data[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) } }
        if size == 0 { size = data.count - offset }
        guard size >= 8 else { break }
        boxes.append(type)
        offset += size
    }
    return boxes
}

/// The frame rate the video bitstream itself states (H.264/HEVC VUI timing),
/// as libavcodec's decoder reads it from the parameter sets: nil when absent.
func bitstreamFrameRate(path: String) throws -> AVRational? {
    let input = try FFInputContext(url: path, format: nil, options: FFDictionary(), interrupt: AVIOInterruptCB())
    try input.findStreamInfo()
    let index = av_find_best_stream(input.raw, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
    guard index >= 0 else { return nil }
    let stream = input.stream(Int(index))
    let codec = try #require(avcodec_find_decoder(stream.pointee.codecpar.pointee.codec_id))
    let decoder = try FFCodecContext(decoding: stream.pointee.codecpar, codec: codec)
    try decoder.open()
    let packet = FFPacket(), frame = FFFrame()
    while input.read(packet) >= 0 {
        defer { packet.unref() }
        guard packet.raw.pointee.stream_index == index else { continue }
        _ = decoder.send(packet)
        if decoder.receive(frame) == 0 { break }
    }
    let rate = decoder.raw.pointee.framerate
    return rate.num > 0 && rate.den > 0 ? rate : nil
}

/// Runs a reader's command-line tool (`ffprobe`, `gst-discoverer-1.0`) and returns its output.
func runTool(_ path: String, _ args: [String]) throws -> (status: Int32, output: String) {
    try #require(FileManager.default.isExecutableFile(atPath: path), "\(path) is missing: run scripts/setup")
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// What GStreamer's discoverer reports: the length in seconds and the video frame rate.
func gstDiscover(_ path: String) throws -> (duration: Double?, frameRate: String?) {
    let r = try runTool("/usr/bin/gst-discoverer-1.0", [path])
    var duration: Double?, rate: String?
    for line in r.output.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
        if line.hasPrefix("Duration: "), duration == nil {
            let parts = line.dropFirst(10).split(separator: ":").compactMap { Double($0) }
            if parts.count == 3 { duration = parts[0] * 3600 + parts[1] * 60 + parts[2] }
        }
        if line.hasPrefix("Frame rate: "), rate == nil { rate = String(line.dropFirst(12)) }
    }
    return (duration, rate)
}

/// `ffprobe`'s container duration in seconds.
func ffprobeDuration(_ path: String) throws -> Double? {
    let r = try runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "default=nw=1:nk=1", path])
    return Double(r.output.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// The durations an MP4's movie box states: `mvhd` and `mehd` in the movie
/// timescale, then each track's `tkhd` (movie timescale) and `mdhd` (its own).
struct MovieHeader {
    var timescale: UInt64 = 0
    var duration: UInt64 = 0
    var fragmentDuration: UInt64?
    var tracks: [(tkhd: UInt64, mdhdTimescale: UInt64, mdhd: UInt64)] = []

    init(path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let moov = try #require(MP4Boxes(bytes).first { $0.type == "moov" })
        for child in MP4Boxes(bytes, from: moov.range.lowerBound + 8, to: moov.range.upperBound) {
            let at = child.range.lowerBound
            switch child.type {
            case "mvhd":
                timescale = FragmentedMP4.field(bytes, at: at, version0: 20, version1: 28, width32: true)
                duration = FragmentedMP4.field(bytes, at: at, version0: 24, version1: 32)
            case "mvex":
                if let mehd = MP4Boxes(bytes, from: at + 8, to: child.range.upperBound).first(where: { $0.type == "mehd" }) {
                    fragmentDuration = FragmentedMP4.field(bytes, at: mehd.range.lowerBound, version0: 12, version1: 12)
                }
            case "trak":
                let tkhd = try #require(MP4Boxes(bytes, from: at + 8, to: child.range.upperBound).first { _ in true })
                let mdia = try #require(MP4Boxes(bytes, from: at + 8, to: child.range.upperBound).first { $0.type == "mdia" })
                let mdhd = try #require(MP4Boxes(bytes, from: mdia.range.lowerBound + 8, to: mdia.range.upperBound).first { $0.type == "mdhd" })
                tracks.append((FragmentedMP4.field(bytes, at: tkhd.range.lowerBound, version0: 28, version1: 36),
                               FragmentedMP4.field(bytes, at: mdhd.range.lowerBound, version0: 20, version1: 28, width32: true),
                               FragmentedMP4.field(bytes, at: mdhd.range.lowerBound, version0: 24, version1: 32)))
            default: break
            }
        }
    }
}

/// Starts the writer fixture on `out` (paced at 60 frames/s, then `extra`
/// arguments), SIGKILLs it once it has handed `count` frames to its writer
/// (`killAfter`); the last count it printed, and whether a signal ended it.
func killedWriterFixture(writing out: String, extra: [String] = [], after count: Int) throws -> (written: Int, signalled: Bool) {
    let exe = try #require(fixtureExecutable("diptych-writer-fixture"), "diptych-writer-fixture not built")
    let child = Process()
    child.executableURL = exe
    child.arguments = [out, "60"] + extra  // paced at 60 frames/s of 30 fps media
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    let written = killAfter(child, reading: pipe, count: count)
    return (written, child.terminationReason == .uncaughtSignal)
}

/// Reads a writer fixture's progress (a count a line on `pipe`) until it has
/// handed `count` frames to its writer (or died), then SIGKILLs it and waits.
/// Returns the last count it printed.
func killAfter(_ child: Process, reading pipe: Pipe, count: Int) -> Int {
    var written = 0
    var buffer = ""
    while written < count {
        let data = pipe.fileHandleForReading.availableData
        if data.isEmpty { break }  // the child died early
        buffer += String(decoding: data, as: UTF8.self)
        let lines = buffer.split(separator: "\n", omittingEmptySubsequences: false)
        buffer = String(lines.last ?? "")
        if let n = lines.dropLast().last.flatMap({ Int($0) }) { written = n }
    }
    if child.isRunning { kill(child.processIdentifier, SIGKILL) }
    child.waitUntilExit()
    return written
}
