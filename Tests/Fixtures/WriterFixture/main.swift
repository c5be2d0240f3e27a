// Records `testsrc:counter` frames into a MediaWriter until killed, printing
// the number of frames written after each one (tests SIGKILL it mid-take).
// Usage: diptych-writer-fixture OUTPUT [FRAMES_PER_SECOND_PACE] [MAX_FRAMES]
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
let pace = args.count > 2 ? Double(args[2]) ?? 60 : 60
let maxFrames = args.count > 3 ? Int(args[3]) ?? 100_000 : 100_000
MediaLibraries.setLogLevel(.error)
do {
    let size = PixelSize(width: 320, height: 240), rate = FrameRate(30)
    let source = try TestPatternSource(name: "counter", size: size, rate: rate)
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
