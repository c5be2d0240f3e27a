import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

@Suite struct NetworkTimeoutTests {
    /// A server that accepts the connection but never sends a byte: the
    /// interrupt callback / rw_timeout end the open instead of hanging.
    @Test(.timeLimit(.minutes(3)))
    func silentServerTimesOut() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &addr) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                try #require(bind(fd, sa, len) == 0)
                try #require(getsockname(fd, sa, &len) == 0)
            }
        }
        try #require(listen(fd, 4) == 0)
        let port = Int(UInt16(bigEndian: addr.sin_port))
        let url = "tcp://127.0.0.1:\(port)"
        let start = Date()
        let e = expectMediaError { _ = try FileSource(url: url, opening: SourceOpening(timeout: 1)) }
        let elapsed = Date().timeIntervalSince(start)
        #expect(e == .timedOut(path: url), "\(String(describing: e))")
        #expect(elapsed < 8, "took \(elapsed) s")
    }
}

/// A one-connection TCP server on 127.0.0.1 that sends `payload` and then
/// keeps the connection open without sending more (a stalled live source).
final class StallingServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private var client: Int32 = -1
    private let done = DispatchSemaphore(value: 0)

    init(payload: Data) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = listener
        try withUnsafeMutablePointer(to: &addr) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                try #require(bind(fd, sa, len) == 0)
                try #require(getsockname(fd, sa, &len) == 0)
            }
        }
        try #require(listen(fd, 1) == 0)
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread {
            let c = accept(fd, nil, nil)
            self.client = c
            _ = payload.withUnsafeBytes { send(c, $0.baseAddress, $0.count, 0) }
            self.done.wait()  // hold the connection open, silent
        }.start()
    }
    func stop() {
        done.signal()
        if client >= 0 { close(client) }
        close(listener)
    }
}

@Suite struct StalledStreamTests {
    func y4m(frames: Int) -> Data {
        var d = Data("YUV4MPEG2 W64 H64 F30:1 Ip A1:1 C420jpeg\n".utf8)
        for _ in 0..<frames { d += Data("FRAME\n".utf8); d += Data(repeating: 128, count: 64 * 64 * 3 / 2) }
        return d
    }

    /// A live source that stops sending mid-stream times out instead of hanging.
    @Test(.timeLimit(.minutes(3)))
    func stalledStreamTimesOut() throws {
        let server = try StallingServer(payload: y4m(frames: 3))
        defer { server.stop() }
        let url = "tcp://127.0.0.1:\(server.port)"
        let src = try FileSource(url: url, forcedFormat: "yuv4mpegpipe", opening: SourceOpening(timeout: 1))
        var got = 0
        let e = expectMediaError { while try src.nextFrame() != nil { got += 1 } }
        #expect(got == 3)
        #expect(e == .timedOut(path: url))
    }

    /// `interrupt()` from another thread ends a blocked read.
    @Test(.timeLimit(.minutes(3)))
    func interruptEndsABlockedRead() throws {
        let server = try StallingServer(payload: y4m(frames: 2))
        defer { server.stop() }
        let url = "tcp://127.0.0.1:\(server.port)"
        let src = try FileSource(url: url, forcedFormat: "yuv4mpegpipe", opening: SourceOpening(timeout: 60))
        let start = Date()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { src.interrupt() }
        let e = expectMediaError { while try src.nextFrame() != nil {} }
        #expect(e == .readFailed(path: url, detail: "interrupted"))
        #expect(Date().timeIntervalSince(start) < 10)
    }
}
