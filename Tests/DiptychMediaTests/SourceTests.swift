import Foundation
import Testing
@testable import DiptychCore
@testable import DiptychMedia

@Suite struct TestPatternTests {
    @Test(arguments: ["smpte", "gradient", "counter", "solid-FF8000"])
    func patternsProduceExactTimestamps(name: String) throws {
        let rate = FrameRate(30000, 1001)
        let src = try MediaSources.open(.testPattern(name: name, size: PixelSize(width: 320, height: 240), rate: rate), duration: 1)
        #expect(src.info.pixelFormat == .nv12)
        let frames = try readAll(src)
        #expect(frames.count == 30)  // pts < 1 s: 0 ... 29·1001/30000
        for (k, f) in frames.enumerated() {
            #expect(f.pts == rate.time(ofFrame: Int64(k)))
            #expect(f.format == .nv12 && f.width == 320 && f.height == 240)
        }
    }

    @Test func endlessWithoutDuration() throws {
        let src = try MediaSources.open(try SourceSpec.parse("testsrc:gradient:64x64@60", field: "--primary"))
        for _ in 0..<500 { #expect(try src.nextFrame() != nil) }
        src.close()
        #expect(try src.nextFrame() == nil)
    }

    @Test func solidColourIsBT709Limited() throws {
        let src = try TestPatternSource(name: "solid-FFFFFF", size: PixelSize(width: 64, height: 64), rate: FrameRate(30))
        let f = try #require(try src.nextFrame())
        #expect(luma(f, 10, 10) == 235)
        let black = try #require(try TestPatternSource(name: "solid-000000", size: PixelSize(width: 64, height: 64), rate: FrameRate(30)).nextFrame())
        #expect(luma(black, 10, 10) == 16)
    }

    @Test(arguments: [PixelFormat.nv12, .i420], [PixelSize(width: 64, height: 64), PixelSize(width: 321, height: 241), PixelSize(width: 1920, height: 1080)])
    func counterDecodesUncompressed(format: PixelFormat, size: PixelSize) throws {
        let src = try TestPatternSource(name: "counter", size: size, rate: FrameRate(30), format: format)
        for k in 0..<40 {
            let f = try #require(try src.nextFrame())
            #expect(CounterPattern.decode(frame: f) == k)
        }
    }

    @Test func counterDecodesRGBA() throws {
        for (w, h) in [(64, 64), (640, 360)] {
            let f = VideoFrame.allocate(width: w, height: h, format: .rgba)
            let m = f.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
            for y in 0..<h { for x in 0..<w {
                let v: UInt8 = (CounterPattern.isWhite(index: 12345, x: x, y: y, width: w, height: h) ?? false) ? 255 : 0
                for c in 0..<3 { m[y * f.planes[0].stride + 4 * x + c] = v }
                m[y * f.planes[0].stride + 4 * x + 3] = 255
            } }
            #expect(CounterPattern.decode(frame: f) == 12345)
        }
    }

    @Test func nonCounterFramesDecodeToNil() throws {
        for name in ["smpte", "gradient", "solid-808080"] {
            let f = try #require(try TestPatternSource(name: name, size: PixelSize(width: 320, height: 240), rate: FrameRate(30)).nextFrame())
            #expect(CounterPattern.decode(frame: f) == nil, "\(name)")
        }
    }

    @Test func badPatternsFailClearly() {
        let e = expectMediaError { _ = try MediaSources.open(.testPattern(name: "plaid", size: .hd720, rate: FrameRate(30))) }
        #expect(e?.description.contains("unknown test pattern 'plaid'") == true)
        let small = expectMediaError { _ = try TestPatternSource(name: "counter", size: PixelSize(width: 32, height: 32), rate: FrameRate(30)) }
        #expect(small?.description.contains("64x64") == true)
        #expect(expectMediaError { _ = try MediaSources.open(.none) } != nil)
    }
}

@Suite struct FileSourceTests {
    init() { _ = quietFFmpeg }

    @Test func missingFile() {
        let e = expectMediaError { _ = try MediaSources.open(.url("/nonexistent/dir/clip.mp4")) }
        #expect(e == .fileNotFound(path: "/nonexistent/dir/clip.mp4"))
        #expect(e?.description == "/nonexistent/dir/clip.mp4: no such file")
    }

    @Test func zeroLengthFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("empty.mp4")
        _ = FileManager.default.createFile(atPath: p, contents: Data())
        #expect(expectMediaError { _ = try FileSource(url: p) } == .emptyFile(path: p))
    }

