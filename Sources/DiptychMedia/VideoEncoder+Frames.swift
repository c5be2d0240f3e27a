import CFFmpeg
import DiptychCore

/// Keeps a `VideoFrame` alive while FFmpeg holds the AVFrame wrapping it.
private final class FrameKeepAlive {
    let frame: VideoFrame
    init(frame: VideoFrame) { self.frame = frame }
}

private func releaseKeepAlive(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    guard let opaque else { return }
    Unmanaged<FrameKeepAlive>.fromOpaque(opaque).release()
}

/// A dma-buf's VA surface while the encoder holds the AVFrame naming it:
/// when FFmpeg lets go (the picture is encoded, or the encoder is freed) the
/// surface is destroyed, then `release` tells the buffer's owner it may reuse it.
private final class SurfaceHold {
    var surface: VAImportedSurface?
    let release: (@Sendable () -> Void)?
    init(surface: VAImportedSurface, release: (@Sendable () -> Void)?) { self.surface = surface; self.release = release }
    deinit {
        surface = nil
        release?()
    }
}

private func releaseSurfaceHold(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    guard let opaque else { return }
    Unmanaged<SurfaceHold>.fromOpaque(opaque).release()
}

/// A CUDA picture's owner while the encoder holds the AVFrame naming it:
/// `release` runs once, when FFmpeg lets go of the frame (NVENC has encoded
/// it, or the encoder is freed), to hand the memory back to its ring.
private final class CUDAPictureHold {
    let release: (@Sendable () -> Void)?
    init(release: (@Sendable () -> Void)?) { self.release = release }
    deinit { release?() }
}

private func releaseCUDAPictureHold(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    guard let opaque else { return }
    Unmanaged<CUDAPictureHold>.fromOpaque(opaque).release()
}

/// A frame of the NVENC encoder's CUDA pool, lent to be filled and given back with its picture.
final class LentCUDAFrame: @unchecked Sendable {   // the frame is touched by the filler, then by the encoder, never at once
    let frame: FFFrame
    init(_ frame: FFFrame) { self.frame = frame }
}

/// Wrapping the frames handed to the encoder as AVFrames.
extension VideoEncoder {
    /// A frame of the encoder's CUDA pool (NVENC only) for the compositor to
    /// fill device to device; nil elsewhere or when none can be had. Any
    /// thread (the pool is FFmpeg's thread-safe buffer pool).
    func lendCUDAFrame(_ size: PixelSize) -> CUDAFrameTarget? {
        guard nvenc != nil, let hwFrames, size == settings.size else { return nil }
        let f = FFFrame()
        guard av_hwframe_get_buffer(hwFrames.raw, f.raw, 0) >= 0,
              diptych_frame_linesize(f.raw, 0) == diptych_frame_linesize(f.raw, 1) else { return nil }
        let p = CUDANV12Picture(luma: diptych_frame_device_plane(f.raw, 0), chroma: diptych_frame_device_plane(f.raw, 1),
                                pitch: Int(diptych_frame_linesize(f.raw, 0)), width: size.width, height: size.height)
        return CUDAFrameTarget(picture: p, owner: LentCUDAFrame(f))
    }

    /// Encodes a frame `lendCUDAFrame` lent, filled with the composite.
    func encode(lent target: CUDAFrameTarget, pts: MediaTime, keyframe: Bool = false) throws(MediaError) -> [FFPacket] {
        guard let lent = target.owner as? LentCUDAFrame, let hwFrames,
              lent.frame.raw.pointee.hw_frames_ctx?.pointee.data == hwFrames.raw.pointee.data else {
            throw .invalidFrame(reason: "a CUDA frame \(name) did not lend")
        }
        let frame = lent.frame
        frame.raw.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        frame.raw.pointee.pts = ticks(for: pts)
        frame.raw.pointee.pict_type = keyframe ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        return try send(frame)
    }

