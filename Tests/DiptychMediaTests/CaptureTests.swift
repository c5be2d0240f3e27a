import CFFmpeg
import DiptychCore
import Foundation
import Testing
@testable import DiptychMedia

/// Capture through libavdevice (`CaptureDevices`, `FileSource`'s capture
/// path). No machine here has a camera, so the chain — libavdevice found
/// and registered, a device input opened non-blocking with its options,
/// its packets decoded into frames — runs on lavfi's `testsrc`, a device
/// input of the same library opened by the same code; FFmpeg's V4L2 input
/// itself is opened on nodes that are not cameras, and fails in one line.
@Suite struct CaptureTests {
    /// lavfi's test pattern as a capture device.
    static func testsrc(_ graph: String = "testsrc=size=320x240:rate=25") -> DeviceCapture {
        DeviceCapture(format: "lavfi", device: graph, options: [], description: "lavfi \(graph)")
    }

    /// libavdevice is loaded (this build does not link it) and registers its inputs.
    @Test func libavdeviceLoads() throws {
        #expect(try CaptureDevices.registration.get() == "libavdevice.so.\(avformat_version() >> 16)")
        #expect(CaptureDevices.packageName == "libavdevice\(avformat_version() >> 16)")
        let v4l2 = try CaptureDevices.inputFormat("video4linux2")
        #expect(String(cString: v4l2.pointee.name) == "video4linux2,v4l2")
        #expect(v4l2.pointee.flags & AVFMT_NOFILE != 0)
        _ = try CaptureDevices.inputFormat("lavfi")
        #expect(throws: CaptureUnavailable.self) { try CaptureDevices.inputFormat("no-such-device") }
        #expect(try CaptureSupport.status.get() == "libavdevice.so.\(avformat_version() >> 16)")
    }

    /// Without libavdevice: one line naming the library and its Debian package.
    @Test func missingLibraryIsOneLine() {
        switch CaptureDevices.load(library: "libavdevice.so.999", package: "libavdevice999") {
        case .success: Issue.record("libavdevice.so.999 loaded")
        case .failure(let e):
            #expect(e.description.hasPrefix("camera capture needs libavdevice.so.999 (Debian: libavdevice999), which cannot be loaded: "))
            #expect(!e.description.contains("\n"))
        }
    }

    /// The capture path end to end: opened non-blocking, described, decoded,
    /// timed by the device's own timestamps.
    @Test func testPatternThroughTheCapturePath() throws {
        let source = try FileSource(capture: Self.testsrc(), name: "camera:test")
        defer { source.close() }
        let input = try #require(source.input)
        #expect(input.raw.pointee.flags & AVFMT_FLAG_NONBLOCK != 0)
        #expect(String(cString: input.raw.pointee.iformat.pointee.name) == "lavfi")
        #expect(source.capturing)
        #expect(source.info.size == PixelSize(width: 320, height: 240))
        #expect(source.info.frameRate == FrameRate(25))
        #expect(source.info.duration == nil)
        #expect(source.info.capture == "lavfi testsrc=size=320x240:rate=25")
        #expect(source.info.notices.first == "lavfi testsrc=size=320x240:rate=25")
        var frames: [VideoFrame] = []
        while frames.count < 50, let f = try source.nextFrame() { frames.append(f) }
        #expect(frames.count == 50)
        #expect(frames.allSatisfy { $0.width == 320 && $0.height == 240 })
        let times = frames.map(\.pts.seconds)
        #expect(abs(times[0]) < 1e-9)
        #expect(zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 0.04) < 1e-6 }, "\(times.prefix(5))")
        // testsrc moves (a counter, a sweeping bar): the first and last pictures differ.
        func sum(_ f: VideoFrame) -> Int {
            let p = f.planes[0]
            return (0..<f.height).reduce(0) { acc, y in
                acc &+ (0..<f.width).reduce(0) { $0 &+ Int(p.baseAddress.load(fromByteOffset: y * p.stride + $1, as: UInt8.self)) }
            }
        }
        #expect(sum(frames[0]) != sum(frames[49]))
        #expect(source.decodeErrors == 0)
    }

