import CGLES
import DiptychCore

/// Where a picture read in place lies: a buffer (the staging slot's, held
/// while current; or the set's own device copy), its format, its planes' rows
/// and, for NV12, the UV plane's offset (the first plane starts at byte 0),
/// and how to let a held slot go once the picture is replaced.
final class InPlacePicture {
    /// The staging slot held; -1: the buffer is the set's own (`ownsBuffer`).
    let slot: Int
    let buffer: GLuint
    var ownsBuffer: Bool { slot < 0 }
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

/// Pictures read in place (`DIPTYCH_GPU_PICTURES=in-place|device`, compute
/// path only): an NV12, RGBA or BGRA frame staged in a GL buffer is not uploaded into
/// textures; the compute pass reads its bytes and filters them itself, as the
/// textures would be filtered. Staged in imported CUDA memory (device memory
/// NVDEC frames are copied into device to device), it is read from the slot,
/// which stays held while the picture is its role's current one and is reused
/// after the fence of the last frame that read it. Staged in GL's mapped host
/// memory it is read from the slot too (`in-place`: over the bus, by the
/// pass), or (`device`) first copied into a device buffer of its own with
/// one buffer copy, the slot then free as after a texture upload. This takes
/// GL's texture uploads (the bound of host frames on the H200) and CUDA–GL
/// interop's maps (the bound of NVDEC frames) off the path
/// (docs/ARCHITECTURE.md, "Pictures read in place").
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
        let set = TextureSet(format: nil, input: frame.format == .nv12 ? .nv12 : .rgb, width: frame.width, height: frame.height, textures: [])
        set.inPlace = InPlacePicture(slot: st.slot, buffer: staging.slots[st.slot].buffer, format: frame.format, layout: st.layout) { [unowned staging] i, serial in
            staging.release(i, lastUse: serial)
        }
        staging.hold(st.slot)
        set.lastUse = timeline.pendingSerial
        set.matrix = frame.matrix
        set.range = frame.range
        makeCurrent(set, role: st.role)
    }

    /// Copies the staged frame into a device buffer set of the role (reused
    /// once the frames that read it are done) and makes it current; the slot
    /// is free after this submission, as after a texture upload.
    func commitToDevice(_ st: StagedUpload, from staging: StagingRing, timer: PassTimer) {
        let frame = st.frame
        let set = bufferSet(for: st.role, format: frame.format, width: frame.width, height: frame.height, layout: st.layout)
        timer.begin(.upload)
        glBindBuffer(GL.copyReadBuffer, staging.slots[st.slot].buffer)
        glBindBuffer(GL.copyWriteBuffer, set.inPlace!.buffer)
        glCopyBufferSubData(GL.copyReadBuffer, GL.copyWriteBuffer, 0, 0, GLsizeiptr(st.layout.total))
        glBindBuffer(GL.copyReadBuffer, 0)
        glBindBuffer(GL.copyWriteBuffer, 0)
        timer.end(.upload)
        committed(set, st, staging)
    }

    /// A device buffer set for the role that fits `layout` (the pool's rule, as for textures).
    private func bufferSet(for role: StreamRole, format: PixelFormat, width: Int, height: Int, layout: UploadLayout) -> TextureSet {
        set(for: role, fits: { s in
            guard let p = s.inPlace, p.ownsBuffer else { return false }
            // The same format, size, plane offsets and rows: the same bytes (the buffer was made for them).
            return p.format == format && s.width == width && s.height == height
                && (p.yRowBytes, p.uvOffset, p.uvRowBytes) == InPlacePicture.rows(format, layout)
        }) {
            var b: GLuint = 0
            glGenBuffers(1, &b)
            glBindBuffer(GL.copyWriteBuffer, b)
            glBufferData(GL.copyWriteBuffer, GLsizeiptr(layout.total), nil, GL.streamRead)
            glBindBuffer(GL.copyWriteBuffer, 0)
            let s = TextureSet(format: format, input: format == .nv12 ? .nv12 : .rgb, width: width, height: height, textures: [])
            s.inPlace = InPlacePicture(slot: -1, buffer: b, format: format, layout: layout) { _, _ in }
            return s
        }
    }
}
