/// A V4L2 device as listed (docs/ARCHITECTURE.md, "Cameras"): what
/// `CameraListing` (DiptychMedia) reads with VIDIOC_QUERYCAP,
/// VIDIOC_ENUM_FMT, VIDIOC_ENUM_FRAMESIZES and VIDIOC_ENUM_FRAMEINTERVALS,
/// and what a recorded description (a test fixture, JSON) holds. Ranking
/// and `camera:N` resolution work on this value alone, so they are tested
/// without a device.
public struct CameraDevice: Hashable, Sendable, Codable {
    /// The device node (`/dev/video0`).
    public var path: String
    /// The card name the driver reports (`HD Pro Webcam C920`).
    public var name: String
    /// The driver (`uvcvideo`).
    public var driver: String
    /// Whether the node captures video (V4L2_CAP_VIDEO_CAPTURE); a UVC
    /// camera's metadata node and output-only devices do not.
    public var capture: Bool
    public var formats: [CameraFormat]

    public init(path: String, name: String, driver: String, capture: Bool, formats: [CameraFormat]) {
        self.path = path; self.name = name; self.driver = driver; self.capture = capture; self.formats = formats
    }

    /// Every format at every size and rate, in the device's order.
    public var modes: [CameraMode] {
        formats.flatMap { f in
            f.sizes.flatMap { s in
                s.rates.map { CameraMode(format: f.fourcc, compressed: f.compressed, size: PixelSize(width: s.width, height: s.height), rate: $0) }
            }
        }
    }

    /// The mode `CameraRanking` prefers; nil when the device captures nothing.
    public var bestMode: CameraMode? {
        capture ? modes.min(by: CameraRanking.prefers) : nil
    }
}

/// One pixel format or codec of a device (`YUYV`, `MJPG`, `H264`).
public struct CameraFormat: Hashable, Sendable, Codable {
    /// The V4L2 FourCC as text (`MJPG`).
    public var fourcc: String
    /// The driver's description (`Motion-JPEG`).
    public var description: String
    /// Whether frames come compressed (V4L2_FMT_FLAG_COMPRESSED) and must be decoded.
    public var compressed: Bool
    public var sizes: [CameraSize]

    public init(fourcc: String, description: String, compressed: Bool, sizes: [CameraSize]) {
        self.fourcc = fourcc; self.description = description; self.compressed = compressed; self.sizes = sizes
    }
}

/// One frame size of a format with the frame rates it offers at that size.
public struct CameraSize: Hashable, Sendable, Codable {
    public var width: Int
    public var height: Int
    /// Frames per second, as the driver's intervals inverted (30, 29.97).
    public var rates: [Double]

    public init(width: Int, height: Int, rates: [Double]) { self.width = width; self.height = height; self.rates = rates }
}

/// One way a device can capture: a format at one size and rate.
public struct CameraMode: Hashable, Sendable, Codable, CustomStringConvertible {
    public var format: String
    public var compressed: Bool
    public var size: PixelSize
    public var rate: Double

    public init(format: String, compressed: Bool, size: PixelSize, rate: Double) {
        self.format = format; self.compressed = compressed; self.size = size; self.rate = rate
    }

    /// The rate as FFmpeg's `framerate` option takes it (`30`, `29.97`).
    public var rateText: String { Self.rateText(rate) }

    /// `rate` as FFmpeg's `framerate` option takes it.
    public static func rateText(_ rate: Double) -> String {
        rate == rate.rounded() ? String(Int(rate)) : String((rate * 1000).rounded() / 1000)
    }

    /// `MJPG 1920x1080@30`.
    public var description: String { "\(format) \(size)@\(rateText)" }
}

/// The stated priority rule: a device's modes rank by size (more pixels
/// first), then rate (higher first), then decoding cost at equal size and
/// rate (raw, then MJPEG, whose frames stand alone, then other codecs), then
/// FourCC; devices rank by their best mode, ties by device path, and devices
/// that capture no video are not ranked.
public enum CameraRanking {
    /// The rule in one line, as `diptych probe` states it.
    public static let rule = "more pixels, then a higher rate, then raw before MJPEG before other codecs; devices by their best mode, ties by path"

    /// 0 raw, 1 MJPEG, 2 any other compressed format.
    static func decodingCost(_ m: CameraMode) -> Int {
        !m.compressed ? 0 : (m.format == "MJPG" || m.format == "JPEG") ? 1 : 2
    }

    /// Whether mode `a` ranks before mode `b`.
    public static func prefers(_ a: CameraMode, _ b: CameraMode) -> Bool {
        let pa = a.size.width * a.size.height, pb = b.size.width * b.size.height
        if pa != pb { return pa > pb }
        if a.rate != b.rate { return a.rate > b.rate }
        let ca = decodingCost(a), cb = decodingCost(b)
        if ca != cb { return ca < cb }
        return a.format < b.format
    }

