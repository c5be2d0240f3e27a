import CFFmpeg

/// One libswscale context, rebuilt only when the conversion changes
/// (`sws_getCachedContext`). Converts without resizing.
final class FFScaler {
    private var raw: OpaquePointer?
    deinit { if raw != nil { sws_freeContext(raw) } }

    /// Converts a `width`×`height` picture from `source` planes in `sourceFormat`
    /// into `destination` (already allocated, same size, its own format).
    func convert(source: [UnsafePointer<UInt8>?], strides: [Int32], format sourceFormat: AVPixelFormat,
                 width: Int32, height: Int32, into destination: FFFrame) throws(FFmpegError) {
        raw = sws_getCachedContext(raw, width, height, sourceFormat, width, height, destination.pixelFormat,
                                   SWS_BILINEAR, nil, nil, nil)
        guard raw != nil else { throw FFmpegError("sws_getCachedContext", code: averrorEINVAL) }
        var src = source + Array(repeating: nil, count: max(0, 4 - source.count))
        var srcStrides = strides + Array(repeating: 0, count: max(0, 4 - strides.count))
        var (dst, dstStrides) = destination.planes
        try ffCheck(sws_scale(raw, &src, &srcStrides, 0, height, &dst, &dstStrides), "sws_scale")
    }

    /// Converts `source` into `destination` (same size).
    func convert(_ source: FFFrame, into destination: FFFrame) throws(FFmpegError) {
        let (data, strides) = source.planes
        try convert(source: data.map { UnsafePointer($0) }, strides: strides, format: source.pixelFormat,
                    width: source.width, height: source.height, into: destination)
    }
}
