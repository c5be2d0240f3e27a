import Diptych
import DiptychOptions
import DiptychCore
import DiptychCUDA
import DiptychGPU
import DiptychMedia
import Foundation

/// `diptych probe`: what this machine offers Diptych.
enum Probe {
    static func run(arguments: [String]) -> Never {
        if arguments.contains("-h") || arguments.contains("--help") {
            Console.out("usage: diptych probe [--gpu auto|software|N|/dev/dri/renderDN] [--json]\nPrints the EGL display ladder, the GL context taken, encoders, VA-API profiles, NVDEC capabilities, cameras and library versions (--json: as one JSON object).")
            leave(0)
        }
        var selectionText = "auto"
        var json = false
        do {
            for (flag, value) in try ArgumentReader(flags: ["--gpu": true, "--json": false]).read(arguments) {
                if flag == "--json" { json = true; continue }
                try TakeConfiguration.checkGPU(value!)
                selectionText = value!
            }
        } catch { fail("probe: \(error)", code: 2) }
        guard let selection = GPUSelection(parsing: selectionText) else {
            fail("--gpu '\(selectionText)': expected auto, software, an index or /dev/dri/renderDN", code: 2)
        }
        if json {
            let report = ProbeReport.current(selection)
            let e = JSONEncoder()
            e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            guard let data = try? e.encode(report) else { fail("probe: the report could not be written as JSON", code: 1) }
            print(String(decoding: data, as: UTF8.self))
            leave(0)
        }
        print("diptych \(DiptychVersion.string)")
        print("\nEGL display ladder (\(selection)):")
        for rung in GPUCompositor.probeLadder(selection) { print("  \(rung)") }
        print("\nGL context:")
        do {
            // As `diptych record` makes it: the direct-copy shortcut on software renderers only.
            let gpu = try GPUCompositor(selection: selection, directCopy: .auto)
            print("  \(gpu.info)")
            print("  \(gpu.plan)")
            for (name, present) in gpu.info.capabilities.summary { print("  \(present ? "yes" : "no ")  \(name)") }
            print("  encoder targets (VA-API from the render target): \(describe(gpu.encoderTargetSupport()))")
            let info = gpu.info
            print("  GPU H.264 encoder (--encoder gpu): " + gpuEncoderLine(info))
            print("  NVENC (--encoder nvenc): " + nvencLines(gpu.cudaDevice()).joined(separator: "\n    "))
            gpu.shutdown()
        } catch {
            print("  none: \(error)")
        }
        print("")
        print(MediaProbeReport.current().description)
        print("\nCameras (V4L2), best first (\(CameraRanking.rule)):")
        for line in cameraLines(CameraListing.devices()) { print("  \(line)") }
        print("  capture: \(captureLine)")
        print("  a take opens \(CameraModeChoice.rule)")
        leave(0)
    }

    /// Whether the GPU H.264 encoder runs on the context `info` describes.
    static func gpuEncoderLine(_ info: GPUInfo) -> String {
        info.capabilities.computeShaders
            ? "runs: GLES compute on \(info.renderer)\(info.isSoftware ? " (software renderer)" : ""); --encoder auto does not take it yet"
            : "unavailable: \(info.renderer) has no compute shaders (\(info.version))"
    }

    /// NVENC on the compositor's CUDA device, a line a codec: its engine and
    /// limits, or `absent: <reason>` (one line where both codecs are absent
    /// for one reason). A session is opened and closed to find out.
    static func nvencLines(_ device: Result<Int, CUDAUnavailable>) -> [String] {
        NVENCFacts.probeLines(VideoCodec.allCases.map { ($0, NVENCProbe.facts(codec: $0, cudaDevice: device)) })
    }

    /// Where capture comes from (libavdevice's video4linux2 input), or why there is none.
    static var captureLine: String {
        switch CaptureSupport.status {
        case .success(let from): return "FFmpeg's video4linux2 input (\(from))"
        case .failure(let e): return "unavailable: \(e)"
        }
    }

    /// The cameras as probe prints them: each ranked device as `camera:N`
    /// with its best mode and every format's sizes and rates, then the
    /// nodes that capture no video; "none" when there are none.
    static func cameraLines(_ devices: [CameraDevice]) -> [String] {
        if devices.isEmpty { return ["none (no /dev/video*)"] }
        let ranked = CameraRanking.rank(devices)
        var lines: [String] = []
        for (i, r) in ranked.enumerated() {
            lines.append("camera:\(i)  \(r.device.path)  \(r.device.name) (\(r.device.driver)); best \(r.mode)")
            for f in r.device.formats {
                let sizes = f.sizes.map { s in "\(s.width)x\(s.height)@" + s.rates.map { CameraMode(format: f.fourcc, compressed: f.compressed, size: PixelSize(width: s.width, height: s.height), rate: $0).rateText }.joined(separator: "/") }
                lines.append("    \(f.fourcc) (\(f.description)\(f.compressed ? ", compressed" : "")): \(sizes.joined(separator: " "))")
            }
        }
        for d in devices where !ranked.contains(where: { $0.device.path == d.path }) {
            lines.append("--        \(d.path)  \(d.name) (\(d.driver)): \(d.capture ? "no capture modes" : "no video capture")")
        }
        return lines
    }

