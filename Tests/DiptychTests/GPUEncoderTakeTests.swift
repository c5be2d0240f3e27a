import DiptychCore
@testable import DiptychGPU
import DiptychMedia
import DiptychOptions
import Foundation
import Testing
@testable import Diptych

/// `diptych record --encoder gpu` on the software renderer: the GPU encoder
/// runs there when asked for (docs/ARCHITECTURE.md, "The GPU encoder").
@Suite(.serialized) struct GPUEncoderTakeTests {
    @Test("A 720p take encoded on the GPU decodes with FFmpeg's strictest checks and plays in GStreamer")
    func take720p() throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("gpu.mp4")
        let reconstructions = try ReconstructionFolder(in: dir)
        let r = try runCLI(["record", "--primary", "testsrc:counter:1280x720@30", "--secondary", "testsrc:smpte:640x360@30",
                            "--duration", "1", "--encoder", "gpu", "--gpu", "software", "--audio", "none", "--out", out, "--json"],
                           environment: reconstructions.environment)
        try #require(r.status == 0, "\(r.stderr)")
        // Every picture decodes to the encoder's own reconstruction.
        try reconstructions.expectDecoded([out], width: 1280, height: 720)
        #expect(r.stderr.contains("encoder: gpu-h264"), "\(r.stderr)")
        #expect(r.stdout.contains("\"encoderPath\" : \"gpu\""), "\(r.stdout)")
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                                                 "stream=codec_name,profile,width,height,nb_read_frames", "-of", "csv=p=0", out])
        #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "h264,Constrained Baseline,1280,720,30", "\(probe.stdout)")
        let strict = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", out,
                                                 dir.path("check.nut")])
        #expect(strict.status == 0 && strict.stderr.isEmpty, "\(strict.stderr)")
        let gst = try run("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "decodebin", "!", "fakesink"])
        #expect(gst.status == 0, "\(gst.stderr)")
        // Slices of at most 34 rows where the take does not say: 45 rows of 80 in two, at macroblocks 0 and 1840.
        let firsts = try sliceFirstMacroblocks(out)
        #expect(firsts == Array(repeating: [0, 1840], count: 30).flatMap { $0 }, "\(firsts)")
    }

    @Test("DIPTYCH_GPU_ENCODER_RECONSTRUCTION: a folder that is not there, or a file there already, stops the take before it starts")
    func reconstructionFolderIsChecked() throws {
        let dir = Scratch(); defer { dir.remove() }
        let take = ["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--duration", "0.2",
                    "--encoder", "gpu", "--gpu", "software", "--audio", "none"]
        let missing = try runCLI(take + ["--out", dir.path("a.mp4")], environment: ["DIPTYCH_GPU_ENCODER_RECONSTRUCTION": dir.path("none")])
        #expect(missing.status == 2 && missing.stderr.contains("DIPTYCH_GPU_ENCODER_RECONSTRUCTION '\(dir.path("none"))': no such folder"),
                "\(missing.status) \(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("a.mp4")))
        let reconstructions = try ReconstructionFolder(in: dir)
        let kept = reconstructions.path + "/1-320x240.nv12"
        try Data("kept".utf8).write(to: URL(fileURLWithPath: kept))
        let there = try runCLI(take + ["--out", dir.path("b.mp4")], environment: reconstructions.environment)
        #expect(there.status == 2 && there.stderr.contains("1-320x240.nv12: File exists"), "\(there.status) \(there.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == Data("kept".utf8))
    }

    @Test("--slices 3: every picture of the GPU encoder's file and libx264's is three slices of five rows, and decodes",
          arguments: ["gpu", "x264"])
    func slices(encoder: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("take.mp4")
        let reconstructions = try ReconstructionFolder(in: dir)
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:smpte:160x120@30",
                            "--duration", "0.5", "--encoder", encoder, "--slices", "3", "--gpu", "software", "--audio", "none", "--out", out],
                           environment: reconstructions.environment)
        try #require(r.status == 0, "\(r.stderr)")
        if encoder == "gpu" { try reconstructions.expectDecoded([out], width: 320, height: 240) }
        // 15 macroblock rows of 20: slices at macroblocks 0, 100 and 200 of each of the 15 pictures.
        let firsts = try sliceFirstMacroblocks(out)
        #expect(firsts == Array(repeating: [0, 100, 200], count: 15).flatMap { $0 }, "\(firsts)")
        let strict = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", out, dir.path("check.nut")])
        #expect(strict.status == 0 && strict.stderr.isEmpty, "\(strict.stderr)")
        let gst = try run("/usr/bin/gst-launch-1.0", ["-q", "filesrc", "location=\(out)", "!", "decodebin", "!", "fakesink"])
        #expect(gst.status == 0, "\(gst.stderr)")
    }
}