    /// The devices that capture video, best first.
    public static func rank(_ devices: [CameraDevice]) -> [(device: CameraDevice, mode: CameraMode)] {
        devices.compactMap { d in d.bestMode.map { (d, $0) } }
            .sorted { x, y in prefers(x.1, y.1) || (!prefers(y.1, x.1) && x.0.path < y.0.path) }
    }
}

/// What a take asks of a camera: the canvas its picture is drawn into (in
/// the camera's own orientation: a role rotated 90° asks for the canvas
/// turned) and the take's frame rate, each when known. A primary camera's
/// rate becomes the take's, so a primary asks for none.
public struct CameraRequest: Hashable, Sendable, CustomStringConvertible {
    public var canvas: PixelSize?
    public var rate: Double?

    public init(canvas: PixelSize? = nil, rate: Double? = nil) { self.canvas = canvas; self.rate = rate }

    public var description: String {
        let size = canvas.map { "canvas \($0)" } ?? "no canvas yet"
        let r = rate.map { "\(CameraMode.rateText($0)) fps" }
            ?? "the take's rate from this camera (\(CameraMode.rateText(CameraModeChoice.primaryRate)) fps or more wanted)"
        return "\(size), \(r)"
    }
}

extension TakeConfiguration {
    /// What a camera in `role` is asked for: `canvas` turned into the role's
    /// own orientation (a camera rotated 90° covers a landscape canvas with
    /// a portrait mode), and the take's `rate` (nil for the primary, whose
    /// rate becomes the take's).
    public func cameraRequest(_ role: StreamRole, canvas: PixelSize?, rate: FrameRate?) -> CameraRequest {
        let rotation = (role == .primary ? primaryOrientation : secondaryOrientation).rotation
        return CameraRequest(canvas: canvas?.rotated(rotation), rate: rate?.fps)
    }
}

/// Which of a device's modes a take opens (`CameraModeChoice.rule`), a pure
/// function of the device's description and the take's request:
///
/// 1. A mode *fits* when it is at least the canvas in both dimensions (any
///    size when the canvas is not known yet) and its rate is at least the
///    take's (`primaryRate` when the camera is the primary and sets the
///    rate), within 1 % (29.97 fits 30). Only modes whose format FFmpeg's
///    V4L2 input can be asked for by name are considered (`ffmpegInputFormat`).
/// 2. Of the fitting modes: with a canvas, the fewest pixels, then the lowest
///    rate, then raw before MJPEG before other codecs, then FourCC (the
///    least to capture and decode that still covers the take); without a
///    canvas, the best by `CameraRanking` (the camera's size becomes the canvas).
/// 3. When none fits, the device's best mode (`CameraRanking`).
public enum CameraModeChoice {
    /// The rule in one line, as the log and the docs state it.
    public static let rule = "the smallest mode at least the canvas in both dimensions at the take's rate or more "
        + "(the best such mode when there is no canvas yet; a primary camera is asked for \(CameraMode.rateText(primaryRate)) fps or more), "
        + "the lower rate, then raw before MJPEG at equal size and rate; else the best mode"

    /// The rate a primary camera is asked for (its rate becomes the take's).
    public static let primaryRate = 30.0

    /// The mode `device` opens for `request`, and which part of the rule chose
    /// it; nil when the device captures nothing.
    public static func choose(_ device: CameraDevice, for request: CameraRequest) -> (mode: CameraMode, reason: String)? {
        guard device.capture else { return nil }
        let usable = device.modes.filter { $0.ffmpegInputFormat != nil }
        let rate = request.rate ?? primaryRate
        let fitting = usable.filter { m in
            m.rate * 1.01 >= rate && request.canvas.map { m.size.width >= $0.width && m.size.height >= $0.height } ?? true
        }
        let rateText = CameraMode.rateText(rate)
        if let canvas = request.canvas {
            if let m = fitting.min(by: smaller) {
                return (m, "the smallest mode covering \(canvas) at \(rateText) fps or more")
            }
        } else if let m = fitting.min(by: CameraRanking.prefers) {
            return (m, "the best mode at \(rateText) fps or more (no canvas yet: its size becomes the canvas)")
        }
        guard let best = (usable.isEmpty ? device.modes : usable).min(by: CameraRanking.prefers) else { return nil }
        let wanted = request.canvas.map { "covers \($0) at \(rateText) fps" } ?? "reaches \(rateText) fps"
        return (best, "no mode \(wanted); the best mode")
    }

    /// Whether mode `a` comes before `b` among modes that fit a canvas:
    /// fewer pixels, a lower rate, raw before MJPEG before other codecs, FourCC.
    public static func smaller(_ a: CameraMode, _ b: CameraMode) -> Bool {
        let pa = a.size.width * a.size.height, pb = b.size.width * b.size.height
        if pa != pb { return pa < pb }
        if a.rate != b.rate { return a.rate < b.rate }
        let ca = CameraRanking.decodingCost(a), cb = CameraRanking.decodingCost(b)
        if ca != cb { return ca < cb }
        return a.format < b.format
    }
}

