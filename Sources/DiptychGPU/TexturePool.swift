import CEGL
import CGLES
import DiptychCore

/// Where a stream picture's samples are read from: the one place the plan's
/// `pictures` (and a dma-buf import) shows in the passes.
enum Picture {
    /// Textures it was uploaded or copied into (one per plane).
    case textures([GLuint])
    /// The staging slot it was copied into, read there by the compute pass
    /// (`TexturePool.commitInPlace`).
    case inPlace(InPlacePicture)
    /// An external texture over an imported dma-buf's EGLImage (destroyed after the texture).
    case external(texture: GLuint, image: EGLImageKHR)
}

/// One uploaded (or imported) stream frame as the passes read it. Owned by
/// the pool, deleted only after the fence of its last use (`lastUse`) has signalled.
final class StreamPicture {
    /// The CPU format it was made for; nil for a dma-buf import or a picture read in place (never reused).
    let format: PixelFormat?
    let input: ShaderKey.Input
    let width: Int
    let height: Int
    let source: Picture
    var lastUse: UInt64 = 0
    var matrix: ColorMatrix = .bt709
    var range: ColorRange = .limited
    /// Which upload its pictures hold (unique per upload in a renderer).
    var uploadSerial: UInt64 = 0
    /// 16-bit normalized planes (P010 from NVDEC) instead of 8-bit ones.
    let sixteenBit: Bool
    /// The textures' CUDA registrations, once CUDA frames were copied into them.
    var cuda: CUDARegistration?

    init(format: PixelFormat?, input: ShaderKey.Input, width: Int, height: Int, source: Picture, sixteenBit: Bool = false) {
        self.format = format; self.input = input; self.width = width; self.height = height
        self.source = source; self.sixteenBit = sixteenBit
    }

    /// The textures the fragment pass and CUDA copies use (none for a picture read in place).
    var textures: [GLuint] {
        switch source {
        case .textures(let t): t
        case .external(let t, _): [t]
        case .inPlace: []
        }
    }

    /// The staging slot read in place, if it is one.
    var inPlace: InPlacePicture? { if case .inPlace(let p) = source { p } else { nil } }

    /// A texture set of that shape (a picture read in place is never one).
    func matches(_ f: PixelFormat, _ w: Int, _ h: Int, sixteenBit: Bool = false) -> Bool {
        inPlace == nil && format == f && width == w && height == h && self.sixteenBit == sixteenBit
    }

    /// Allocates immutable textures for `format` (BGRA through texture swizzle;
    /// NV12 with `sixteenBit` as R16/RG16, GL_EXT_texture_norm16).
    static func make(format: PixelFormat, width: Int, height: Int, sixteenBit: Bool = false) -> StreamPicture {
        var shapes = format.planeShapes(width: width, height: height)
        if sixteenBit {
            shapes = shapes.map { s in
                var w = s
                w.bytesPerPixel *= 2
                w.internalFormat = s.internalFormat == GL.rg8 ? GL.rg16 : GL.r16
                return w
            }
        }
        var ids = [GLuint](repeating: 0, count: shapes.count)
        glGenTextures(GLsizei(ids.count), &ids)
        for (i, s) in shapes.enumerated() {
            glBindTexture(GL.texture2D, ids[i])
            glTexStorage2D(GL.texture2D, 1, s.internalFormat, GLsizei(s.width), GLsizei(s.height))
            glTexParameteri(GL.texture2D, GL.textureWrapS, GL.clampToEdge)
            glTexParameteri(GL.texture2D, GL.textureWrapT, GL.clampToEdge)
            glTexParameteri(GL.texture2D, GL.textureMinFilter, GL.nearest)
            glTexParameteri(GL.texture2D, GL.textureMagFilter, GL.nearest)
            if format == .bgra {
                glTexParameteri(GL.texture2D, GL.textureSwizzleR, GL.blueValue)
                glTexParameteri(GL.texture2D, GL.textureSwizzleB, GL.redValue)
            }
        }
        glBindTexture(GL.texture2D, 0)
        let input: ShaderKey.Input = format == .nv12 ? .nv12 : format == .i420 ? .i420 : .rgb
        return StreamPicture(format: format, input: input, width: width, height: height, source: .textures(ids), sixteenBit: sixteenBit)
    }

