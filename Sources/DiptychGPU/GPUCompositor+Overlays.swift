import DiptychCore

/// Overlay pictures: RGBA images uploaded once and drawn by the same passes
/// as the streams (`DrawDescription.overlay`).
extension GPUCompositor {
    /// Makes `image` overlay `id`'s picture, drawn by every draw whose
    /// `overlay` is `id` (`DrawDescription.overlay`) from the next render on;
    /// nil removes it (its draws are skipped). `image` is RGBA with straight
    /// alpha (a PNG's, any stride); it is premultiplied here and uploaded
    /// once as a texture, sampled by the compute and fragment passes alike.
    /// `premultiplied`: the image's colours are already multiplied by its
    /// alpha (a rendered text's), uploaded as they are. Blocks for one
    /// render-thread hop. Throws `.badFrame` for another format or a size
    /// the GPU cannot hold.
    public func setOverlay(_ id: Int, image: VideoFrame?, premultiplied: Bool = false) throws(GPUError) {
        guard let image else {
            try withRenderer { r in r.textures.setOverlay(id, nil) }
            return
        }
        guard image.format == .rgba else { throw .badFrame("an overlay is RGBA, not \(image.format.rawValue)") }
        let maxTextureSize = try callerSide { r in r.maxTextureSize }
        guard image.width > 0, image.height > 0, image.width <= maxTextureSize, image.height <= maxTextureSize else {
            throw .badFrame("an overlay of \(image.width)x\(image.height) (this GPU holds up to \(maxTextureSize)x\(maxTextureSize))")
        }
        let bytes = premultiplied ? GPUCompositor.packed(image) : GPUCompositor.premultiplied(image)
        try withRenderer { r throws(GPUError) in
            r.textures.setOverlay(id, (bytes, image.width, image.height))
            try r.checkGL("overlay \(id) \(image.width)x\(image.height)")
        }
    }

    /// The RGBA picture's pixels as they are, tightly packed.
    static func packed(_ image: VideoFrame) -> [UInt8] {
        let row = image.width * 4, stride = image.planes[0].stride
        var out = [UInt8](repeating: 0, count: row * image.height)
        out.withUnsafeMutableBytes { dst in
            for y in 0..<image.height { dst.baseAddress!.advanced(by: y * row).copyMemory(from: image.planes[0].baseAddress + y * stride, byteCount: row) }
        }
        return out
    }

    /// The RGBA picture's pixels, tightly packed, with colour multiplied by
    /// alpha and rounded to 8 bits: c' = (c·a + 127) / 255.
    public static func premultiplied(_ image: VideoFrame) -> [UInt8] {
        let w = image.width, h = image.height, stride = image.planes[0].stride
        let src = image.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self)
        var out = [UInt8](repeating: 0, count: w * h * 4)
        out.withUnsafeMutableBufferPointer { dst in
            for y in 0..<h {
                let row = src + y * stride
                for x in 0..<w {
                    let a = Int(row[4 * x + 3]), o = 4 * (y * w + x)
                    for c in 0..<3 { dst[o + c] = UInt8((Int(row[4 * x + c]) * a + 127) / 255) }
                    dst[o + 3] = UInt8(a)
                }
            }
        }
        return out
    }
}