    /// A device input's error while opening is one line naming the source and the node.
    @Test func v4l2OnNodesThatAreNoCamera() throws {
        for (node, reason) in [("/dev/null", "Inappropriate ioctl for device"), ("/dev/video-none", "No such file or directory")] {
            let capture = DeviceCapture(format: "video4linux2", device: node,
                                        options: [(key: "video_size", value: "640x480"), (key: "framerate", value: "30")], description: node)
            do {
                _ = try FileSource(capture: capture, name: "v4l2:\(node)")
                Issue.record("\(node) opened as a camera")
            } catch {
                guard case .openFailed = error else { Issue.record("\(node): \(error)"); continue }
                #expect(error.description == "v4l2:\(node): cannot open: \(node): \(reason)")
            }
        }
    }

    /// A capture that ends (lavfi's graph runs out; a camera unplugged) ends the stream.
    @Test func endOfCapture() throws {
        let source = try FileSource(capture: Self.testsrc("testsrc=size=160x120:rate=30:duration=0.5"), name: "camera:test")
        defer { source.close() }
        var n = 0
        while try source.nextFrame() != nil { n += 1 }
        #expect(n == 15)
    }

    /// A device that delivers nothing (EAGAIN, again and again) is read
    /// until the deadline fires or the read is interrupted, never longer;
    /// other sources' reads are passed through.
    @Test func aSilentDeviceDoesNotHang() {
        let eagain = diptych_averror(EAGAIN)
        let deadline = InterruptDeadline(timeout: 0.2)
        deadline.arm()
        let start = InterruptDeadline.now()
        var calls = 0
        let r = FileSource.waitingRead(pause: FileSource.capturePause, deadline: deadline) { calls += 1; return eagain }
        let took = InterruptDeadline.now() - start
        #expect(r == diptych_averror_exit() && deadline.fired && !deadline.interrupted)
        #expect(took >= 0.2 && took < 1, "\(took) s")
        #expect(calls > 10 && calls < 200, "asked \(calls) times in \(took) s")

        // Interrupted (the take stops, or the role gives the source up): at once.
        let stopped = InterruptDeadline(timeout: 10)
        stopped.arm()
        let t0 = InterruptDeadline.now()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { stopped.interrupt() }
        #expect(FileSource.waitingRead(pause: FileSource.capturePause, deadline: stopped) { eagain } == diptych_averror_exit())
        #expect(stopped.interrupted && InterruptDeadline.now() - t0 < 2)

        // A frame after a few tries is returned; without waiting, EAGAIN is the caller's.
        let waiting = InterruptDeadline(timeout: 10)
        waiting.arm()
        var tries = 0
        #expect(FileSource.waitingRead(pause: FileSource.capturePause, deadline: waiting) { tries += 1; return tries < 4 ? eagain : 0 } == 0)
        #expect(tries == 4)
        #expect(FileSource.waitingRead(pause: nil, deadline: deadline) { eagain } == eagain)
    }

    /// A camera's `DeviceCapture`: its node and the chosen mode as FFmpeg's V4L2 options.
    @Test func cameraOptions() throws {
        let cam = CameraDevice(path: "/dev/video0", name: "Cam", driver: "uvcvideo", capture: true, formats: [
            CameraFormat(fourcc: "YUYV", description: "YUYV 4:2:2", compressed: false,
                         sizes: [CameraSize(width: 640, height: 480, rates: [29.97])])])
        let mode = try #require(CameraModeChoice.choose(cam, for: CameraRequest(canvas: PixelSize(width: 640, height: 360), rate: 29.97)))
        let c = DeviceCapture.camera(cam, mode: mode.mode, reason: mode.reason)
        #expect(c.format == "video4linux2" && c.device == "/dev/video0")
        #expect(c.options.map { "\($0.key)=\($0.value)" } == ["video_size=640x480", "framerate=29.97", "input_format=yuyv422"])
        #expect(c.description == "camera /dev/video0 (Cam, uvcvideo): YUYV 640x480@29.97, the smallest mode covering 640x360 at 29.97 fps or more")
    }
}
