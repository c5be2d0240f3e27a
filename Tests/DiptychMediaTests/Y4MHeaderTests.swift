import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// A bad Y4M header says what is wrong with it (checked before FFmpeg's demuxer).
@Suite struct Y4MHeaderTests {
    init() { _ = quietFFmpeg }

    static let bad: [(header: String, reason: String)] = [
        ("YUV4MPEG2 W0 H0 F25:1 Ip A1:1 C420jpeg", "width W0 must be 1 to 16384"),
        ("YUV4MPEG2 W99999999 H480 F25:1 C420jpeg", "width W99999999 must be 1 to 16384"),
        ("YUV4MPEG2 W640 H0 F25:1", "height H0 must be 1 to 16384"),
        ("YUV4MPEG2 W640 H-480 F25:1", "height H-480 must be 1 to 16384"),
        ("YUV4MPEG2 W" + String(repeating: "9", count: 30) + " H480", "width W" + String(repeating: "9", count: 23) + "… must be 1 to 16384"),
        ("YUV4MPEG2 H480 F25:1", "no width (W) field"),
        ("YUV4MPEG2 W640 F25:1", "no height (H) field"),
        ("YUV4MPEG2 W64 H64 C440", "colour space C440 is not one FFmpeg reads (C420jpeg, C420p10, C422, C444, Cmono, ...)"),
        ("YUV4MPEG2 W16384 H16384", "picture 16384x16384 is larger than FFmpeg decodes"),
    ]

    /// Rates FFmpeg reads as 25 fps (a zero or missing part) or passes on to
    /// the muxer, which then fails or writes a broken file.
    static let badRates: [(header: String, reason: String)] = [
        ("YUV4MPEG2 W320 H240 F0:0 C420jpeg", "frame rate F0:0 must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F30:0", "frame rate F30:0 must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F30", "frame rate F30 must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F-30:1", "frame rate F-30:1 must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F30:1x", "frame rate F30:1x must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F99999999999:1", "frame rate F99999999999:1 must be two positive numbers N:D (F30:1, F30000:1001)"),
        ("YUV4MPEG2 W320 H240 F1:1000000", "frame rate F1:1000000 must be 0.01 to 1000 fps"),
        ("YUV4MPEG2 W320 H240 F1000000:1", "frame rate F1000000:1 must be 0.01 to 1000 fps"),
        ("YUV4MPEG2 W320 H240 F1001:1", "frame rate F1001:1 must be 0.01 to 1000 fps"),
    ]

    @Test(arguments: zip((bad + badRates).map(\.header), (bad + badRates).map(\.reason)))
    func badHeaderSaysWhy(header: String, reason: String) throws {
        #expect(throws: Y4MHeader.HeaderError(reason)) { try Y4MHeader.parse(Array((header + "\nFRAME\n").utf8)) }
    }

    @Test func goodHeadersParse() throws {
        for h in ["YUV4MPEG2 W64 H48 F30000:1001 It A10:11 C420p10 XYSCSS=420P10", "YUV4MPEG2 W1 H1", "YUV4MPEG2 W320 H240 F1:100 Cmono", "YUV4MPEG2 W8 H8 F1000:1"] {
            let parsed = try Y4MHeader.parse(Array((h + "\n").utf8))
            #expect(parsed.width > 0 && parsed.height > 0)
        }
        #expect(throws: Y4MHeader.HeaderError("the stream ends inside the header line")) { try Y4MHeader.parse(Array("YUV4MPEG2 W64".utf8)) }
        let long = Array(("YUV4MPEG2 W64 H64 X" + String(repeating: "a", count: 2000)).utf8)
        #expect(throws: Y4MHeader.HeaderError("no end of the header line in its first 1024 bytes")) { try Y4MHeader.parse(long) }
    }

