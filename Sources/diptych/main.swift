import Diptych
import DiptychGPU
import DiptychMedia
import DiptychOptions
import DiptychServer
import Foundation

// The driver's settings before any thread starts (docs/ENVIRONMENT.md).
DriverEnvironment.apply()

let usage = """
usage: diptych <command> [options]

commands:
  demo       synthetic streams for ten seconds -> demo.mp4 + demo.png
  record     --primary SRC --secondary SRC --out FILE|URL [options]
  probe      EGL platform/GPU, GL renderer, encoders, VA-API profiles, NVDEC, cameras
  bench      layouts x sizes x formats -> table + JSON (diptych bench --help)
  serve      many takes on one GPU behind an HTTP API (diptych serve --help)

""" + TakeConfiguration.usage + """


exit status: 0 success, 1 runtime failure (what was recorded is finalized)
or output lost on stdout, 2 bad usage or bad input.

environment: DIPTYCH_FFMPEG_LOG=error|warning|info|verbose prints FFmpeg's own
messages (none by default); DIPTYCH_GPU_* and DIPTYCH_CUDA_* compare GPU paths
(docs/ENVIRONMENT.md; an unknown one or value is an error).

  -h, --help     show this help
  --version      print the version
"""

/// Runs one take with progress on a terminal; SIGINT, SIGTERM and SIGHUP
/// (a closed terminal) are funnelled into a clean stop.
func record(_ config: TakeConfiguration) -> Never {
    var hooks = SessionHooks(log: { Console.line("diptych: \($0)") })
    if Console.isTerminal {
        hooks.progress = { (p: TakeProgress) in
            let line = "frames \(p.frames)  " + String(format: "%.1f fps  %.2fx realtime", p.fps, p.realtimeFactor)
                + "  secondary repeated \(p.secondaryRepeated) dropped \(p.secondaryDropped)"
            Console.raw("\r\u{1B}[K\(line)")
        }
    }
    let session = RecordingSession(configuration: config, hooks: hooks)
    var sources: [DispatchSourceSignal] = []
    for (sig, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP")] {
        signal(sig, SIG_IGN)
        let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        s.setEventHandler {
            // Before the take has started (a source still opening, e.g. stdin
            // waiting for its header) nothing is recorded: leave at once.
            guard session.hasStarted else { fail("stopped by \(name) before the take started; nothing was recorded", code: 1) }
            session.stop(StopReason.requested(name))
        }
        s.resume()
        sources.append(s)
    }
    let result: Result<TakeSummary, SessionError>
    do throws(SessionError) { result = .success(try session.run()) } catch { result = .failure(error) }
    if config.json, let summary = session.summary {
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let data = try? enc.encode(summary) { Console.out(String(decoding: data, as: UTF8.self)) }
    }
    switch result {
    case .success(let s):
        if Console.isTerminal { Console.raw("\r\u{1B}[K") }
        if !config.json {
            Console.line("diptych: \(s.frames) frames (" + String(format: "%.2f s", s.durationSeconds) + ") -> \(s.output) at "
                         + String(format: "%.1f fps (%.2fx realtime)", s.fps, s.realtimeFactor))
        }
        leave(0)
    case .failure(let e):
        fail(e.description, code: e.exitCode)
    }
}

/// `diptych record` arguments, or the one-line error (exit 2).
func takeConfiguration(_ arguments: [String]) -> TakeConfiguration {
    do { return try TakeConfiguration.parse(arguments: arguments) } catch { fail(error.description, code: 2) }
}

Console.ignoreBrokenPipes()
// FFmpeg's own messages stay out of the one-line errors (Diptych's say what
// failed and where); DIPTYCH_FFMPEG_LOG=error|warning|info|verbose shows them.
MediaLibraries.setLogLevel(MediaLibraries.levelFromEnvironment ?? .quiet)
let args = Array(CommandLine.arguments.dropFirst())
// The GPU settings of the environment (docs/ENVIRONMENT.md): an unknown one is bad usage.
if case .failure(let e) = GPURequest.process {
    FileHandle.standardError.write(Data("diptych: \(e)\n".utf8))
    exit(2)
}
switch args.first {
case nil:
    // No command is a usage error: the usage goes to stderr.
    Console.raw(usage + "\n")
    leave(2)
case "-h", "--help", "help":
    Console.out(usage)
    leave(0)
case "--version":
    Console.out("diptych \(DiptychVersion.string)")
    leave(0)
case "record":
    let rest = Array(args.dropFirst())
    if rest.contains("-h") || rest.contains("--help") { Console.out(usage); leave(0) }
    record(takeConfiguration(rest))
case "demo":
    let rest = Array(args.dropFirst())
    if rest.contains("-h") || rest.contains("--help") {
        Console.out("usage: diptych demo [record options]\nRecords ten seconds of synthetic streams (colour bars with a mirrored\ncounter inset) into demo.mp4, with demo.png as the preview.")
        leave(0)
    }
    let defaults = ["--primary", "testsrc:smpte:1280x720@30", "--secondary", "testsrc:counter:640x480@30",
                    "--layout", "pip", "--mirror-secondary", "--duration", "10",
                    "--out", "demo.mp4", "--preview", "demo.png"]
    record(takeConfiguration(defaults + rest))
case "probe":
    Probe.run(arguments: Array(args.dropFirst()))
case "bench":
    Bench.run(arguments: Array(args.dropFirst()))
case "serve":
    if args.contains("-h") || args.contains("--help") { Console.out(ServeOptions.usage); leave(0) }
    ServeCommand.run(arguments: Array(args.dropFirst()))
default:
    fail("unknown command '\(ConfigurationError.quoted(args[0]))' (see diptych --help)", code: 2)
}
