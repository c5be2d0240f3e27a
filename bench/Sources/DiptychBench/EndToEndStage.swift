import Diptych
import DiptychCore
import DiptychMedia
import Foundation

/// The end-to-end stage: `diptych record` on two H.264 files — decode →
/// composite → libx264 → fragmented MP4 — through the real `RecordingSession`,
/// and the peers on the same files with the same geometry, encoder, preset,
/// bitrate and keyframe interval.
struct EndToEndStage {
    let options: BenchOptions
    let log: (String) -> Void

    struct Inputs {
        var primary: String
        var secondary: String
        var primarySize: PixelSize
        var secondarySize: PixelSize
        var frames: Int
        var note: String?
    }

    static let secondarySize = PixelSize.hd720

    /// The cached input pair for `canvas`: primary at the canvas size, 60 fps;
    /// secondary 1280×720, 30 fps; `duration` seconds each. Made once with the
    /// ffmpeg CLI (testsrc2 / testsrc, moving pictures, libx264 veryfast CRF 20),
    /// or with Diptych's own test patterns where the CLI is missing.
    func inputs(canvas: PixelSize) throws -> Inputs {
        try FileManager.default.createDirectory(atPath: options.workDir, withIntermediateDirectories: true)
        let d = options.duration
        let tag = String(format: "%gs", d)
        let p = "\(options.workDir)/primary-\(canvas)-60-\(tag).mp4"
        let s = "\(options.workDir)/secondary-\(Self.secondarySize)-30-\(tag).mp4"
        let frames = Int((d * 60).rounded())
        var note: String?
        for (path, size, fps, pattern) in [(p, canvas, 60, Self.patterns.primary), (s, Self.secondarySize, 30, Self.patterns.secondary)]
            where !FileManager.default.fileExists(atPath: path) {
            log("making \(path)")
            if let ffmpeg = Tools.find("ffmpeg") {
                let r = Tools.run(ffmpeg, Self.inputArguments(pattern: pattern, size: size, fps: fps, duration: d, out: path + ".partial.mp4"))
                guard r.status == 0 else { throw BenchRunError("ffmpeg could not make \(path): \(r.stderrTail)") }
                try FileManager.default.moveItem(atPath: path + ".partial.mp4", toPath: path)
            } else {
                note = "inputs made with Diptych's test patterns (no ffmpeg CLI): still pictures decode faster than camera video"
                try Self.writePattern(path, size: size, fps: fps, duration: d, pattern: pattern == Self.patterns.primary ? "smpte" : "counter")
            }
        }
        return Inputs(primary: p, secondary: s, primarySize: canvas, secondarySize: Self.secondarySize, frames: frames, note: note)
    }

    /// The ffmpeg command line that makes one input file.
    static func inputArguments(pattern: String, size: PixelSize, fps: Int, duration: Double, out: String) -> [String] {
        ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
         "-i", "\(pattern)=size=\(size.width)x\(size.height):rate=\(fps)", "-t", "\(duration)",
         "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-g", "\(fps)", "-pix_fmt", "yuv420p", out]
    }

    /// The lavfi sources of the primary and the secondary.
    static let patterns = (primary: "testsrc2", secondary: "testsrc")

    static func writePattern(_ path: String, size: PixelSize, fps: Int, duration: Double, pattern: String) throws {
        let rate = FrameRate(Int32(fps))
        let src = try TestPatternSource(name: pattern, size: size, rate: rate, duration: duration)
        let w = try MediaWriter(url: path + ".partial.mp4", container: .mp4,
                                video: VideoEncoderSettings(size: size, frameRate: rate, encoder: .x264, bitrate: 8_000_000,
                                                            preset: "veryfast", gop: fps))
        while let f = try src.nextFrame() { try w.write(f) }
        try w.finish()
        try FileManager.default.moveItem(atPath: path + ".partial.mp4", toPath: path)
    }

    /// Ours: one take with the CLI's defaults for this layout.
    func runOurs(layout: LayoutKind, inputs: Inputs) throws -> BenchResult {
        let out = "\(options.workDir)/diptych-\(layout.rawValue)-\(inputs.primarySize).mp4"
        let config: TakeConfiguration
        do {
            config = try TakeConfiguration.parse(arguments: [
                "--primary", inputs.primary, "--secondary", inputs.secondary, "--layout", layout.rawValue,
                "--preset", options.preset, "--bitrate", "\(options.bitrate)", "--audio", "none", "--gpu", options.gpu,
                "--out", out])
        } catch { throw BenchRunError("\(error)") }
        let path = PathLine()
        let session = RecordingSession(configuration: config, hooks: SessionHooks(log: { path.note($0) }))
        let cpu0 = CPUClock.seconds(), t0 = now()
        let summary: TakeSummary
        do { summary = try session.run() } catch { throw BenchRunError("diptych record: \(error)") }
        let seconds = now() - t0, cpu = CPUClock.seconds() - cpu0
        var r = BenchResult(stage: .endToEnd, layout: layout.rawValue, canvas: "\(inputs.primarySize)",
                            input: "h264 yuv420p files", frames: summary.frames, seconds: seconds,
                            fps: Double(summary.frames) / seconds, realtime60: Double(summary.frames) / seconds / 60,
                            cpuMsPerFrame: cpu * 1000 / Double(max(summary.frames, 1)))
        r.preset = options.preset
        r.path = path.value
        if summary.frames != inputs.frames {
            r.notes.append("wrote \(summary.frames) frames, expected \(inputs.frames)")
        }
        if let n = inputs.note { r.notes.append(n) }
        return r
    }
}

/// The compositor's `diptych-gpu: composite path …` log line, caught from any thread.
final class PathLine: @unchecked Sendable {
    private let lock = NSLock()
    private var line: String?
    func note(_ l: String) {
        guard let r = l.range(of: "composite path ") else { return }
        lock.lock(); line = String(l[r.upperBound...]); lock.unlock()
    }
    var value: String? { lock.lock(); defer { lock.unlock() }; return line }
}

struct BenchRunError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// External programs: lookup on PATH, run with captured output and child CPU time.
enum Tools {
    /// The program beside the running executable (a self-contained install's
    /// bin/ holds its own ffmpeg), else the first on PATH.
    static func find(_ name: String) -> String? {
        var dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            dirs.insert((exe as NSString).deletingLastPathComponent, at: 0)
        }
        for dir in dirs {
            let p = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    struct Outcome {
        var status: Int32
        var stdout: String
        var stderrTail: String
        var seconds: Double
        var cpuSeconds: Double
    }

    static func run(_ exe: String, _ args: [String], timeout: Double = 1800) -> Outcome {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out; p.standardError = err
        p.standardInput = FileHandle.nullDevice
        let cpu0 = CPUClock.seconds(children: true), t0 = now()
        do { try p.run() } catch { return Outcome(status: -1, stdout: "", stderrTail: "\(error)", seconds: 0, cpuSeconds: 0) }
        // Read both pipes while it runs (a full pipe would block the child).
        let group = DispatchGroup()
        nonisolated(unsafe) var o = Data(), e = Data()
        group.enter(); DispatchQueue.global().async { o = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter(); DispatchQueue.global().async { e = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        p.waitUntilExit()
        group.wait()
        let seconds = now() - t0, cpu = CPUClock.seconds(children: true) - cpu0
        let errText = String(decoding: e, as: UTF8.self)
        let tail = errText.split(separator: "\n").suffix(3).joined(separator: " | ")
        return Outcome(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderrTail: tail,
                       seconds: seconds, cpuSeconds: cpu)
    }
}
