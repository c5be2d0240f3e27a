import CGLES
import DiptychCore

/// An NV12 readback submitted but not yet delivered.
struct PendingReadback {
    var serial: UInt64
    /// The pack buffer, or -1 when nothing is read from the GPU (a direct-copy frame without a rendered region).
    var slot: Int
    var output: OutputID
    var pts: MediaTime
    var width: Int
    var height: Int
    var stride: Int
    var bytes: Int
    var matrix: ColorMatrix
    var range: ColorRange
    /// A direct-copy frame: assembled on the CPU from the copies' frames, then
    /// the rendered region read from the GPU (`bytes` of it in the pack buffer).
    var direct: DirectFrame?
    /// Bytes of the delivered NV12 frame.
    var frameBytes: Int { stride * height + stride * (height / 2) }
}

/// NV12 readbacks in flight, delivered in submission order: a ring of
/// pixel-pack buffers the GPU copies each frame into, and the frames waiting
/// in them.
///
/// How the bytes come back is the plan's readback (`GPUPlan.Readback`), one
/// `Transport` for the whole ring:
/// - `mapped`: buffers persistently mapped for reading (GL_EXT_buffer_storage,
///   coherent): once a frame's fence has signalled, the caller copies it out
///   on its own thread with no render-thread hop;
/// - `imported`: CUDA memory imported into GL: the GPU's readback copy stays
///   in device memory and the caller's thread copies the frame out through
///   CUDA's copy engines;
/// - `mapOnRenderThread`: the render thread maps the buffer at delivery.
/// Bookkeeping happens under the renderer's lock; GL calls on the render thread.
final class ReadbackQueue {
    /// How frames come back, as the plan's readback says.
    enum Transport {
        case mapOnRenderThread
        case mapped(PFNGLBUFFERSTORAGEEXTPROC)
        case imported(ImportedMemory)
    }

    struct PackBuffer {
        var buffer: GLuint
        var base: UnsafeRawPointer?
        var capacity = 0
        var busy = false
        var imported: ImportedBuffer?
        /// Host copy of an imported buffer's bytes, for frames assembled from parts (direct copy).
        var shadow: FrameStorage?
    }
    private(set) var buffers: [PackBuffer]
    private var next = 0
    private(set) var pending: [PendingReadback] = []
    var ready: [NV12Readback] = []
    let transport: Transport
    /// The imported memory the buffers are, or nil.
    var exported: ImportedMemory? { if case .imported(let m) = transport { m } else { nil } }
    var persistent: Bool { if case .mapped = transport { true } else { false } }
    /// CPU memory of delivered NV12 frames, reused once the consumer drops them.
    private let framePool: FrameBufferPool
    /// Outputs whose frames go device to device into CUDA pictures their
    /// encoder lends (imported CUDA memory only): set by the compositor.
    var cudaFrameProviders: [OutputID: CUDAFrameProvider] = [:]

    init(depth: Int, transport: Transport) {
        precondition(depth >= 1)
        var ids = [GLuint](repeating: 0, count: depth)
        self.transport = transport
        if case .imported = transport {} else { glGenBuffers(GLsizei(depth), &ids) }
        buffers = ids.map { PackBuffer(buffer: $0) }
        framePool = FrameBufferPool(allocator: transport.hostMemory)
    }

    /// Every pack buffer holds a frame nobody has taken: deliver one first.
    var isFull: Bool { pending.count >= buffers.count }
    var outstanding: Int { ready.count + pending.count }

    /// Render thread: the next pack buffer, bound to `target` (GL_PIXEL_PACK_BUFFER
    /// for glReadPixels, GL_COPY_WRITE_BUFFER for a buffer copy), with room for
    /// `bytes`. The ring moves on only once it is ready (a failure leaves no gap).
    func bindNext(bytes: Int, target: GLenum, releaser: GLReleaser) throws(GPUError) -> Int {
        let i = next
        precondition(!buffers[i].busy, "pack buffer \(i) still holds an undelivered readback")
        if buffers[i].capacity < bytes {
            let cap = (bytes + 65535) & ~65535
            switch transport {
            case .imported(let exported):
                // Nothing in flight uses the old one (it is not busy): a bigger import replaces it.
                buffers[i].imported?.release(releaser, procs: exported.procs)
                buffers[i] = PackBuffer(buffer: 0)
                let b = try ImportedBuffer(try exported.source.allocate(cap), target: GL.pixelPackBuffer, procs: exported.procs)
                buffers[i] = PackBuffer(buffer: b.buffer, base: nil, capacity: b.memory.size, imported: b)
            case .mapped(let bufferStorage):
                // Immutable storage: a bigger buffer replaces it (nothing in flight uses it: it is not busy).
                releaser.delete(.buffer, [buffers[i].buffer])
                var b: GLuint = 0
                glGenBuffers(1, &b)
                glBindBuffer(GL.pixelPackBuffer, b)
                let flags = GL.mapReadBit | GL.mapPersistentBit | GL.mapCoherentBit
                bufferStorage(GL.pixelPackBuffer, GLsizeiptr(cap), nil, flags)
                buffers[i] = PackBuffer(buffer: b, base: glMapBufferRange(GL.pixelPackBuffer, 0, GLsizeiptr(cap), flags).map { UnsafeRawPointer($0) })
                guard buffers[i].base != nil else {
                    glBindBuffer(GL.pixelPackBuffer, 0)
                    _ = glGetError()
                    throw .gl(label: "readback buffer of \(cap) bytes: persistent map failed", code: 0)
                }
                buffers[i].capacity = cap
            case .mapOnRenderThread:
                glBindBuffer(GL.pixelPackBuffer, buffers[i].buffer)
                glBufferData(GL.pixelPackBuffer, GLsizeiptr(cap), nil, GL.streamRead)
                buffers[i].capacity = cap
            }
            glBindBuffer(GL.pixelPackBuffer, 0)
        }
        glBindBuffer(target, buffers[i].buffer)
        next = (i + 1) % buffers.count
        return i
    }

