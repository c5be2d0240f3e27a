import DiptychCore

/// How each plane of a CPU frame is laid out in GL: texel size and plane size.
struct PlaneShape: Hashable {
    var bytesPerPixel: Int
    var width: Int
    var height: Int
    var rowBytes: Int { bytesPerPixel * width }
    var internalFormat: GLenumValue
    var format: GLenumValue
}
typealias GLenumValue = UInt32

extension PixelFormat {
    /// The GL planes of a `width`×`height` frame (YUV frames have even dimensions).
    func planeShapes(width: Int, height: Int) -> [PlaneShape] {
        switch self {
        case .rgba, .bgra:
            return [PlaneShape(bytesPerPixel: 4, width: width, height: height, internalFormat: GL.rgba8, format: GL.rgba)]
        case .nv12:
            return [PlaneShape(bytesPerPixel: 1, width: width, height: height, internalFormat: GL.r8, format: GL.red),
                    PlaneShape(bytesPerPixel: 2, width: width / 2, height: height / 2, internalFormat: GL.rg8, format: GL.rg)]
        case .i420:
            let y = PlaneShape(bytesPerPixel: 1, width: width, height: height, internalFormat: GL.r8, format: GL.red)
            let c = PlaneShape(bytesPerPixel: 1, width: width / 2, height: height / 2, internalFormat: GL.r8, format: GL.red)
            return [y, c, c]
        }
    }
}

/// Checks that `frame` can be uploaded as described. Pure: no GL call.
/// Throws `GPUError.badFrame` naming the field that is wrong.
public func validateUpload(_ frame: VideoFrame, maxTextureSize: Int = 16384) throws(GPUError) {
    let f = frame.format
    guard frame.width > 0, frame.height > 0 else {
        throw .badFrame("zero size \(frame.width)x\(frame.height) (\(f.rawValue))")
    }
    guard frame.width <= maxTextureSize, frame.height <= maxTextureSize else {
        throw .badFrame("size \(frame.width)x\(frame.height) exceeds the GPU's maximum texture size \(maxTextureSize)")
    }
    if f.isYUV && (frame.width % 2 != 0 || frame.height % 2 != 0) {
        throw .badFrame("odd dimensions \(frame.width)x\(frame.height) for \(f.rawValue) (must be even)")
    }
    guard frame.planes.count == f.planeCount else {
        throw .badFrame("\(f.rawValue) needs \(f.planeCount) plane(s), frame has \(frame.planes.count)")
    }
    for (i, shape) in f.planeShapes(width: frame.width, height: frame.height).enumerated() {
        let p = frame.planes[i]
        let minimum = f.minimumStride(plane: i, width: frame.width)
        guard p.stride >= minimum else {
            throw .badFrame("plane \(i) stride \(p.stride) < minimum \(minimum) for \(f.rawValue) width \(frame.width)")
        }
        guard p.offset >= 0 else { throw .badFrame("plane \(i) offset \(p.offset) is negative") }
        let needed = p.stride * (shape.height - 1) + shape.rowBytes
        guard p.availableBytes >= needed else {
            throw .badFrame("plane \(i) too small: \(shape.height) rows of stride \(p.stride) need \(needed) bytes, storage has \(max(p.availableBytes, 0))")
        }
    }
}
