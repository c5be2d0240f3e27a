import CVA
import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// A VA surface made from an NV12 dma-buf: `vaCreateSurfaces` with
/// `VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2`, the buffer's format modifier and
/// its planes' objects, so the encoder reads the GPU's buffer itself
/// (docs/ARCHITECTURE.md, "Encoder paths"). FFmpeg 5.1's DRM-PRIME mapping
/// (`av_hwframe_map`) passes no modifier and takes one object only, so the
/// surface is made here on the encoder's own display. The driver holds its
/// own reference to the buffer while the surface exists; the fds stay the
/// caller's. `deinit` destroys the surface.
final class VAImportedSurface {
    let id: VASurfaceID
    private let display: VADisplay
    private let va: VALibrary

    /// DRM_FORMAT_MOD_INVALID: the layout is implied by the buffer (no modifier given).
    static let implicitModifier: UInt64 = 0x00ff_ffff_ffff_ffff

    init(display: VADisplay, va: VALibrary, frame: DmaBufFrame) throws(VAImportError) {
        guard frame.fourcc == DmaBufFrame.nv12, frame.planes.count == 2 else {
            throw VAImportError(reason: "the encoder takes NV12 dma-bufs of 2 planes, not \(DmaBufFrame.fourccName(frame.fourcc)) with \(frame.planes.count)")
        }
        guard frame.width > 0, frame.height > 0, frame.width % 2 == 0, frame.height % 2 == 0 else {
            throw VAImportError(reason: "NV12 dma-buf \(frame.width)x\(frame.height) needs an even, non-zero size")
        }
        // One object per distinct buffer: planes exported as separate fds of one buffer share it.
        var objects: [(fd: Int32, key: VAImportedSurface.BufferKey, size: UInt32)] = []
        var planeObject: [UInt32] = []
        for (i, p) in frame.planes.enumerated() {
            guard let key = BufferKey(fd: p.fd) else { throw VAImportError(reason: "plane \(i) fd \(p.fd): \(String(cString: strerror(errno)))") }
            if let k = objects.firstIndex(where: { $0.key == key }) { planeObject.append(UInt32(k)); continue }
            let end = lseek(p.fd, 0, SEEK_END)
            guard end > 0, end <= off_t(UInt32.max) else { throw VAImportError(reason: "plane \(i) fd \(p.fd): cannot tell the buffer's size") }
            planeObject.append(UInt32(objects.count))
            objects.append((p.fd, key, UInt32(end)))
        }
        var desc = VADRMPRIMESurfaceDescriptor()
        let fds = objects.map { CInt($0.fd) }, sizes = objects.map(\.size)
        let offsets = frame.planes.map { UInt32($0.offset) }, pitches = frame.planes.map { UInt32($0.stride) }
        diptych_va_nv12_descriptor(&desc, UInt32(frame.width), UInt32(frame.height), UInt32(objects.count), fds, sizes,
                                   frame.modifier ?? VAImportedSurface.implicitModifier, planeObject, offsets, pitches)
        var attributes = [VASurfaceAttrib](repeating: VASurfaceAttrib(), count: 2)
        var surface = VASurfaceID(VA_INVALID_SURFACE)
        let status = withUnsafeMutablePointer(to: &desc) { d in
            diptych_va_prime2_attributes(&attributes, d)
            return va.createSurfaces(display, UInt32(VA_RT_FORMAT_YUV420), UInt32(frame.width), UInt32(frame.height),
                                     &surface, 1, &attributes, 2)
        }
        guard status == VA_STATUS_SUCCESS else {
            throw VAImportError(reason: "vaCreateSurfaces(DRM PRIME 2, NV12 \(frame.width)x\(frame.height), modifier "
                                + "\(frame.modifier.map { ModifierTrial.name($0) } ?? "implicit")): \(va.message(status))")
        }
        id = surface; self.display = display; self.va = va
    }

    deinit {
        var s = id
        _ = va.destroySurfaces(display, &s, 1)
    }

    /// A dma-buf's identity: its inode (each dma-buf has its own; fds of one buffer share it).
    struct BufferKey: Hashable {
        var device: UInt64
        var inode: UInt64
        init?(fd: Int32) {
            var st = stat()
            guard fd >= 0, fstat(fd, &st) == 0 else { return nil }
            device = UInt64(st.st_dev); inode = UInt64(st.st_ino)
        }
    }
}

/// Why the VA driver did not take a dma-buf.
struct VAImportError: Error, Hashable, Sendable {
    var reason: String
}

extension EncoderProbe {
    /// Whether the VA-API encoder reads `frame` in place: a `VideoEncoder`
    /// with `settings` (VA-API on `settings.preferredRenderNode`, the frame's
    /// size) takes the buffer as a surface and encodes it into at least one
    /// packet. The take's trial of a modifier before its ring is made; what
    /// the buffer holds does not matter. Throws the encoder's refusal.
    public static func checkZeroCopy(_ frame: DmaBufFrame, settings: VideoEncoderSettings) throws(MediaError) {
        var s = settings
        s.encoder = .vaapi
        s.size = PixelSize(width: frame.width, height: frame.height)
        let encoder = try VideoEncoder(settings: s, globalHeader: false)
        var packets = try encoder.encode(frame, pts: .zero, release: nil)
        packets += try encoder.flush()
        guard !packets.isEmpty else { throw .encoderFailed(encoder: encoder.name, detail: "encoded no packet from the dma-buf") }
    }
}
