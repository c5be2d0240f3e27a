// Records `testsrc:counter` frames into a MediaWriter until killed, printing
// the number of frames written after each one (tests SIGKILL it mid-take).
// Usage: diptych-writer-fixture OUTPUT [FRAMES_PER_SECOND_PACE] [MAX_FRAMES] [encoded]
//        (encoded: the frames are encoded first, by libx264 into Annex B
//        access units, and the writer takes those, as from the GPU encoder)
//        diptych-writer-fixture --stdin   (reads `-`, a Y4M stream, and prints
//                                          "SIZE RATE FORMAT FRAMES LAST_PTS")
import DiptychCore
import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered line to a file descriptor (the parent reads progress as it happens).
func say(_ text: String, fd: Int32 = 1) {
    let line = text + "\n"
    _ = line.withCString { write(fd, $0, strlen($0)) }
}
let args = CommandLine.arguments
guard args.count >= 2 else { say("usage: diptych-writer-fixture OUTPUT [PACE_FPS] [MAX_FRAMES]", fd: 2); exit(2) }
if args.count == 2 && args[1] == "--stdin" {
    do {
        let source = try MediaSources.open(.stdin)
        var n = 0
        var last = MediaTime.zero
        while let f = try source.nextFrame() { n += 1; last = f.pts }
        say("\(source.info.size) \(source.info.frameRate) \(source.info.pixelFormat.rawValue) \(n) \(last)")
        exit(0)
    } catch {
        say("diptych-writer-fixture: \(error)", fd: 2)
        exit(1)
    }
}
let pace = args.count > 2 ? Double(args[2]) ?? 60 : 60
let maxFrames = args.count > 3 ? Int(args[3]) ?? 100_000 : 100_000
MediaLibraries.setLogLevel(.error)
do {
    let size = PixelSize(width: 320, height: 240), rate = FrameRate(30)
    let source = try TestPatternSource(name: "counter", size: size, rate: rate)
    let settings = VideoEncoderSettings(size: size, frameRate: rate, encoder: .x264, preset: "ultrafast")
    if args.count > 4 && args[4] == "encoded" {
        let encoder = try PacketEncoder(settings: settings)
        let writer = try MediaWriter(url: args[1], preEncoded: PreEncodedVideo(size: size, frameRate: rate))
        for _ in 0..<maxFrames {
            guard let frame = try source.nextFrame() else { break }
            for p in try encoder.encode(frame) { try writer.write(EncodedVideoPacket(data: p.data, pts: p.pts, keyframe: p.isKeyframe)) }
            say(String(writer.framesWritten))
            usleep(useconds_t(1_000_000 / pace))
        }
        for p in try encoder.finish() { try writer.write(p) }
        try writer.finish()
        exit(0)
    }
    let writer = try MediaWriter(url: args[1], video: VideoEncoderSettings(size: size, frameRate: rate, preset: "ultrafast"))
    for _ in 0..<maxFrames {
        guard let frame = try source.nextFrame() else { break }
        try writer.write(frame)
        say(String(writer.framesWritten))
        usleep(useconds_t(1_000_000 / pace))
    }
    try writer.finish()
} catch {
    say("diptych-writer-fixture: \(error)", fd: 2)
    exit(1)
}
