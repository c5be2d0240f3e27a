import DiptychCore
import Foundation

/// Timing an end-to-end case: ours is `diptych record` (this executable,
/// the CLI's defaults for the layout) and each peer its own program, every
/// one a child process timed from start to exit (`wait4`: wall, CPU, peak
/// memory, page faults; resident memory sampled). With `--repeat N` they
/// run in turn N times (ours, FFmpeg, GStreamer, ours, …) so a machine
/// shared with other work loads them alike; figures are medians, ratios the
/// median of the paired runs' ratios.
extension EndToEndStage {
    func run(layout: LayoutKind, inputs: Inputs, peers: Peers) throws -> BenchResult {
        let out = "\(options.workDir)/diptych-\(layout.rawValue)-\(inputs.primarySize).mp4"
        guard let exe = PairRunners.diptychExecutable() else { throw BenchRunError("the diptych executable was not found") }
        let args = ourArguments(layout: layout, inputs: inputs, out: out)
        var ours: [RunFigures] = [], theirs: [BenchPeer: [RunFigures]] = [:], peerNotes: [BenchPeer: String] = [:]
        var path: String?, notes: [String] = []
        let commands = Dictionary(uniqueKeysWithValues: options.peers.map { ($0, peers.command($0, layout: layout, inputs: inputs)) })
        for _ in 0..<options.repeats {
            let r = try timed(exe, args, output: out, expected: inputs.frames)
            guard r.failure == nil else { throw BenchRunError("diptych record: \(r.failure!)") }
            var f = r.figures
            if let summary = try? JSONDecoder().decode(OurSummary.self, from: Data(r.stdout.utf8)), let stages = summary.cpuStages {
                // The process's CPU time outside the take's stages (start-up, exit) counts as other.
                var ms = StageTimes()
                for s in PipelineStage.allCases { ms[s] = stages[s] * 1000 / Double(max(f.frames, 1)) }
                ms.other += max(0, f.cpuMsPerFrame - ms.total)
                f.stageMsPerFrame = ms
            }
            if let at = r.stderr.range(of: "diptych-gpu: plan: ") {
                path = "plan: " + String(r.stderr[at.upperBound...].prefix { $0 != "\n" })
            }
            ours.append(f)
            for p in options.peers where peerNotes[p] == nil {
                let c = commands[p]!
                guard let pexe = c.executable else { peerNotes[p] = "\(c.shown.split(separator: " ")[0]) not installed: skipped"; continue }
                let pr = try timed(pexe, c.arguments, output: c.output, expected: inputs.frames)
                if let failure = pr.failure { peerNotes[p] = failure; continue }
                theirs[p, default: []].append(pr.figures)
            }
        }
        for f in ours where f.frames != inputs.frames { notes.append("wrote \(f.frames) frames, expected \(inputs.frames)") }
        if let n = inputs.note { notes.append(n) }
        let loads = ours.map(\.loadAverage).map { String(format: "%.1f", $0) }.joined(separator: ", ")
        notes.append("load average (1 min) at the start of each run of ours: \(loads)")
        var r = Self.summarize(ours, layout: layout, inputs: inputs)
        r.preset = options.preset
        r.path = path
        r.notes = Array(Set(notes)).sorted()
        r.command = ChildCommand(executable: "diptych", arguments: args, stdoutPath: "", stderrPath: "").shown
        for p in options.peers {
            var pr = PeerResult(peer: p, command: commands[p]!.shown, note: peerNotes[p])
            if let runs = theirs[p], !runs.isEmpty {
                pr.runs = runs
                pr.frames = runs.last!.frames
                pr.fps = median(runs.map(\.fps))
                pr.cpuMsPerFrame = median(runs.map(\.cpuMsPerFrame))
                pr.peakRSSMiB = median(runs.map(\.peakRSSMiB))
                let ratios = zip(ours, runs).map { $0.fps / $1.fps }
                pr.ratio = median(ratios)
                pr.ratioRange = [ratios.min()!, ratios.max()!]
                if let a = r.peakRSSMiB, let b = pr.peakRSSMiB, b > 0 { pr.memoryRatio = a / b }
                if let bad = runs.first(where: { $0.frames != inputs.frames }) {
                    pr.note = "wrote \(bad.frames) frames, expected \(inputs.frames) (not comparable)"
                }
            }
            r.peers.append(pr)
        }
        return r
    }

