import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation

/// `diptych bench`: layouts × canvas sizes × input formats × stages, with
/// FFmpeg and GStreamer beside ours where installed. See `BenchOptions.usage`
/// and bench/README.md.
public enum DiptychBench {
    /// Runs the benchmark; returns the exit status (0, 1 on a failed case, 2 on bad usage).
    public static func run(arguments: [String]) -> Int32 {
        let options: BenchOptions
        do throws(BenchUsageError) {
            guard let o = try BenchOptions.parse(arguments) else { print(BenchOptions.usage); return 0 }
            try o.checkOutputPaths()
            options = o
        } catch {
            FileHandle.standardError.write(Data("diptych bench: \(error.message)\n".utf8))
            return 2
        }
        guard let gpu = GPUSelection(parsing: options.gpu) else {
            FileHandle.standardError.write(Data("diptych bench: --gpu '\(options.gpu)': unknown selection\n".utf8))
            return 2
        }
        return Runner(options: options, gpu: gpu, arguments: arguments).run()
    }
}

/// One run of the matrix, with a progress line on a terminal.
final class Runner {
    let options: BenchOptions
    let gpu: GPUSelection
    let arguments: [String]
    let terminal = isatty(STDERR_FILENO) == 1
    var done = 0
    var total = 0
    var failures = 0

    init(options: BenchOptions, gpu: GPUSelection, arguments: [String]) {
        self.options = options; self.gpu = gpu; self.arguments = arguments
    }

    func progress(_ what: String) {
        guard terminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K[\(done + 1)/\(total)] \(what)".utf8))
    }

    func note(_ line: String) {
        FileHandle.standardError.write(Data(((terminal ? "\r\u{1B}[K" : "") + "diptych bench: " + line + "\n").utf8))
    }

    func run() -> Int32 {
        var machine = MachineInfo.current()
        let peers = Peers(options: options)
        let v = peers.versions()
        machine.ffmpeg = v.ffmpeg; machine.gstreamer = v.gstreamer
        let composite = options.stages.contains(.composite)
        let e2e = options.stages.contains(.endToEnd)
        let runners = options.pairs == nil ? 1 : pairRunnerNames.count
        total = (composite ? options.layouts.count * options.sizes.count * options.formats.count : 0)
            + (e2e ? options.e2eLayouts.count * options.e2eSizes.count * options.presets.count * runners : 0)
        var results: [BenchResult] = []
        var previews: [LayoutKind: VideoFrame] = [:]

        if composite {
            let stage = CompositeStage(options: options)
            for size in options.sizes {
                for layout in options.layouts {
                    for format in options.formats {
                        progress("composite \(layout.rawValue) \(size) \(format.rawValue)")
                        let wantPreview = options.sheet != nil && previews[layout] == nil
                        do {
                            let r = try stage.run(layout: layout, canvas: size, format: format, gpu: gpu,
                                                  preview: wantPreview ? { previews[layout] = $0 } : nil,
                                                  gpuName: { machine.gpu = $0 })
                            results.append(r)
                        } catch {
                            failures += 1
                            note("composite \(layout.rawValue) \(size) \(format.rawValue) failed: \(error)")
                        }
                        done += 1
                    }
                }
            }
        }
        var concurrency: [ConcurrencyResult] = []
        if e2e && options.pairs != nil {
            concurrency = runPairs()
        } else if e2e {
            let stage = EndToEndStage(options: options, log: { [unowned self] in self.note($0) })
            for size in options.e2eSizes {
                guard let inputs = inputs(stage, size) else { done += options.e2eLayouts.count * options.presets.count; continue }
                for layout in options.e2eLayouts {
                    for preset in options.presets {
                        var o = options
                        o.preset = preset
                        let presetStage = EndToEndStage(options: o, log: stage.log), peers = Peers(options: o)
                        let what = "end to end \(layout.rawValue) \(size)" + (options.presets.count > 1 ? " \(preset)" : "")
                        progress(what)
                        do {
                            results.append(try presetStage.run(layout: layout, inputs: inputs, peers: peers))
                        } catch {
                            failures += 1
                            note("\(what) failed: \(error)")
                        }
                        done += 1
                    }
                }
            }
        }
        var nvdec: NVDECStage.Result?
        if options.stages.contains(.nvdec) {
            let inputStage = EndToEndStage(options: options, log: { [unowned self] in self.note($0) })
            if let inputs = inputs(inputStage, options.e2eSizes.first ?? .hd1080) {
                progress("nvdec")
                let r = NVDECStage(options: options, log: { [unowned self] in self.note($0) }).run(inputs: inputs, gpu: gpu)
                if r.checks.isEmpty || r.checks.contains(where: { !$0.passed }) || r.rates.isEmpty { failures += 1 }
                nvdec = r
            }
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }

        var report = BenchReport(date: ISO8601DateFormatter().string(from: Date()),
                                 command: (["diptych", "bench"] + arguments).joined(separator: " "),
                                 machine: machine, results: results, concurrency: concurrency.isEmpty ? nil : concurrency)
        report.nvdec = nvdec
        print(Report.markdown(report))
        if let path = options.json {
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            do { try enc.encode(report).write(to: URL(fileURLWithPath: path)) } catch {
                note(BenchOptions.writeFailure("--json", path, error)); failures += 1
            }
        }
        if concurrency.contains(where: { $0.maxRealtimePairs == 0 && $0.runner == "diptych" }) { failures += 1 }
        if let path = options.chart, !results.isEmpty {
            do { try Report.svg(report).write(toFile: path, atomically: true, encoding: .utf8) } catch {
                note(BenchOptions.writeFailure("--chart", path, error)); failures += 1
            }
        }
        if let path = options.sheet {
            let order = options.layouts.filter { previews[$0] != nil }
            if let sheet = Report.contactSheet(order.map { (label: $0.rawValue, frame: previews[$0]!) }) {
                do {
                    try PNGWriter.write(sheet, to: path)
                    note("\(path): " + order.map(\.rawValue).joined(separator: ", ") + " (left to right, top to bottom, each tile labelled)")
                } catch { note(BenchOptions.writeFailure("--sheet", path, error)); failures += 1 }
            }
        }
        return failures == 0 ? 0 : 1
    }

