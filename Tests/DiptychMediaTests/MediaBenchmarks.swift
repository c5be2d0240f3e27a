import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// Throughput at 1080p: run with DIPTYCH_MEDIA_BENCH=1 (skipped otherwise; slow on small machines).
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["DIPTYCH_MEDIA_BENCH"] != nil))
struct MediaBenchmarks {
    init() { _ = quietFFmpeg }

    func seconds(_ body: () throws -> Void) rethrows -> Double {
        let t = Date(); try body(); return Date().timeIntervalSince(t)
    }

    @Test func decode1080p() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("1080p.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30", "-t", "5", "-pix_fmt", "yuv420p",
                                        "-c:v", "libx264", "-preset", "veryfast", "-b:v", "10M", p]) == 0)
        let src = try FileSource(url: p)
        var n = 0
        let t = try seconds { while try src.nextFrame() != nil { n += 1 } }
        print("BENCH decode 1080p H.264 (10 Mbit/s, \(ProcessInfo.processInfo.activeProcessorCount) cores): \(n) frames, \(String(format: "%.1f", Double(n) / t)) fps")
    }

    @Test(arguments: ["ultrafast", "veryfast"])
    func encode1080p(preset: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let size = PixelSize.hd1080, rate = FrameRate(30)
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        var frames: [VideoFrame] = []
        for _ in 0..<120 { frames.append(try #require(try src.nextFrame())) }
        let w = try MediaWriter(url: dir.path("e.mp4"), video: VideoEncoderSettings(size: size, frameRate: rate, preset: preset))
        let t = try seconds {
            for f in frames { try w.write(f) }
            try w.finish()
        }
        print("BENCH encode 1080p \(w.encoderName) \(preset) 10 Mbit/s: \(String(format: "%.1f", 120 / t)) fps")
    }

    /// Moving, detailed content (ffmpeg's testsrc2), converted to NV12 before timing.
    @Test(arguments: ["ultrafast", "veryfast"])
    func encodeNatural1080p(preset: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("src.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30", "-t", "3", "-pix_fmt", "yuv420p",
                                        "-c:v", "libx264", "-preset", "ultrafast", "-qp", "10", p]) == 0)
        let src = try FileSource(url: p)
        var frames: [VideoFrame] = []
        while let f = try src.nextFrame() {
            var nv12 = VideoFrame.allocate(width: f.width, height: f.height, format: .nv12, pts: f.pts)
            let dst = nv12.planes[0].storage.mutableBase
            for y in 0..<f.height {
                (dst + nv12.planes[0].offset + y * nv12.planes[0].stride).copyMemory(from: f.planes[0].baseAddress + y * f.planes[0].stride, byteCount: f.width)
            }
            let cw = f.width / 2
            for y in 0..<f.height / 2 {
                let u = (f.planes[1].baseAddress + y * f.planes[1].stride).assumingMemoryBound(to: UInt8.self)
                let v = (f.planes[2].baseAddress + y * f.planes[2].stride).assumingMemoryBound(to: UInt8.self)
                let d = (dst + nv12.planes[1].offset + y * nv12.planes[1].stride).assumingMemoryBound(to: UInt8.self)
                for x in 0..<cw { d[2 * x] = u[x]; d[2 * x + 1] = v[x] }
            }
            nv12.pts = f.pts
            frames.append(nv12)
        }
        let w = try MediaWriter(url: dir.path("e.mp4"), video: VideoEncoderSettings(size: .hd1080, frameRate: FrameRate(30), preset: preset))
        let t = try seconds {
            for f in frames { try w.write(f) }
            try w.finish()
        }
        print("BENCH encode 1080p testsrc2 \(w.encoderName) \(preset) 10 Mbit/s: \(frames.count) frames, \(String(format: "%.1f", Double(frames.count) / t)) fps")
    }

    @Test func generateCounter1080p() throws {
        let src = try TestPatternSource(name: "counter", size: .hd1080, rate: FrameRate(30))
        let t = try seconds { for _ in 0..<300 { _ = try src.nextFrame() } }
        print("BENCH testsrc:counter 1080p NV12 generation: \(String(format: "%.0f", 300 / t)) fps")
    }
}
