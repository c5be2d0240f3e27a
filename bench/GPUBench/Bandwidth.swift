import DiptychCUDA
import Foundation

/// Host copy bandwidth, the CPU side of the copy bound: frames start in
/// ordinary memory and must reach memory a DMA engine reads (GL's staging,
/// page-locked bounce buffers). Each thread copies 1080p NV12 frames from a
/// ring of six into a ring of six others (about 37 MB a thread, more than a
/// cache holds), with `memcpy` and with the streaming copy the bounce
/// buffers are filled with (`CUDAPinnedMemory.copy`).
func measureCopyBandwidth() {
    let block = 3_110_400, ring = 6, rounds = 60
    for threads in [1, 2, 4, 8, 12, 16] where threads <= ProcessInfo.processInfo.activeProcessorCount {
        let bufs = (0..<threads * ring * 2).map { _ in UnsafeMutableRawPointer.allocate(byteCount: block, alignment: 64) }
        for (i, b) in bufs.enumerated() { memset(b, Int32(i & 0xff), block) }
        let addrs = bufs.map { UInt(bitPattern: $0) }
        var line = String(format: "%2d threads:", threads)
        for streaming in [false, true] {
            let t0 = DispatchTime.now().uptimeNanoseconds
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for r in 0..<rounds {
                    for k in 0..<ring {
                        let src = UnsafeRawPointer(bitPattern: addrs[(t * ring + k) * 2])!
                        let dst = UnsafeMutableRawPointer(bitPattern: addrs[(t * ring + (k + r) % ring) * 2 + 1])!
                        if streaming { CUDAPinnedMemory.copy(dst, from: src, count: block) } else { dst.copyMemory(from: src, byteCount: block) }
                    }
                }
            }
            let s = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            line += String(format: " %@ %.1f GB/s", streaming ? "streaming" : "memcpy", Double(block * rounds * ring * threads) / s / 1e9)
        }
        print(line)
        for b in bufs { b.deallocate() }
    }
}
