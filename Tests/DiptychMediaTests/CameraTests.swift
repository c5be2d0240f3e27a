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
            do { try SourceGuard.checkCamera(url, policy: policy, devices: { devices }); return nil } catch { return error.description }
        }
        let server = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: false)
        #expect(message("in.mp4", .commandLine) == nil)
        #expect(message("camera:0", server) == "camera:0: not allowed: cameras are not allowed here (diptych serve --allow-cameras)")
        #expect(message("camera:1", .commandLine) == "camera:1: no such camera: 1 camera found (camera:0…camera:0)")
        #expect(message("camera:x", .commandLine) == "camera:x: expected camera:N, N a rank from 0 (the best camera)")
        #expect(message("v4l2:/dev/video1", .commandLine) == "v4l2:/dev/video1: not a video capture device")
        // Resolved: capture is not linked yet, and says what it would open.
        let allowed = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: false, cameras: true)
        #expect(message("camera:0", allowed)?.contains("would open /dev/video0 as MJPG 1920x1080@30") == true)
        #expect(server.description.hasSuffix("no cameras"))
        #expect(!SourcePolicy.commandLine.description.contains("cameras"))
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
