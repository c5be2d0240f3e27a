import CFFmpeg
import Foundation
import Testing
@testable import Diptych
import DiptychCore
@testable import DiptychMedia

/// Cameras in a take: a camera is a live source (live timing, reopened
/// when lost), a missing one is refused in one line (exit 2), and a take
/// records from one. No machine here has /dev/video*: the take runs on a
/// stand-in device (lavfi's `testsrc` through the same capture code), and
/// the recording from a real camera runs only where one exists.
@Suite(.serialized) struct CameraCaptureTests {
    static let hasCamera = FileManager.default.fileExists(atPath: "/dev/video0")

    /// Cameras are live and reopened; files and patterns are neither.
    @Test func cameraIsALiveSource() {
        for spec in [SourceSpec.url("camera:0"), .url("v4l2:/dev/video2")] {
            #expect(SourceRecovery.isCamera(spec) && SourceRecovery.isReopened(spec) && TakeRun.isLive(spec), "\(spec)")
            #expect(!SourceRecovery.isNetwork(spec))
        }
        #expect(SourceRecovery.isReopened(.url("srt://h:9000")) && !SourceRecovery.isCamera(.url("srt://h:9000")))
        for spec in [SourceSpec.url("a.mp4"), .testPattern(name: "smpte", size: .hd720, rate: FrameRate(30)), .stdin, .none] {
            #expect(!SourceRecovery.isCamera(spec) && !SourceRecovery.isReopened(spec), "\(spec)")
        }
    }

    /// A camera node that does not exist: exit 2, one line naming it, nothing written.
    @Test func missingDeviceIsRefused() throws {
        for (source, message) in [("v4l2:/dev/video-none", "v4l2:/dev/video-none: no such camera"),
                                  ("v4l2:video0", "v4l2:video0: expected v4l2:/dev/videoN")] {
            let dir = Scratch(); defer { dir.remove() }
            let r = try runCLI(["record", "--primary", source, "--out", "x.mp4", "--duration", "1"], in: dir.url.path)
            #expect(r.status == 2, "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(message), "\(r.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).isEmpty)
        }
    }

    /// camera:0 where there is no camera: exit 2, one line.
    @Test(.enabled(if: !hasCamera, "this machine has a camera at /dev/video0"))
    func noCameraHere() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "camera:0", "--out", "x.mp4",
                            "--duration", "1"], in: dir.url.path)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("camera:0: no such camera: no cameras found"), "\(r.stderr)")
    }

    /// A take whose primary is a camera, on a stand-in device: lavfi's
    /// testsrc opened by the capture path in place of `camera:0`, a second
    /// of frames each time it is opened. The take paces and times it as a
    /// live source, and when the device stops (unplugged, here: the graph
    /// ends) reopens it within the reconnect window, as a network source.
    @Test func aTakeFromAStandInCamera() throws {
        let dir = Scratch(); defer { dir.remove() }
        final class Count: @unchecked Sendable { let lock = NSLock(); var n = 0
            func next() -> Int { lock.lock(); defer { lock.unlock() }; n += 1; return n } }
        let opens = Count()
        let io = TakeIO(openInput: { role, spec, duration, decoding, opening throws(MediaError) in
            guard SourceRecovery.isCamera(spec) else { return try TakeIO.media.openInput(role, spec, duration, decoding, opening) }
            let n = opens.next()
            let capture = DeviceCapture(format: "lavfi", device: "testsrc=size=320x240:rate=30:duration=1", options: [],
                                        description: "stand-in camera, opening \(n)")
            return MediaInput(try FileSource(capture: capture, name: spec.description, decoding: decoding, opening: opening))
        }, openOutput: TakeIO.media.openOutput)
        let log = LogLines()
        let config = try takeConfig(primary: "camera:0", secondary: "none", out: dir.path("cam.mp4"), duration: 2.5,
                                    extra: ["--source-reconnect-window", "10"])
        let summary = try RecordingSession(configuration: config, hooks: SessionHooks(storage: plentyOfSpace, log: log.add), io: io).run()
        #expect(summary.frames == 75, "\(summary.frames)")
        #expect(opens.n >= 3, "opened \(opens.n) times")
        let reconnects = summary.sourceSwitches.filter { $0.role == "primary" && $0.reason == .reconnect && $0.to == "camera:0" }
        #expect(reconnects.count >= 2, "\(summary.sourceSwitches)")
        #expect(log.contains("primary: stand-in camera, opening 1"), "\(log.all.prefix(20))")
        let decoded = try decodeAll(dir.path("cam.mp4"))
        #expect(decoded.frames.count == 75)
        #expect(decoded.info.size == PixelSize(width: 320, height: 240))
    }

    /// `diptych probe` says where capture comes from (here: libavdevice loaded at run time) and the mode rule.
    @Test func probeSaysWhereCaptureComesFrom() throws {
        let json = try runCLI(["probe", "--json", "--gpu", "software"])
        #expect(json.status == 0, "\(json.stderr)")
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(o["capture"] as? String == "FFmpeg's video4linux2 input (libavdevice.so.\(avformat_version() >> 16))", "\(o["capture"] ?? "none")")
        let text = try runCLI(["probe", "--gpu", "software"])
        #expect(text.stdout.contains("  capture: FFmpeg's video4linux2 input (libavdevice.so."))
        #expect(text.stdout.contains("  a take opens \(CameraModeChoice.rule)"))
    }

    /// A real camera, where there is one: 2 s from camera:0 that ffprobe decodes.
    @Test(.enabled(if: hasCamera, "no camera on this machine (no /dev/video0)"))
    func recordsFromARealCamera() throws {
        let dir = Scratch(); defer { dir.remove() }
        let r = try runCLI(["record", "--primary", "camera:0", "--secondary", "none", "--duration", "2", "--out", "cam.mp4",
                            "--gpu", "software"], in: dir.url.path, timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("camera /dev/"), "the chosen mode is logged: \(r.stderr)")
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                                 "stream=nb_read_frames,width,height", "-of", "csv=p=0", dir.path("cam.mp4")])
        #expect(probe.status == 0, "\(probe.stderr)")
        let fields = probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Int($0) }
        #expect(fields.count == 3 && fields[0] > 0 && fields[1] > 0 && fields[2] > 0, "ffprobe: \(probe.stdout)")
    }
}
