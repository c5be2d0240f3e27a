import Diptych
import DiptychCore
import DiptychGPU
import DiptychMedia
import Foundation

/// `--stages nvdec`: NVDEC against the CPU decoder on the end-to-end inputs
/// (H.264, a 1080p60 primary and a 720p30 secondary) and on a 10-bit HEVC
/// primary alone. `diptych record --decoder nvdec` and the same take with
/// `--decoder cpu` (two processes, the CLI as users run it), their outputs
/// compared frame by frame (PSNR of Y, U and V); then composites per second with
/// NVDEC-decoded inputs in CUDA memory (CUDA–GL interop) against the same
/// pictures from host memory, `--streams` compositors sharing one context.
struct NVDECStage {
    let options: BenchOptions
    let log: (String) -> Void

    /// What `--decoder nvdec` wrote against `--decoder cpu`.
    struct DecodeCheck: Sendable, Codable {
        /// The inputs (`h264 1920x1080@60 + h264 1280x720@30`).
        var inputs: String
        var commands: [String]
        /// Each take's decoders as its summary states them (`stream: decoder (reason)`).
        var decoders: [String: [String]]
        var frames: [String: Int]
        /// The lowest and mean PSNR over the frames, dB (99 where every frame is identical).
        var minimumPSNR: [String: Double]
        var meanPSNR: [String: Double]
        /// Frames whose pictures are byte for byte the same.
        var identicalFrames: Int
        var passed: Bool
        var notes: [String] = []
    }

    struct Result: Sendable, Codable {
        /// NVDEC on this machine (`diptych probe`'s lines).
        var capabilities: String
        var checks: [DecodeCheck] = []
        var rates: [NVDECCompositeRate] = []
        var notes: [String] = []
    }

    static let psnrThreshold = 45.0

    func run(inputs: EndToEndStage.Inputs, gpu: GPUSelection) -> Result {
        var result = Result(capabilities: NVDECReport.current().description)
        do {
            result.checks.append(try decodeCheck(primary: inputs.primary, secondary: inputs.secondary,
                                                 inputs: "h264 \(inputs.primarySize)@60 + h264 \(inputs.secondarySize)@30"))
        } catch { result.notes.append("decode check (H.264): \(error)") }
        do {
            let hevc = try tenBitInput()
            result.checks.append(try decodeCheck(primary: hevc, secondary: nil, inputs: "hevc Main 10 1280x720@30 alone"))
        } catch { result.notes.append("decode check (10-bit HEVC): \(error)") }
        do {
            let rates = try NVDECComposite(options: options, gpu: gpu).measure(inputs: inputs)
            result.rates = rates
        } catch {
            result.notes.append("composite with NVDEC inputs: \(error)")
        }
        return result
    }

