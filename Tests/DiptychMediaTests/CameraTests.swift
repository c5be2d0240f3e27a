import DiptychCore
import Foundation
import Testing
@testable import DiptychMedia

/// The camera listing's ranking and `camera:N` / `v4l2:PATH` resolution on
/// recorded device descriptions (Tests/Fixtures/Cameras), and camera
/// sources through the source policy. No machine here has a camera, so
/// reading a real device is only tried where one exists.
@Suite struct CameraTests {
    static func fixture(_ name: String) throws -> [CameraDevice] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/Cameras/\(name).json")
        return try JSONDecoder().decode([CameraDevice].self, from: Data(contentsOf: url))
    }

    @Test func recordedWebcamParses() throws {
        let devices = try Self.fixture("webcam")
        #expect(devices.count == 2)
        let cam = devices[0]
        #expect(cam.path == "/dev/video0" && cam.driver == "uvcvideo" && cam.capture)
        #expect(cam.formats.map(\.fourcc) == ["YUYV", "MJPG", "H264"])
        #expect(cam.formats.map(\.compressed) == [false, true, true])
        #expect(cam.modes.count == 7 + 3 + 1 + 7 * 3 + 7)
        #expect(cam.modes.contains(CameraMode(format: "YUYV", compressed: false, size: PixelSize(width: 640, height: 480), rate: 30)))
        #expect(devices[1].bestMode == nil)
    }

    /// Largest size first, then the higher rate, then raw, MJPEG, other codecs, then FourCC.
    @Test func modeOrder() throws {
        let cam = try Self.fixture("webcam")[0]
        let best = try #require(cam.bestMode)
        // 1080p30 comes only compressed (YUYV does 1080p at 5): MJPG before H264, cheaper to decode.
        #expect(best == CameraMode(format: "MJPG", compressed: true, size: PixelSize(width: 1920, height: 1080), rate: 30))
        #expect(best.description == "MJPG 1920x1080@30")
        let sorted = cam.modes.sorted(by: CameraRanking.prefers)
        #expect(sorted[1].format == "H264" && sorted[1].size == best.size && sorted[1].rate == 30)
        let yuyv = CameraMode(format: "YUYV", compressed: false, size: PixelSize(width: 640, height: 480), rate: 30)
        let mjpg = CameraMode(format: "MJPG", compressed: true, size: PixelSize(width: 640, height: 480), rate: 30)
        #expect(CameraRanking.prefers(yuyv, mjpg) && !CameraRanking.prefers(mjpg, yuyv))
        #expect(CameraMode(format: "X", compressed: false, size: .hd1080, rate: 29.97).rateText == "29.97")
    }

    /// The capture card's raw 1080p60 outranks the webcam's MJPEG 1080p30;
    /// the metadata node is not ranked.
    @Test func deviceOrder() throws {
        let ranked = CameraRanking.rank(try Self.fixture("capture-card"))
        #expect(ranked.map(\.device.path) == ["/dev/video2", "/dev/video0"])
        #expect(ranked[0].mode == CameraMode(format: "NV12", compressed: false, size: .hd1080, rate: 60))
        #expect(!ranked[0].mode.compressed)
        #expect(ranked[1].mode.description == "MJPG 1920x1080@30")
    }

    /// Equal best modes: by device path.
    @Test func tiesByPath() throws {
        var a = try Self.fixture("webcam")[0]
        var b = a
        a.path = "/dev/video4"; b.path = "/dev/video3"
        #expect(CameraRanking.rank([a, b]).map(\.device.path) == ["/dev/video3", "/dev/video4"])
    }

    @Test func selectionParses() throws {
        #expect(try CameraSelection.parse("camera:0") == .rank(0))
        #expect(try CameraSelection.parse("camera:12") == .rank(12))
        #expect(try CameraSelection.parse("v4l2:/dev/video2") == .device("/dev/video2"))
        #expect(try CameraSelection.parse("in.mp4") == nil)
        #expect(try CameraSelection.parse("testsrc:smpte") == nil)
        #expect(try CameraSelection.parse("srt://h:9000") == nil)
        for bad in ["camera:", "camera:-1", "camera:x", "v4l2:video0", "v4l2:"] {
            #expect(throws: CameraError.self) { try CameraSelection.parse(bad) }
        }
    }

    @Test func resolution() throws {
        let devices = try Self.fixture("capture-card")
        #expect(try CameraSelection.rank(0).resolve(in: devices).device.path == "/dev/video2")
        #expect(try CameraSelection.rank(1).resolve(in: devices).device.path == "/dev/video0")
        let byPath = try CameraSelection.device("/dev/video0").resolve(in: devices)
        #expect(byPath.mode.description == "MJPG 1920x1080@30")
    }

    @Test func resolutionErrors() throws {
        let devices = try Self.fixture("capture-card")
        let cases: [(CameraSelection, [CameraDevice], String)] = [
            (.rank(2), devices, "camera:2: no such camera: 2 cameras found (camera:0…camera:1)"),
            (.device("/dev/video1"), devices, "v4l2:/dev/video1: not a video capture device"),
            (.device("/dev/video9"), devices, "v4l2:/dev/video9: no such camera"),
            (.rank(0), try Self.fixture("none"), "camera:0: no such camera: no cameras found"),
            (.rank(0), [], "camera:0: no such camera: no cameras found"),
        ]
        for (selection, list, message) in cases {
            do {
                _ = try selection.resolve(in: list)
                Issue.record("\(selection) resolved")
            } catch {
                #expect(error.description == message)
            }
        }
    }

    /// What probe --json and GET /v1/sources give: ranked cameras, then the rest.
    @Test func sourceList() throws {
        let list = SourceCamera.list(try Self.fixture("capture-card"))
        #expect(list.map(\.source) == ["camera:0", "camera:1", nil])
        #expect(list.map(\.device) == ["/dev/video2", "/dev/video0", "/dev/video1"])
        #expect(list[0].mode?.description == "NV12 1920x1080@60")
        let json = String(decoding: try JSONEncoder().encode(list[0]), as: UTF8.self)
        #expect(json.contains("\"fourcc\":\"YUYV\""))
        #expect(SourceCamera.list([]).isEmpty)
    }

    /// Through the source guard: a malformed or missing camera is an error
    /// naming it (bad input: exit 2, HTTP 400); a server without
    /// --allow-cameras refuses cameras; other sources pass untouched.
    @Test func policy() throws {
        let devices = try Self.fixture("webcam")
        func message(_ url: String, _ policy: SourcePolicy) -> String? {
            do { _ = try SourceGuard.checkCamera(url, policy: policy, devices: { devices }); return nil } catch { return error.description }
        }
        let server = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: false)
        #expect(message("in.mp4", .commandLine) == nil)
        #expect(message("camera:0", server) == "camera:0: not allowed: cameras are not allowed here (diptych serve --allow-cameras)")
        #expect(message("camera:1", .commandLine) == "camera:1: no such camera: 1 camera found (camera:0…camera:0)")
        #expect(message("camera:x", .commandLine) == "camera:x: expected camera:N, N a rank from 0 (the best camera)")
        #expect(message("v4l2:/dev/video1", .commandLine) == "v4l2:/dev/video1: not a video capture device")
        // Resolved where the server allows cameras: the capture to open, in the mode chosen for the take.
        let allowed = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: false, cameras: true)
        #expect(message("camera:0", allowed) == nil)
        let capture = try #require(try SourceGuard.checkCamera("camera:0", policy: allowed, request: CameraRequest(canvas: .hd720, rate: 30),
                                                                devices: { devices }))
        #expect(capture.format == "video4linux2" && capture.device == "/dev/video0")
        #expect(capture.options.map { "\($0.key)=\($0.value)" } == ["video_size=1280x720", "framerate=30", "input_format=mjpeg"])
        #expect(capture.description == "camera /dev/video0 (HD Pro Webcam C920, uvcvideo): MJPG 1280x720@30, "
                + "the smallest mode covering 1280x720 at 30 fps or more")
        #expect(try SourceGuard.checkCamera("in.mp4", policy: allowed, devices: { devices }) == nil)
        #expect(server.description.hasSuffix("no cameras"))
        #expect(!SourcePolicy.commandLine.description.contains("cameras"))
    }

    /// The mode a take opens (`CameraModeChoice.rule`), on the recorded
    /// devices: the smallest mode covering the canvas at the take's rate or
    /// more, the lower rate, raw before MJPEG at equal size and rate; the best
    /// such mode without a canvas (a primary asks for 30 fps); else the best mode.
    @Test func modeChoice() throws {
        let webcam = try Self.fixture("webcam")[0]
        let card = try #require(try Self.fixture("capture-card").first { $0.path == "/dev/video2" })
        let portrait = PixelSize(width: 720, height: 1280)
        let cases: [(CameraDevice, PixelSize?, Double?, String, String)] = [
            // YUYV does 1280x720 at 10 fps only: MJPEG covers it at 30.
            (webcam, .hd720, 30, "MJPG 1280x720@30", "the smallest mode covering 1280x720 at 30 fps or more"),
            // Equal size and rate: raw before MJPEG.
            (webcam, PixelSize(width: 640, height: 360), 30, "YUYV 640x480@30", "the smallest mode covering 640x360 at 30 fps or more"),
            // The lowest rate that reaches the take's.
            (webcam, PixelSize(width: 640, height: 480), 15, "YUYV 640x480@15", "the smallest mode covering 640x480 at 15 fps or more"),
            (webcam, .hd720, 10, "YUYV 1280x720@10", "the smallest mode covering 1280x720 at 10 fps or more"),
            (webcam, .hd1080, 5, "YUYV 1920x1080@5", "the smallest mode covering 1920x1080 at 5 fps or more"),
            // 30 fps reaches 29.97 (within 1 %); MJPEG before H.264.
            (webcam, .hd1080, 29.97, "MJPG 1920x1080@30", "the smallest mode covering 1920x1080 at 29.97 fps or more"),
            // Nothing fits: the best mode.
            (webcam, .hd1080, 60, "MJPG 1920x1080@30", "no mode covers 1920x1080 at 60 fps; the best mode"),
            (webcam, PixelSize(width: 3840, height: 2160), 30, "MJPG 1920x1080@30", "no mode covers 3840x2160 at 30 fps; the best mode"),
            (webcam, portrait, 30, "MJPG 1920x1080@30", "no mode covers 720x1280 at 30 fps; the best mode"),
            // A primary (no rate): 30 fps or more; with --size the smallest that covers it.
            (webcam, .hd720, nil, "MJPG 1280x720@30", "the smallest mode covering 1280x720 at 30 fps or more"),
            // No canvas yet: the best mode that reaches the rate.
            (webcam, nil, nil, "MJPG 1920x1080@30", "the best mode at 30 fps or more (no canvas yet: its size becomes the canvas)"),
            (webcam, nil, 15, "MJPG 1920x1080@30", "the best mode at 15 fps or more (no canvas yet: its size becomes the canvas)"),
            (card, .hd720, 30, "YUYV 1280x720@60", "the smallest mode covering 1280x720 at 30 fps or more"),
            (card, .hd1080, 30, "YUYV 1920x1080@30", "the smallest mode covering 1920x1080 at 30 fps or more"),
            // Two raw modes at equal size and rate: by FourCC.
            (card, .hd1080, 60, "NV12 1920x1080@60", "the smallest mode covering 1920x1080 at 60 fps or more"),
            (card, .hd1080, 50, "NV12 1920x1080@60", "the smallest mode covering 1920x1080 at 50 fps or more"),
            (card, nil, nil, "NV12 1920x1080@60", "the best mode at 30 fps or more (no canvas yet: its size becomes the canvas)"),
        ]
        for (device, canvas, rate, mode, reason) in cases {
            let chosen = try #require(CameraModeChoice.choose(device, for: CameraRequest(canvas: canvas, rate: rate)))
            #expect(chosen.mode.description == mode, "\(device.path) \(canvas.map(\.description) ?? "-") \(rate ?? 0)")
            #expect(chosen.reason == reason, "\(device.path) \(canvas.map(\.description) ?? "-") \(rate ?? 0)")
        }
        // The metadata node captures nothing.
        #expect(CameraModeChoice.choose(try Self.fixture("webcam")[1], for: CameraRequest(canvas: .hd720, rate: 30)) == nil)
    }

    /// A mode FFmpeg's V4L2 input cannot be asked for by name is never
    /// chosen while another fits; a device with none is refused in one line.
    @Test func modesFFmpegCannotName() throws {
        var cam = try Self.fixture("webcam")[0]
        let bayer = CameraFormat(fourcc: "BA81", description: "8-bit Bayer BGBG/GRGR", compressed: false,
                                 sizes: [CameraSize(width: 640, height: 480, rates: [60])])
        cam.formats.append(bayer)
        #expect(bayer.sizes[0].rates.count == 1 && CameraMode(format: "BA81", compressed: false, size: .hd720, rate: 60).ffmpegInputFormat == nil)
        #expect(CameraModeChoice.choose(cam, for: CameraRequest(canvas: PixelSize(width: 640, height: 480), rate: 60))?.mode.description
                == "MJPG 1920x1080@30")
        let only = CameraDevice(path: "/dev/video5", name: "Bayer sensor", driver: "unicam", capture: true, formats: [bayer])
        do {
            _ = try SourceGuard.checkCamera("v4l2:/dev/video5", policy: .commandLine, devices: { [only] })
            Issue.record("a device with only Bayer modes was taken")
        } catch {
            #expect(error.description == "v4l2:/dev/video5: unsupported format: /dev/video5 offers no format FFmpeg's V4L2 input can be asked for (BA81)")
        }
        let names = ["YUYV": "yuyv422", "UYVY": "uyvy422", "YU12": "yuv420p", "422P": "yuv422p", "NV12": "nv12", "RGB3": "rgb24",
                     "BGR3": "bgr24", "GREY": "gray", "Y16": "gray16le", "MJPG": "mjpeg", "JPEG": "mjpeg", "H264": "h264"]
        for (fourcc, name) in names {
            #expect(CameraMode(format: fourcc, compressed: false, size: .hd720, rate: 30).ffmpegInputFormat == name)
        }
    }

    /// A camera in a role rotated 90° is asked for the canvas turned; a primary for no rate.
    @Test func requestFollowsTheRole() {
        var config = TakeConfiguration()
        config.secondaryOrientation = Orientation(rotation: .r90)
        #expect(config.cameraRequest(.secondary, canvas: .hd720, rate: FrameRate(30)) == CameraRequest(canvas: PixelSize(width: 720, height: 1280), rate: 30))
        #expect(config.cameraRequest(.primary, canvas: .hd720, rate: nil) == CameraRequest(canvas: .hd720, rate: nil))
        #expect(config.cameraRequest(.primary, canvas: nil, rate: nil).description == "no canvas yet, the take's rate from this camera (30 fps or more wanted)")
    }

    @Test func fourcc() {
        #expect(CameraListing.fourccText(0x4750_4A4D) == "MJPG")
        #expect(CameraListing.fourccText(0x5659_5559) == "YUYV")
        #expect(CameraListing.fourccText(0x2020_3859) == "Y8")
    }

    /// A real device, where there is one (none here): it lists with modes.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/video0"), "needs a V4L2 device at /dev/video0; no machine here has one"))
    func realDevice() {
        let devices = CameraListing.devices()
        #expect(!devices.isEmpty)
        #expect(devices.allSatisfy { !$0.capture || !$0.formats.isEmpty })
    }

    /// No /dev/video* here: the listing is empty, and says so rather than failing.
    @Test func noDevicesHere() {
        #expect(CameraListing.devices(directory: "/nonexistent").isEmpty)
        #expect(CameraListing.device(path: "/dev/null") == nil)
    }
}