    /// What the GPU offers the zero-copy path; a take tries the modifiers when it starts.
    static func describe(_ s: EncoderTargetSupport) -> String {
        guard s.platform == .gbm, let node = s.renderNode else { return "no: the GPU runs on the EGL \(s.platform) platform, not GBM on a render node" }
        if !s.missing.isEmpty { return "no: \(node) lacks \(s.missing.joined(separator: ", "))" }
        if s.renderableModifiers.isEmpty { return "no: \(node) renders R8 and GR88 dma-buf planes with no modifier" }
        return "GBM on \(node); R8/GR88 planes render with " + s.renderableModifiers.map { ModifierTrial.name($0) }.joined(separator: ", ")
    }
}

/// `diptych probe --json`: the same report as one JSON object.
struct ProbeReport: Encodable {
    struct Candidate: Encodable { var name: String; var hardware: Bool; var available: Bool; var reason: String; var device: String? }
    struct VAProfile: Encodable { var profile: String; var entrypoints: [String] }
    struct VADevice: Encodable { var path: String; var vendor: String?; var vaVersion: String?; var error: String?; var profiles: [VAProfile] }
    struct VAAPI: Encodable { var directory: String; var problem: String?; var devices: [VADevice] }
    struct NVDECDeviceReport: Encodable { var label: String; var problem: String?; var support: [NVDECCodecSupport] }
    struct NVDEC: Encodable { var problem: String?; var devices: [NVDECDeviceReport]; var ffmpegDecoders: [String: String] }
    struct GL: Encodable {
        var info: GPUInfo?
        var plan: GPUPlan?
        var planLine: String?
        var encoderTargets: String?
        var gpuEncoder: String?
        /// NVENC on the context's CUDA device: per codec, `present on …` or `absent: <reason>`.
        var nvenc: [String: String]?
        /// Why no context could be made, else nil.
        var error: String?
    }
    var version: String
    var ladder: [String]
    var gl: GL
    var libraries: [String]
    var encoders: [String: [Candidate]]
    var autoEncoder: [String: String]
    var vaapi: VAAPI
    var nvdec: NVDEC
    /// As `GET /v1/sources` gives them: ranked, then the nodes that capture nothing.
    var cameras: [SourceCamera]
    /// Where camera capture comes from, or `unavailable: <reason>`.
    var capture: String

    static func current(_ selection: GPUSelection) -> ProbeReport {
        var gl = GL()
        do {
            let gpu = try GPUCompositor(selection: selection, directCopy: .auto)
            let device = gpu.cudaDevice()
            gl = GL(info: gpu.info, plan: gpu.plan, planLine: gpu.plan.description,
                    encoderTargets: Probe.describe(gpu.encoderTargetSupport()), gpuEncoder: Probe.gpuEncoderLine(gpu.info),
                    nvenc: Dictionary(uniqueKeysWithValues: VideoCodec.allCases.map { c in
                        (c.rawValue, NVENCProbe.facts(codec: c, cudaDevice: device).probeLine(codec: c))
                    }))
            gpu.shutdown()
        } catch {
            gl.error = "\(error)"
        }
        let m = MediaProbeReport.current()
        return ProbeReport(
            version: DiptychVersion.string, ladder: GPUCompositor.probeLadder(selection).map { "\($0)" }, gl: gl, libraries: m.libraries,
            encoders: Dictionary(uniqueKeysWithValues: m.encoders.map { codec, list in
                (codec.rawValue, list.map { Candidate(name: $0.name, hardware: $0.isHardware, available: $0.available, reason: $0.reason, device: $0.devicePath) })
            }),
            autoEncoder: Dictionary(uniqueKeysWithValues: m.autoChoice.map { ($0.key.rawValue, $0.value) }),
            vaapi: VAAPI(directory: m.vaapi.directory, problem: m.vaapi.problem, devices: m.vaapi.devices.map { d in
                VADevice(path: d.path, vendor: d.vendor, vaVersion: d.vaVersion, error: d.error,
                         profiles: d.profiles.map { VAProfile(profile: $0.profile, entrypoints: $0.entrypoints) })
            }),
            nvdec: NVDEC(problem: m.nvdec.problem,
                         devices: m.nvdec.devices.map { NVDECDeviceReport(label: $0.label, problem: $0.problem, support: $0.support) },
                         ffmpegDecoders: Dictionary(uniqueKeysWithValues: m.nvdec.ffmpegDecoders.map { ($0.codec, $0.decoder ?? "none") })),
            cameras: SourceCamera.list(CameraListing.devices()), capture: Probe.captureLine)
    }
}