    /// The end-to-end input files for `size` (made once), or nil after noting why not.
    func inputs(_ stage: EndToEndStage, _ size: PixelSize) -> EndToEndStage.Inputs? {
        progress("end to end: inputs \(size)")
        do { return try stage.inputs(canvas: size) } catch {
            failures += 1
            note("inputs for \(size): \(error)")
            return nil
        }
    }

    /// The runners `--pairs` times.
    var pairRunnerNames: [String] {
        options.pairRunners ?? (options.peers.contains(.ffmpeg) ? PairRunners.defaultNames : ["diptych"])
    }

    /// `--pairs`: for each size, layout and preset, ours and FFmpeg's configurations, N takes at once.
    func runPairs() -> [ConcurrencyResult] {
        var out: [ConcurrencyResult] = []
        let inputStage = EndToEndStage(options: options, log: { [unowned self] in self.note($0) })
        let stage = ConcurrencyStage(options: options, log: { [unowned self] in self.note($0) })
        if options.peers.contains(.gstreamer) { note("--pairs runs FFmpeg as the peer (GStreamer is timed one pair at a time)") }
        for size in options.e2eSizes {
            guard let inputs = inputs(inputStage, size) else {
                done += options.e2eLayouts.count * options.presets.count * pairRunnerNames.count
                continue
            }
            for layout in options.e2eLayouts {
                for preset in options.presets {
                    var o = options
                    o.preset = preset
                    let peers = Peers(options: o)
                    let c = PairCase(layout: layout, inputs: inputs, preset: preset, bitrate: options.bitrate, gop: options.gop,
                                     gpu: options.gpu, workDir: options.workDir, mirrored: options.mirror, encoder: options.encoder, slices: options.slices)
                    for r in PairRunners.all(peers, serve: options.serve) where pairRunnerNames.contains(r.name) {
                        out.append(stage.measure(r, c, progress: { [unowned self] in self.progress($0) }))
                        done += 1
                    }
                }
            }
        }
        return out
    }
}