    /// Encodes an NV12 picture in CUDA memory (NVENC only, no host copy): an
    /// `AV_PIX_FMT_CUDA` frame of the encoder's frames context whose planes
    /// are the picture's device addresses. `release` runs exactly once, when
    /// FFmpeg no longer holds the frame (at once when it is refused).
    func encode(_ picture: CUDANV12Picture, pts: MediaTime, release: (@Sendable () -> Void)?, keyframe: Bool = false) throws(MediaError) -> [FFPacket] {
        guard nvenc != nil, let hwFrames else {
            release?()
            throw .invalidFrame(reason: "CUDA pictures need the NVENC encoder; \(name) takes frames in host memory")
        }
        guard picture.width == settings.size.width, picture.height == settings.size.height else {
            release?()
            throw .invalidFrame(reason: "CUDA picture \(picture.width)x\(picture.height), encoder expects \(settings.size) NV12")
        }
        guard picture.pitch >= picture.width, picture.luma != 0, picture.chroma != 0 else {
            release?()
            throw .invalidFrame(reason: "CUDA picture with pitch \(picture.pitch) for width \(picture.width), or no plane address")
        }
        let hold = Unmanaged.passRetained(CUDAPictureHold(release: release)).toOpaque()
        // buf[0] holds the picture: FFmpeg's references to the frame keep it, its last unref releases it.
        guard let buf = av_buffer_create(nil, 0, releaseCUDAPictureHold, hold, 0) else {
            Unmanaged<CUDAPictureHold>.fromOpaque(hold).release()
            throw .encoderFailed(encoder: name, detail: "av_buffer_create: out of memory")
        }
        let frame = FFFrame()
        frame.raw.pointee.format = AV_PIX_FMT_CUDA.rawValue
        frame.raw.pointee.width = Int32(picture.width)
        frame.raw.pointee.height = Int32(picture.height)
        frame.raw.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        diptych_frame_set_buf(frame.raw, 0, buf)
        frame.raw.pointee.hw_frames_ctx = hwFrames.newReference()
        diptych_frame_set_device_plane(frame.raw, 0, picture.luma, Int32(picture.pitch))
        diptych_frame_set_device_plane(frame.raw, 1, picture.chroma, Int32(picture.pitch))
        frame.raw.pointee.pts = ticks(for: pts)
        if keyframe { frame.raw.pointee.pict_type = AV_PICTURE_TYPE_I }
        return try send(frame)
    }

    /// Encodes an NV12 dma-buf (VA-API only, zero copy): the buffer becomes a
    /// VA surface of the encoder's display (`VAImportedSurface`) named by a
    /// `AV_PIX_FMT_VAAPI` frame. `release` runs exactly once, when the encoder
    /// no longer reads the buffer (at once when it is refused).
    func encode(_ image: DmaBufFrame, pts: MediaTime, release: (@Sendable () -> Void)?, keyframe: Bool = false) throws(MediaError) -> [FFPacket] {
        guard selection.isHardware, let hwFrames, let vaDisplay, case .success(let va) = VALibrary.shared else {
            release?()
            throw .invalidFrame(reason: "dma-buf frames need the VA-API encoder; \(name) takes frames in host memory")
        }
        guard image.width == settings.size.width, image.height == settings.size.height else {
            release?()
            throw .invalidFrame(reason: "dma-buf \(image.width)x\(image.height), encoder expects \(settings.size) NV12")
        }
        let surface: VAImportedSurface
        do { surface = try VAImportedSurface(display: vaDisplay, va: va, frame: image) } catch {
            release?()
            throw .encoderFailed(encoder: name, detail: "import dma-buf as a VA surface: \(error.reason)")
        }
        let hold = Unmanaged.passRetained(SurfaceHold(surface: surface, release: release)).toOpaque()
        let frame = FFFrame()
        frame.raw.pointee.format = AV_PIX_FMT_VAAPI.rawValue
        frame.raw.pointee.width = Int32(image.width)
        frame.raw.pointee.height = Int32(image.height)
        frame.raw.pointee.color_range = settings.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        frame.raw.pointee.hw_frames_ctx = hwFrames.newReference()
        // data[3] is the VASurfaceID (FFmpeg's VAAPI frame layout); buf[0] holds the surface.
        guard let buf = av_buffer_create(nil, 0, releaseSurfaceHold, hold, 0) else {
            Unmanaged<SurfaceHold>.fromOpaque(hold).release()
            throw .encoderFailed(encoder: name, detail: "av_buffer_create: out of memory")
        }
        diptych_frame_set_buf(frame.raw, 0, buf)
        diptych_frame_set_plane(frame.raw, 3, UnsafeMutablePointer(bitPattern: UInt(surface.id)), 0)
        frame.raw.pointee.pts = ticks(for: pts)
        if keyframe { frame.raw.pointee.pict_type = AV_PICTURE_TYPE_I }
        return try send(frame)
    }

