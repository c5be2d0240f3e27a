import CGLES
import DiptychCore
import DiptychCUDA

/// Where a picture read in place lies: the buffer that holds it (a staging
/// slot's, or a decoder picture's import, held while current), its format,
/// its planes' rows and, for NV12, the UV plane's offset (for I420 the U
/// plane's, and the V plane's after it; the first plane starts at byte 0),
/// and how to let what it holds go once the picture is replaced.
final class InPlacePicture {
    let buffer: GLuint
    /// NV12, I420, RGBA or BGRA (8 bits a sample).
    let format: PixelFormat
    /// Bytes a row of the first plane (Y, or the RGBA texels).
    let yRowBytes: Int
    /// The UV plane (NV12) or the U plane (I420): its offset, and bytes a row (of V's too).
    let uvOffset: Int
    let uvRowBytes: Int
    /// I420's V plane (0 for the other formats).
    let vOffset: Int
    private let onRelease: (UInt64) -> Void
    private var released = false

    init(buffer: GLuint, format: PixelFormat, yRowBytes: Int, uvOffset: Int, uvRowBytes: Int, vOffset: Int = 0,
         onRelease: @escaping (UInt64) -> Void) {
        self.buffer = buffer; self.format = format
        self.yRowBytes = yRowBytes; self.uvOffset = uvOffset; self.uvRowBytes = uvRowBytes; self.vOffset = vOffset
        self.onRelease = onRelease
    }

    /// A staged frame's planes as `layout` places them in its slot's buffer.
    convenience init(buffer: GLuint, format: PixelFormat, layout: UploadLayout, onRelease: @escaping (UInt64) -> Void) {
        let l = layout.planes
        switch format {
        case .nv12:
            self.init(buffer: buffer, format: format, yRowBytes: l[0].rowLength, uvOffset: l[1].offset, uvRowBytes: 2 * l[1].rowLength,
                      onRelease: onRelease)
        case .i420:
            self.init(buffer: buffer, format: format, yRowBytes: l[0].rowLength, uvOffset: l[1].offset, uvRowBytes: l[1].rowLength,
                      vOffset: l[2].offset, onRelease: onRelease)
        default:
            self.init(buffer: buffer, format: format, yRowBytes: 4 * l[0].rowLength, uvOffset: 0, uvRowBytes: 0, onRelease: onRelease)
        }
    }

    /// The compute pass's input kind (composite.comp): 3 NV12 or I420 read in place, 4 RGBA or BGRA.
    var kind: Int { format == .nv12 || format == .i420 ? 3 : 4 }

    /// What it holds is free after the submission `lastUse` (once).
    func release(_ lastUse: UInt64) {
        guard !released else { return }
        released = true
        onRelease(lastUse)
    }
}

/// Pictures read in place (compute path, staging in imported CUDA memory):
/// an NV12, I420, RGBA or BGRA frame staged in an imported slot is not uploaded
/// into textures; the compute pass reads its bytes on the device and filters
/// them itself, as the textures would be filtered. NVDEC frames are read
/// where the decoder copied them, in its pool's picture imported into the
/// context (`PictureImports`), or else copied into such slots device to
/// device. The slot (or the decoder's picture) stays held while the picture
/// is its role's current one and is reused after the fence of the last frame
/// that read it. This takes GL's texture uploads (the bound of host frames on
/// the H200) and CUDA–GL interop's maps (the bound of NVDEC frames) off the
/// path (docs/ARCHITECTURE.md, "Pictures read in place").
extension TexturePool {
    /// Whether `st` can be read in place: 8-bit NV12, I420 (its U and V
    /// rows as long as each other), RGBA or BGRA, its first plane at byte 0,
    /// in a slot whose buffer the compute pass can bind.
    static func canReadInPlace(_ st: StagedUpload, staging: StagingRing) -> Bool {
        let l = st.layout.planes
        let shaped = switch st.frame.format {
        case .nv12: l.count == 2
        case .i420: l.count == 3 && l[1].rowLength == l[2].rowLength
        case .rgba, .bgra: l.count == 1
        }
        return shaped && l[0].offset == 0 && staging.readableInPlace(st.slot)
    }