extension CameraMode {
    /// This mode as the options of FFmpeg's V4L2 input: `video_size`,
    /// `framerate` and, where it has a name, `input_format`.
    public var ffmpegOptions: [(key: String, value: String)] {
        var options = [(key: "video_size", value: size.description), (key: "framerate", value: rateText)]
        if let f = ffmpegInputFormat { options.append((key: "input_format", value: f)) }
        return options
    }

    /// What FFmpeg's V4L2 input is asked for with `input_format`: the pixel
    /// format or codec name of this mode's FourCC (`yuyv422` for YUYV,
    /// `mjpeg` for MJPG), from the FourCCs its conversion table knows; nil
    /// for one it cannot be asked for by name (Bayer, CPiA, packed RGB).
    public var ffmpegInputFormat: String? {
        switch format {
        case "YUYV": return "yuyv422"
        case "UYVY": return "uyvy422"
        case "YU12": return "yuv420p"
        case "422P": return "yuv422p"
        case "NV12": return "nv12"
        case "RGB3": return "rgb24"
        case "BGR3": return "bgr24"
        case "GREY": return "gray"
        case "Y16": return "gray16le"
        case "MJPG", "JPEG": return "mjpeg"
        case "H264": return "h264"
        default: return nil
        }
    }
}

/// A source naming a camera: `v4l2:/dev/videoN` (by device) or `camera:N`
/// (by rank, 0 the best). Other sources are not camera sources (`parse` is nil).
public enum CameraSelection: Hashable, Sendable, CustomStringConvertible {
    case device(String)
    case rank(Int)

    /// The camera `text` names; nil when it names no camera; throws
    /// `CameraError` when it is camera syntax but malformed.
    public static func parse(_ text: String) throws(CameraError) -> CameraSelection? {
        if text.hasPrefix("v4l2:") {
            let path = String(text.dropFirst("v4l2:".count))
            guard path.hasPrefix("/dev/"), !path.contains("/../") else {
                throw CameraError(source: text, reason: "expected v4l2:/dev/videoN")
            }
            return .device(path)
        }
        if text.hasPrefix("camera:") {
            guard let n = Int(text.dropFirst("camera:".count)), n >= 0 else {
                throw CameraError(source: text, reason: "expected camera:N, N a rank from 0 (the best camera)")
            }
            return .rank(n)
        }
        return nil
    }

    public var description: String {
        switch self {
        case .device(let p): return "v4l2:\(p)"
        case .rank(let n): return "camera:\(n)"
        }
    }

    /// The device this selection names among `devices` (ranked by
    /// `CameraRanking`) and its best mode (a take opens the mode
    /// `CameraModeChoice` chooses for it). Throws a `CameraError` naming the
    /// source when there is no such camera or it captures nothing.
    public func resolve(in devices: [CameraDevice]) throws(CameraError) -> (device: CameraDevice, mode: CameraMode) {
        let ranked = CameraRanking.rank(devices)
        switch self {
        case .rank(let n):
            guard n < ranked.count else {
                let found = ranked.isEmpty ? "no cameras found" : "\(ranked.count) camera\(ranked.count == 1 ? "" : "s") found (camera:0…camera:\(ranked.count - 1))"
                throw CameraError(source: description, reason: "no such camera: \(found)")
            }
            return ranked[n]
        case .device(let path):
            if let r = ranked.first(where: { $0.device.path == path }) { return r }
            if devices.contains(where: { $0.path == path }) {
                throw CameraError(source: description, reason: "not a video capture device")
            }
            throw CameraError(source: description, reason: "no such camera")
        }
    }
}

/// A camera source that cannot be used: one line naming it.
public struct CameraError: Error, Hashable, Sendable, CustomStringConvertible {
    public var source: String
    public var reason: String
    public init(source: String, reason: String) { self.source = source; self.reason = reason }
    public var description: String { "\(source): \(reason)" }
}

/// A device as `diptych probe --json` and `GET /v1/sources` list it.
public struct SourceCamera: Hashable, Sendable, Encodable {
    /// `camera:N`, its rank; nil for a node that captures no video.
    public var source: String?
    public var device: String
    public var name: String
    public var driver: String
    public var capture: Bool
    /// Its best mode by `CameraRanking` (what ranks it; a take opens the
    /// mode that fits its canvas and rate, `CameraModeChoice`).
    public var mode: CameraMode?
    public var formats: [CameraFormat]

    /// The ranked devices as `camera:0`, `camera:1`, …, then the rest in path order.
    public static func list(_ devices: [CameraDevice]) -> [SourceCamera] {
        let ranked = CameraRanking.rank(devices)
        return ranked.enumerated().map { i, r in
            SourceCamera(source: "camera:\(i)", device: r.device.path, name: r.device.name, driver: r.device.driver,
                         capture: true, mode: r.mode, formats: r.device.formats)
        } + devices.filter { d in !ranked.contains { $0.device.path == d.path } }.sorted { $0.path < $1.path }.map { d in
            SourceCamera(source: nil, device: d.path, name: d.name, driver: d.driver, capture: d.capture, mode: nil, formats: d.formats)
        }
    }
}
