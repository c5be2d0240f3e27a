import DiptychCore
import DiptychGPU

func testFrame(_ size: PixelSize, _ format: PixelFormat, seed: Int) -> VideoFrame {
    let f = VideoFrame.allocate(width: size.width, height: size.height, format: format)
    for p in 0..<format.planeCount {
        let rows = format.planeHeight(plane: p, height: size.height)
        let stride = f.planes[p].stride
        let b = f.planes[p].storage.mutableBase.advanced(by: f.planes[p].offset).assumingMemoryBound(to: UInt8.self)
        for y in 0..<rows {
            for x in 0..<stride { b[y * stride + x] = UInt8(truncatingIfNeeded: x &+ y &* 3 &+ seed &* 17 &+ p &* 64) }
        }
    }
    return f
}