    /// Makes the staged frame its role's picture, read from its slot (held until replaced).
    func commitInPlace(_ st: StagedUpload, from staging: StagingRing) {
        let frame = st.frame
        let slot = st.slot
        let picture = InPlacePicture(buffer: staging.slots[slot].buffer, format: frame.format, layout: st.layout) { [unowned staging] serial in
            staging.release(slot, lastUse: serial)
        }
        staging.hold(slot)
        commitInPlace(picture, width: frame.width, height: frame.height, matrix: frame.matrix, range: frame.range, role: st.role)
    }

    /// Makes a decoder's picture its role's picture, read from its pool's
    /// memory imported into the context; the holder is kept until the fence
    /// of the last frame that read it.
    func commitInPlace(_ u: PooledUpload, imports: PictureImports) throws(GPUError) {
        let f = u.frame, memory = u.memory
        let buffer = try imports.buffer(for: memory)
        let holder = u.holder
        let picture = InPlacePicture(buffer: buffer, format: .nv12, yRowBytes: f.planes[0].pitch,
                                     uvOffset: Int(f.planes[1].address - memory.address), uvRowBytes: f.planes[1].pitch) { [timeline] serial in
            imports.used(memory, lastUse: serial)
            timeline.retire(lastUse: serial) { withExtendedLifetime(holder) {} }
        }
        commitInPlace(picture, width: f.width, height: f.height, matrix: f.matrix, range: f.range, role: u.role)
    }

    private func commitInPlace(_ picture: InPlacePicture, width: Int, height: Int, matrix: ColorMatrix, range: ColorRange, role: StreamRole) {
        let input: ShaderKey.Input = picture.format == .nv12 ? .nv12 : picture.format == .i420 ? .i420 : .rgb
        let set = StreamPicture(format: nil, input: input, width: width, height: height, source: .inPlace(picture))
        set.lastUse = timeline.pendingSerial
        set.matrix = matrix
        set.range = range
        makeCurrent(set, role: role)
    }
}

/// An NVDEC frame in a picture of its decoder's pool (one shareable
/// allocation, `CUDAPictureHolder.sharedMemory`, luma at byte 0), made its
/// role's picture at the next hop and read there in place.
struct PooledUpload {
    var frame: CUDAFrame
    var holder: any CUDAFrameHolder
    var memory: any ShareableDeviceMemory
    var role: StreamRole

    /// `frame` where the compute pass reads it in place: 8-bit NV12 in one
    /// shareable allocation of `device`, its luma plane at the allocation's
    /// start, its chroma plane after it, every row inside the allocation.
    static func readable(_ frame: CUDAFrame, _ holder: any CUDAFrameHolder, device: Int, role: StreamRole) -> PooledUpload? {
        guard frame.format == .nv12, frame.planes.count == 2, frame.device == device, frame.width > 0, frame.height > 0,
              frame.width % 2 == 0, frame.height % 2 == 0,
              let m = (holder as? any CUDAPictureHolder)?.sharedMemory, m.device == device else { return nil }
        let y = frame.planes[0], uv = frame.planes[1]
        guard y.address == m.address, y.pitch >= frame.width, uv.pitch >= frame.width,
              uv.address >= y.address + UInt64(y.pitch * frame.height),
              uv.address + UInt64(uv.pitch * (frame.height / 2)) <= m.address + UInt64(m.size) else { return nil }
        return PooledUpload(frame: frame, holder: holder, memory: m, role: role)
    }
}

/// GL imports of decoders' pictures (`CUDAPictureHolder.sharedMemory`), one an
/// allocation, made at its first use and kept while the allocation lives (a
/// pool reuses its pictures for as long as its decoder runs); once the
/// allocation has gone, its import (memory object and buffer,
/// `ImportedBuffer`) is deleted after the last frame that read it. An
/// allocation whose import failed is remembered as such (its frames are
/// staged instead; the first failure is logged). Read under the renderer's
/// lock; imports made and deleted on the render thread.
final class PictureImports {
    private struct Entry {
        weak var memory: (any ShareableDeviceMemory)?
        /// Nil where the import failed.
        let imported: ImportedBuffer?
        var lastUse: UInt64 = 0
    }
    private var entries: [ObjectIdentifier: Entry] = [:]
    private let procs: MemoryObjectProcs
    private let releaser: GLReleaser
    private let log: @Sendable (String) -> Void
    private var failedBefore = false