    /// What the check refuses FFmpeg cannot open either (the frame rates
    /// aside: see `badRates`), and what it accepts FFmpeg opens.
    @Test(arguments: bad.map(\.header) + ["YUV4MPEG2 W64 H48 F25:1 C420jpeg", "YUV4MPEG2 W64 H48 F1000:1 C444p", "YUV4MPEG2 W16 H16 Cmono8"])
    func agreesWithFFmpeg(header: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("h.y4m")
        try Data((header + "\nFRAME\n").utf8 + [UInt8](repeating: 16, count: 64 * 48 * 3)).write(to: URL(fileURLWithPath: path))
        let accepted = (try? Y4MHeader.parse(Array((header + "\n").utf8))) != nil
        let ffprobe = try runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=width", "-of", "csv", path])
        #expect(accepted == ffprobe.output.hasPrefix("stream,"), "\(header): ffprobe \(ffprobe.output)")
    }

    /// Opens a Y4M source on a pipe fed `bytes` from another thread. The
    /// pipe is returned too: its read end closes when it is released.
    func pipeSource(writing bytes: [UInt8], in pieces: Int = 1) throws -> (Result<FileSource, MediaError>, Pipe) {
        let pipe = Pipe()
        let writer = pipe.fileHandleForWriting
        let piece = max(1, bytes.count / pieces)
        DispatchQueue.global().async {
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + piece)
                writer.write(Data(bytes[at..<end]))
                at = end
                usleep(20_000)
            }
            try? writer.close()
        }
        let src: any VideoSource
        do throws(MediaError) {
            src = try MediaSources.openY4M(pipe: pipe.fileHandleForReading.fileDescriptor)
        } catch { return (.failure(error), pipe) }
        return (.success(try #require(src as? FileSource)), pipe)
    }

    @Test func badHeaderOnAPipeSaysWhy() throws {
        let (r, pipe) = try pipeSource(writing: Array("YUV4MPEG2 W0 H0 F25:1 Ip A1:1 C420jpeg\nFRAME\n".utf8))
        defer { _ = pipe }
        guard case .failure(let e) = r else { Issue.record("opened"); return }
        guard case .invalidHeader(let path, "Y4M", "width W0 must be 1 to 16384") = e else { Issue.record("\(e)"); return }
        #expect(e.description == "\(path): invalid Y4M header: width W0 must be 1 to 16384")
        let (r2, pipe2) = try pipeSource(writing: [])
        defer { _ = pipe2 }
        guard case .failure(let empty) = r2 else { Issue.record("opened"); return }
        #expect(empty.description.hasSuffix("invalid Y4M header: the stream is empty"))
    }

    /// The header read for the check is replayed to FFmpeg: frames decode,
    /// even when the header arrives a few bytes at a time.
    @Test func goodHeaderOnAPipeIsReplayed() throws {
        var y4m = Array("YUV4MPEG2 W64 H48 F25:1 Ip A1:1 C420jpeg\n".utf8)
        for k in 0..<5 { y4m += Array("FRAME\n".utf8) + [UInt8](repeating: UInt8(40 + 30 * k), count: 64 * 48) + [UInt8](repeating: 128, count: 64 * 48 / 2) }
        let (r, pipe) = try pipeSource(writing: y4m, in: 40)
        guard case .success(let src) = r else { Issue.record("\(r)"); return }
        let frames = try readAll(src)
        withExtendedLifetime(pipe) {}
        #expect(frames.count == 5)
        #expect(frames.map { luma($0, 10, 10) } == [40, 70, 100, 130, 160])
        #expect(src.info.size == PixelSize(width: 64, height: 48) && src.info.frameRate == FrameRate(25))
    }

    @Test func badHeaderInAFileSaysWhy() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("big.y4m")
        try Data("YUV4MPEG2 W99999999 H480 F25:1 C420jpeg\nFRAME\n".utf8).write(to: URL(fileURLWithPath: path))
        let e = expectMediaError { _ = try FileSource(url: path) }
        #expect(e?.description == "\(path): invalid Y4M header: width W99999999 must be 1 to 16384")
    }
}
