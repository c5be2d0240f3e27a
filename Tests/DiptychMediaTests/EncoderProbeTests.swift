import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

@Suite struct EncoderProbeTests {
    init() { _ = quietFFmpeg }

    /// This machine (and CI) has no /dev/dri: auto falls back to software and says why.
    @Test func autoFallsBackToSoftwareWithReason() throws {
        let dri = "/nonexistent-dri"
        let sel = try EncoderProbe.choose(codec: .h264, choice: .auto, driDirectory: dri)
        #expect(sel.name == "libx264")
        #expect(sel.reason == "VA-API unavailable: no /nonexistent-dri")
        #expect(sel.description == "libx264 (VA-API unavailable: no /nonexistent-dri)")
        let hevc = try EncoderProbe.choose(codec: .hevc, choice: .auto, driDirectory: dri)
        #expect(hevc.name == "libx265")
    }

    @Test func writerRecordsEncoderAndReason() throws {
        let dir = TempDir(); defer { dir.remove() }
        let w = try MediaWriter(url: dir.path("a.mp4"), video: VideoEncoderSettings(
            size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30), driDirectory: dir.path("no-dri")))
        #expect(w.encoderName == "libx264")
        #expect(w.encoderReason == "VA-API unavailable: no \(dir.path("no-dri"))")
        try w.finish()
        if !FileManager.default.fileExists(atPath: "/dev/dri") {
            let d = try MediaWriter(url: dir.path("b.mp4"), video: VideoEncoderSettings(size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30)))
            #expect(d.encoderDescription == "libx264 (VA-API unavailable: no /dev/dri)")
            try d.finish()
        }
    }

    @Test func forcingVAAPIFailsClearly() throws {
        let e = expectMediaError { _ = try EncoderProbe.choose(codec: .h264, choice: .vaapi, driDirectory: "/nonexistent-dri") }
        #expect(e == .encoderUnavailable(encoder: "h264_vaapi", reason: "no /nonexistent-dri"))
        #expect(e?.description == "encoder h264_vaapi unavailable: no /nonexistent-dri")
        let dir = TempDir(); defer { dir.remove() }
        let w = expectMediaError { _ = try MediaWriter(url: dir.path("v.mp4"), video: VideoEncoderSettings(
            size: PixelSize(width: 320, height: 240), frameRate: FrameRate(30), codec: .hevc, encoder: .vaapi, driDirectory: "/nonexistent-dri")) }
        #expect(w?.description == "encoder hevc_vaapi unavailable: no /nonexistent-dri")
        #expect(!FileManager.default.fileExists(atPath: dir.path("v.mp4")))
    }

    @Test func forcingSoftware() throws {
        let sel = try EncoderProbe.choose(codec: .h264, choice: .x264)
        #expect(sel.name == "libx264" && !sel.isHardware)
    }

    @Test func candidatesListEveryEncoderWithReasons() {
        let c = EncoderProbe.candidates(codec: .h264, driDirectory: "/nonexistent-dri")
        #expect(c.map(\.name) == ["h264_vaapi", "libx264"])
        #expect(c[0].available == false && c[0].reason == "no /nonexistent-dri")
        #expect(c[1].available && c[1].reason == "software")
        #expect(EncoderProbe.candidates(codec: .hevc).map(\.name) == ["hevc_vaapi", "libx265"])
    }

    @Test func directoryWithoutRenderNodes() throws {
        let dir = TempDir(); defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.path("card0"), contents: Data())
        let report = EncoderProbe.vaapi(directory: dir.url.path)
        #expect(report.problem == "no DRM render node (renderD*) in \(dir.url.path)")
        #expect(EncoderProbe.candidates(codec: .h264, driDirectory: dir.url.path)[0].reason == report.problem)
    }

    /// A render node with no VA driver behind it: vaInitialize fails, and the reason says so.
    @Test func renderNodeWithoutDriver() throws {
        let dir = TempDir(); defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.path("renderD128"), contents: Data())
        let report = EncoderProbe.vaapi(directory: dir.url.path)
        #expect(report.problem == nil)
        let dev = try #require(report.devices.first)
        #expect(dev.path == dir.path("renderD128"))
        #expect(dev.error?.hasPrefix("no VA driver") == true, "\(String(describing: dev.error))")
        let c = EncoderProbe.candidates(codec: .h264, driDirectory: dir.url.path)
        #expect(c[0].available == false)
        #expect(c[0].reason.contains("renderD128: no VA driver"))
        let sel = try EncoderProbe.choose(codec: .h264, choice: .auto, driDirectory: dir.url.path)
        #expect(sel.name == "libx264" && sel.reason.contains("no VA driver"))
    }

    @Test(.enabled(if: getuid() != 0, "root opens any file, so the node cannot be made unreadable"))
    func unreadableRenderNode() throws {
        let dir = TempDir(); defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.path("renderD129"), contents: Data(), attributes: [.posixPermissions: 0])
        let dev = try #require(EncoderProbe.vaapi(directory: dir.url.path).devices.first)
        #expect(dev.error == "cannot open: Permission denied")
    }

    @Test func encodeSupportNeedsAnEncodeEntrypoint() {
        let dev = VADeviceReport(path: "/dev/dri/renderD128", vendor: "Mesa", vaVersion: "1.17", profiles: [
            VAProfileSupport(profile: "VAProfileH264High", entrypoints: ["VAEntrypointVLD"]),
            VAProfileSupport(profile: "VAProfileHEVCMain", entrypoints: ["VAEntrypointVLD", "VAEntrypointEncSliceLP"]),
        ], error: nil)
        #expect(dev.encodeSupport(for: .h264).isEmpty)
        #expect(dev.encodeSupport(for: .hevc) == [VAProfileSupport(profile: "VAProfileHEVCMain", entrypoints: ["VAEntrypointEncSliceLP"])])
    }

    @Test func probeReportMentionsEncodersAndVAAPI() {
        let r = MediaProbeReport.current(driDirectory: "/nonexistent-dri")
        let text = r.description
        #expect(text.contains("libavformat 59."))
        #expect(text.contains("h264_vaapi: unavailable (no /nonexistent-dri)"))
        #expect(text.contains("libx264: available (software)"))
        #expect(text.contains("auto: libx264 (VA-API unavailable: no /nonexistent-dri)"))
        #expect(text.contains("VA-API: no /nonexistent-dri"))
    }
}
