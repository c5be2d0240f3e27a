import CFFmpeg
import CVA
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// One VA profile a device supports and its entrypoints (`VAEntrypointEncSlice`, ...).
public struct VAProfileSupport: Hashable, Sendable {
    public var profile: String
    public var entrypoints: [String]
    public init(profile: String, entrypoints: [String]) { self.profile = profile; self.entrypoints = entrypoints }
}

/// What one DRM render node offers through VA-API.
public struct VADeviceReport: Hashable, Sendable {
    /// `/dev/dri/renderD128`, ...
    public var path: String
    /// The driver's vendor string when `vaInitialize` succeeded.
    public var vendor: String?
    public var vaVersion: String?
    public var profiles: [VAProfileSupport]
    /// Why the device is unusable (cannot open, no VA driver), nil when it initialized.
    public var error: String?
    /// What the driver lists for the input surfaces of its first encode
    /// profile and entrypoint (`vaQuerySurfaceAttributes`).
    public var encodeSurfaces: VASurfaceSupport?

    public init(path: String, vendor: String?, vaVersion: String?, profiles: [VAProfileSupport], error: String?,
                encodeSurfaces: VASurfaceSupport? = nil) {
        self.path = path; self.vendor = vendor; self.vaVersion = vaVersion; self.profiles = profiles; self.error = error
        self.encodeSurfaces = encodeSurfaces
    }

    /// The encode entrypoints (`VAEntrypointEncSlice[LP]`) for `codec`'s 8-bit profiles.
    public func encodeSupport(for codec: VideoCodec) -> [VAProfileSupport] {
        let wanted = codec == .h264
            ? ["VAProfileH264High", "VAProfileH264Main", "VAProfileH264ConstrainedBaseline"]
            : ["VAProfileHEVCMain"]
        return profiles.filter { wanted.contains($0.profile) }.compactMap { p in
            let enc = p.entrypoints.filter { $0 == "VAEntrypointEncSlice" || $0 == "VAEntrypointEncSliceLP" }
            return enc.isEmpty ? nil : VAProfileSupport(profile: p.profile, entrypoints: enc)
        }
    }
}

/// Every VA-API device found, or why there is none.
public struct VAAPIReport: Hashable, Sendable, CustomStringConvertible {
    public var directory: String
    public var devices: [VADeviceReport]
    /// Why no device could be examined (no directory, no render nodes), else nil.
    public var problem: String?

    public init(directory: String, devices: [VADeviceReport], problem: String?) {
        self.directory = directory; self.devices = devices; self.problem = problem
    }

    public var description: String {
        if let problem { return "VA-API: \(problem)" }
        var lines: [String] = []
        for d in devices {
            if let e = d.error { lines.append("VA-API \(d.path): \(e)"); continue }
            lines.append("VA-API \(d.path): \(d.vendor ?? "?") (VA-API \(d.vaVersion ?? "?"))")
            for p in d.profiles { lines.append("  \(p.profile): \(p.entrypoints.joined(separator: ", "))") }
            if let s = d.encodeSurfaces { lines.append("  encode surfaces (\(s.profile)): \(s)") }
        }
        return lines.joined(separator: "\n")
    }
}

/// An encoder considered for a codec, and whether it can be used here.
public struct EncoderCandidate: Hashable, Sendable, CustomStringConvertible {
    /// FFmpeg encoder name (`h264_vaapi`, `libx264`, ...).
    public var name: String
    public var isHardware: Bool
    public var available: Bool
    /// Why it is (un)available: `VA-API on /dev/dri/renderD128 (...)`, `no /dev/dri`, ...
    public var reason: String
    /// Render node for VA-API encoders.
    public var devicePath: String?
    public var description: String { "\(name): \(available ? "available" : "unavailable") (\(reason))" }
}

/// The encoder chosen for a take, and why.
public struct EncoderSelection: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    /// VA-API (frames go through VA surfaces).
    public var isHardware: Bool
    /// NVENC (frames go through CUDA frames).
    public var isNVENC: Bool { name.hasSuffix("_nvenc") }
    public var reason: String
    public var devicePath: String?
    public var description: String { "\(name) (\(reason))" }
}

