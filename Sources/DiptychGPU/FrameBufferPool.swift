import DiptychCore
import Foundation
import Synchronization

/// Reusable CPU buffers for delivered frames, so a steady stream of NV12
/// readbacks does not allocate (and page-fault) megabytes per frame.
/// Thread-safe: a frame's storage goes back to the pool from whichever thread
/// drops the last reference. With an `Allocator` (page-locked memory) its
/// buffers come from there where it can give them, else from the heap.
final class FrameBufferPool: Sendable {
    struct Allocator: @unchecked Sendable {   // C allocator entry points (page-locked memory), thread-safe
        var allocate: (Int) -> UnsafeMutableRawPointer?
        var free: (UnsafeMutableRawPointer) -> Void
    }
    /// Free buffers by size, and which buffers came from `allocator` (the
    /// rest from the heap), as addresses.
    private struct Buffers {
        var free: [Int: [UInt]] = [:]
        var fromAllocator: Set<UInt> = []
    }
    private let buffers = Mutex(Buffers())
    /// Free buffers kept per size.
    let keep: Int
    private let allocator: Allocator?

    init(keep: Int = 8, allocator: Allocator? = nil) { self.keep = keep; self.allocator = allocator }

    /// New memory, and whether it came from the allocator (page-locked).
    private func allocate(_ count: Int) -> (UnsafeMutableRawPointer, pinned: Bool) {
        if let allocator, let p = allocator.allocate(max(count, 1)) {
            let address = UInt(bitPattern: p)
            buffers.withLock { _ = $0.fromAllocator.insert(address) }
            return (p, true)
        }
        return (UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64), false)
    }

    private func deallocate(_ p: UnsafeMutableRawPointer) {
        let address = UInt(bitPattern: p)
        let pinned = buffers.withLock { $0.fromAllocator.remove(address) != nil }
        if pinned, let allocator { allocator.free(p) } else { p.deallocate() }
    }

    /// Storage of `count` bytes filled by `fill`; its memory returns to the pool on release.
    func storage(count: Int, fill: (UnsafeMutableRawPointer) -> Void) -> FrameStorage {
        let reused = buffers.withLock { b in
            b.free[count]?.popLast().map { (UnsafeMutableRawPointer(bitPattern: $0)!, pinned: b.fromAllocator.contains($0)) }
        }
        let (base, pinned) = reused ?? allocate(count)
        fill(base)
        let address = UInt(bitPattern: base)
        return FrameStorage(base: UnsafeRawPointer(base), count: count, pageLocked: pinned,
                            release: { [self] in give(address, count) })
    }

    private func give(_ address: UInt, _ count: Int) {
        let kept = buffers.withLock { b in
            guard b.free[count, default: []].count < keep else { return false }
            b.free[count, default: []].append(address)
            return true
        }
        if !kept { deallocate(UnsafeMutableRawPointer(bitPattern: address)!) }
    }

    deinit {
        let lists = buffers.withLock { b in
            defer { b.free = [:] }
            return b.free
        }
        for list in lists.values { for address in list { deallocate(UnsafeMutableRawPointer(bitPattern: address)!) } }
    }
}

/// Copies large blocks on several cores where the machine has them to spare
/// (a 1080p NV12 frame is 3 MB; one core copies about 10 GB/s). Small copies,
/// and machines with few cores, copy on the calling thread.
enum BulkCopy {
    static let lanes = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount / 4))
    static let threshold = 1 << 20

    static func copy(_ dst: UnsafeMutableRawPointer, _ src: UnsafeRawPointer, _ count: Int, lanes: Int = BulkCopy.lanes) {
        guard lanes > 1, count >= threshold else { dst.copyMemory(from: src, byteCount: count); return }
        let chunk = (count / lanes + 4095) & ~4095
        let d = UInt(bitPattern: dst), s = UInt(bitPattern: src)
        DispatchQueue.concurrentPerform(iterations: lanes) { i in
            let start = i * chunk
            guard start < count else { return }
            UnsafeMutableRawPointer(bitPattern: d + UInt(start))!
                .copyMemory(from: UnsafeRawPointer(bitPattern: s + UInt(start))!, byteCount: min(chunk, count - start))
        }
    }

    /// Copies `rows` rows of `rowBytes` (on several cores for large blocks).
    static func copyRows(_ dst: UnsafeMutableRawPointer, dstStride: Int, _ src: UnsafeRawPointer, srcStride: Int,
                         rowBytes: Int, rows: Int) {
        if dstStride == rowBytes && srcStride == rowBytes {
            copy(dst, src, rowBytes * rows)
            return
        }
        let lanes = rowBytes * rows >= threshold ? BulkCopy.lanes : 1
        let d = UInt(bitPattern: dst), s = UInt(bitPattern: src)
        let band = (rows + lanes - 1) / lanes
        let work: @Sendable (Int) -> Void = { lane in
            for row in (lane * band)..<min(rows, (lane + 1) * band) {
                UnsafeMutableRawPointer(bitPattern: d + UInt(row * dstStride))!
                    .copyMemory(from: UnsafeRawPointer(bitPattern: s + UInt(row * srcStride))!, byteCount: rowBytes)
            }
        }
        if lanes > 1 { DispatchQueue.concurrentPerform(iterations: lanes, execute: work) } else { work(0) }
    }
}

