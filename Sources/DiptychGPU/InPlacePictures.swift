import CGLES
import DiptychCore

/// Where an NV12 picture read in place lies: the staging slot's buffer, its
/// planes' rows and the UV plane's offset (the Y plane starts at byte 0), and
/// how to let the slot go once the picture is replaced.
final class InPlacePicture {
    let slot: Int
    let buffer: GLuint
    let yRowBytes: Int
    let uvOffset: Int
    let uvRowBytes: Int
    private let onRelease: (Int, UInt64) -> Void
    private var released = false

    init(slot: Int, buffer: GLuint, layout: UploadLayout, onRelease: @escaping (Int, UInt64) -> Void) {
        self.slot = slot; self.buffer = buffer
        yRowBytes = layout.planes[0].rowLength
        uvOffset = layout.planes[1].offset
        uvRowBytes = 2 * layout.planes[1].rowLength
        self.onRelease = onRelease
    }

    /// The slot is free after the submission `lastUse` (once).
    func release(_ lastUse: UInt64) {
        guard !released else { return }
        released = true
        onRelease(slot, lastUse)
    }
}

/// Pictures read in place (`DIPTYCH_GPU_PICTURES=in-place`, compute path
/// only): an NV12 frame staged in a GL buffer (persistently mapped host
/// memory, or imported CUDA memory that NVDEC frames are copied into device
/// to device) is not uploaded into textures; the compute pass reads its bytes
/// from the slot and filters them itself, as the textures would be filtered.
/// The slot stays held while the picture is its role's current one, and is
/// reused after the fence of the last frame that read it. This takes GL's
/// texture uploads (the bound of host frames on the H200) and CUDA–GL
/// interop's maps (the bound of NVDEC frames) off the path
/// (docs/ARCHITECTURE.md, "Pictures read in place").
extension TexturePool {
    /// Whether `st` can be read in place: 8-bit NV12, Y at byte 0, in a slot
    /// whose buffer the compute pass can bind.
    static func canReadInPlace(_ st: StagedUpload, staging: StagingRing) -> Bool {
        st.frame.format == .nv12 && st.layout.planes.count == 2 && st.layout.planes[0].offset == 0
            && staging.readableInPlace(st.slot)
    }

    /// Makes the staged frame its role's picture, read from its slot (held until replaced).
    func commitInPlace(_ st: StagedUpload, from staging: StagingRing) {
        let frame = st.frame
        let set = TextureSet(format: nil, input: .nv12, width: frame.width, height: frame.height, textures: [])
        set.inPlace = InPlacePicture(slot: st.slot, buffer: staging.slots[st.slot].buffer, layout: st.layout) { [unowned staging] i, serial in
            staging.release(i, lastUse: serial)
        }
        staging.hold(st.slot)
        set.lastUse = timeline.pendingSerial
        set.matrix = frame.matrix
        set.range = frame.range
        makeCurrent(set, role: st.role)
    }
}
