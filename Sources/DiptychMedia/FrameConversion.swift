import CFFmpeg
import DiptychCore

/// The `PixelFormat` an AVFrame of `format` is delivered in without conversion.
func directPixelFormat(_ format: AVPixelFormat) -> PixelFormat? {
    switch format {
    case AV_PIX_FMT_NV12: return .nv12
    case AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P: return .i420
    case AV_PIX_FMT_RGBA: return .rgba
    case AV_PIX_FMT_BGRA: return .bgra
    default: return nil
    }
}

func avPixelFormat(_ format: PixelFormat) -> AVPixelFormat {
    switch format {
    case .nv12: return AV_PIX_FMT_NV12
    case .i420: return AV_PIX_FMT_YUV420P
    case .rgba: return AV_PIX_FMT_RGBA
    case .bgra: return AV_PIX_FMT_BGRA
    }
}

func pixelFormatName(_ format: AVPixelFormat) -> String {
    guard let n = av_get_pix_fmt_name(format) else { return "unknown(\(format.rawValue))" }
    return String(cString: n)
}

/// What a non-direct decoder format is converted to: RGBA for RGB and
/// alpha formats, I420 for everything else (one swscale pass).
func conversionTarget(_ format: AVPixelFormat) -> PixelFormat? {
    guard let d = av_pix_fmt_desc_get(format) else { return nil }
    let flags = d.pointee.flags
    if flags & UInt64(AV_PIX_FMT_FLAG_HWACCEL) != 0 || flags & UInt64(AV_PIX_FMT_FLAG_BITSTREAM) != 0 { return nil }
    if flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0 || flags & UInt64(AV_PIX_FMT_FLAG_ALPHA) != 0 { return .rgba }
    return .i420
}

/// The format frames of decoder format `format` are delivered in, or nil when none fits.
func deliveredPixelFormat(_ format: AVPixelFormat) -> PixelFormat? {
    directPixelFormat(format) ?? conversionTarget(format)
}

/// Wraps `frame` (already in `format`) as a `VideoFrame` without copying:
/// each plane's storage keeps a reference to the frame.
func wrapFrame(_ frame: FFFrame, format: PixelFormat, pts: MediaTime,
               matrix: ColorMatrix, range: ColorRange) -> VideoFrame {
    let w = Int(frame.width), h = Int(frame.height)
    var planes: [FramePlane] = []
    for i in 0..<format.planeCount {
        let stride = Int(frame.linesize(i))
        let rows = format.planeHeight(plane: i, height: h)
        let storage = FrameStorage(base: UnsafeRawPointer(frame.data(i)!), count: stride * rows, release: { _ = frame })
        planes.append(FramePlane(storage: storage, offset: 0, stride: stride))
    }
    return VideoFrame(width: w, height: h, format: format, planes: planes, pts: pts, matrix: matrix, range: range)
}