    /// A 10-bit HEVC file (libx265 Main 10, 1280x720, 30 fps), made once with the ffmpeg CLI.
    func tenBitInput() throws -> String {
        let path = "\(options.workDir)/hevc10-1280x720-30-\(String(format: "%gs", options.duration)).mp4"
        if FileManager.default.fileExists(atPath: path) { return path }
        guard let ffmpeg = Tools.find("ffmpeg") else { throw BenchRunError("no ffmpeg CLI to make \(path)") }
        log("making \(path)")
        let r = Tools.run(ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
                                   "-t", "\(options.duration)", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error",
                                   "-pix_fmt", "yuv420p10le", path + ".partial.mp4"])
        guard r.status == 0 else { throw BenchRunError("ffmpeg could not make \(path): \(r.stderrTail)") }
        try FileManager.default.moveItem(atPath: path + ".partial.mp4", toPath: path)
        return path
    }

    /// The two takes, and their outputs compared.
    func decodeCheck(primary: String, secondary: String?, inputs: String) throws -> DecodeCheck {
        guard let exe = PairRunners.diptychExecutable() else { throw BenchRunError("the diptych executable was not found") }
        var check = DecodeCheck(inputs: inputs, commands: [], decoders: [:], frames: [:], minimumPSNR: [:], meanPSNR: [:],
                                identicalFrames: 0, passed: false)
        var outputs: [String: String] = [:]
        let tag = secondary == nil ? "single" : "pair"
        for decoder in ["nvdec", "cpu"] {
            let out = "\(options.workDir)/decoder-\(tag)-\(decoder).mp4"
            let args = ["record", "--primary", primary] + (secondary.map { ["--secondary", $0] } ?? []) + ["--layout", "pip",
                        "--preset", options.preset, "--bitrate", "\(options.bitrate)", "--audio", "none", "--gpu", options.gpu,
                        "--decoder", decoder, "--out", out, "--json"]
            check.commands.append((["diptych"] + args).joined(separator: " "))
            log("diptych record --decoder \(decoder)")
            let r = Tools.run(exe, args)
            guard r.status == 0 else { throw BenchRunError("diptych record --decoder \(decoder): exit \(r.status): \(r.stderrTail)") }
            if let data = r.stdout.data(using: .utf8), let summary = try? JSONDecoder().decode(TakeSummary.self, from: data) {
                check.decoders[decoder] = summary.decoders.map { d in
                    "\(d.stream): \(d.decoder) (\(d.reason))" + (d.fallback.map { "; fell back \($0)" } ?? "")
                }
                check.frames[decoder] = summary.frames
            }
            outputs[decoder] = out
        }
        let a = try MediaSources.open(.url(outputs["nvdec"]!)), b = try MediaSources.open(.url(outputs["cpu"]!))
        defer { a.close(); b.close() }
        var psnr: [[Double]] = [[], [], []]
        while true {
            let x = try a.nextFrame(), y = try b.nextFrame()
            guard let x, let y else {
                if x != nil || y != nil { check.notes.append("the outputs have different frame counts") }
                break
            }
            let p = PSNR.planes(x, y)
            if p.allSatisfy({ $0 >= PSNR.identical }) { check.identicalFrames += 1 }
            for i in 0..<3 { psnr[i].append(p[i]) }
        }
        for (i, name) in ["Y", "U", "V"].enumerated() where !psnr[i].isEmpty {
            check.minimumPSNR[name] = psnr[i].min()
            check.meanPSNR[name] = psnr[i].reduce(0, +) / Double(psnr[i].count)
        }
        let streams = secondary == nil ? 1 : 2
        let nvdecUsed = check.decoders["nvdec"].map { $0.count == streams && $0.allSatisfy { $0.contains(": nvdec (") && !$0.contains("fell back") } } ?? false
        if !nvdecUsed { check.notes.append("the --decoder nvdec take did not decode every stream with NVDEC throughout") }
        check.passed = nvdecUsed && check.notes.isEmpty && !psnr[0].isEmpty && psnr.allSatisfy { ($0.min() ?? 0) >= Self.psnrThreshold }
        return check
    }
}

/// Peak signal-to-noise ratio of 8-bit YUV 4:2:0 frames, per plane.
enum PSNR {
    /// What identical planes read as (finite, for JSON).
    static let identical = 99.0

    /// Y, U and V of two frames of one size (NV12 or I420), in dB.
    static func planes(_ a: VideoFrame, _ b: VideoFrame) -> [Double] {
        guard a.width == b.width, a.height == b.height else { return [0, 0, 0] }
        return (0..<3).map { plane in
            let (w, h) = plane == 0 ? (a.width, a.height) : (a.width / 2, a.height / 2)
            var sum = 0.0
            for y in 0..<h {
                for x in 0..<w {
                    let d = Double(sample(a, plane, x, y)) - Double(sample(b, plane, x, y))
                    sum += d * d
                }
            }
            let mse = sum / Double(w * h)
            return mse == 0 ? identical : min(identical, 10 * log10(255 * 255 / mse))
        }
    }

    /// Sample (x, y) of plane 0 (Y), 1 (U) or 2 (V).
    static func sample(_ f: VideoFrame, _ plane: Int, _ x: Int, _ y: Int) -> UInt8 {
        switch (f.format, plane) {
        case (.nv12, 1), (.nv12, 2):
            let p = f.planes[1]
            return p.baseAddress.load(fromByteOffset: y * p.stride + x * 2 + plane - 1, as: UInt8.self)
        default:
            let p = f.planes[plane]
            return p.baseAddress.load(fromByteOffset: y * p.stride + x, as: UInt8.self)
        }
    }
}

