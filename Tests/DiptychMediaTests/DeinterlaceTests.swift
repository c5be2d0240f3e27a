import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// Interlaced input is deinterlaced (bwdif) before a frame leaves the source.
@Suite struct DeinterlaceTests {
    init() { _ = quietFFmpeg }

    /// Vertical bars moving 12 px a field at 50 fields/s, woven into 25 interlaced
    /// frames a second and encoded as interlaced H.264 (MBAFF, fields flagged).
    func makeInterlaced(_ dir: TempDir, ext: String = "mp4", topFirst: Bool = true, seconds: Int = 1) throws -> String {
        let p = dir.path("interlaced-\(topFirst ? "tff" : "bff").\(ext)")
        try #require(try FFmpegCLI.run([
            "-f", "lavfi", "-i", "nullsrc=s=320x240:r=50,geq=lum='128+100*sin(X/6+N*2)':cb=128:cr=128",
            "-t", "\(seconds)", "-vf", "tinterlace=mode=\(topFirst ? "interleave_top" : "interleave_bottom"),setfield=\(topFirst ? "tff" : "bff")",
            "-pix_fmt", "yuv420p", "-c:v", "libx264", "-qp", "0", "-flags", "+ilme+ildct", "-x264-params", topFirst ? "tff=1" : "bff=1", p]) == 0)
        return p
    }

    /// The Y planes of `path` decoded by the ffmpeg tool, optionally through `filter`.
    func ffmpegLuma(_ path: String, filter: String?, dir: TempDir) throws -> [[UInt8]] {
        let out = dir.path("luma-\(UUID().uuidString.prefix(6)).yuv")
        try #require(try FFmpegCLI.run(["-i", path] + (filter.map { ["-vf", $0] } ?? []) + ["-pix_fmt", "yuv420p", "-f", "rawvideo", out]) == 0)
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        let frame = 320 * 240 * 3 / 2
        return stride(from: 0, to: data.count - frame + 1, by: frame).map { Array(data[$0..<$0 + 320 * 240]) }
    }

    func lumaPlane(_ f: VideoFrame) -> [UInt8] {
        (0..<f.height).flatMap { y in (0..<f.width).map { x in luma(f, x, y) } }
    }

    /// Mean |Y(x, y) − (Y(x, y−1) + Y(x, y+1)) / 2|: large where fields of
    /// different moments are woven together (combing), small when progressive.
    func combing(_ y: [UInt8], width: Int = 320, height: Int = 240) -> Double {
        var sum = 0
        for r in 1..<(height - 1) { for x in 0..<width {
            sum += abs(2 * Int(y[r * width + x]) - Int(y[(r - 1) * width + x]) - Int(y[(r + 1) * width + x]))
        } }
        return Double(sum) / Double(2 * width * (height - 2))
    }

    @Test(arguments: ["mp4", "ts"])
    func interlacedInputIsDeinterlacedWithBwdif(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = try makeInterlaced(dir, ext: ext)
        let src = try FileSource(url: path)
        #expect(src.info.interlaced == .topFirst)
        #expect(src.info.deinterlacer == "bwdif")
        #expect(src.info.notices == ["interlaced (top field first), deinterlaced with bwdif before compositing"])
        #expect(src.info.description.contains("interlaced (top field first), deinterlaced with bwdif"))
        let frames = try readAll(src)
        // One progressive frame per interlaced frame, timestamps kept.
        #expect(frames.count == 25)
        #expect(src.framesDeinterlaced == 25)
        #expect(frames.enumerated().allSatisfy { $0.element.pts == FrameRate(25).time(ofFrame: Int64($0.offset)) })
        // Exactly what ffmpeg's own bwdif gives on the same file.
        let reference = try ffmpegLuma(path, filter: "bwdif=mode=send_frame:parity=auto:deint=interlaced", dir: dir)
        try #require(reference.count == frames.count)
        for (k, f) in frames.enumerated() { #expect(lumaPlane(f) == reference[k], "frame \(k) differs from ffmpeg's bwdif") }
        // And no longer combed: the woven fields are far apart, the output is not.
        let woven = try ffmpegLuma(path, filter: nil, dir: dir)
        let before = woven.map { combing($0) }.reduce(0, +) / Double(woven.count)
        let after = frames.map { combing(lumaPlane($0)) }.reduce(0, +) / Double(frames.count)
        #expect(after * 4 < before, "combing \(after) after, \(before) before")
    }

    @Test func bottomFieldFirstIsRecognised() throws {
        let dir = TempDir(); defer { dir.remove() }
        let path = try makeInterlaced(dir, topFirst: false)
        let src = try FileSource(url: path)
        #expect(src.info.interlaced == .bottomFirst)
        let frames = try readAll(src)
        let reference = try ffmpegLuma(path, filter: "bwdif=mode=send_frame:parity=auto:deint=interlaced", dir: dir)
        #expect(frames.map { lumaPlane($0) } == reference)
    }

    /// Progressive input goes through untouched, and says nothing.
    @Test func progressiveInputIsNotFiltered() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("progressive.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "1", "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.interlaced == nil && src.info.deinterlacer == nil && src.info.notices.isEmpty)
        #expect(try readAll(src).count == 25)
        #expect(src.framesDeinterlaced == 0)
    }

    /// What is recorded from a deinterlaced source is truthfully progressive.
    @Test func recordingIsProgressive() throws {
        let dir = TempDir(); defer { dir.remove() }
        let src = try FileSource(url: try makeInterlaced(dir))
        let out = dir.path("out.mp4")
        let w = try MediaWriter(url: out, video: VideoEncoderSettings(size: src.info.size, frameRate: src.info.frameRate, preset: "ultrafast"))
        while let f = try src.nextFrame() { try w.write(f) }
        try w.finish()
        let r = try runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=field_order", "-of", "default=nw=1:nk=1", out])
        #expect(r.output.trimmingCharacters(in: .whitespacesAndNewlines) == "progressive")
    }
}
