import Foundation

/// Host planes gathered into page-locked memory laid out as their
/// destination, so that one copy at bus speed takes them all in: CUDA copies
/// from ordinary memory go through the driver's own bounce buffers, one call
/// at a time, far below the bus (docs/ARCHITECTURE.md, "NV12 read back
/// through CUDA"). The gathering runs on the caller's thread, as a copy into
/// GL's mapped staging would.
enum BouncedUpload {
    /// The bytes of the destination that `planes` write: from the first
    /// plane's offset to the end of the last row of any plane.
    static func span(_ planes: [PlaneTransfer]) -> Range<Int>? {
        guard let start = planes.map(\.offset).min() else { return nil }
        let end = planes.map { $0.offset + ($0.rows > 0 ? ($0.rows - 1) * $0.dstPitch + $0.rowBytes : 0) }.max()!
        return start..<max(start, end)
    }

    /// Whether `planes` go in through a bounce buffer: all from the host,
    /// and some from ordinary (pageable) memory. Page-locked planes alone go
    /// as they are: the copy engines read them at bus speed.
    static func wanted(_ planes: [PlaneTransfer]) -> Bool {
        var pageable = false
        for p in planes {
            guard case .host = p.source else { return false }
            pageable = pageable || !p.pageLocked
        }
        return pageable
    }

    /// Copies each host plane into `bounce` at its destination offset and
    /// pitch, and returns the one transfer (from `bounce`, at those offsets)
    /// that takes them in. Nil when a plane is on the device or the span
    /// does not fit `capacity` bytes: those go as they are.
    /// `copy` moves each run of bytes (page-locked memory: `CUDAPinnedMemory.copy`).
    static func gather(_ planes: [PlaneTransfer], into bounce: UnsafeMutableRawPointer, capacity: Int,
                       copy: (UnsafeMutableRawPointer, UnsafeRawPointer, Int) -> Void = { $0.copyMemory(from: $1, byteCount: $2) })
        -> PlaneTransfer? {
        guard let span = span(planes), span.upperBound <= capacity, !span.isEmpty else { return nil }
        var sources: [UnsafeRawPointer] = []
        for p in planes {
            guard case .host(let h) = p.source else { return nil }
            sources.append(h)
        }
        for (p, src) in zip(planes, sources) {
            let dst = bounce + p.offset
            if p.pitch == p.rowBytes && p.dstPitch == p.rowBytes {
                copy(dst, src, p.rowBytes * p.rows)
            } else {
                for r in 0..<p.rows { copy(dst + r * p.dstPitch, src + r * p.pitch, p.rowBytes) }
            }
        }
        let n = span.count
        return PlaneTransfer(source: .host(UnsafeRawPointer(bounce + span.lowerBound)), pitch: n, rowBytes: n, rows: 1,
                             offset: span.lowerBound, dstPitch: n)
    }
}
