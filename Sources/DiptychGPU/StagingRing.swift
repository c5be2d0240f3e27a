import CGLES
import DiptychCore

/// Where each plane of a CPU frame goes in a staging slot, and its GL row length.
struct UploadLayout {
    struct Plane { var offset: Int; var bytes: Int; var rowLength: Int; var bulk: Bool }
    var planes: [Plane] = []
    var total = 0

    /// Planes 64-byte aligned; a plane whose stride is a whole number of pixels
    /// and not much wider than its rows is copied as one block (rows and
    /// padding, GL_UNPACK_ROW_LENGTH skips the padding), else row by row.
    /// I420's U and V planes keep rows as long as each other (a picture read
    /// in place has one chroma row length): row by row where their strides differ.
    init(_ frame: VideoFrame) {
        let chromaApart = frame.format == .i420 && frame.planes.count == 3 && frame.planes[1].stride != frame.planes[2].stride
        for (i, s) in frame.format.planeShapes(width: frame.width, height: frame.height).enumerated() {
            let p = frame.planes[i]
            let bulk = p.stride % s.bytesPerPixel == 0 && p.stride <= 2 * s.rowBytes + 256 && !(chromaApart && i > 0)
            let bytes = bulk ? p.stride * (s.height - 1) + s.rowBytes : s.rowBytes * s.height
            total = (total + 63) & ~63
            planes.append(Plane(offset: total, bytes: bytes, rowLength: bulk ? p.stride / s.bytesPerPixel : s.width, bulk: bulk))
            total += bytes
        }
    }

    /// The copies of `frame`'s planes to `dst` (they keep the frame alive until they have run).
    func copyJobs(_ frame: VideoFrame, to dst: UnsafeMutableRawPointer) -> [CopyJob] {
        let keep = KeepAlive(frame)
        return transfers(frame).map { t in
            guard case .host(let src) = t.source else { preconditionFailure("a host frame's planes are in host memory") }
            var j = CopyJob(dst: dst + t.offset, dstStride: t.dstPitch, src: src, srcStride: t.pitch, rowBytes: t.rowBytes, rows: t.rows)
            j.owner = keep
            return j
        }
    }

    /// Where each of `frame`'s planes goes in a slot: one block (rows and
    /// padding) where the plane is `bulk`, else row by row.
    func transfers(_ frame: VideoFrame) -> [PlaneTransfer] {
        frame.format.planeShapes(width: frame.width, height: frame.height).enumerated().map { i, s in
            let p = frame.planes[i], l = planes[i]
            return l.bulk
                ? PlaneTransfer(source: .host(p.baseAddress), pitch: l.bytes, rowBytes: l.bytes, rows: 1, offset: l.offset, dstPitch: l.bytes,
                                pageLocked: p.storage.pageLocked)
                : PlaneTransfer(source: .host(p.baseAddress), pitch: p.stride, rowBytes: s.rowBytes, rows: s.height,
                                offset: l.offset, dstPitch: s.rowBytes, pageLocked: p.storage.pageLocked)
        }
    }
}

/// The upload staging ring: slots the callers copy frames into, on their own
/// threads, before the render thread turns them into textures (or the compute
/// pass reads them in place).
///
/// Where the slots live is the plan's staging (`GPUPlan.Staging`), one
/// `Memory` for the whole ring:
/// - `mapped`: pixel-unpack buffers persistently mapped for writing
///   (GL_EXT_buffer_storage, coherent), so no render-thread hop maps or
///   unmaps them and glTexSubImage2D (or the compute pass) reads them at bus speed;
/// - `imported`: CUDA device memory imported into GL; the callers copy in
///   through CUDA's copy engines, and glTexSubImage2D or the compute pass
///   reads it on the device;
/// - `client`: host memory glTexSubImage2D copies from during the call.
/// A slot of the first two is reused once the fence of the upload that read
/// it has signalled.
///
/// Slot bookkeeping happens under the renderer's lock (any thread); buffers
/// are created and deleted on the render thread.
final class StagingRing {
    /// The memory the slots are, as the plan's staging says.
    enum Memory {
        case client
        case mapped(PFNGLBUFFERSTORAGEEXTPROC)
        case imported(ImportedMemory)
    }

    struct Slot {
        var buffer: GLuint = 0
        var base: UnsafeMutableRawPointer?
        var capacity = 0
        /// The submission that last read it (mapped and imported memory).
        var lastUse: UInt64 = 0
        /// Holds a copied frame not yet committed.
        var staged = false
        /// Holds a picture read in place (`TexturePool.commitInPlace`) while it is current.
        var held = false
        /// Imported device memory: callers copy in through its owner.
        var imported: ImportedBuffer?
    }
    private(set) var slots: [Slot]
    private var next = 0
    let memory: Memory
    /// The imported memory the slots are (the plan's `cuda-imported` staging), or nil.
    var imported: ImportedMemory? { if case .imported(let m) = memory { m } else { nil } }
    var persistent: Bool { if case .mapped = memory { true } else { false } }
    /// Slots are read after the call that reads them returns, so they wait for its fence.
    private var tracksUse: Bool { if case .client = memory { false } else { true } }

    init(count: Int, memory: Memory) {
        precondition(count >= 1)
        slots = Array(repeating: Slot(), count: count)
        self.memory = memory
    }

    /// A slot for `bytes` that nothing staged holds, in ring order, after its
    /// last read has completed (`wait` blocks for a serial). Nil when every
    /// slot holds a staged frame. The caller grows it if `needsGrowth`.
    func acquire(wait: (UInt64) throws(GPUError) -> Void) throws(GPUError) -> Int? {
        guard let (i, lastUse) = candidate() else { return nil }
        try wait(lastUse)
        take(i)
        return i
    }

