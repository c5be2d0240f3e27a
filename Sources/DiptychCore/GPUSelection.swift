/// Which GPU (EGL device) renders, from `--gpu auto|software|N|/dev/dri/renderDN`.
public enum GPUSelection: Hashable, Sendable, CustomStringConvertible {
    /// The display ladder's first working choice (DESIGN "Platforms").
    case auto
    /// Mesa's software rasterizer (llvmpipe), even when a GPU exists.
    case software
    /// The N-th EGL device (0-based), in the order EGL enumerates them.
    case index(Int)
    /// A DRM render node, e.g. `/dev/dri/renderD128` (GBM platform).
    case renderNode(String)

    /// Parses the command-line form; errors name `field`.
    public static func parse(_ text: String, field: String = "--gpu") throws(ConfigurationError) -> GPUSelection {
        switch text.lowercased() {
        case "auto": return .auto
        case "software", "llvmpipe": return .software
        default: break
        }
        if let n = Int(text) {
            guard n >= 0 else { throw ConfigurationError(field: field, value: text, reason: "device index must be 0 or more") }
            return .index(n)
        }
        if text.hasPrefix("/dev/dri/"), text.count > "/dev/dri/".count { return .renderNode(text) }
        throw ConfigurationError(field: field, value: text,
                                 reason: "expected auto, software, a device index (0, 1, ...) or a render node such as /dev/dri/renderD128")
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .software: "software"
        case .index(let n): "\(n)"
        case .renderNode(let p): p
        }
    }
}

extension GPUSelection: Codable {
    /// JSON: the command-line string (`"auto"`, `"software"`, `"1"` or a path); a bare integer is an index.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let n = try? c.decode(Int.self) { self = .index(n); return }
        let s = try c.decode(String.self)
        do { self = try GPUSelection.parse(s) } catch {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "'\(error.value)': \(error.reason)")
        }
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
