import DiptychCore

extension DmaBufFrame {
    func validate() throws(GPUError) {
        guard width > 0, height > 0 else { throw .badFrame("dma-buf zero size \(width)x\(height)") }
        guard (1...4).contains(planes.count) else { throw .badFrame("dma-buf needs 1 to 4 planes, has \(planes.count)") }
        for (i, p) in planes.enumerated() {
            guard p.fd >= 0 else { throw .badFrame("dma-buf plane \(i) fd \(p.fd) is invalid") }
            guard p.stride > 0, p.offset >= 0 else { throw .badFrame("dma-buf plane \(i) stride \(p.stride) offset \(p.offset)") }
        }
    }
}
