import CV4L2
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// The V4L2 devices of this machine (`/dev/video*`) as `CameraDevice`
/// values, read the way FFmpeg's `video4linux2` input lists them
/// (`-list_formats all`): VIDIOC_QUERYCAP, then per single-planar capture
/// format VIDIOC_ENUM_FRAMESIZES and per size VIDIOC_ENUM_FRAMEINTERVALS.
/// A node that cannot be opened or queried is left out. Ranking and
/// resolution are `CameraRanking` and `CameraSelection` (DiptychCore).
/// Never run on a real device here: no machine of the project has one.
public enum CameraListing {
    /// Every `video*` node under `directory`, by path.
    public static func devices(directory: String = "/dev") -> [CameraDevice] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let e = readdir(dir) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name.hasPrefix("video") { names.append(name) }
        }
        return names.sorted().compactMap { device(path: directory + "/" + $0) }
    }

    /// One node's description; nil when it cannot be opened or is not V4L2.
    public static func device(path: String) -> CameraDevice? {
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var card = [CChar](repeating: 0, count: 64), driver = [CChar](repeating: 0, count: 32)
        var caps: UInt32 = 0
        guard dv4l2_querycap(fd, &card, &driver, &caps) == 0 else { return nil }
        let capture = caps & dv4l2_cap_video_capture() != 0
        var formats: [CameraFormat] = []
        if capture {
            var index: UInt32 = 0
            var fourcc: UInt32 = 0, compressed: Int32 = 0
            var text = [CChar](repeating: 0, count: 32)
            while index < 64, dv4l2_enum_fmt(fd, index, &fourcc, &text, &compressed) == 0 {
                formats.append(CameraFormat(fourcc: fourccText(fourcc), description: string(text),
                                            compressed: compressed != 0, sizes: sizes(fd, fourcc)))
                index += 1
            }
        }
        return CameraDevice(path: path, name: string(card), driver: string(driver), capture: capture, formats: formats)
    }

    private static func sizes(_ fd: Int32, _ fourcc: UInt32) -> [CameraSize] {
        let discrete = dv4l2_size_is_discrete(fd, fourcc) != 0
        var out: [CameraSize] = []
        var index: UInt32 = 0, w: UInt32 = 0, h: UInt32 = 0
        while index < (discrete ? 256 : 1), dv4l2_enum_size(fd, fourcc, index, &w, &h) == 0 {
            out.append(CameraSize(width: Int(w), height: Int(h), rates: rates(fd, fourcc, w, h)))
            index += 1
        }
        return out
    }

    private static func rates(_ fd: Int32, _ fourcc: UInt32, _ w: UInt32, _ h: UInt32) -> [Double] {
        let discrete = dv4l2_rate_is_discrete(fd, fourcc, w, h) != 0
        var out: [Double] = []
        var index: UInt32 = 0, num: UInt32 = 0, den: UInt32 = 0
        while index < (discrete ? 64 : 1), dv4l2_enum_rate(fd, fourcc, w, h, index, &num, &den) == 0 {
            if den > 0, num > 0 { out.append((Double(num) / Double(den) * 1000).rounded() / 1000) }
            index += 1
        }
        return out
    }

    /// A FourCC as its four characters (`MJPG`), trailing spaces dropped.
    public static func fourccText(_ v: UInt32) -> String {
        let bytes = (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \0")
    }

    private static func string(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

private extension String {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