    @Test func textFileNamedMP4() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("notes.mp4")
        try "This is not a video.\nJust some notes.\n".write(toFile: p, atomically: true, encoding: .utf8)
        let e = expectMediaError { _ = try FileSource(url: p) }
        guard case .unrecognizedFormat(let path, _)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(path == p)
        #expect(e!.description.hasPrefix("\(p): not a media file"))
    }

    @Test func directoryIsNotAFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let e = expectMediaError { _ = try FileSource(url: dir.url.path) }
        #expect(e?.description.contains("is a directory") == true)
    }

    /// A regular MP4 (index at the end) cut in half: the index is gone.
    @Test func truncatedMP4() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("full.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "2", "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let data = try Data(contentsOf: URL(fileURLWithPath: p))
        let cut = dir.path("cut.mp4")
        try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: cut))
        let e = expectMediaError { _ = try FileSource(url: cut) }
        guard case .corrupt(let path, let detail)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(path == cut)
        #expect(detail.contains("mov"))
    }

    /// Our fragmented MP4 cut mid-file still decodes up to the cut.
    @Test func truncatedFragmentedMP4DecodesPrefix() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("frag.mp4")
        let size = PixelSize(width: 320, height: 240), rate = FrameRate(30)
        let src = try TestPatternSource(name: "counter", size: size, rate: rate)
        let w = try MediaWriter(url: p, video: VideoEncoderSettings(size: size, frameRate: rate))
        for _ in 0..<90 { try w.write(try #require(try src.nextFrame())) }
        try w.finish()
        let data = try Data(contentsOf: URL(fileURLWithPath: p))
        let cut = dir.path("cut.mp4")
        try data.prefix(data.count * 2 / 3).write(to: URL(fileURLWithPath: cut))
        let probe = ProbedFile(path: cut)
        #expect(probe.error == nil)
        #expect(probe.frames.count >= 30 && probe.frames.count < 90)
        #expect(probe.counters.prefix(30) == ArraySlice((0..<30).map { Optional($0) }))
    }

    /// Garbage over the middle of the media data: decoding goes on (or stops
    /// with a clear error), never crashes or hangs.
    @Test(arguments: ["mp4", "ts"])
    func corruptedFile(ext: String) throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("ok.\(ext)")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "2", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-g", "15", p]) == 0)
        var data = try Data(contentsOf: URL(fileURLWithPath: p))
        var rng = SystemRandomNumberGenerator()
        let start = ext == "mp4" ? data.count / 3 : data.count / 4
        for i in start..<(start + data.count / 4) where i % 3 == 0 { data[i] = UInt8.random(in: 0...255, using: &rng) }
        let bad = dir.path("bad.\(ext)")
        try data.write(to: URL(fileURLWithPath: bad))
        do {
            let src = try FileSource(url: bad)
            let frames = try readAll(src)
            #expect(frames.count <= 60)
        } catch {
            #expect(error.description.hasPrefix(bad))
        }
        // Corrupted header: a clear error naming the file.
        var head = try Data(contentsOf: URL(fileURLWithPath: p))
        for i in 0..<min(4096, head.count) { head[i] = UInt8(truncatingIfNeeded: i &* 7) }
        let badHead = dir.path("badhead.\(ext)")
        try head.write(to: URL(fileURLWithPath: badHead))
        do {
            let src = try FileSource(url: badHead)
            _ = try readAll(src)
        } catch {
            #expect(error.description.hasPrefix(badHead))
        }
    }

    @Test func audioOnlyFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("tone.m4a")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", p]) == 0)
        #expect(expectMediaError { _ = try FileSource(url: p) } == .noVideoStream(path: p))
        #expect(MediaError.noVideoStream(path: p).description == "\(p): has no video stream")
    }

    @Test func decodesH264ZeroCopyI420() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("clip.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "2", "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.size == PixelSize(width: 320, height: 240))
        #expect(src.info.frameRate == FrameRate(25))
        #expect(src.info.pixelFormat == .i420 && src.info.nativeFormat == "yuv420p")
        #expect(src.info.matrix == .bt601 && src.info.range == .limited)
        #expect(src.info.duration == 2)
        #expect(!src.info.hasAudio)
        let frames = try readAll(src)
        #expect(frames.count == 50)
        #expect(frames.enumerated().allSatisfy { $0.element.pts == FrameRate(25).time(ofFrame: Int64($0.offset)) })
        #expect(frames.allSatisfy { $0.format == .i420 && $0.planes.count == 3 && $0.planes[0].stride >= 320 })
    }

    @Test func fullRangeJPEGFormatIsFull() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("mjpeg.avi")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "1", "-pix_fmt", "yuvj420p", "-c:v", "mjpeg", p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.range == .full)
        let f = try #require(try src.nextFrame())
        #expect(f.format == .i420 && f.range == .full)
    }

    /// Formats the GPU cannot upload are converted once (never by default).
    @Test(arguments: [("gray16le", "ffv1", "mkv", PixelFormat.i420), ("yuv444p12le", "ffv1", "mkv", .i420),
                      ("yuv422p", "libx264", "mp4", .i420), ("yuv420p10le", "libx264", "mkv", .i420),
                      ("rgb24", "rawvideo", "nut", .rgba), ("bgra", "ffv1", "mkv", .bgra), ("nv12", "rawvideo", "nut", .nv12)])
    func pixelFormats(fmt: String, codec: String, ext: String, expected: PixelFormat) throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("f.\(ext)")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "1", "-pix_fmt", fmt, "-c:v", codec, p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.nativeFormat == fmt)
        #expect(src.info.pixelFormat == expected)
        let frames = try readAll(src)
        #expect(frames.count == 10)
        #expect(frames.allSatisfy { $0.format == expected && $0.width == 160 && $0.height == 120 })
    }

    @Test func oddFrameSize() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("odd.mkv")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=321x241:rate=30", "-t", "1", "-pix_fmt", "yuv420p", "-c:v", "ffv1", p]) == 0)
        let src = try FileSource(url: p)
        #expect(src.info.size == PixelSize(width: 321, height: 241))
        let frames = try readAll(src)
        #expect(frames.count == 30)
        let f = try #require(frames.first)
        #expect(f.format == .i420 && f.width == 321 && f.height == 241)
        #expect(f.planes[1].stride >= 161 && f.planes[1].storage.count >= f.planes[1].stride * 121)
    }

    @Test func variableFrameRateKeepsTimestamps() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("vfr.mp4")
        // 10 frames 1/30 s apart, then 10 frames 1/10 s apart (testsrc's time base is 1/30).
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=30", "-frames:v", "20",
                                        "-vf", "setpts='if(lt(N,10),N,10+3*(N-10))'", "-fps_mode", "passthrough",
                                        "-video_track_timescale", "90000", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-bf", "0", p]) == 0)
        let frames = try readAll(try FileSource(url: p))
        #expect(frames.count == 20)
        for (k, f) in frames.enumerated() {
            let expected = k < 10 ? Double(k) / 30 : Double(10 + 3 * (k - 10)) / 30
            #expect(abs(f.pts.seconds - expected) < 0.0001, "frame \(k): \(f.pts.seconds) vs \(expected)")
        }
    }

    /// The display matrix gives the clockwise turn to upright; checked against
    /// ffmpeg's own autorotate on the same file.
    @Test func rotationFromDisplayMatrix() throws {
        let dir = TempDir(); defer { dir.remove() }
        let plain = dir.path("plain.mp4"), rot = dir.path("rot.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "1", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-qp", "0", plain]) == 0)
        try #require(try FFmpegCLI.run(["-i", plain, "-c", "copy", "-metadata:s:v:0", "rotate=90", rot]) == 0)
        #expect(try FileSource(url: plain).info.orientation.rotation == .r0)
        let src = try FileSource(url: rot)
        let rotation = src.info.orientation.rotation
        #expect(rotation.swapsAxes)
        // What ffmpeg shows (autorotated), as gray.
        let yuv = dir.path("upright.yuv")
        try #require(try FFmpegCLI.run(["-i", rot, "-frames:v", "1", "-pix_fmt", "yuv420p", "-f", "rawvideo", yuv]) == 0)
        let upright = try Data(contentsOf: URL(fileURLWithPath: yuv)).prefix(120 * 160)  // the Y plane
        try #require(upright.count == 120 * 160)
        let f = try #require(try src.nextFrame())
        // Turn our frame upright by `rotation` (clockwise) and compare.
        var diff = 0
        for y in 0..<160 { for x in 0..<120 {
            let s = rotation.sensorPixel(uprightX: x, uprightY: y, width: 160, height: 120)
            diff += abs(Int(luma(f, s.x, s.y)) - Int(upright[y * 120 + x]))
        } }
        #expect(diff / (120 * 160) < 2, "mean difference \(diff / (120 * 160)) for rotation \(rotation)")
        #expect(rotation == .r270)  // FFmpeg 5.1 writes rotate=90 as a 90° counter-clockwise display matrix
    }

    @Test func y4mFromPipe() throws {
        let pipe = Pipe()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi", "-i", "testsrc=size=176x144:rate=15",
                       "-frames:v", "20", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", "-"]
        p.standardOutput = pipe
        try p.run()
        defer { p.waitUntilExit() }
        let src = try MediaSources.openY4M(pipe: pipe.fileHandleForReading.fileDescriptor)
        #expect(src.info.size == PixelSize(width: 176, height: 144))
        #expect(src.info.frameRate == FrameRate(15))
        let frames = try readAll(src)
        src.close()
        #expect(frames.count == 20)
        #expect(frames.enumerated().allSatisfy { $0.element.pts == FrameRate(15).time(ofFrame: Int64($0.offset)) && $0.element.format == .i420 })
    }

    @Test func durationLimitsAFile() throws {
        let dir = TempDir(); defer { dir.remove() }
        let p = dir.path("clip.mp4")
        try #require(try FFmpegCLI.run(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=30", "-t", "2", "-pix_fmt", "yuv420p", "-c:v", "libx264", p]) == 0)
        let frames = try readAll(try MediaSources.open(.url(p), duration: 0.5))
        #expect(frames.count == 15)
    }

    @Test func unreachableNetworkURLFailsQuickly() throws {
        let start = Date()
        let e = expectMediaError { _ = try FileSource(url: "tcp://127.0.0.1:9/", opening: SourceOpening(timeout: 2)) }
        #expect(e?.description.hasPrefix("tcp://127.0.0.1:9/") == true)
        #expect(Date().timeIntervalSince(start) < 10)
    }
}

