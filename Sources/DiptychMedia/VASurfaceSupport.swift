import CVA
import DiptychCore

/// What a VA driver lists for the input surfaces of one encode config
/// (`vaQuerySurfaceAttributes`): whether NV12 is among their formats and
/// which dma-buf imports it names. A hint for `diptych probe`, not a gate:
/// some drivers leave the memory types out and take DRM PRIME 2 anyway, so a
/// take decides by its trial (`EncoderProbe.checkZeroCopy`).
public struct VASurfaceSupport: Hashable, Sendable, CustomStringConvertible {
    /// The encode profile asked about (`VAProfileH264High`, ...).
    public var profile: String
    public var nv12: Bool
    /// `VASurfaceAttribMemoryType`; nil when the driver does not list it.
    public var memoryTypes: UInt32?

    public init(profile: String, nv12: Bool, memoryTypes: UInt32?) {
        self.profile = profile; self.nv12 = nv12; self.memoryTypes = memoryTypes
    }

    public var primeImport: Bool? { memoryTypes.map { $0 & UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2) != 0 } }

    public var description: String {
        let formats = nv12 ? "NV12 listed" : "NV12 not listed"
        guard let m = memoryTypes else { return "\(formats); no memory types listed (the take's trial decides)" }
        var names: [String] = []
        if m & UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2) != 0 { names.append("DRM PRIME 2") }
        if m & UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME) != 0 { names.append("DRM PRIME") }
        if m & UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_VA) != 0 { names.append("VA") }
        return "\(formats); memory types: \(names.isEmpty ? "none known" : names.joined(separator: ", "))"
            + (primeImport == true ? "" : " (no DRM PRIME 2 listed; the take's trial decides)")
    }

    /// Asks the driver about `profile`/`entrypoint`'s config; nil when it makes none.
    static func query(display: VADisplay, va: VALibrary, profile: VAProfile, name: String, entrypoint: VAEntrypoint) -> VASurfaceSupport? {
        var config = VAConfigID(VA_INVALID_ID)
        guard va.createConfig(display, profile, entrypoint, nil, 0, &config) == VA_STATUS_SUCCESS else { return nil }
        defer { _ = va.destroyConfig(display, config) }
        var n: UInt32 = 0
        guard va.querySurfaceAttributes(display, config, nil, &n) == VA_STATUS_SUCCESS, n > 0 else { return nil }
        var attrs = [VASurfaceAttrib](repeating: VASurfaceAttrib(), count: Int(n))
        guard va.querySurfaceAttributes(display, config, &attrs, &n) == VA_STATUS_SUCCESS else { return nil }
        var support = VASurfaceSupport(profile: name, nv12: false, memoryTypes: nil)
        for a in attrs.prefix(Int(n)) {
            if a.type == VASurfaceAttribPixelFormat, UInt32(bitPattern: a.value.value.i) == UInt32(VA_FOURCC_NV12) { support.nv12 = true }
            if a.type == VASurfaceAttribMemoryType { support.memoryTypes = UInt32(bitPattern: a.value.value.i) }
        }
        return support
    }
}
