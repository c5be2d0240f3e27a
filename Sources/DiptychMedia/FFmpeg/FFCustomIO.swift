import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// An `AVIOContext` that reads a file descriptor, first replaying bytes
/// already read from it (a header checked before FFmpeg sees the stream).
/// The descriptor is not closed.
final class FFCustomIO {
    private(set) var raw: UnsafeMutablePointer<AVIOContext>?
    private let reader: Reader

    final class Reader {
        let fd: Int32
        var replay: [UInt8]
        var offset = 0
        /// Checked between waits on a non-blocking descriptor.
        let interrupted: () -> Bool
        init(fd: Int32, replay: [UInt8], interrupted: @escaping () -> Bool) {
            self.fd = fd; self.replay = replay; self.interrupted = interrupted
        }

        func read(into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int32 {
            if offset < replay.count {
                let n = min(count, replay.count - offset)
                replay.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: n) }
                offset += n
                if offset == replay.count { replay = []; offset = 0 }
                return Int32(n)
            }
            while true {
                let n = Glibc.read(fd, buffer, count)
                if n > 0 { return Int32(n) }
                if n == 0 { return averrorEOF }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    if interrupted() { return averrorExit }
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    _ = poll(&p, 1, 100)
                    continue
                }
                return diptych_averror(errno)
            }
        }
    }

    init(fd: Int32, replay: [UInt8], interrupted: @escaping () -> Bool) throws(FFmpegError) {
        reader = Reader(fd: fd, replay: replay, interrupted: interrupted)
        let size = 1 << 16
        guard let buffer = av_malloc(size) else { throw .outOfMemory("av_malloc") }
        let opaque = Unmanaged.passUnretained(reader).toOpaque()
        raw = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), Int32(size), 0, opaque, { opaque, buf, size in
            guard let opaque, let buf else { return averrorEOF }
            return Unmanaged<Reader>.fromOpaque(opaque).takeUnretainedValue().read(into: buf, count: Int(size))
        }, nil, nil)
        guard raw != nil else { av_free(buffer); throw .outOfMemory("avio_alloc_context") }
        raw!.pointee.seekable = 0
    }

    deinit {
        if let r = raw { av_freep(&r.pointee.buffer) }
        avio_context_free(&raw)
    }
}