extension Rotation {
    /// For the upright pixel (x, y) of a picture turned clockwise by `self`,
    /// the pixel of the `width`×`height` sensor image shown there.
    func sensorPixel(uprightX x: Int, uprightY y: Int, width: Int, height: Int) -> (x: Int, y: Int) {
        switch self {
        case .r0: return (x, y)
        case .r90: return (y, height - 1 - x)
        case .r180: return (width - 1 - x, height - 1 - y)
        case .r270: return (width - 1 - y, x)
        }
    }
}

/// A CPU decoder's clock (`DecoderSettings.cpuClock`): the threads the
/// decoder started and the reading thread's time while it decoded.
@Suite struct DecodeCPUClockTests {
    @Test func countsTheDecodersThreadsAndTheReadingThread() throws {
        let dir = TempDir(); defer { dir.remove() }
        let clip = dir.path("clip.mp4")
        try makeAVFile(clip, size: "640x360", seconds: 2)
        let clock = DecodeCPUClock()
        var settings = DecoderSettings.cpu
        settings.cpuClock = clock
        let before = StageClock.times().decode
        let reading = StageClock.threadSeconds()
        var frames = 0
        do {
            let source = try FileSource(url: clip, decoding: settings)
            while try source.nextFrame() != nil { frames += 1 }
        }
        let readingSpent = StageClock.threadSeconds() - reading
        let stage = StageClock.times().decode - before
        #expect(frames > 0)
        // One frame thread a core, so a machine of more than one core has several; none left running.
        if ProcessInfo.processInfo.activeProcessorCount > 1 { #expect(clock.threads >= 2, "\(clock.threads) threads") }
        let counted = clock.seconds
        #expect(counted > 0)
        // No more than the decode stage's threads and this thread spent (other tests' decoders may add to the stage).
        #expect(counted <= stage + readingSpent + 0.01, "\(counted) s counted, \(stage) s in the stage and \(readingSpent) s reading")
        // The threads ended with the source: what they did stays counted, and nothing more comes.
        #expect(clock.seconds == counted)
        // Their time counts toward the decode stage as before (tagged names are the stage's).
        #expect(PipelineStage.of(threadName: "dp-decode-3f") == .decode && PipelineStage.of(threadName: "dp-decode") == .decode)
    }

    /// `DecoderSettings.cpuThreads` is each CPU decoder's frame threads:
    /// one starts none of its own, three start three; every frame either way.
    @Test func frameThreadsAreTheSettings() throws {
        let dir = TempDir(); defer { dir.remove() }
        let clip = dir.path("clip.mp4")
        try makeAVFile(clip, size: "640x360", seconds: 1)
        var counts: [Int] = []
        for threads in [1, 3] {
            let clock = DecodeCPUClock()
            var settings = DecoderSettings.cpu
            settings.cpuClock = clock
            settings.cpuThreads = threads
            let source = try FileSource(url: clip, decoding: settings)
            var frames = 0
            while try source.nextFrame() != nil { frames += 1 }
            counts.append(frames)
            #expect(clock.threads == (threads == 1 ? 0 : threads), "\(threads) frame threads: \(clock.threads) started")
        }
        #expect(counts[0] > 0 && counts[0] == counts[1])
    }
}