    /// The CUDA registrations, then the textures, then the EGLImage, once
    /// the last use has completed (a picture read in place lets its slot go itself).
    func release(_ r: GLReleaser) {
        let source = source, cuda = cuda
        self.cuda = nil
        r.timeline.retire(lastUse: lastUse) {
            cuda?.unregister()
            switch source {
            case .textures(let t): r.delete(.texture, t)
            case .external(let t, let image):
                r.delete(.texture, [t])
                r.destroy(image: image)
            case .inPlace: break
            }
        }
    }
}

/// A stream role's current textures and its pool of reusable sets.
final class StreamSlot {
    var pool: [StreamPicture] = []
    var current: StreamPicture?
}

/// A frame copied into a staging slot, waiting for the render thread to turn it into textures.
struct StagedUpload {
    var frame: VideoFrame
    var role: StreamRole
    var slot: Int
    var layout: UploadLayout
}

/// The stream textures every output samples: per role the current set and a
/// pool of sets, so an upload never writes textures a frame in flight still
/// reads. Render thread only.
final class TexturePool {
    private(set) var streams: [StreamRole: StreamSlot] = [:]
    /// Overlay pictures by the caller's id (`GPUCompositor.setOverlay`), uploaded once.
    private(set) var overlays: [Int: StreamPicture] = [:]
    /// Texture sets kept per role: the current one, one per frame in flight, one being uploaded.
    let maxSetsPerRole: Int
    private let releaser: GLReleaser
    /// Counts uploads and imports (`StreamPicture.uploadSerial`).
    private var uploadCounter: UInt64 = 0

    init(maxSetsPerRole: Int, releaser: GLReleaser) {
        self.maxSetsPerRole = maxSetsPerRole
        self.releaser = releaser
        for r in StreamRole.allCases { streams[r] = StreamSlot() }
    }

    var timeline: FenceTimeline { releaser.timeline }

    /// A free texture set for `role` that fits the frame: a matching set whose
    /// last use has completed, a new one while the pool has room, else the
    /// oldest matching set after waiting for its fence.
    func set(for role: StreamRole, format: PixelFormat, width: Int, height: Int, sixteenBit: Bool = false) -> StreamPicture {
        set(for: role, fits: { $0.matches(format, width, height, sixteenBit: sixteenBit) }) {
            StreamPicture.make(format: format, width: width, height: height, sixteenBit: sixteenBit)
        }
    }

    /// The pool's rule for any kind of set: sets that do not `fit` go (after
    /// their last use), then a fitting one whose last use has completed, a
    /// new one (`make`) while the pool has room, else the oldest after waiting.
    func set(for role: StreamRole, fits: (StreamPicture) -> Bool, make: () -> StreamPicture) -> StreamPicture {
        let slot = streams[role]!
        slot.pool.removeAll { s in
            guard s !== slot.current, !fits(s) else { return false }
            s.release(releaser)
            return true
        }
        let candidates = slot.pool.filter { $0 !== slot.current }
        if let free = candidates.first(where: { timeline.isComplete($0.lastUse) }) { return free }
        if slot.pool.count < maxSetsPerRole || candidates.isEmpty {
            let s = make()
            slot.pool.append(s)
            return s
        }
        let oldest = candidates.min { $0.lastUse < $1.lastUse }!
        timeline.wait(for: oldest.lastUse)
        return oldest
    }

    func makeCurrent(_ set: StreamPicture, role: StreamRole) {
        let slot = streams[role]!
        if let old = slot.current, old !== set, let p = old.inPlace {
            // Its staging slot is free once the last frame that read it is done.
            p.release(old.lastUse)
        } else if let old = slot.current, old !== set {
            let keep = old.format != nil && set.format != nil && old.matches(set.format!, set.width, set.height, sixteenBit: set.sixteenBit)
            if !keep {
                slot.pool.removeAll { $0 === old }
                old.release(releaser)
            }
        }
        uploadCounter += 1
        set.uploadSerial = uploadCounter
        slot.current = set
    }

