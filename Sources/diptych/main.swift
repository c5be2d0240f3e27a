import Diptych
import DiptychGPU
import DiptychMedia
import Foundation

let usage = """
usage: diptych <command> [options]

commands:
  demo       synthetic streams for ten seconds -> demo.mp4 + demo.png
  record     --primary SRC --secondary SRC --out FILE|URL [options]
  probe      EGL platform/GPU, GL renderer, encoders, VA-API profiles, cameras
  bench      layouts x sizes x formats -> table + JSON (diptych bench --help)

""" + TakeConfiguration.usage + """

exit status: 0 success, 1 runtime failure (what was recorded is finalized),
2 bad usage or bad input.

  -h, --help     show this help
  --version      print the version
"""

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("diptych: \(message)\n".utf8))
    leave(code)
}

/// Ends the process once a take is over (its output finalized): standard
/// output flushed, then `_exit`. The take's threads (source readers, the render
/// thread) signal that they are done before they have finished unwinding;
/// `exit` would run the libraries' destructors while such a thread is still
/// freeing its thread-local data (a double free in glibc's TSD teardown).
func leave(_ code: Int32) -> Never {
    fflush(nil)
    _exit(code)
}

let isTerminal = isatty(STDERR_FILENO) == 1

func stderrLine(_ s: String) {
    FileHandle.standardError.write(Data(((isTerminal ? "\r\u{1B}[K" : "") + s + "\n").utf8))
}

/// Runs one take with progress on a terminal, signals funnelled into a clean stop.
func record(_ config: TakeConfiguration) -> Never {
    var hooks = SessionHooks(log: { stderrLine("diptych: \($0)") })
    if isTerminal {
        hooks.progress = { (p: TakeProgress) in
            let line = "frames \(p.frames)  " + String(format: "%.1f fps  %.2fx realtime", p.fps, p.realtimeFactor)
                + "  secondary repeated \(p.secondaryRepeated) dropped \(p.secondaryDropped)"
            FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
        }
    }
    let session = RecordingSession(configuration: config, hooks: hooks)
    var sources: [DispatchSourceSignal] = []
    for sig in [SIGINT, SIGTERM] {
        signal(sig, SIG_IGN)
        let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        let name = sig == SIGINT ? "SIGINT" : "SIGTERM"
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
        if let data = try? enc.encode(summary) { print(String(decoding: data, as: UTF8.self)) }
    }
    switch result {
    case .success(let s):
        if isTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        if !config.json {
            stderrLine("diptych: \(s.frames) frames (" + String(format: "%.2f s", s.durationSeconds) + ") -> \(s.output) at "
                       + String(format: "%.1f fps (%.2fx realtime)", s.fps, s.realtimeFactor))
        }
        leave(0)
    case .failure(let e):
        fail(e.description, code: e.exitCode)
    }
}

MediaLibraries.setLogLevel(.error)
// Video frames are megabytes each. glibc returns such blocks to the kernel on
// free (mmap/trim), so every new frame would fault its pages in again
// (~750 page faults per 1080p frame). Keep freed blocks in the heap instead.
@_silgen_name("mallopt") func glibcMallopt(_ param: Int32, _ value: Int32) -> Int32
_ = glibcMallopt(-3 /* M_MMAP_THRESHOLD */, 256 << 20)
_ = glibcMallopt(-1 /* M_TRIM_THRESHOLD */, 512 << 20)
let args = Array(CommandLine.arguments.dropFirst())
switch args.first {
case nil, "-h", "--help", "help":
    print(usage)
case "--version":
    print("diptych \(DiptychVersion.string)")
case "record":
    let rest = Array(args.dropFirst())
    if rest.contains("-h") || rest.contains("--help") { print(usage); exit(0) }
    do { record(try TakeConfiguration.parse(arguments: rest)) }
    catch { fail(error.description, code: 2) }
case "demo":
    let rest = Array(args.dropFirst())
    if rest.contains("-h") || rest.contains("--help") {
        print("usage: diptych demo [record options]\nRecords ten seconds of synthetic streams (colour bars with a mirrored\ncounter inset) into demo.mp4, with demo.png as the preview.")
        exit(0)
    }
    let defaults = ["--primary", "testsrc:smpte:1280x720@30", "--secondary", "testsrc:counter:640x480@30",
                    "--layout", "pip", "--mirror-secondary", "--duration", "10",
                    "--out", "demo.mp4", "--preview", "demo.png"]
    do { record(try TakeConfiguration.parse(arguments: defaults + rest)) }
    catch { fail(error.description, code: 2) }
case "probe":
    Probe.run(arguments: Array(args.dropFirst()))
case "bench":
    Bench.run(arguments: Array(args.dropFirst()))
default:
    fail("unknown command '\(args[0])' (see diptych --help)", code: 2)
}
