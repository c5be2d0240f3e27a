import DiptychCore

/// Uploads through imported staging (the default where the readback goes
/// through CUDA; `DIPTYCH_CUDA_UPLOADS=import`): the
/// staging slots are CUDA device memory imported into the GL context, the
/// callers' threads copy frames into them with CUDA's copy engines (host
/// frames from host memory, NVDEC's NV12 frames device to device), and the
/// render thread's glTexSubImage2D reads them on the device. No cuGraphics
/// map or unmap: the copy has completed when the upload call returns, and the
/// slot is reused only after the fence of the upload that read it
/// (docs/ARCHITECTURE.md, "NV12 read back through CUDA").
extension GPUCompositor {
    /// Memory for the bytes of frames this compositor will upload: page-locked
    /// where uploads are staged in imported CUDA memory (the copy engines read
    /// it directly, and an upload skips the copy into staging), ordinary
    /// memory elsewhere. Fill it, make a `VideoFrame` whose planes point into
    /// it, upload. Freed when its last frame is gone.
    public func makeUploadStorage(byteCount: Int) -> FrameStorage {
        let n = max(byteCount, 1)
        let allocator = try? callerSide { r in r.staging.imported?.source.hostMemory }
        guard let allocator, let p = allocator.allocate(n) else { return FrameStorage(zeroedCount: n) }
        let address = UInt(bitPattern: p)
        return FrameStorage(base: UnsafeRawPointer(p), count: n, pageLocked: true,
                            release: { allocator.free(UnsafeMutableRawPointer(bitPattern: address)!) })
    }

    /// `frame` with its bytes copied into upload storage (`makeUploadStorage`),
    /// its planes at the same offsets and strides; `frame` itself where its
    /// planes are not all in one storage.
    public func copyIntoUploadStorage(_ frame: VideoFrame) -> VideoFrame {
        let old = frame.planes[0].storage
        guard frame.planes.allSatisfy({ $0.storage === old }) else { return frame }
        let s = makeUploadStorage(byteCount: old.count)
        s.mutableBase.copyMemory(from: old.base, byteCount: old.count)
        return VideoFrame(width: frame.width, height: frame.height, format: frame.format,
                          planes: frame.planes.map { FramePlane(storage: s, offset: $0.offset, stride: $0.stride) },
                          pts: frame.pts, matrix: frame.matrix, range: frame.range)
    }

    /// A staging slot with room for `bytes`, once the GPU has read what it
    /// held (waited for here where the fences allow, else on the render
    /// thread). Where every slot holds a staged frame (a ring shallower than
    /// the roles), a hop commits them; another grows the slot. `calls` is held.
    func stagingSlot(bytes: Int) throws(GPUError) -> Int {
        enum Step: Sendable { case slot(Int), wait(UInt64), full }
        var committed = false
        while true {
            let step = try callerSide { r -> Step in
                guard let (i, lastUse) = r.staging.candidate() else { return .full }
                guard lastUse <= r.timeline.completed || (r.timeline.canWaitOffThread && r.timeline.waitOffThread(for: lastUse)) else {
                    return .wait(lastUse)
                }
                r.staging.take(i)
                return .slot(i)
            }
            switch step {
            case .slot(let i):
                guard try callerSide({ r in r.staging.needsGrowth(i, bytes: bytes) }) else { return i }
                do throws(GPUError) {
                    try withRenderer { r throws(GPUError) in try r.staging.grow(i, bytes: bytes, releaser: r.releaser) }
                } catch { _ = try? callerSide { r in r.staging.abandon(i) }; throw error }
                return i
            case .wait(let serial):
                // The slot's last read is recorded but not fenced yet: where fences can be waited for
                // here, the hop only fences it and this thread waits; the render thread, which every
                // take of the context waits on, does not wait for the GPU for it.
                try withRenderer { r in
                    if r.timeline.canWaitOffThread { r.timeline.fence(upTo: serial) } else { r.timeline.wait(for: serial) }
                }
            case .full:
                guard !committed else {
                    let n = try callerSide { r in r.staging.slots.count }
                    throw .gl(label: "upload: staging ring of \(n) slots exhausted", code: 0)
                }
                committed = true
                _ = try withRenderer { r throws(GPUError) in try r.beginHop() }
            }
        }
    }