    /// Render thread: gives back the buffer `bindNext` just returned, unused
    /// (the work that was to fill it failed), so the ring has no gap.
    func unbind(_ i: Int) {
        precondition(!buffers[i].busy && (i + 1) % buffers.count == next)
        next = i
    }

    func buffer(_ i: Int) -> GLuint { buffers[i].buffer }

    /// Queues a submitted readback (`r.slot` now holds its bytes until delivery).
    func submitted(_ r: PendingReadback) {
        if r.slot >= 0 { buffers[r.slot].busy = true }
        pending.append(r)
    }

    /// Whether the oldest pending readback can be delivered off the render thread.
    var deliversOffThread: Bool { if case .mapOnRenderThread = transport { false } else { true } }

    /// The oldest pending readback, its fence already waited for, as a frame,
    /// and the copies that fill it (run them on any thread before the next
    /// call). On any thread where `deliversOffThread`, else on the render thread.
    func deliver() throws(GPUError) -> (readback: PendingReadback, frame: VideoFrame, jobs: [CopyJob], device: CUDAFrameTarget?) {
        switch transport {
        case .imported:
            if let d = try deliverToDevice() { return d }
            let (r, frame, jobs) = try deliverImported()
            return (r, frame, jobs, nil)
        case .mapped:
            let (r, frame, jobs) = deliverMapped()
            return (r, frame, jobs, nil)
        case .mapOnRenderThread:
            let (r, frame) = try deliverByMapping()
            return (r, frame, [], nil)
        }
    }

    /// The oldest pending readback, its fence already waited for, copied
    /// device to device into a CUDA picture its output's provider lends (the
    /// encoder's own frame: no host copy); nil where the output has no
    /// provider, the frame is assembled from parts (direct copy), or the
    /// provider has none free (the frame then comes back in host memory).
    /// Any thread. A failed copy leaves the readback pending.
    private func deliverToDevice() throws(GPUError) -> (readback: PendingReadback, frame: VideoFrame, jobs: [CopyJob], device: CUDAFrameTarget?)? {
        let r = pending[0]
        guard r.direct == nil, r.slot >= 0, let imported = buffers[r.slot].imported, let provider = cudaFrameProviders[r.output],
              let target = provider(PixelSize(width: r.width, height: r.height)) else { return nil }
        let p = target.picture
        guard p.width == r.width, p.height == r.height else { return nil }
        try imported.memory.copyOut([
            DevicePlaneCopy(offset: 0, pitch: r.stride, rowBytes: r.width, rows: r.height, destination: p.luma, dstPitch: p.pitch),
            DevicePlaneCopy(offset: r.stride * r.height, pitch: r.stride, rowBytes: (r.width + 1) & ~1, rows: (r.height + 1) / 2,
                            destination: p.chroma, dstPitch: p.pitch)])
        pending.removeFirst()
        buffers[r.slot].busy = false
        let frame = VideoFrame(width: r.width, height: r.height, format: .nv12, planes: [], pts: r.pts, matrix: r.matrix, range: r.range)
        return (r, frame, [], target)
    }

