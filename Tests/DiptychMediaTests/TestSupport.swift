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
