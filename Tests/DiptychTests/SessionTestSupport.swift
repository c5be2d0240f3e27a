import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

let quietMedia: Void = { MediaLibraries.setLogLevel(.error) }()

/// A temporary folder removed by `remove()`.
struct Scratch {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-session-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Collects log lines from a session (thread-safe).
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ s: String) { lock.lock(); lines.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
    func contains(_ s: String) -> Bool { all.contains { $0.contains(s) } }
}

/// A configuration for a small, fast take.
func takeConfig(primary: String = "testsrc:counter:320x240@60", secondary: String = "testsrc:solid-ff0000:160x120@30",
                out: String, duration: Double? = 2, extra: [String] = []) throws -> TakeConfiguration {
    var args = ["--primary", primary, "--secondary", secondary, "--out", out, "--gpu", "software"]
    if let duration { args += ["--duration", String(duration)] }
    return try TakeConfiguration.parse(arguments: args + extra)
}

/// Plenty of free space, whatever the disk says.
let plentyOfSpace = ScriptedStorageMonitor([1 << 40])

/// One decoded output frame: its timestamp, the counter it shows (if any) and the frame.
struct DecodedFrame {
    var pts: MediaTime
    var counter: Int?
    var frame: VideoFrame
}

/// Decodes every frame of `path` with libavcodec.
func decodeAll(_ path: String) throws -> (info: SourceInfo, frames: [DecodedFrame]) {
    let source = try MediaSources.open(.url(path))
    defer { source.close() }
    var out: [DecodedFrame] = []
    while let f = try source.nextFrame() {
        out.append(DecodedFrame(pts: f.pts, counter: CounterPattern.decode(frame: f), frame: f))
        if out.count > 100_000 { break }
    }
    return (source.info, out)
}

/// Y, U, V at pixel (x, y) of a NV12 or I420 frame.
func yuv(_ f: VideoFrame, _ x: Int, _ y: Int) -> (y: Int, u: Int, v: Int) {
    let yv = Int(f.planes[0].baseAddress.load(fromByteOffset: y * f.planes[0].stride + x, as: UInt8.self))
    switch f.format {
    case .nv12:
        let p = f.planes[1]
        let o = (y / 2) * p.stride + (x / 2) * 2
        return (yv, Int(p.baseAddress.load(fromByteOffset: o, as: UInt8.self)), Int(p.baseAddress.load(fromByteOffset: o + 1, as: UInt8.self)))
    case .i420:
        let o1 = (y / 2) * f.planes[1].stride + x / 2
        let o2 = (y / 2) * f.planes[2].stride + x / 2
        return (yv, Int(f.planes[1].baseAddress.load(fromByteOffset: o1, as: UInt8.self)),
                Int(f.planes[2].baseAddress.load(fromByteOffset: o2, as: UInt8.self)))
    default:
        Issue.record("yuv() takes NV12 or I420, got \(f.format)")
        return (0, 0, 0)
    }
}

/// RGB (0...255) at (x, y) of a decoded BT.709 limited-range frame, or of an RGBA frame.
func rgb(_ f: VideoFrame, _ x: Int, _ y: Int) -> (r: Double, g: Double, b: Double) {
    if f.format == .rgba {
        let o = y * f.planes[0].stride + x * 4
        let p = f.planes[0].baseAddress
        return (Double(p.load(fromByteOffset: o, as: UInt8.self)), Double(p.load(fromByteOffset: o + 1, as: UInt8.self)),
                Double(p.load(fromByteOffset: o + 2, as: UInt8.self)))
    }
    let c = yuv(f, x, y)
    let yy = (Double(c.y) - 16) * 255 / 219
    let u = (Double(c.u) - 128) * 255 / 224
    let v = (Double(c.v) - 128) * 255 / 224
    func clamp(_ d: Double) -> Double { min(255, max(0, d)) }
    return (clamp(yy + 1.5748 * v), clamp(yy - 0.1873 * u - 0.4681 * v), clamp(yy + 1.8556 * u))
}

enum Hue { case red, green, blue, other }
/// The dominant primary colour at (x, y).
func hue(_ f: VideoFrame, _ x: Int, _ y: Int) -> Hue {
    let c = rgb(f, x, y)
    if c.r > 150 && c.g < 90 && c.b < 90 { return .red }
    if c.g > 150 && c.r < 90 && c.b < 90 { return .green }
    if c.b > 150 && c.r < 90 && c.g < 90 { return .blue }
    return .other
}

/// Runs the `ffmpeg` tool to make a fixture file. Our code never shells out.
func makeFixture(_ args: [String]) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    p.arguments = ["-v", "error", "-y"] + args
    try p.run()
    p.waitUntilExit()
    #expect(p.terminationStatus == 0, "ffmpeg \(args.joined(separator: " "))")
}

/// The built `diptych` executable next to the test bundle.
func diptychExecutable() -> URL? {
    let dirs = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")]
    return dirs.map { $0.appendingPathComponent("diptych") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
}

/// The outcome of running the CLI.
struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var signalled: Bool
    /// Standard output's bytes as they came.
    var stdoutData = Data()
}

