import Foundation

/// What the environment asks of the GPU path: the one reader of the
/// `DIPTYCH_GPU_*` and `DIPTYCH_CUDA_*` variables (docs/ENVIRONMENT.md).
/// Every value is checked against its list; an unknown variable of those
/// prefixes, or an unknown value, is an error naming it, never a silent
/// default. Pure: `init(environment:)` takes the variables as a dictionary.
public struct GPURequest: Hashable, Sendable, CustomStringConvertible {
    public enum Readback: String, Sendable, CaseIterable { case auto, gl, cuda }
    public enum Uploads: String, Sendable, CaseIterable { case auto, `import`, off }
    public enum Pictures: String, Sendable, CaseIterable {
        case auto, textures
        case inPlace = "in-place"
    }

    /// `DIPTYCH_GPU_READBACK`: NV12 read back through GL's buffers or CUDA memory imported into GL.
    public var readback = Readback.auto
    /// `DIPTYCH_CUDA_UPLOADS`: uploads staged in imported CUDA memory, or GL's buffers.
    public var uploads = Uploads.auto
    /// `DIPTYCH_GPU_PICTURES`: NV12, I420, RGBA and BGRA pictures staged in imported
    /// memory read in place by the compute pass (`auto`), in GL's mapped
    /// staging buffers too (`in-place`), or uploaded into textures.
    public var pictures = Pictures.auto
    /// `DIPTYCH_GPU_ENCODER_RECONSTRUCTION`: a folder where each GPU-encoded
    /// output writes its reconstructed pictures (a check that a decoder's
    /// pictures equal them); nil: none is kept.
    public var encoderReconstruction: String?
    /// The variables that were set, as `NAME=value`, for the log.
    public private(set) var given: [String] = []

    public init() {}

    /// The variables every value is read from, and what each takes.
    public static let variables: [(name: String, values: String)] = [
        ("DIPTYCH_GPU_READBACK", "auto|gl|cuda"), ("DIPTYCH_CUDA_UPLOADS", "auto|import|off"),
        ("DIPTYCH_GPU_PICTURES", "auto|in-place|textures"), ("DIPTYCH_GPU_ENCODER_RECONSTRUCTION", "a folder"),
    ]

    /// Reads `environment` (the process's, or a test's). Throws naming the
    /// first variable that is unknown or holds a value off its list.
    public init(environment: [String: String]) throws(ConfigurationError) {
        for (name, value) in environment.sorted(by: { $0.key < $1.key })
        where name.hasPrefix("DIPTYCH_GPU_") || name.hasPrefix("DIPTYCH_CUDA_") {
            guard let known = Self.variables.first(where: { $0.name == name }) else {
                throw ConfigurationError(field: name, value: value,
                                         reason: "is not a setting (known: \(Self.variables.map(\.name).joined(separator: ", ")))")
            }
            func bad() -> ConfigurationError { ConfigurationError(field: name, value: value, reason: "expected \(known.values)") }
            func pick<E: RawRepresentable & CaseIterable>(_: E.Type) throws(ConfigurationError) -> E where E.RawValue == String {
                guard let e = E(rawValue: value) else { throw bad() }
                return e
            }
            switch name {
            case "DIPTYCH_GPU_READBACK": readback = try pick(Readback.self)
            case "DIPTYCH_CUDA_UPLOADS": uploads = try pick(Uploads.self)
            case "DIPTYCH_GPU_PICTURES": pictures = try pick(Pictures.self)
            case "DIPTYCH_GPU_ENCODER_RECONSTRUCTION":
                guard !value.isEmpty else { throw bad() }
                encoderReconstruction = value
            default: break
            }
            given.append("\(name)=\(value)")
        }
    }

    /// This process's, read once. A failure is reported by the tools at
    /// start (exit 2) and by `GPUCompositor`'s creation; code that runs
    /// anyway gets the defaults (`settings`).
    public static let process = Result { () throws(ConfigurationError) in try GPURequest(environment: ProcessInfo.processInfo.environment) }

    /// `process`'s settings, the defaults where it failed.
    public static var settings: GPURequest { (try? process.get()) ?? GPURequest() }

    public var description: String { given.isEmpty ? "defaults" : given.joined(separator: " ") }
}