    /// The oldest pending readback, its fence already waited for, copied out
    /// of its imported buffer (into the frame, or for a frame assembled from
    /// parts into the buffer's host copy, with the copies that fill the frame
    /// from there: run them on any thread before the next call). Any thread.
    /// A failed copy leaves the readback pending (the next call fails the same way).
    private func deliverImported() throws(GPUError) -> (readback: PendingReadback, frame: VideoFrame, jobs: [CopyJob]) {
        let r = pending[0]
        let slot = r.slot
        let storage = framePool.storage(count: r.frameBytes) { _ in }
        func done(_ jobs: [CopyJob]) -> (readback: PendingReadback, frame: VideoFrame, jobs: [CopyJob]) {
            pending.removeFirst()
            if slot >= 0 { buffers[slot].busy = false }
            return (r, ReadbackQueue.frame(r, storage), jobs)
        }
        guard slot >= 0, let imported = buffers[slot].imported else {
            return done(DirectCopyPlanner.deliveryJobs(r, packed: nil, into: storage.mutableBase))
        }
        func copyOut(to dst: UnsafeMutableRawPointer) throws(GPUError) {
            try imported.memory.copyOut(count: r.bytes, to: dst)
        }
        if r.direct == nil {
            try copyOut(to: storage.mutableBase)
            return done([])
        }
        if (buffers[slot].shadow?.count ?? -1) < r.bytes {
            buffers[slot].shadow = framePool.storage(count: buffers[slot].capacity) { _ in }
        }
        let shadow = buffers[slot].shadow!
        try copyOut(to: shadow.mutableBase)
        var jobs = DirectCopyPlanner.deliveryJobs(r, packed: UnsafeRawPointer(shadow.mutableBase), into: storage.mutableBase)
        for i in jobs.indices { jobs[i].owner = KeepAlive((jobs[i].owner, shadow)) }
        return done(jobs)
    }

    /// The oldest pending readback, its fence already waited for, as a frame
    /// and the copies that fill it from the persistently mapped buffer (run
    /// them on any thread before the next call). Persistent buffers only.
    private func deliverMapped() -> (readback: PendingReadback, frame: VideoFrame, jobs: [CopyJob]) {
        precondition(persistent)
        let r = pending.removeFirst()
        let src = r.slot >= 0 ? buffers[r.slot].base : nil
        let storage = framePool.storage(count: r.frameBytes) { _ in }
        let jobs = DirectCopyPlanner.deliveryJobs(r, packed: src, into: storage.mutableBase)
        if r.slot >= 0 { buffers[r.slot].busy = false }
        return (r, ReadbackQueue.frame(r, storage), jobs)
    }

    /// Render thread, without persistent mapping: maps the oldest readback's
    /// buffer (its fence already waited for), copies it into a frame and unmaps it.
    private func deliverByMapping() throws(GPUError) -> (readback: PendingReadback, frame: VideoFrame) {
        precondition(!persistent)
        let r = pending.removeFirst()
        var src: UnsafeRawPointer?
        if r.slot >= 0 {
            buffers[r.slot].busy = false
            glBindBuffer(GL.pixelPackBuffer, buffers[r.slot].buffer)
            guard let p = glMapBufferRange(GL.pixelPackBuffer, 0, GLsizeiptr(r.bytes), GL.mapReadBit) else {
                glBindBuffer(GL.pixelPackBuffer, 0)
                throw .gl(label: "readback: map pack buffer", code: glGetError())
            }
            src = UnsafeRawPointer(p)
        }
        let storage = framePool.storage(count: r.frameBytes) { dst in
            for j in DirectCopyPlanner.deliveryJobs(r, packed: src, into: dst) { j.run() }
        }
        if r.slot >= 0 { glUnmapBuffer(GL.pixelPackBuffer) }
        glBindBuffer(GL.pixelPackBuffer, 0)
        return (r, ReadbackQueue.frame(r, storage))
    }

    static func frame(_ r: PendingReadback, _ storage: FrameStorage) -> VideoFrame {
        VideoFrame(width: r.width, height: r.height, format: .nv12,
                   planes: [FramePlane(storage: storage, offset: 0, stride: r.stride),
                            FramePlane(storage: storage, offset: r.stride * r.height, stride: r.stride)],
                   pts: r.pts, matrix: r.matrix, range: r.range)
    }

    /// Drops every readback nobody collected (context loss, teardown).
    func dropAll() {
        pending.removeAll(); ready.removeAll()
        for i in buffers.indices { buffers[i].busy = false }
    }

    /// Render thread, at teardown (after the timeline drained).
    func release(_ r: GLReleaser) {
        dropAll()
        if let exported = exported {
            for b in buffers { b.imported?.release(r, procs: exported.procs) }
        } else {
            r.delete(.buffer, buffers.map(\.buffer))
        }
        buffers.removeAll()
    }
}

extension ReadbackQueue.Transport {
    /// The transport the plan's readback names, with what it needs (the planner checked it is there).
    init(_ readback: GPUPlan.Readback, bufferStorage: PFNGLBUFFERSTORAGEEXTPROC?, imported: ImportedMemory?) throws(GPUError) {
        switch readback {
        case .mapOnRenderThread: self = .mapOnRenderThread
        case .mappedBuffers:
            guard let bufferStorage else { throw .unsupported("mapped readback without GL_EXT_buffer_storage") }
            self = .mapped(bufferStorage)
        case .cudaImported:
            guard let imported else { throw .unsupported("CUDA-imported readback without imported memory") }
            self = .imported(imported)
        }
    }

    /// Page-locked host memory for delivered frames (imported memory's), if any.
    var hostMemory: FrameBufferPool.Allocator? { if case .imported(let m) = self { m.source.hostMemory } else { nil } }
}