/// Runs `diptych args…` in `directory`, optionally feeding `stdinFile`, and
/// optionally sending `signal` `delay` seconds after the start, or after
/// `ready` first holds.
func runCLI(_ args: [String], in directory: String? = nil, stdin: FileHandle? = nil,
            signal: Int32? = nil, after delay: Double = 0, once ready: (() -> Bool)? = nil,
            timeout: Double = 120, environment: [String: String] = [:]) throws -> CLIResult {
    let exe = try #require(diptychExecutable(), "the diptych executable is not built")
    return try run(exe.path, args, in: directory, stdin: stdin, signal: signal, after: delay, once: ready, timeout: timeout,
                   environment: environment)
}

/// How many times `marker` occurs in the file at `path` as it is now (0
/// where there is no file): `moof` in a fragmented MP4 counts its fragments
/// begun, `.m4s` in a playlist its segments listed.
func occurrences(of marker: String, in path: String) -> Int {
    guard let data = FileManager.default.contents(atPath: path) else { return 0 }
    let m = Data(marker.utf8)
    var (count, from) = (0, data.startIndex)
    while let r = data.range(of: m, in: from..<data.endIndex) { count += 1; from = r.upperBound }
    return count
}

/// `diptych` run with `DIPTYCH_GPU_ENCODER_RECONSTRUCTION` set to a folder of
/// its own: where its GPU encoders write their reconstructed pictures.
struct ReconstructionFolder {
    let path: String
    init(in dir: Scratch) throws {
        path = dir.path("reconstructions")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    var environment: [String: String] { ["DIPTYCH_GPU_ENCODER_RECONSTRUCTION": path] }

    /// Every picture FFmpeg decodes from `files`, one after another, equals
    /// the GPU encoder's reconstruction of the output of `width`x`height`, byte for byte.
    func expectDecoded(_ files: [String], width: Int, height: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix("-\(width)x\(height).nv12") }
        let name = try #require(names.count == 1 ? names[0] : nil, "reconstructions of \(width)x\(height): \(names)", sourceLocation: sourceLocation)
        let reconstruction = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
        var decoded = Data()
        for f in files {
            let r = try run("/usr/bin/ffmpeg", ["-v", "error", "-i", f, "-f", "rawvideo", "-pix_fmt", "nv12", "-"])
            #expect(r.status == 0, "ffmpeg \(f): \(r.stderr)", sourceLocation: sourceLocation)
            decoded += r.stdoutData
        }
        let picture = width * height * 3 / 2
        let first = zip(decoded, reconstruction).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(decoded.count == reconstruction.count && first == nil,
                "decoded \(decoded.count / picture) pictures, reconstructed \(reconstruction.count / picture); first difference in picture \(first.map { $0 / picture } ?? -1)",
                sourceLocation: sourceLocation)
    }
}

/// Runs a program to its end (killed after `timeout`, with an issue
/// recorded) and returns its status and output. `signal` is sent `delay`
/// seconds after the start or, with `ready`, after it first holds (polled
/// every 50 ms; a program that ends or times out first records an issue):
/// a signal meant for a program at work, not one still starting on a loaded machine.
@discardableResult
func run(_ program: String, _ args: [String], in directory: String? = nil, stdin: FileHandle? = nil,
         signal: Int32? = nil, after delay: Double = 0, once ready: (() -> Bool)? = nil,
         timeout: Double = 300, environment: [String: String] = [:]) throws -> CLIResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: program)
    p.arguments = args
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = stdin ?? FileHandle.nullDevice
    try p.run()
    // Drain both pipes on their own threads so a chatty child never blocks.
    final class Box: @unchecked Sendable { var data = Data() }
    let o = Box(), e = Box()
    let g = DispatchGroup()
    DispatchQueue.global().async(group: g) { o.data = out.fileHandleForReading.readDataToEndOfFile() }
    DispatchQueue.global().async(group: g) { e.data = err.fileHandleForReading.readDataToEndOfFile() }
    let deadline = Date(timeIntervalSinceNow: timeout)
    if let signal {
        if let ready {
            while p.isRunning && Date() < deadline && !ready() { Thread.sleep(forTimeInterval: 0.05) }
            if !ready() { Issue.record("\(program) \(args): what the signal waits for never came (\(p.isRunning ? "timed out" : "it ended"))") }
        }
        Thread.sleep(forTimeInterval: delay)
        if p.isRunning { kill(p.processIdentifier, signal) }
    }
    while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    if p.isRunning { kill(p.processIdentifier, SIGKILL); Issue.record("\(program) \(args) timed out") }
    p.waitUntilExit()
    g.wait()
    return CLIResult(status: p.terminationStatus, stdout: String(decoding: o.data, as: UTF8.self),
                     stderr: String(decoding: e.data, as: UTF8.self),
                     signalled: p.terminationReason == .uncaughtSignal, stdoutData: o.data)
}

/// `diptych record` of a second of test pattern with `args` exits 2 with one
/// line naming `named`, and writes nothing into its folder.
func expectRefusedWritingNothing(_ args: [String], naming named: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "1"] + args,
                           in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(named), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).isEmpty)
}
