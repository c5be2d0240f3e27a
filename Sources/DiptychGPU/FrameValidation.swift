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

/// Checks that `frame` can be uploaded as described (`FrameValidator`, with
/// this GPU's largest texture). Pure: no GL call. Throws `GPUError.badFrame`
/// naming the field that is wrong.
public func validateUpload(_ frame: VideoFrame, maxTextureSize: Int = TakeConfiguration.maximumDimension) throws(GPUError) {
    do { try FrameValidator.check(frame, maxDimension: maxTextureSize) } catch { throw .badFrame(error.reason) }
}