    /// The slot `acquire` would take, and the submission whose completion it waits for.
    func candidate() -> (slot: Int, lastUse: UInt64)? {
        for k in 0..<slots.count {
            let i = (next + k) % slots.count
            if !slots[i].staged && !slots[i].held { return (i, slots[i].lastUse) }
        }
        return nil
    }

    /// Takes the `candidate` slot `i` (its last read has completed).
    func take(_ i: Int) {
        next = (i + 1) % slots.count
        slots[i].staged = true
    }

    func needsGrowth(_ i: Int, bytes: Int) -> Bool { slots[i].capacity < bytes }

    func base(_ i: Int) -> UnsafeMutableRawPointer { slots[i].base! }

    /// Slot `i`'s imported memory (`imported` only).
    func exported(_ i: Int) -> (any ExportedMemory)? { slots[i].imported?.memory }

    /// Lets go of a staged slot that will not be committed (superseded or failed).
    func abandon(_ i: Int) { slots[i].staged = false }

    /// Render thread: slot `i` with room for `bytes` (its old buffer retired after its last read).
    func grow(_ i: Int, bytes: Int, releaser: GLReleaser) throws(GPUError) {
        let cap = (bytes + 65535) & ~65535
        switch memory {
        case .imported(let imported):
            if let old = slots[i].imported {
                let procs = imported.procs
                releaser.timeline.retire(lastUse: slots[i].lastUse) { old.release(releaser, procs: procs) }
            }
            slots[i].imported = nil
            slots[i].buffer = 0
            slots[i].capacity = 0
            let b = try ImportedBuffer(try imported.source.allocate(cap), target: GL.pixelUnpackBuffer, procs: imported.procs)
            glBindBuffer(GL.pixelUnpackBuffer, 0)
            slots[i].imported = b
            slots[i].buffer = b.buffer
            slots[i].capacity = b.memory.size
            return
        case .mapped(let bufferStorage):
            if slots[i].buffer != 0 { releaser.retire(lastUse: slots[i].lastUse, .buffer, [slots[i].buffer]) }
            var b: GLuint = 0
            glGenBuffers(1, &b)
            glBindBuffer(GL.pixelUnpackBuffer, b)
            let flags = GL.mapWriteBit | GL.mapPersistentBit | GL.mapCoherentBit
            bufferStorage(GL.pixelUnpackBuffer, GLsizeiptr(cap), nil, flags)
            let p = glMapBufferRange(GL.pixelUnpackBuffer, 0, GLsizeiptr(cap), flags)
            glBindBuffer(GL.pixelUnpackBuffer, 0)
            guard let p else {
                releaser.delete(.buffer, [b])
                slots[i] = Slot(staged: slots[i].staged)
                _ = glGetError()
                throw .gl(label: "staging buffer of \(cap) bytes: persistent map failed", code: 0)
            }
            slots[i].buffer = b
            slots[i].base = p
        case .client:
            slots[i].base?.deallocate()
            slots[i].base = UnsafeMutableRawPointer.allocate(byteCount: cap, alignment: 64)
        }
        slots[i].capacity = cap
    }

    /// Render thread: binds slot `i` as the pixel-unpack source; returns the
    /// "pointer" glTexSubImage2D takes for byte `offset` of it.
    func bind(_ i: Int, offset: Int) -> UnsafeRawPointer? {
        if case .client = memory {
            glBindBuffer(GL.pixelUnpackBuffer, 0)
            return UnsafeRawPointer(slots[i].base! + offset)
        }
        glBindBuffer(GL.pixelUnpackBuffer, slots[i].buffer)
        return diptych_gl_offset(offset)
    }

    /// Render thread: slot `i`'s frame stays where it is, read in place
    /// while it is its role's picture; `release` lets it go.
    func hold(_ i: Int) {
        slots[i].staged = false
        slots[i].held = true
    }

    /// The picture held in slot `i` was last read by the submission `serial`.
    func release(_ i: Int, lastUse serial: UInt64) {
        slots[i].held = false
        slots[i].lastUse = max(slots[i].lastUse, serial)
    }

    /// Whether slot `i`'s buffer can be read in place: imported device memory, or a mapped buffer.
    func readableInPlace(_ i: Int) -> Bool { slots[i].buffer != 0 && (imported != nil || persistent) }

    /// Render thread: slot `i` has been read by the submission `serial` and is free again.
    func committed(_ i: Int, serial: UInt64) {
        slots[i].staged = false
        if tracksUse { slots[i].lastUse = serial }
    }

    /// Render thread, at teardown (after the timeline drained).
    func release(_ r: GLReleaser) {
        switch memory {
        case .imported(let imported): for s in slots { s.imported?.release(r, procs: imported.procs) }
        case .mapped: r.delete(.buffer, slots.map(\.buffer))
        case .client: for s in slots { s.base?.deallocate() }
        }
        slots = slots.map { _ in Slot() }
    }
}

extension StagingRing.Memory {
    /// The memory the plan's staging names, with what it needs (the planner checked it is there).
    init(_ staging: GPUPlan.Staging, bufferStorage: PFNGLBUFFERSTORAGEEXTPROC?, imported: ImportedMemory?) throws(GPUError) {
        switch staging {
        case .clientMemory: self = .client
        case .mappedBuffers:
            guard let bufferStorage else { throw .unsupported("mapped staging without GL_EXT_buffer_storage") }
            self = .mapped(bufferStorage)
        case .cudaImported:
            guard let imported else { throw .unsupported("CUDA-imported staging without imported memory") }
            self = .imported(imported)
        }
    }
}