    /// Wraps `frame` as an AVFrame in `inputFormat`, without copying when the
    /// formats match; the AVFrame's buffer keeps `frame` alive.
    func makeAVFrame(_ frame: VideoFrame) throws(MediaError) -> FFFrame {
        let av = FFFrame()
        av.raw.pointee.width = Int32(frame.width)
        av.raw.pointee.height = Int32(frame.height)
        av.raw.pointee.format = inputFormat.rawValue
        av.raw.pointee.color_range = frame.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        let keep = Unmanaged.passRetained(FrameKeepAlive(frame: frame)).toOpaque()
        let p0 = UnsafeMutablePointer(mutating: frame.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self))
        diptych_frame_set_buf(av.raw, 0, av_buffer_create(p0, frame.planes[0].availableBytes, releaseKeepAlive, keep, Int32(AV_BUFFER_FLAG_READONLY)))
        let srcFormat = avPixelFormat(frame.format)
        if srcFormat == inputFormat {
            for i in 0..<frame.format.planeCount {
                let p = frame.planes[i]
                diptych_frame_set_plane(av.raw, Int32(i), UnsafeMutablePointer(mutating: p.baseAddress.assumingMemoryBound(to: UInt8.self)), Int32(p.stride))
            }
            return av
        }
        // NV12 → I420 for libx265: Y stays where it is, only the chroma is de-interleaved.
        if frame.format == .nv12 && inputFormat == AV_PIX_FMT_YUV420P {
            let cw = (frame.width + 1) / 2, ch = (frame.height + 1) / 2
            guard let chroma = av_buffer_alloc(2 * cw * ch) else { throw .encoderFailed(encoder: name, detail: "av_buffer_alloc: out of memory") }
            diptych_frame_set_buf(av.raw, 1, chroma)
            let u = chroma.pointee.data!, v = u + cw * ch
            let uv = frame.planes[1]
            let src = uv.baseAddress.assumingMemoryBound(to: UInt8.self)
            for y in 0..<ch {
                let row = src + y * uv.stride, ur = u + y * cw, vr = v + y * cw
                for x in 0..<cw { ur[x] = row[2 * x]; vr[x] = row[2 * x + 1] }
            }
            diptych_frame_set_plane(av.raw, 0, p0, Int32(frame.planes[0].stride))
            diptych_frame_set_plane(av.raw, 1, u, Int32(cw))
            diptych_frame_set_plane(av.raw, 2, v, Int32(cw))
            return av
        }
        // Anything else: one swscale pass into a new buffer (`av` releases the source on return).
        let converted = FFFrame()
        do {
            try converted.allocate(format: inputFormat, width: Int32(frame.width), height: Int32(frame.height))
            try scaler.convert(source: (0..<frame.format.planeCount).map { frame.planes[$0].baseAddress.assumingMemoryBound(to: UInt8.self) },
                               strides: (0..<frame.format.planeCount).map { Int32(frame.planes[$0].stride) },
                               format: srcFormat, width: Int32(frame.width), height: Int32(frame.height), into: converted)
        } catch {
            throw .invalidFrame(reason: "cannot convert \(frame.format.rawValue) to \(pixelFormatName(inputFormat)): \(error)")
        }
        converted.raw.pointee.color_range = av.raw.pointee.color_range
        return converted
    }
}
