/// An EGL platform, one rung of the display ladder.
public enum GPUPlatform: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// Position on the ladder (GBM first).
    var rank: Int { self == .gbm ? 0 : self == .device ? 1 : 2 }
    /// GBM on a DRM render node (`/dev/dri/renderD*`), libgbm loaded with dlopen.
    case gbm
    /// `EGL_EXT_platform_device`: hardware devices first, Mesa's software device last.
    case device
    /// `EGL_MESA_platform_surfaceless`.
    case surfaceless
    public var description: String { rawValue }
}

/// Which GPU to use, and optionally on which platform.
///
/// Parsed from `auto`, `software`, `N` (an EGL device index as `eglQueryDevicesEXT`
/// lists them), `/dev/dri/renderDN`, a platform name (`gbm`, `device`,
/// `surfaceless`), or `PLATFORM:DEVICE` such as `device:1` or `gbm:/dev/dri/renderD129`.
public struct GPUSelection: Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Device: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Hardware first, software last.
        case auto
        /// Mesa's software rasterizer only.
        case software
        /// The Nth EGL device (eglQueryDevicesEXT order).
        case index(Int)
        /// The device behind this DRM render node.
        case renderNode(String)

        public var description: String {
            switch self {
            case .auto: return "auto"
            case .software: return "software"
            case .index(let n): return "\(n)"
            case .renderNode(let p): return p
            }
        }
    }
    public var device: Device
    /// Force one platform; nil tries the whole ladder.
    public var platform: GPUPlatform?

    public init(device: Device = .auto, platform: GPUPlatform? = nil) {
        self.device = device; self.platform = platform
    }
    public static let auto = GPUSelection()
    public static let software = GPUSelection(device: .software)
    public static func index(_ n: Int) -> GPUSelection { GPUSelection(device: .index(n)) }
    public static func renderNode(_ path: String) -> GPUSelection { GPUSelection(device: .renderNode(path)) }
    public static func platform(_ p: GPUPlatform) -> GPUSelection { GPUSelection(platform: p) }

    /// Parses the command-line form; nil when malformed.
    public init?(parsing text: String) {
        let t = text.trimmingCharactersInWhitespace()
        if let p = GPUPlatform(rawValue: t) { self.init(platform: p); return }
        var platform: GPUPlatform?
        var rest = Substring(t)
        if let colon = t.firstIndex(of: ":"), let p = GPUPlatform(rawValue: String(t[..<colon])) {
            platform = p
            rest = t[t.index(after: colon)...]
        }
        guard let device = GPUSelection.parseDevice(String(rest)) else { return nil }
        self.init(device: device, platform: platform)
    }

    private static func parseDevice(_ s: String) -> Device? {
        switch s {
        case "auto", "": return .auto
        case "software", "cpu", "llvmpipe": return .software
        default:
            if let n = Int(s), n >= 0 { return .index(n) }
            if s.hasPrefix("/dev/dri/") && s.count > "/dev/dri/".count { return .renderNode(s) }
            return nil
        }
    }

    public var description: String {
        let d = device.description
        guard let platform else { return d }
        return device == .auto ? platform.rawValue : "\(platform.rawValue):\(d)"
    }
}

extension String {
    func trimmingCharactersInWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}

/// The outcome of one rung of the display ladder (for errors and `diptych probe`).
public struct RungOutcome: Hashable, Sendable, Codable, CustomStringConvertible {
    public var platform: GPUPlatform
    /// The device tried (`/dev/dri/renderD128`, `EGL device 0 (software)`, `default`).
    public var device: String
    /// nil when the rung worked.
    public var failure: String?
    /// GL_RENDERER when the rung worked.
    public var renderer: String?
    public init(platform: GPUPlatform, device: String, failure: String?, renderer: String? = nil) {
        self.platform = platform; self.device = device; self.failure = failure; self.renderer = renderer
    }
    public var succeeded: Bool { failure == nil }
    public var description: String {
        if let failure { return "\(platform) [\(device)]: \(failure)" }
        return "\(platform) [\(device)]: ok (\(renderer ?? "?"))"
    }
}