    /// Copies a staged frame into the role's next texture set (GPU side) and makes it current.
    func commit(_ st: StagedUpload, from staging: StagingRing, timer: PassTimer) {
        let frame = st.frame
        let set = self.set(for: st.role, format: frame.format, width: frame.width, height: frame.height)
        timer.begin(.upload)
        glActiveTexture(GL.texture0)
        for (i, s) in frame.format.planeShapes(width: frame.width, height: frame.height).enumerated() {
            let pixels = staging.bind(st.slot, offset: st.layout.planes[i].offset)
            glBindTexture(GL.texture2D, set.textures[i])
            // The widest alignment the rows allow (byte alignment takes a slow path on some drivers).
            let rowBytes = st.layout.planes[i].rowLength * s.bytesPerPixel
            glPixelStorei(GL.unpackAlignment, rowBytes % 8 == 0 ? 8 : rowBytes % 4 == 0 ? 4 : rowBytes % 2 == 0 ? 2 : 1)
            glPixelStorei(GL.unpackRowLength, GLint(st.layout.planes[i].rowLength))
            glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(s.width), GLsizei(s.height), s.format, GL.unsignedByte, pixels)
        }
        glPixelStorei(GL.unpackRowLength, 0)
        glBindTexture(GL.texture2D, 0)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        timer.end(.upload)
        committed(set, st, staging)
    }

    /// After the GPU copy of a staged frame into `set`: the slot is free after
    /// this submission, and the set is the role's picture.
    func committed(_ set: StreamPicture, _ st: StagedUpload, _ staging: StagingRing) {
        let serial = timeline.pendingSerial
        set.lastUse = serial
        staging.committed(st.slot, serial: serial)
        set.matrix = st.frame.matrix
        set.range = st.frame.range
        makeCurrent(set, role: st.role)
    }

    /// Forgets the role's pictures (each set deleted after its last use).
    func clear(_ role: StreamRole) {
        let slot = streams[role]!
        var all = slot.pool
        if let c = slot.current, !all.contains(where: { $0 === c }) { all.append(c) }
        for s in all {
            s.inPlace?.release(s.lastUse)
            s.release(releaser)
        }
        slot.pool.removeAll(); slot.current = nil
    }

    func clearAll() {
        for r in StreamRole.allCases { clear(r) }
        for id in Array(overlays.keys) { setOverlay(id, nil) }
    }

    /// Makes `image` (premultiplied RGBA, tightly packed, `width` × `height`)
    /// overlay `id`'s picture, or removes it (nil). The picture it replaces
    /// is deleted after its last use.
    func setOverlay(_ id: Int, _ image: (bytes: [UInt8], width: Int, height: Int)?) {
        if let old = overlays.removeValue(forKey: id) { old.release(releaser) }
        guard let image else { return }
        var tex: GLuint = 0
        glGenTextures(1, &tex)
        glActiveTexture(GL.texture0)
        glBindTexture(GL.texture2D, tex)
        glTexStorage2D(GL.texture2D, 1, GL.rgba8, GLsizei(image.width), GLsizei(image.height))
        glTexParameteri(GL.texture2D, GL.textureWrapS, GL.clampToEdge)
        glTexParameteri(GL.texture2D, GL.textureWrapT, GL.clampToEdge)
        glTexParameteri(GL.texture2D, GL.textureMinFilter, GL.linear)
        glTexParameteri(GL.texture2D, GL.textureMagFilter, GL.linear)
        glBindBuffer(GL.pixelUnpackBuffer, 0)
        glPixelStorei(GL.unpackAlignment, 4)
        glPixelStorei(GL.unpackRowLength, 0)
        image.bytes.withUnsafeBytes {
            glTexSubImage2D(GL.texture2D, 0, 0, 0, GLsizei(image.width), GLsizei(image.height), GL.rgba, GL.unsignedByte, $0.baseAddress)
        }
        glBindTexture(GL.texture2D, 0)
        let picture = StreamPicture(format: nil, input: .overlay, width: image.width, height: image.height, source: .textures([tex]))
        uploadCounter += 1
        picture.uploadSerial = uploadCounter
        overlays[id] = picture
    }
}
