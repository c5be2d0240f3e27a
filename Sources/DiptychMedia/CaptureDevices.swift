import CFFmpeg
import CV4L2
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// libavdevice, FFmpeg's capture inputs (`video4linux2` for cameras), found
/// the first time a camera is opened: in the binary itself where it links
/// libavdevice (the self-contained server build links it statically), else
/// `libavdevice.so.N` loaded with dlopen (N: the linked libavformat's major
/// version, which libavdevice's follows), so binaries run without it until a
/// camera is asked for. Its `avdevice_register_all` adds the device inputs to
/// the libavformat the process already uses, and `av_find_input_format`
/// finds them from then on. Registered once; the library stays loaded.
enum CaptureDevices {
    /// The shared library that goes with the linked libavformat (`libavdevice.so.59`).
    static var libraryName: String { "libavdevice.so.\(avformat_version() >> 16)" }
    /// Debian's package of that library (`libavdevice59`).
    static var packageName: String { "libavdevice\(avformat_version() >> 16)" }

    /// Where the device inputs came from (`libavdevice linked in`,
    /// `libavdevice.so.59`), or why there are none: one line naming the
    /// library and its Debian package.
    static let registration: Result<String, CaptureUnavailable> = {
        if let linked = dv4l2_linked_avdevice_register_all() {
            linked()
            return .success("libavdevice linked in")
        }
        return load(library: libraryName, package: packageName)
    }()

    /// Loads `library` and calls its `avdevice_register_all`.
    static func load(library: String, package: String) -> Result<String, CaptureUnavailable> {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            return .failure(CaptureUnavailable(reason: "camera capture needs \(library) (Debian: \(package)), which cannot be loaded: \(why)"))
        }
        guard let symbol = dlsym(handle, "avdevice_register_all") else {
            return .failure(CaptureUnavailable(reason: "camera capture needs \(library) (Debian: \(package)), which has no avdevice_register_all"))
        }
        typealias Register = @convention(c) () -> Void
        unsafeBitCast(symbol, to: Register.self)()
        return .success(library)
    }

    /// libavdevice's input `name` (`video4linux2`), registering the device
    /// inputs first. Throws when libavdevice cannot be had or lacks it.
    static func inputFormat(_ name: String) throws(CaptureUnavailable) -> UnsafePointer<AVInputFormat> {
        let from = try registration.get()
        guard let format = av_find_input_format(name) else {
            throw CaptureUnavailable(reason: "FFmpeg's device input '\(name)' is not in this build (\(from))")
        }
        return format
    }
}

/// Why a capture device cannot be opened here: libavdevice cannot be loaded
/// or lacks the input. One line.
struct CaptureUnavailable: Error, Hashable, Sendable, CustomStringConvertible {
    var reason: String
    var description: String { reason }
}

/// Whether this process can capture from cameras (`diptych probe`).
public enum CaptureSupport {
    /// Where the capture inputs come from (`libavdevice.so.59`), or the one-line reason there are none.
    public static var status: Result<String, CaptureFailure> {
        CaptureDevices.registration.mapError { CaptureFailure(reason: $0.reason) }.flatMap { from in
            av_find_input_format("video4linux2") != nil ? .success(from)
                : .failure(CaptureFailure(reason: "FFmpeg's video4linux2 input is not in this build (\(from))"))
        }
    }

    /// Why capture cannot run here, as `status` says it.
    public struct CaptureFailure: Error, Hashable, Sendable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }
}

/// A capture device opened through libavdevice, which `FileSource` opens in
/// place of a URL: the input, what it opens, its options, and what the log
/// says about it.
struct DeviceCapture: Sendable, CustomStringConvertible {
    /// libavdevice's input (`video4linux2`; the tests' `lavfi`).
    var format: String
    /// What the input opens (`/dev/video0`; a lavfi graph).
    var device: String
    /// The input's options, in order (a camera's: `CameraMode.ffmpegOptions`).
    var options: [(key: String, value: String)]
    /// One line for the log: the device, its mode and why it was chosen.
    var description: String

    /// A V4L2 camera in `mode`, asked for by size, rate and format.
    static func camera(_ device: CameraDevice, mode: CameraMode, reason: String) -> DeviceCapture {
        DeviceCapture(format: "video4linux2", device: device.path, options: mode.ffmpegOptions,
                      description: "camera \(device.path) (\(device.name), \(device.driver)): \(mode), \(reason)")
    }
}
