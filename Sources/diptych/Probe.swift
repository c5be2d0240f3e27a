import Diptych
import DiptychOptions
import DiptychGPU
import DiptychMedia
import Foundation

/// `diptych probe`: what this machine offers Diptych.
enum Probe {
    static func run(arguments: [String]) -> Never {
        if arguments.contains("-h") || arguments.contains("--help") {
            Console.out("usage: diptych probe [--gpu auto|software|N|/dev/dri/renderDN]\nPrints the EGL display ladder, the GL context taken, encoders, VA-API profiles, NVDEC capabilities, cameras and library versions.")
            leave(0)
        }
        var selectionText = "auto"
        do {
            for (flag, value) in try ArgumentReader(flags: ["--gpu": true]).read(arguments) where flag == "--gpu" {
                try TakeConfiguration.checkGPU(value!)
                selectionText = value!
            }
        } catch { fail("probe: \(error)", code: 2) }
        guard let selection = GPUSelection(parsing: selectionText) else {
            fail("--gpu '\(selectionText)': expected auto, software, an index or /dev/dri/renderDN", code: 2)
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
            print("  GPU H.264 encoder (--encoder gpu): " + (info.capabilities.computeShaders
                ? "runs: GLES compute on \(info.renderer)\(info.isSoftware ? " (software renderer)" : ""); --encoder auto does not take it yet"
                : "unavailable: \(info.renderer) has no compute shaders (\(info.version))"))
            gpu.shutdown()
        } catch {
            print("  none: \(error)")
        }
        print("")
        print(MediaProbeReport.current().description)
        print("\nCameras (V4L2):")
        let devices = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            .filter { $0.hasPrefix("video") }.sorted()
        if devices.isEmpty { print("  none (no /dev/video*)") }
        for d in devices {
            let name = (try? String(contentsOfFile: "/sys/class/video4linux/\(d)/name", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
            print("  /dev/\(d): \(name)")
        }
        leave(0)
    }

    /// What the GPU offers the zero-copy path; a take tries the modifiers when it starts.
    static func describe(_ s: EncoderTargetSupport) -> String {
        guard s.platform == .gbm, let node = s.renderNode else { return "no: the GPU runs on the EGL \(s.platform) platform, not GBM on a render node" }
        if !s.missing.isEmpty { return "no: \(node) lacks \(s.missing.joined(separator: ", "))" }
        if s.renderableModifiers.isEmpty { return "no: \(node) renders R8 and GR88 dma-buf planes with no modifier" }
        return "GBM on \(node); R8/GR88 planes render with " + s.renderableModifiers.map { ModifierTrial.name($0) }.joined(separator: ", ")
    }
}
