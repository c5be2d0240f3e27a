import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// Encoder settings refused up front, naming the setting, with nothing opened or printed.
@Suite(.serialized) struct EncoderSettingsCheckTests {
    init() { _ = quietFFmpeg }

    func settings(codec: VideoCodec = .h264, encoder: EncoderChoice = .x264, preset: String = "veryfast",
                  tune: String? = nil, bitrate: Int = 10_000_000) -> VideoEncoderSettings {
        VideoEncoderSettings(size: PixelSize(width: 160, height: 120), frameRate: FrameRate(30), codec: codec, encoder: encoder,
                             bitrate: bitrate, preset: preset, tune: tune)
    }

    /// What `body` writes to file descriptor 2 (where libx264 logs).
    func stderrOutput(_ body: () -> Void) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stderr-\(UUID().uuidString)").path
        let fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        let saved = dup(2)
        dup2(fd, 2)
        body()
        dup2(saved, 2)
        close(saved)
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    @Test func presetListsComeFromTheEncoders() {
        let x264 = VideoEncoderSettings.presetNames(codec: .h264)
        #expect(x264.first == "ultrafast" && x264.last == "placebo" && x264.count == 10)
        #expect(VideoEncoderSettings.presetNames(codec: .hevc).contains("veryslow"))
        #expect(VideoEncoderSettings.tuneNames(codec: .h264).contains("film"))
        #expect(!VideoEncoderSettings.tuneNames(codec: .hevc).contains("film"))
    }

    @Test func bogusPresetIsRefusedQuietly() throws {
        var error: MediaError?
        let printed = try stderrOutput {
            do throws(MediaError) { try settings(preset: "bogus").validate() } catch let e { error = e }
        }
        let e = try #require(error)
        guard case .invalidSetting(.preset, let value, _) = e else { Issue.record("\(e)"); return }
        #expect(value == "bogus")
        #expect(e.description == "preset 'bogus': not a libx264 preset (one of ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo)")
        #expect(printed.isEmpty, "printed: \(printed)")
        let hevc = expectMediaError { try settings(codec: .hevc, preset: "bogus").validate() }
        #expect(hevc?.description.hasPrefix("preset 'bogus': not a libx265 preset") == true)
    }

    @Test func tunesArePerEncoder() throws {
        try settings(tune: "zerolatency").validate()
        try settings(tune: "film,fastdecode").validate()
        try settings(codec: .hevc, tune: "zerolatency").validate()
        let e = expectMediaError { try settings(codec: .hevc, tune: "film").validate() }
        guard case .invalidSetting(.tune, "film", _)? = e else { Issue.record("\(String(describing: e))"); return }
    }

    @Test func bitrateRangeIsTheEncoders() throws {
        let e = expectMediaError { try settings(bitrate: 360).validate() }
        guard case .invalidSetting(.bitrate, "360", _)? = e else { Issue.record("\(String(describing: e))"); return }
        #expect(e?.description == "bitrate '360': libx264 takes 1000...2147483647000 bits per second")
        try settings(bitrate: 1000).validate()
        #expect(expectMediaError { try settings(bitrate: 2_147_483_648_000).validate() } != nil)
        #expect(VideoEncoderSettings.bitrateRange(encoder: .vaapi) == 1...4_294_967_295)
        #expect(VideoEncoderSettings.bitrateRange(encoder: .auto) == 1000...4_294_967_295)
        #expect(expectMediaError { try settings(encoder: .auto, bitrate: 5_000_000_000).validate() } != nil)
        // The GPU encoder keeps a quantizer: any positive rate is no concern of it.
        #expect(VideoEncoderSettings.bitrateRange(encoder: .gpu) == 1...Int.max)
        try settings(encoder: .gpu, bitrate: 360).validate()
    }

    /// The check agrees with the real encoder: what it refuses libx264 refuses
    /// when it opens, what it accepts opens.
    @Test(arguments: [("bogus", 10_000_000), ("veryslow", 10_000_000), ("ultrafast", 999), ("ultrafast", 1000)])
    func agreesWithTheEncoder(preset: String, bitrate: Int) throws {
        let s = settings(preset: preset, bitrate: bitrate)
        let checked = (try? s.validate()) != nil
        let opened = (try? PacketEncoder(settings: s)) != nil
        #expect(checked == opened, "validate says \(checked), libx264 opens: \(opened)")
    }

    /// A huge value is not echoed back.
    @Test func hugeValuesAreCut() throws {
        let huge = String(repeating: "x", count: 10_000_000)
        let e = try #require(expectMediaError { try settings(preset: huge).validate() })
        #expect(e.description.utf8.count < 300)
        #expect(expectMediaError { try settings(tune: huge).validate() }.map { $0.description.utf8.count < 300 } == true)
    }
}
