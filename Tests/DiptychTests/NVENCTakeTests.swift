import DiptychCore
import DiptychMedia
import DiptychOptions
import Foundation
import Testing
@testable import Diptych

/// `--encoder nvenc` wherever the other encoder values are taken, and a
/// take's refusal or choice from what the machine's NVENC offers (facts
/// standing in for the GPU's, `ZeroCopyOverride.nvenc`).
@Suite(.serialized) struct NVENCTakeTests {
    static let h200 = NVENCFacts.unavailable(NVENCAbsence.session(status: 2, gpu: "NVIDIA H200 (CUDA device 0)", codec: .h264)!)
    static let h200Absent = "no NVENC engine on this GPU (NVIDIA H200 (CUDA device 0): its encode session does not open: unsupported device (2))"

    /// The command line, `--config` and the server's bodies (one JSON key),
    /// the embedding API and so the C API and Python's `encoder="nvenc"`.
    @Test func acceptedWhereverEncodersAre() throws {
        let cli = try TakeConfiguration.parse(arguments: ["--primary", "a.mp4", "--out", "t.mp4", "--encoder", "nvenc", "--codec", "hevc"])
        #expect(cli.encoder == .nvenc && cli.codec == .hevc)
        try cli.validate()
        let json = try TakeConfiguration(jsonData: Data(#"{"primary": "a.mp4", "out": "t.mp4", "encoder": "nvenc"}"#.utf8))
        #expect(json.encoder == .nvenc)
        #expect(try TakeConfiguration(jsonData: json.jsonData()).encoder == .nvenc)
        let embedded = try EmbeddedConfiguration.parse(arguments: ["--size", "320x240", "--fps", "30", "--encoder", "nvenc"])
        #expect(embedded.0.encoder == .nvenc)
        #expect(VideoEncoderSettings.bitrateRange(encoder: .nvenc) == 1...Int(UInt32.max))
    }

    func hooks(_ log: LogLines, nvenc: NVENCFacts) -> SessionHooks {
        var h = SessionHooks(storage: plentyOfSpace, log: log.add)
        h.zeroCopyOverride = ZeroCopyOverride(
            report: VAAPIReport(directory: "/dev/dri", devices: [], problem: "no /dev/dri"),
            support: EncoderTargetFacts(platform: "device", renderNode: nil), nvenc: nvenc,
            device: { _, _ in preconditionFailure("no VA-API device stands in: zero copy is never tried") })
        return h
    }

    /// A GPU without an engine: `--encoder nvenc` is bad input (exit 2, one
    /// line naming what is missing) and nothing is written.
    @Test func refusedWhereTheGPUHasNoEngine() throws {
        let dir = Scratch(); defer { dir.remove() }
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("x.mp4"), duration: 0.2, extra: ["--encoder", "nvenc"])
        do {
            _ = try RecordingSession(configuration: config, hooks: hooks(LogLines(), nvenc: Self.h200)).run()
            Issue.record("the take ran")
        } catch {
            #expect(error.exitCode == 2)
            #expect(error.description == "encoder h264_nvenc unavailable: " + Self.h200Absent)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("x.mp4")))
    }

    /// `auto` on the same GPU: libx264, the log and summary saying why NVENC was passed over.
    @Test func autoPassesOverAnAbsentEngine() throws {
        let dir = Scratch(); defer { dir.remove() }
        let log = LogLines()
        let config = try takeConfig(primary: "testsrc:counter:320x240@30", out: dir.path("x.mp4"), duration: 0.2)
        let summary = try RecordingSession(configuration: config, hooks: hooks(log, nvenc: Self.h200)).run()
        #expect(summary.frames == 6)
        #expect(summary.encoder == "libx264" && summary.encoderPath == "software")
        #expect(summary.encoderReason.contains("VA-API unavailable: no /dev/dri; NVENC not taken: " + Self.h200Absent + "; GPU encoder not taken: "),
                "\(summary.encoderReason)")
        #expect(log.contains("NVENC not taken: no NVENC engine on this GPU"))
        #expect(!log.contains("NVENC: "))
    }
}
