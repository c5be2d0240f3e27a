import Foundation
import Testing
import DiptychCore
import DiptychCUDA
@testable import DiptychGPU

/// Host planes gathered into a bounce buffer laid out as the destination:
/// every row lands at its offset and pitch, one transfer covers them all,
/// and what cannot be gathered is left as it is.
@Suite struct BouncedUploadTests {
    /// An NV12 frame with padded rows (stride 40 for 30-byte rows), gathered
    /// as a staging slot lays it out (planes 64-byte aligned, rows packed).
    @Test func planesLandAtTheirOffsetsInOneTransfer() throws {
        let stride = 40, w = 30, h = 6
        var y = [UInt8](repeating: 0, count: stride * h), uv = [UInt8](repeating: 0, count: stride * h / 2)
        for i in y.indices { y[i] = UInt8(truncatingIfNeeded: i &* 7 &+ 1) }
        for i in uv.indices { uv[i] = UInt8(truncatingIfNeeded: i &* 13 &+ 5) }
        let bounce = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 64)
        defer { bounce.deallocate() }
        memset(bounce, 0xee, 1024)
        let one: PlaneTransfer? = y.withUnsafeBytes { yp in
            uv.withUnsafeBytes { up in
                BouncedUpload.gather([
                    PlaneTransfer(source: .host(yp.baseAddress!), pitch: stride, rowBytes: w, rows: h, offset: 64, dstPitch: w),
                    PlaneTransfer(source: .host(up.baseAddress!), pitch: stride, rowBytes: w, rows: h / 2, offset: 256, dstPitch: w),
                ], into: bounce, capacity: 1024)
            }
        }
        let t = try #require(one)
        // From the first plane's offset to the end of the last plane's last row.
        #expect(t.offset == 64 && t.rows == 1 && t.rowBytes == 256 + 3 * w - 64 && t.pitch == t.rowBytes && t.dstPitch == t.rowBytes)
        guard case .host(let src) = t.source else { Issue.record("the transfer is from the bounce buffer"); return }
        #expect(src == UnsafeRawPointer(bounce + 64))
        let b = bounce.assumingMemoryBound(to: UInt8.self)
        for r in 0..<h { for x in 0..<w { #expect(b[64 + r * w + x] == y[r * stride + x]) } }
        for r in 0..<h / 2 { for x in 0..<w { #expect(b[256 + r * w + x] == uv[r * stride + x]) } }
        #expect(b[64 + h * w] == 0xee, "nothing written past the Y plane's rows")
    }

    /// Contiguous planes go in one block each.
    @Test func packedPlanesCopyAsBlocks() throws {
        let data = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let bounce = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 64)
        defer { bounce.deallocate() }
        let t = data.withUnsafeBytes { p in
            BouncedUpload.gather([PlaneTransfer(source: .host(p.baseAddress!), pitch: 300, rowBytes: 300, rows: 1, offset: 0, dstPitch: 300)],
                                 into: bounce, capacity: 512)
        }
        #expect(t?.offset == 0 && t?.rowBytes == 300)
        #expect(memcmp(bounce, data, 300) == 0)
    }

    /// Device planes, and planes past the bounce buffer, are not gathered.
    @Test func whatCannotBeGatheredIsLeft() {
        let bounce = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 64)
        defer { bounce.deallocate() }
        let device = PlaneTransfer(source: .device(0x1000), pitch: 64, rowBytes: 64, rows: 1, offset: 0, dstPitch: 64)
        #expect(BouncedUpload.gather([device], into: bounce, capacity: 128) == nil)
        let bytes = [UInt8](repeating: 1, count: 256)
        let big = bytes.withUnsafeBytes { p in
            BouncedUpload.gather([PlaneTransfer(source: .host(p.baseAddress!), pitch: 256, rowBytes: 256, rows: 1, offset: 0, dstPitch: 256)],
                                 into: bounce, capacity: 128)
        }
        #expect(big == nil)
        #expect(BouncedUpload.gather([], into: bounce, capacity: 128) == nil)
    }

    /// Planes from pageable host memory go through the bounce buffer; planes
    /// all page-locked, or on the device, go as they are.
    @Test func onlyPageableHostPlanesAreBounced() {
        func host(_ locked: Bool) -> PlaneTransfer {
            PlaneTransfer(source: .host(UnsafeRawPointer(bitPattern: 0x1000)!), pitch: 64, rowBytes: 64, rows: 1, offset: 0,
                          dstPitch: 64, pageLocked: locked)
        }
        let device = PlaneTransfer(source: .device(0x1000), pitch: 64, rowBytes: 64, rows: 1, offset: 0, dstPitch: 64)
        #expect(BouncedUpload.wanted([host(false), host(false)]))
        #expect(!BouncedUpload.wanted([host(true), host(true)]))
        #expect(BouncedUpload.wanted([host(true), host(false)]), "one pageable plane: all are gathered")
        #expect(!BouncedUpload.wanted([device]) && !BouncedUpload.wanted([host(false), device]) && !BouncedUpload.wanted([]))
    }

    /// A frame's storage says whether it is page-locked, and the upload's
    /// transfers carry it: pooled storage from a page-locked allocator is,
    /// the heap's is not.
    @Test func pageLockedStorageReachesTheTransfers() {
        let allocator = FrameBufferPool.Allocator(allocate: { n in UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 64) },
                                                  free: { $0.deallocate() })
        #expect(FrameBufferPool(allocator: allocator).storage(count: 64) { _ in }.pageLocked)
        #expect(!FrameBufferPool().storage(count: 64) { _ in }.pageLocked)
        let w = 64, h = 16
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: w * h * 3 / 2, alignment: 64)
        for locked in [false, true] {
            let s = FrameStorage(base: UnsafeRawPointer(bytes), count: w * h * 3 / 2, pageLocked: locked, release: nil)
            let f = VideoFrame(width: w, height: h, format: .nv12,
                               planes: [FramePlane(storage: s, offset: 0, stride: w), FramePlane(storage: s, offset: w * h, stride: w)],
                               pts: .zero, matrix: .bt709, range: .limited)
            let t = UploadLayout(f).transfers(f)
            #expect(t.count == 2 && t.allSatisfy { $0.pageLocked == locked })
        }
        bytes.deallocate()
    }

    /// The streaming copy into page-locked memory moves every byte and nothing
    /// else, at every alignment of either side and every length around its
    /// 16- and 64-byte steps, and for a frame's worth.
    @Test func streamingCopyMovesExactlyTheBytes() {
        let cap = 4096 + 64
        let src = UnsafeMutableRawPointer.allocate(byteCount: cap, alignment: 64)
        let dst = UnsafeMutableRawPointer.allocate(byteCount: cap + 32, alignment: 64)
        defer { src.deallocate(); dst.deallocate() }
        for i in 0..<cap { src.storeBytes(of: UInt8(truncatingIfNeeded: i &* 31 &+ 7), toByteOffset: i, as: UInt8.self) }
        var bad = 0
        for n in [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 1000, 4000] {
            for so in [0, 1, 7, 15] {
                for d0 in [0, 1, 8, 15] {
                    memset(dst, 0xa5, cap + 32)
                    CUDAPinnedMemory.copy(dst + d0, from: src + so, count: n)
                    if memcmp(dst + d0, src + so, n) != 0 { bad += 1 }
                    let b = dst.assumingMemoryBound(to: UInt8.self)
                    if (0..<d0).contains(where: { b[$0] != 0xa5 }) || (d0 + n..<cap + 32).contains(where: { b[$0] != 0xa5 }) { bad += 1 }
                }
            }
        }
        #expect(bad == 0, "\(bad) copies wrong")
        let frame = 1920 * 1080 * 3 / 2
        let a = UnsafeMutableRawPointer.allocate(byteCount: frame, alignment: 64), z = UnsafeMutableRawPointer.allocate(byteCount: frame, alignment: 64)
        defer { a.deallocate(); z.deallocate() }
        for i in stride(from: 0, to: frame, by: 8) { a.storeBytes(of: UInt64(i) &* 0x9e37_79b9_7f4a_7c15, toByteOffset: i, as: UInt64.self) }
        CUDAPinnedMemory.copy(z, from: a, count: frame)
        #expect(memcmp(z, a, frame) == 0)
    }
}
