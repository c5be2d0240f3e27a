import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// An `AVIOContext` that reads a file descriptor, first replaying bytes
/// already read from it (a header checked before FFmpeg sees the stream).
/// The descriptor is closed with it only when it owns it (a FIFO it opened).
final class FFCustomIO {
    private(set) var raw: UnsafeMutablePointer<AVIOContext>?
    private let reader: Reader

    final class Reader {
        let fd: Int32
        var replay: [UInt8]
        var offset = 0
        /// Checked between waits on a non-blocking descriptor.
        let interrupted: () -> Bool
        /// A FIFO opened without blocking: a read of 0 bytes is the end only
        /// once a writer has come and gone (poll says hang-up); before that
        /// it means no writer yet, and the reader waits.
        let fifo: Bool
        init(fd: Int32, replay: [UInt8], fifo: Bool, interrupted: @escaping () -> Bool) {
            self.fd = fd; self.replay = replay; self.fifo = fifo; self.interrupted = interrupted
        }

        /// Waits up to 100 ms for `fd` to be readable; the poll's events.
        private func wait() -> Int16 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            return poll(&p, 1, 100) > 0 ? p.revents : 0
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
                if n == 0 {
                    guard fifo else { return averrorEOF }
                    if interrupted() { return averrorExit }
                    let events = wait()
                    if events & Int16(POLLHUP) != 0 && events & Int16(POLLIN) == 0 { return averrorEOF }
                    continue
                }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    if interrupted() { return averrorExit }
                    _ = wait()
                    continue
                }
                return diptych_averror(errno)
            }
        }
    }

    /// The descriptor, closed with this reader (nil: the caller's, left open).
    private let owned: Int32?

    /// Reads `fd` (after `replay`). `ownsDescriptor`: close it at the end.
    init(fd: Int32, replay: [UInt8], fifo: Bool = false, ownsDescriptor: Bool = false,
         interrupted: @escaping () -> Bool) throws(FFmpegError) {
        reader = Reader(fd: fd, replay: replay, fifo: fifo, interrupted: interrupted)
        owned = ownsDescriptor ? fd : nil
        let size = 1 << 16
        guard let buffer = av_malloc(size) else { throw .outOfMemory("av_malloc") }
        let opaque = Unmanaged.passUnretained(reader).toOpaque()
        raw = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), Int32(size), 0, opaque, { opaque, buf, size in
            guard let opaque, let buf else { return averrorEOF }
            return Unmanaged<Reader>.fromOpaque(opaque).takeUnretainedValue().read(into: buf, count: Int(size))
        }, nil, nil)
        guard raw != nil else {
            av_free(buffer)
            if let owned { Glibc.close(owned) }
            throw .outOfMemory("avio_alloc_context")
        }
        raw!.pointee.seekable = 0
    }

    deinit {
        if let r = raw { av_freep(&r.pointee.buffer) }
        avio_context_free(&raw)
        if let owned { Glibc.close(owned) }
    }
}
