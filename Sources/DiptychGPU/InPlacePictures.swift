import CGLES
import DiptychCore

/// Where a picture read in place lies: the staging slot's buffer (held
/// while current), its format, its planes' rows and, for NV12, the UV
/// plane's offset (the first plane starts at byte 0), and how to let the
/// held slot go once the picture is replaced.
final class InPlacePicture {
    /// The staging slot held.
    let slot: Int
    let buffer: GLuint
    /// NV12, RGBA or BGRA (8 bits a sample).
    let format: PixelFormat
    /// Bytes a row of the first plane (Y, or the RGBA texels).
    let yRowBytes: Int
    let uvOffset: Int
    let uvRowBytes: Int
    private let onRelease: (Int, UInt64) -> Void
    private var released = false

    init(slot: Int, buffer: GLuint, format: PixelFormat, layout: UploadLayout, onRelease: @escaping (Int, UInt64) -> Void) {
        self.slot = slot; self.buffer = buffer; self.format = format
        (yRowBytes, uvOffset, uvRowBytes) = InPlacePicture.rows(format, layout)
        self.onRelease = onRelease
    }

    /// The first plane's row bytes, the UV plane's offset and row bytes (0, 0 for RGBA and BGRA).
    static func rows(_ format: PixelFormat, _ layout: UploadLayout) -> (Int, Int, Int) {
        format == .nv12 ? (layout.planes[0].rowLength, layout.planes[1].offset, 2 * layout.planes[1].rowLength)
            : (4 * layout.planes[0].rowLength, 0, 0)
    }

    /// The compute pass's input kind (composite.comp): 3 NV12 read in place, 4 RGBA or BGRA.
    var kind: Int { format == .nv12 ? 3 : 4 }

    /// The slot is free after the submission `lastUse` (once).
    func release(_ lastUse: UInt64) {
        guard !released else { return }
        released = true
        onRelease(slot, lastUse)
    }
}

/// Pictures read in place (compute path, staging in imported CUDA memory):
/// an NV12, RGBA or BGRA frame staged in an imported slot is not uploaded
/// into textures; the compute pass reads its bytes on the device and filters
/// them itself, as the textures would be filtered. NVDEC frames are copied
/// into such slots device to device. The slot stays held while the picture
/// is its role's current one and is reused after the fence of the last frame
/// that read it. This takes GL's texture uploads (the bound of host frames on
/// the H200) and CUDA–GL interop's maps (the bound of NVDEC frames) off the
/// path (docs/ARCHITECTURE.md, "Pictures read in place").
extension TexturePool {
    /// Whether `st` can be read in place: 8-bit NV12, RGBA or BGRA, its first
    /// plane at byte 0, in a slot whose buffer the compute pass can bind.
    static func canReadInPlace(_ st: StagedUpload, staging: StagingRing) -> Bool {
        let planes = st.layout.planes.count
        let shaped = st.frame.format == .nv12 ? planes == 2 : [.rgba, .bgra].contains(st.frame.format) && planes == 1
        return shaped && st.layout.planes[0].offset == 0 && staging.readableInPlace(st.slot)
    }

    /// Makes the staged frame its role's picture, read from its slot (held until replaced).
    func commitInPlace(_ st: StagedUpload, from staging: StagingRing) {
        let frame = st.frame
        let picture = InPlacePicture(slot: st.slot, buffer: staging.slots[st.slot].buffer, format: frame.format, layout: st.layout) { [unowned staging] i, serial in
            staging.release(i, lastUse: serial)
        }
        let set = StreamPicture(format: nil, input: frame.format == .nv12 ? .nv12 : .rgb, width: frame.width, height: frame.height,
                                source: .inPlace(picture))
        staging.hold(st.slot)
        set.lastUse = timeline.pendingSerial
        set.matrix = frame.matrix
        set.range = frame.range
        makeCurrent(set, role: st.role)
    }
}