/// Holds whatever owns a copy job's memory (frames, region caches).
final class KeepAlive: Sendable {
    let value: any Sendable
    init(_ value: any Sendable) { self.value = value }
}

/// One block of rows to copy between a frame and a mapped GL buffer. Made on
/// the render thread, run on any thread (the caller's, so that the render
/// thread only issues GL calls) while the buffer stays mapped.
struct CopyJob: @unchecked Sendable {   // raw pointers into memory `owner` keeps alive
    var dst: UnsafeMutableRawPointer
    var dstStride: Int
    var src: UnsafeRawPointer
    var srcStride: Int
    var rowBytes: Int
    var rows: Int
    /// I420 → NV12 chroma: `src` is U, `src2` V, each `rowBytes / 2` bytes a row.
    var src2: UnsafeRawPointer?
    /// 0: copy; 1: mirror bytes (Y rows); 2: mirror byte pairs (UV rows). Mirrored rows are a multiple of 4 bytes.
    var mirror: Int
    /// Keeps the memory behind `src`/`dst` alive until the job has run (a job
    /// may outlive the record it was made from: delivery copies run on the
    /// caller's thread after the render thread has moved on).
    var owner: KeepAlive?
    /// A plane of a scaled CPU draw instead of a copy (`dst`, `src` are its pointers, `rows` its row count).
    var scale: PlaneScale?

    init(dst: UnsafeMutableRawPointer, dstStride: Int, src: UnsafeRawPointer, srcStride: Int, rowBytes: Int, rows: Int,
         interleaving v: UnsafeRawPointer? = nil, mirror: Int = 0) {
        self.dst = dst; self.dstStride = dstStride; self.src = src; self.srcStride = srcStride
        self.rowBytes = rowBytes; self.rows = rows; self.src2 = v; self.mirror = mirror
    }

    /// A plane of a scaled draw.
    init(scaling s: PlaneScale) {
        self.init(dst: s.dst, dstStride: s.dstStride, src: s.src, srcStride: s.srcStride, rowBytes: s.columns.count, rows: s.rows.count)
        scale = s
    }

    var bytes: Int { rowBytes * rows }

    /// Bytes b0 b1 b2 b3 → b0 0 b1 0 b2 0 b3 0 (little endian).
    @inline(__always) static func spread(_ x: UInt64) -> UInt64 {
        var x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        return x
    }

    func run() {
        if let scale { scale.run(); return }
        if let v = src2 {
            let pairs = rowBytes / 2
            for row in 0..<rows {
                let o = dst.advanced(by: row * dstStride).assumingMemoryBound(to: UInt8.self)
                let a = src.advanced(by: row * srcStride).assumingMemoryBound(to: UInt8.self)
                let b = v.advanced(by: row * srcStride).assumingMemoryBound(to: UInt8.self)
                if mirror != 0 {
                    for i in 0..<pairs { o[2 * i] = a[pairs - 1 - i]; o[2 * i + 1] = b[pairs - 1 - i] }
                } else {
                    // Four U and four V bytes → eight interleaved bytes at a time.
                    let quads = pairs / 4
                    let ra = UnsafeRawPointer(a), rb = UnsafeRawPointer(b), ro = UnsafeMutableRawPointer(o)
                    for q in 0..<quads {
                        let u = CopyJob.spread(UInt64(ra.loadUnaligned(fromByteOffset: 4 * q, as: UInt32.self)))
                        let w = CopyJob.spread(UInt64(rb.loadUnaligned(fromByteOffset: 4 * q, as: UInt32.self)))
                        ro.storeBytes(of: u | (w << 8), toByteOffset: 8 * q, as: UInt64.self)
                    }
                    for i in (4 * quads)..<pairs { o[2 * i] = a[i]; o[2 * i + 1] = b[i] }
                }
            }
        } else if mirror != 0 {
            // Four bytes at a time from the row's end: reversed bytes (Y) or reversed pairs (UV).
            let words = rowBytes / 4
            for row in 0..<rows {
                let o = dst.advanced(by: row * dstStride), a = src.advanced(by: row * srcStride + rowBytes)
                for k in 0..<words {
                    let w = a.advanced(by: -4 * (k + 1)).loadUnaligned(as: UInt32.self)
                    o.advanced(by: 4 * k).storeBytes(of: mirror == 1 ? w.byteSwapped : (w >> 16) | (w << 16), as: UInt32.self)
                }
            }
        } else if rows == 1 || (dstStride == rowBytes && srcStride == rowBytes) {
            BulkCopy.copy(dst, src, rowBytes * rows)
        } else {
            BulkCopy.copyRows(dst, dstStride: dstStride, src, srcStride: srcStride, rowBytes: rowBytes, rows: rows)
        }
    }
}