extension Report {
    /// `--stages nvdec`: the decode check and the composite rates.
    static func nvdec(_ r: NVDECStage.Result) -> String {
        var s = "### NVDEC\n\n" + r.capabilities.split(separator: "\n").map { "    \($0)" }.joined(separator: "\n") + "\n\n"
        for c in r.checks {
            s += "`--decoder nvdec` against `--decoder cpu`, \(c.inputs): " + (c.passed ? "**passed**" : "**failed**")
                + " (every plane of every frame ≥ \(f(NVDECStage.psnrThreshold, 0)) dB)\n\n"
            for cmd in c.commands { s += "    \(cmd)\n" }
            s += "\n| take | frames | decoders |\n| --- | ---: | --- |\n"
            for d in ["nvdec", "cpu"] {
                s += "| --decoder \(d) | \(c.frames[d].map(String.init) ?? "–") | \((c.decoders[d] ?? []).joined(separator: "; ")) |\n"
            }
            s += "\nPSNR, dB (lowest · mean over frames): " + ["Y", "U", "V"].map { "\($0) \(f(c.minimumPSNR[$0], 2)) · \(f(c.meanPSNR[$0], 2))" }
                .joined(separator: ", ") + "; identical frames: \(c.identicalFrames)\n"
            for n in c.notes { s += "- \(n)\n" }
            s += "\n"
        }
        if !r.rates.isEmpty {
            s += "\n| inputs | streams | frames/stream | composites/s | CUDA frames per map · render-thread ms | GPU ms upload · composite · nv12 | CPU ms/composite | path |\n"
            s += "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |\n"
            for x in r.rates {
                s += "| \(x.inputs) (\(x.primary) + \(x.secondary)) | \(x.streams)\((x.contexts ?? 1) > 1 ? " in \(x.contexts!) contexts" : "") | \(x.framesPerStream) | \(f(x.compositesPerSecond)) "
                    + "| \(f(x.cudaFramesPerMap, 1)) · \(f(x.cudaCPUMsPerComposite, 3)) | \(f(x.gpuUploadMs, 3)) · \(f(x.gpuCompositeMs, 3)) · \(f(x.gpuNV12Ms, 3)) "
                    + "| \(f(x.cpuMsPerComposite, 3)) | \(x.path) |\n"
            }
            if let e = r.rates.first?.encoder {
                s += "\nEvery composite encoded by the GPU H.264 encoder (\(e)) instead of read back: "
                    + r.rates.map { "\($0.inputs) \(f($0.bytesPerPicture, 0)) bytes a picture" }.joined(separator: ", ") + ".\n"
            }
            s += "\nThe render thread (one per context, every compositor's GL calls; several contexts' added up):\n\n"
                + "| inputs | busy | CPU ms/composite | items/composite | ms/composite in upload · composite · nv12 · CUDA calls |\n"
                + "| --- | ---: | ---: | ---: | --- |\n"
            for x in r.rates {
                let p = x.renderThreadMsByPass ?? [:]
                s += "| \(x.inputs) | \(x.renderThreadBusy.map { String(format: "%.0f %%", $0 * 100) } ?? "–") "
                    + "| \(f(x.renderThreadCPUMsPerComposite, 3)) | \(f(x.renderThreadItemsPerComposite, 2)) "
                    + "| " + ["upload", "composite", "nv12", "cuda"].map { f(p[$0], 3) }.joined(separator: " · ") + " |\n"
            }
            s += "\nIts busy time per composite by phase (ms; poll is part of begin, fence and checks of finish), and items per wake-up:\n\n"
                + "| inputs | " + RenderPhase.allCases.map(\.name).joined(separator: " | ") + " | items/wake-up |\n"
                + "| --- |" + String(repeating: " ---: |", count: RenderPhase.allCases.count + 1) + "\n"
            for x in r.rates {
                let p = x.renderThreadMsByPhase ?? [:]
                s += "| \(x.inputs) | " + RenderPhase.allCases.map { f(p[$0.name], 4) }.joined(separator: " | ")
                    + " | \(f(x.renderThreadItemsPerWakeup, 2)) |\n"
            }
            if let a = r.rates.first(where: { $0.inputs == "nvdec" }), let b = r.rates.first(where: { $0.inputs == "host" }) {
                s += "\nNVDEC inputs: \(f(a.compositesPerSecond / b.compositesPerSecond, 2))× the composites/s of the same pictures from host memory.\n"
            }
        }
        for n in r.notes { s += "- \(n)\n" }
        return s
    }
}