    init(procs: MemoryObjectProcs, releaser: GLReleaser, log: @escaping @Sendable (String) -> Void) {
        self.procs = procs; self.releaser = releaser; self.log = log
    }

    /// Imports made and still held.
    var count: Int { entries.values.filter { $0.imported != nil }.count }

    /// Whether `memory` was imported (true), could not be (false), or was not tried yet (nil).
    func imported(_ memory: any ShareableDeviceMemory) -> Bool? {
        guard let e = entries[ObjectIdentifier(memory)], e.memory === memory else { return nil }
        return e.imported != nil
    }

    /// Render thread: imports `memory` where it was not tried yet (letting
    /// go of the imports of allocations that have gone first); whether it
    /// is imported (a failure is not tried again, and the first is logged).
    func importing(_ memory: any ShareableDeviceMemory) -> Bool {
        RenderThread.assertCurrent()
        if let done = imported(memory) { return done }
        purge()
        do throws(GPUError) {
            let b = try ImportedBuffer(PooledMemory(memory), target: GL.shaderStorageBuffer, procs: procs)
            glBindBuffer(GL.shaderStorageBuffer, 0)
            entries[ObjectIdentifier(memory)] = Entry(memory: memory, imported: b)
            return true
        } catch {
            entries[ObjectIdentifier(memory)] = Entry(memory: memory, imported: nil)
            if !failedBefore { log("diptych-gpu: a decoder's picture could not be imported (\(error)); its frames are copied into staging") }
            failedBefore = true
            return false
        }
    }

    /// The buffer over `memory`, imported before (`importing`).
    func buffer(for memory: any ShareableDeviceMemory) throws(GPUError) -> GLuint {
        guard let e = entries[ObjectIdentifier(memory)], e.memory === memory, let b = e.imported else {
            throw .cudaInterop("a decoder's picture read in place was never imported")
        }
        return b.buffer
    }

    /// A frame read `memory`'s import up to the submission `lastUse`.
    func used(_ memory: any ShareableDeviceMemory, lastUse: UInt64) {
        let key = ObjectIdentifier(memory)
        guard entries[key]?.memory === memory else { return }
        entries[key]!.lastUse = max(entries[key]!.lastUse, lastUse)
    }

    /// Render thread: lets go of the imports whose allocation has gone (after their last use).
    func purge() {
        for (key, e) in entries where e.memory == nil {
            entries.removeValue(forKey: key)
            retire(e)
        }
    }

    /// Teardown: every import, after its last use.
    func release() {
        for e in entries.values { retire(e) }
        entries.removeAll()
    }

    private func retire(_ e: Entry) {
        guard let imported = e.imported else { return }
        let procs = procs, releaser = releaser
        releaser.timeline.retire(lastUse: e.lastUse) { imported.release(releaser, procs: procs) }
    }
}

/// A decoder picture's allocation as an import takes it: its size and a
/// descriptor, without keeping it (its pool frees it; GL's import keeps the
/// memory until deleted).
private final class PooledMemory: ExportedMemory, @unchecked Sendable {   // read on the render thread only
    private weak var memory: (any ShareableDeviceMemory)?
    let size: Int

    init(_ memory: any ShareableDeviceMemory) { self.memory = memory; size = memory.size }

    func exportDescriptor() throws(GPUError) -> Int32 {
        guard let memory else { throw .cudaInterop("a decoder's picture was freed before its import") }
        do throws(CUDAError) { return try memory.exportDescriptor() } catch { throw .cudaInterop("a decoder's picture: \(error)") }
    }

    func copyOut(count: Int, to dst: UnsafeMutableRawPointer) throws(GPUError) { throw .unsupported("copies out of a decoder's picture") }
    func copyIn(_ planes: [PlaneTransfer]) throws(GPUError) { throw .unsupported("copies into a decoder's picture") }
}