    /// The medians of our runs as a result row.
    static func summarize(_ runs: [RunFigures], layout: LayoutKind, inputs: Inputs) -> BenchResult {
        let fps = median(runs.map(\.fps)) ?? 0
        var r = BenchResult(stage: .endToEnd, layout: layout.rawValue, canvas: "\(inputs.primarySize)", input: "h264 yuv420p files",
                            frames: runs.last?.frames ?? 0, seconds: median(runs.map(\.seconds)) ?? 0, fps: fps,
                            realtime60: fps / 60, cpuMsPerFrame: median(runs.map(\.cpuMsPerFrame)) ?? 0)
        r.runs = runs
        r.peakRSSMiB = median(runs.map(\.peakRSSMiB))
        let staged = runs.compactMap(\.stageMsPerFrame)
        if !staged.isEmpty {
            var m = StageTimes()
            for s in PipelineStage.allCases { m[s] = median(staged.map { $0[s] }) ?? 0 }
            r.stageMsPerFrame = m
        }
        return r
    }

    /// `diptych record` for the case, as a user would run it.
    func ourArguments(layout: LayoutKind, inputs: Inputs, out: String) -> [String] {
        ["record", "--primary", inputs.primary, "--secondary", inputs.secondary, "--layout", layout.rawValue]
            + (options.mirror ? ["--mirror-secondary"] : [])
            + ["--preset", options.preset, "--bitrate", "\(options.bitrate)", "--keyframe-interval", "\(Double(options.gop) / 60)", "--audio", "none",
               "--gpu", options.gpu, "--out", out, "--json"]
    }

    /// One whole-process run: its figures (frames counted in its output file)
    /// and what it printed, or why it failed.
    func timed(_ exe: String, _ args: [String], output: String, expected: Int) throws
        -> (figures: RunFigures, stdout: String, stderr: String, failure: String?) {
        try? FileManager.default.removeItem(atPath: output)
        let cmd = ChildCommand(executable: exe, arguments: args, stdoutPath: output + ".stdout", stderrPath: output + ".stderr")
        defer { for f in [cmd.stdoutPath, cmd.stderrPath] { try? FileManager.default.removeItem(atPath: f) } }
        let load = loadAverage()
        // A run slower than a tenth of real time is stuck.
        let deadline = max(120, Double(expected) / 60 * 10)
        let e: ChildOutcome
        do throws(ChildGroup.SpawnError) { e = try ChildGroup.run([cmd], deadline: deadline)[0] } catch { throw BenchRunError(error.description) }
        let stdout = (try? String(contentsOfFile: cmd.stdoutPath, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: cmd.stderrPath, encoding: .utf8)) ?? ""
        let frames = VideoTrackCount.of(output)?.frames ?? 0
        let f = RunFigures(frames: frames, seconds: e.seconds, fps: Double(frames) / max(e.seconds, 1e-9),
                           cpuMsPerFrame: e.cpuSeconds * 1000 / Double(max(frames, 1)), peakRSSMiB: e.peakRSSMiB,
                           minorFaults: e.minorFaults, rssGrowthMiB: e.rssGrowthMiB, loadAverage: load)
        var failure: String?
        if e.killed { failure = "still running after \(Int(deadline)) s (stopped): \(e.stderrTail)" }
        else if e.status != 0 { failure = "failed (exit \(e.status)): \(e.stderrTail)" }
        else if frames == 0 { failure = "could not read the output's video track" }
        return (f, stdout, stderr, failure)
    }

    /// The part of `diptych record --json`'s summary read here.
    struct OurSummary: Decodable {
        var frames: Int
        var cpuStages: StageTimes?
    }
}