    /// Copies `frame`'s planes into staging slot `i` (CPU copies into a
    /// mapped slot; CUDA's copy into an imported one), under the renderer's lock.
    func stage(_ frame: VideoFrame, layout: UploadLayout, into i: Int, _ r: GPURenderer) throws(GPUError) {
        guard let memory = r.staging.exported(i) else {
            for j in layout.copyJobs(frame, to: r.staging.base(i)) { j.run() }
            return
        }
        try withExtendedLifetime(frame) { () throws(GPUError) in try memory.copyIn(layout.transfers(frame)) }
    }

    /// An NV12 frame in a picture of its decoder's pool, on the staging
    /// memory's device, made the role's pending picture as it is: read in
    /// place at the next render (`PooledUpload`), nothing copied, its holder
    /// kept until the last frame that read it has completed. The picture's
    /// allocation is imported at its first frame (one hop to the render
    /// thread). False where the plan does not read pictures in place from
    /// imported memory, for frames that are no such picture, and where the
    /// import failed (logged once; those are staged). `calls` is held.
    func readPooled(_ f: CUDAFrame, holder: any CUDAFrameHolder, role: StreamRole) throws(GPUError) -> Bool {
        // Pending at once where the allocation is imported; else imported first.
        enum Found: Sendable { case done(Bool), toImport(PooledUpload) }
        func pend(_ r: GPURenderer, _ u: PooledUpload) -> Bool {
            r.setPending(role, .pooled(u))
            r.timer.stats.cudaFrames += 1
            return true
        }
        let found = try callerSide { r -> Found in
            guard r.plan.cudaFrames == .staged, r.plan.pictures == .inPlace, let imports = r.pictureImports, let imported = r.staging.imported,
                  f.width <= r.maxTextureSize, f.height <= r.maxTextureSize,
                  let u = PooledUpload.readable(f, holder, device: imported.source.device, role: role) else { return .done(false) }
            switch imports.imported(u.memory) {
            case true?: return .done(pend(r, u))
            case false?: return .done(false)
            case nil: return .toImport(u)
            }
        }
        switch found {
        case .done(let taken): return taken
        case .toImport(let u): return try withRenderer { r in r.pictureImports?.importing(u.memory) == true && pend(r, u) }
        }
    }

    /// An NV12 CUDA frame of the staging memory's device, copied into a
    /// staging slot device to device and made the role's pending upload, as a
    /// host frame would be (its holder can go at once). False where the plan
    /// does not stage CUDA frames, or for frames staging does not take (P010,
    /// another device): those go through interop. `calls` is held.
    func stageImported(_ f: CUDAFrame, role: StreamRole) throws(GPUError) -> Bool {
        let takes = try callerSide { r in
            guard r.plan.cudaFrames == .staged, let imported = r.staging.imported else { return false }
            return f.format == .nv12 && f.device == imported.source.device && f.planes.count == 2 && f.width > 0 && f.height > 0
                && f.width % 2 == 0 && f.height % 2 == 0 && f.width <= r.maxTextureSize && f.height <= r.maxTextureSize
                && f.planes.allSatisfy({ $0.pitch >= f.width })
        }
        guard takes else { return false }   // interop's checks name what is wrong with a bad frame
        // The frame as the upload path describes it: tightly packed planes (the slot's layout), no host memory.
        let none = FrameStorage(base: UnsafeRawPointer(bitPattern: 1)!, count: 0, release: {})
        let shape = VideoFrame(width: f.width, height: f.height, format: .nv12,
                               planes: [FramePlane(storage: none, offset: 0, stride: f.width),
                                        FramePlane(storage: none, offset: 0, stride: f.width)],
                               pts: .zero, matrix: f.matrix, range: f.range)
        let layout = UploadLayout(shape)
        try callerSide { r in r.dropPending(role) }
        let i = try stagingSlot(bytes: layout.total)
        let planes = (0..<2).map { k in
            PlaneTransfer(source: .device(f.planes[k].address), pitch: f.planes[k].pitch, rowBytes: f.width,
                          rows: k == 0 ? f.height : f.height / 2, offset: layout.planes[k].offset, dstPitch: f.width)
        }
        return try callerSide { r throws(GPUError) -> Bool in
            guard let memory = r.staging.exported(i) else { r.staging.abandon(i); return false }
            let t0 = PassTimer.now()
            do throws(GPUError) { try memory.copyIn(planes) } catch { r.staging.abandon(i); throw error }
            r.timer.stats.upload.cpuTotalMs += Double(PassTimer.now() - t0) / 1e6
            r.timer.stats.cudaFrames += 1
            r.setPending(role, .staged(StagedUpload(frame: shape, role: role, slot: i, layout: layout)))
            return true
        }
    }
}
