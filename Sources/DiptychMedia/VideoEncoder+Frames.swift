import CFFmpeg
import DiptychCore

/// Keeps a `VideoFrame` (or a dma-buf) alive while FFmpeg holds the AVFrame wrapping it.
private final class FrameKeepAlive {
    let frame: VideoFrame?
    let release: (@Sendable () -> Void)?
    init(frame: VideoFrame?, release: (@Sendable () -> Void)? = nil) { self.frame = frame; self.release = release }
    deinit { release?() }
}

private func releaseKeepAlive(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    guard let opaque else { return }
    Unmanaged<FrameKeepAlive>.fromOpaque(opaque).release()
}

private func freeDescriptorAndKeepAlive(_ opaque: UnsafeMutableRawPointer?, _ data: UnsafeMutablePointer<UInt8>?) {
    av_free(data)
    guard let opaque else { return }
    Unmanaged<FrameKeepAlive>.fromOpaque(opaque).release()
}

/// Wrapping the frames handed to the encoder as AVFrames.
extension VideoEncoder {
    /// Encodes a dma-buf NV12 image by mapping it to a VA surface (VA-API only).
    func encode(_ image: DMABufFrame) throws(MediaError) -> [FFPacket] {
        guard selection.isHardware, let hwFrames else {
            image.release?()
            throw .invalidFrame(reason: "dma-buf frames need the VA-API encoder; \(name) takes CPU frames")
        }
        guard image.width == settings.size.width, image.height == settings.size.height, !image.offsets.isEmpty,
              image.offsets.count == image.pitches.count, image.offsets.count <= 4 else {
            image.release?()
            throw .invalidFrame(reason: "dma-buf \(image.width)x\(image.height) with \(image.offsets.count) planes, encoder expects \(settings.size) NV12")
        }
        // The DRM-PRIME frame: data[0] is the descriptor, buf[0] owns it and the dma-buf keep-alive.
        let src = FFFrame()
        guard let d = av_mallocz(MemoryLayout<AVDRMFrameDescriptor>.size) else {
            image.release?()
            throw .encoderFailed(encoder: name, detail: "av_mallocz: out of memory")
        }
        let desc = d.assumingMemoryBound(to: AVDRMFrameDescriptor.self)
        diptych_drm_descriptor_fill(desc, image.fd, image.size, image.modifier, image.fourcc, Int32(image.offsets.count),
                                    image.offsets, image.pitches)
        let keep = Unmanaged.passRetained(FrameKeepAlive(frame: nil, release: image.release)).toOpaque()
        let bytes = d.assumingMemoryBound(to: UInt8.self)
        let buf = av_buffer_create(bytes, MemoryLayout<AVDRMFrameDescriptor>.size, freeDescriptorAndKeepAlive, keep, 0)
        src.raw.pointee.format = AV_PIX_FMT_DRM_PRIME.rawValue
        src.raw.pointee.width = Int32(image.width)
        src.raw.pointee.height = Int32(image.height)
        diptych_frame_set_buf(src.raw, 0, buf)
        diptych_frame_set_plane(src.raw, 0, bytes, 0)
        // Map into a VA surface of the encoder's frames context (vaapi map_to from DRM PRIME).
        let dst = FFFrame()
        dst.raw.pointee.format = AV_PIX_FMT_VAAPI.rawValue
        dst.raw.pointee.hw_frames_ctx = hwFrames.newReference()
        do { try ffCheck(av_hwframe_map(dst.raw, src.raw, Int32(AV_HWFRAME_MAP_READ)), "av_hwframe_map") } catch {
            throw .encoderFailed(encoder: name, detail: "map dma-buf (fourcc 0x\(String(image.fourcc, radix: 16)), modifier 0x\(String(image.modifier, radix: 16))) to VA surface: \(error.message)")
        }
        dst.raw.pointee.pts = ticks(for: image.pts)
        return try send(dst)
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