/// `--encoder auto` on a hardware GPU without VA-API or NVENC: facts
/// standing in for an H200's (`ZeroCopyOverride`), the compositor
/// llvmpipe's compute pass (what `auto` finds on a hardware GPU).
@Suite(.serialized) struct GPUEncoderAutoTests {
    /// Hooks presenting llvmpipe's compute pass as an H200 without VA-API or
    /// NVENC; its GPU-encoded outputs write their reconstructions into `reconstructions`.
    static func hardwareHooks(reconstructions: ReconstructionFolder) -> SessionHooks {
        var h = SessionHooks(storage: plentyOfSpace, log: LogLines().add)
        var request = GPURequest.settings
        request.encoderReconstruction = reconstructions.path
        h.makeCompositor = { [request] sel throws(GPUError) in
            try GPUCompositor(selection: sel, directCopy: .off, pass: .compute, request: request, hooks: GPUTestHooks())
        }
        h.zeroCopyOverride = ZeroCopyOverride(
            report: VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri"),
            support: EncoderTargetFacts(platform: "device", renderNode: nil),
            gpuEncoder: .available(renderer: "NVIDIA H200/PCIe/SSE2", software: false), nvenc: NVENCTakeTests.h200,
            device: { _, _ in preconditionFailure("no VA-API device stands in: zero copy is never tried") })
        return h
    }

    @Test("auto takes the GPU encoder in place of libx264 ultrafast, not veryfast, and the summary says why",
          arguments: ["ultrafast", "veryfast"])
    func byPreset(preset: String) throws {
        let dir = Scratch(); defer { dir.remove() }
        let out = dir.path("x.mp4")
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: out, duration: 0.5, extra: ["--preset", preset])
        let reconstructions = try ReconstructionFolder(in: dir)
        let summary = try RecordingSession(configuration: config, hooks: Self.hardwareHooks(reconstructions: reconstructions)).run()
        #expect(summary.frames == 15)
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                                                 "stream=codec_name,profile,nb_read_frames", "-of", "csv=p=0", out])
        if preset == "ultrafast" {
            #expect(summary.encoder == "gpu-h264" && summary.encoderPath == "gpu", "\(summary.encoder) \(summary.encoderPath)")
            #expect(summary.encoderReason.hasPrefix(
                "the GPU's H.264 encoder, GLES compute on NVIDIA H200/PCIe/SSE2, as good as libx264 ultrafast at the same bit rate; "),
                "\(summary.encoderReason)")
            #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "h264,Constrained Baseline,15", "\(probe.stdout)")
            let strict = try run("/usr/bin/ffmpeg", ["-v", "error", "-xerror", "-err_detect", "+bitstream+buffer+explode", "-i", out,
                                                     dir.path("check.nut")])
            #expect(strict.status == 0 && strict.stderr.isEmpty, "\(strict.stderr)")
            try reconstructions.expectDecoded([out], width: 320, height: 240)
        } else {
            #expect(summary.encoder == "libx264" && summary.encoderPath == "software", "\(summary.encoder) \(summary.encoderPath)")
            let why = try #require(SoftwareBaseline(preset: "veryfast").gpuEncoderRefusal)
            #expect(why.contains("the preset is veryfast"))
            #expect(summary.encoderReason.hasSuffix("GPU encoder not taken: " + why), "\(summary.encoderReason)")
            #expect(probe.stdout.hasPrefix("h264,"), "\(probe.stdout)")
        }
    }
}

extension GPUEncoderAutoTests {
    /// Under auto, each output of the take's codec is weighed by its own
    /// preset: the main one at ultrafast on the GPU encoder, a second at
    /// veryfast (`--also-preset`) on libx264, both from the one composite.
    @Test("An output of its own slower preset keeps libx264 beside the GPU-encoded one")
    func outputsByTheirOwnPreset() throws {
        let dir = Scratch(); defer { dir.remove() }
        let (main, also) = (dir.path("main.mp4"), dir.path("also.mp4"))
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: main, duration: 0.5,
                                    extra: ["--preset", "ultrafast", "--also-out", also, "--also-preset", "veryfast"])
        let reconstructions = try ReconstructionFolder(in: dir)
        let summary = try RecordingSession(configuration: config, hooks: Self.hardwareHooks(reconstructions: reconstructions)).run()
        #expect(summary.encoder == "gpu-h264", "\(summary.encoder)")
        // The GPU-encoded output decodes to its reconstruction; libx264's output keeps none.
        try reconstructions.expectDecoded([main], width: 320, height: 240)
        #expect(try FileManager.default.contentsOfDirectory(atPath: reconstructions.path).count == 1)
        for (file, profile) in [(main, "Constrained Baseline"), (also, "High")] {
            let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                                                     "stream=profile,nb_read_frames", "-of", "csv=p=0", file])
            #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(profile),15", "\(file): \(probe.stdout)")
        }
    }
}

/// first_mb_in_slice of every slice of a file's video, in stream order (FFmpeg's `trace_headers`).
func sliceFirstMacroblocks(_ file: String) throws -> [Int] {
    let trace = try run("/usr/bin/ffmpeg", ["-hide_banner", "-i", file, "-c", "copy", "-bsf:v", "trace_headers", "-f", "null", "-"])
    return trace.stderr.split(separator: "\n").filter { $0.contains("first_mb_in_slice") }.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
}