/// Finds which encoders can run here: VA-API (a DRM render node whose VA
/// driver has an encode entrypoint for the codec's profile) or software.
public enum EncoderProbe {
    public static let defaultDRIDirectory = "/dev/dri"

    /// The FFmpeg encoders considered for `codec`, hardware first.
    public static func encoderNames(codec: VideoCodec) -> (hardware: String, software: String) {
        codec == .h264 ? ("h264_vaapi", "libx264") : ("hevc_vaapi", "libx265")
    }

    /// Examines every render node in `directory` (`vaInitialize`, profiles, entrypoints).
    public static func vaapi(directory: String = defaultDRIDirectory) -> VAAPIReport {
        var st = stat()
        guard stat(directory, &st) == 0 else {
            return VAAPIReport(directory: directory, devices: [], problem: "no \(directory)")
        }
        guard let dir = opendir(directory) else {
            return VAAPIReport(directory: directory, devices: [], problem: "cannot read \(directory): \(String(cString: strerror(errno)))")
        }
        var nodes: [String] = []
        while let e = readdir(dir) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name.hasPrefix("renderD") { nodes.append(name) }
        }
        closedir(dir)
        guard !nodes.isEmpty else {
            return VAAPIReport(directory: directory, devices: [], problem: "no DRM render node (renderD*) in \(directory)")
        }
        let va: VALibrary
        switch VALibrary.shared {
        case .success(let l): va = l
        case .failure(let e): return VAAPIReport(directory: directory, devices: [], problem: e.reason)
        }
        return VAAPIReport(directory: directory, devices: nodes.sorted().map { queryDevice(path: directory + "/" + $0, va: va) }, problem: nil)
    }

    /// Opens one render node with libva and lists its profiles and entrypoints.
    /// Every fd and display is released before returning.
    static func queryDevice(path: String, va: VALibrary) -> VADeviceReport {
        var report = VADeviceReport(path: path, vendor: nil, vaVersion: nil, profiles: [], error: nil)
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            report.error = "cannot open: \(String(cString: strerror(errno)))"
            return report
        }
        defer { close(fd) }
        guard let dpy = va.getDisplayDRM(fd) else {
            report.error = "no VA driver (vaGetDisplayDRM failed)"
            return report
        }
        _ = va.setInfoCallback(dpy, nil, nil)
        _ = va.setErrorCallback(dpy, nil, nil)
        var major: Int32 = 0, minor: Int32 = 0
        let status = va.initialize(dpy, &major, &minor)
        // vaTerminate also releases a display whose initialization failed.
        defer { _ = va.terminate(dpy) }
        guard status == VA_STATUS_SUCCESS else {
            report.error = "no VA driver (vaInitialize failed: \(va.errorString(status).map { String(cString: $0) } ?? "status \(status)"))"
            return report
        }
        report.vaVersion = "\(major).\(minor)"
        report.vendor = va.vendorString(dpy).map { String(cString: $0) }
        let maxProfiles = Int(va.maxNumProfiles(dpy))
        var profiles = [VAProfile](repeating: VAProfileNone, count: max(maxProfiles, 1))
        var count: Int32 = 0
        guard va.queryConfigProfiles(dpy, &profiles, &count) == VA_STATUS_SUCCESS else {
            report.error = "vaQueryConfigProfiles failed"
            return report
        }
        let maxEntrypoints = Int(va.maxNumEntrypoints(dpy))
        for p in profiles.prefix(Int(count)) {
            var eps = [VAEntrypoint](repeating: VAEntrypoint(rawValue: 0), count: max(maxEntrypoints, 1))
            var n: Int32 = 0
            guard va.queryConfigEntrypoints(dpy, p, &eps, &n) == VA_STATUS_SUCCESS else { continue }
            let name = va.profileString(p).map { String(cString: $0) } ?? "VAProfile \(p.rawValue)"
            report.profiles.append(VAProfileSupport(
                profile: name,
                entrypoints: eps.prefix(Int(n)).map { e in va.entrypointString(e).map { String(cString: $0) } ?? "VAEntrypoint \(e.rawValue)" }))
            if report.encodeSurfaces == nil,
               let e = eps.prefix(Int(n)).first(where: { $0 == VAEntrypointEncSlice || $0 == VAEntrypointEncSliceLP }),
               let s = VASurfaceSupport.query(display: dpy, va: va, profile: p, name: name, entrypoint: e) {
                report.encodeSurfaces = s
            }
        }
        return report
    }

    /// Which of the codec's encoders this FFmpeg build has.
    public static func built(codec: VideoCodec) -> BuiltEncoders {
        let names = encoderNames(codec: codec)
        return BuiltEncoders(hardware: avcodec_find_encoder_by_name(names.hardware) != nil,
                             software: avcodec_find_encoder_by_name(names.software) != nil)
    }

    /// Every encoder considered for `codec` (hardware first) and why each is
    /// or is not available.
    public static func candidates(codec: VideoCodec, driDirectory: String = defaultDRIDirectory) -> [EncoderCandidate] {
        let names = encoderNames(codec: codec)
        let have = built(codec: codec)
        var hw = EncoderCandidate(name: names.hardware, isHardware: true, available: false, reason: "", devicePath: nil)
        let report = have.hardware ? vaapi(directory: driDirectory) : VAAPIReport(directory: driDirectory, devices: [], problem: nil)
        switch EncoderPlanner.vaDevice(codec: codec, built: have, report: report, preferring: nil) {
        case .success(let d): hw.available = true; hw.devicePath = d.path; hw.reason = d.detail
        case .failure(let why): hw.reason = why.reason
        }
        var sw = EncoderCandidate(name: names.software, isHardware: false, available: have.software, reason: "software", devicePath: nil)
        if !have.software { sw.reason = "FFmpeg lacks the \(names.software) encoder" }
        return [hw, sw]
    }

    /// Picks the encoder for `codec` under `choice` with `EncoderPlanner`
    /// (without a GPU, so VA-API means frames uploaded from host memory):
    /// `.auto` takes VA-API when available, else software (recording why
    /// VA-API was passed over); `.vaapi` and `.x264` force one and throw
    /// `encoderUnavailable` when it cannot run.
    public static func choose(codec: VideoCodec, choice: EncoderChoice, driDirectory: String = defaultDRIDirectory,
                              preferring node: String? = nil) throws(MediaError) -> EncoderSelection {
        // Facts naming only the GPU's node: the device is preferred; zero copy is decided by the take.
        let p = try plan(codec: codec, choice: choice, driDirectory: driDirectory,
                         target: node.map { EncoderTargetFacts(platform: "gbm", renderNode: $0) })
        return EncoderSelection(name: p.encoder, isHardware: p.path == .vaapiZeroCopy || p.path == .vaapiUpload,
                                reason: p.path == .software ? p.reason : p.detail, devicePath: p.devicePath)
    }

    /// The take's plan: this machine's VA-API devices and FFmpeg build, and
    /// the GPU's side of zero copy (`target`, nil before the GPU is open).
    /// `report`: this machine's VA-API devices when already examined (`vaapi(directory:)`).
    /// `gpu`: whether the compositor's GPU runs the GPU encoder (nil before the GPU is open).
    /// `nvenc`: NVENC on the compositor's CUDA device (`NVENCProbe.facts`; nil before the GPU is open).
    /// `baseline`: what libx264 would be asked for, against which `auto` weighs the GPU encoder.
    public static func plan(codec: VideoCodec, choice: EncoderChoice, driDirectory: String = defaultDRIDirectory,
                            report: VAAPIReport? = nil, target: EncoderTargetFacts?, gpu: GPUEncoderFacts? = nil,
                            nvenc: NVENCFacts? = nil, baseline: SoftwareBaseline? = nil) throws(MediaError) -> EncoderPlan {
        let have = built(codec: codec)
        let examine = have.hardware && (choice == .auto || choice == .vaapi)
        let r = report ?? (examine ? vaapi(directory: driDirectory) : VAAPIReport(directory: driDirectory, devices: [], problem: nil))
        return try EncoderPlanner.plan(codec: codec, requested: choice, built: have, vaapi: r, target: target, gpu: gpu, nvenc: nvenc,
                                       baseline: baseline)
    }
}
