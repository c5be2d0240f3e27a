import DiptychCore
#if canImport(Glibc)
import Glibc
#endif

/// The stream header of a YUV4MPEG2 (Y4M) input, checked before FFmpeg's
/// demuxer reads it, so a bad header is reported as what it is (FFmpeg
/// itself only logs "Picture size 0x0 is invalid" and fails with an
/// unrelated error code).
///
/// The header is one line: `YUV4MPEG2` then space-separated fields, each a
/// letter and a value: `W` width, `H` height, `F` rate `num:den`, `I`
/// interlacing, `A` pixel aspect, `C` colour space, `X` comments.
struct Y4MHeader: Equatable {
    static let signature = Array("YUV4MPEG2".utf8)
    /// Longest header line looked at.
    static let maximumLength = 1024
    /// FFmpeg's yuv4mpegpipe demuxer takes a colour space by its prefix
    /// (`420jpeg`, `420p10`, `444alpha`, `mono16`, ...).
    static let colorSpacePrefixes = ["420", "411", "422", "444", "mono"]

    var width: Int
    var height: Int

    /// Whether `bytes` start like a Y4M stream.
    static func isY4M(_ bytes: some Collection<UInt8>) -> Bool { bytes.starts(with: signature) }

    /// Parses the header line (`line` holds at least the bytes up to its
    /// newline). Throws the reason, one line, naming the field.
    static func parse(_ line: [UInt8]) throws(HeaderError) -> Y4MHeader {
        guard isY4M(line) else { throw HeaderError("does not start with YUV4MPEG2") }
        guard let end = line.prefix(maximumLength).firstIndex(of: 0x0A) else {
            throw HeaderError(line.count < maximumLength ? "the stream ends inside the header line"
                                                         : "no end of the header line in its first \(maximumLength) bytes")
        }
        var width: Int?, height: Int?
        for token in line[signature.count..<end].split(separator: 0x20) {
            let text = String(decoding: token, as: UTF8.self)
            let value = String(text.dropFirst())
            switch token.first {
            case UInt8(ascii: "W"): width = try dimension(value, "width", text)
            case UInt8(ascii: "H"): height = try dimension(value, "height", text)
            case UInt8(ascii: "F"): try checkRate(value, text)
            case UInt8(ascii: "C"):
                guard colorSpacePrefixes.contains(where: value.hasPrefix) else {
                    throw HeaderError("colour space \(shown(text)) is not one FFmpeg reads (C420jpeg, C420p10, C422, C444, Cmono, ...)")
                }
            default: continue  // I, A, X: FFmpeg's to read
            }
        }
        guard let width else { throw HeaderError("no width (W) field") }
        guard let height else { throw HeaderError("no height (H) field") }
        // FFmpeg's own picture-size limit (av_image_check_size).
        guard (width + 128) * (height + 128) < Int(Int32.max) / 8 else {
            throw HeaderError("picture \(width)x\(height) is larger than FFmpeg decodes")
        }
        return Y4MHeader(width: width, height: height)
    }

    /// The leading digits of `value`, as FFmpeg's `strtol` reads them.
    private static func dimension(_ value: String, _ name: String, _ token: String) throws(HeaderError) -> Int {
        let digits = value.prefix(while: { $0.isASCII && $0.isNumber })
        guard digits.count <= 9, let v = Int(digits), (1...16384).contains(v) else {
            throw HeaderError("\(name) \(shown(token)) must be 1 to 16384")
        }
        return v
    }

    /// Frame rates a take accepts (as `--fps` and `testsrc:...@FPS`): at
    /// least one frame in 100 s, at most 1000 a second.
    static let frameRates = 0.01...1000.0

    /// `F` must be `N:D`, both positive, within `frameRates`. FFmpeg reads a
    /// zero or missing part as 25 fps and passes a huge or tiny rate on to
    /// the muxer, which then fails or writes a broken file.
    private static func checkRate(_ value: String, _ token: String) throws(HeaderError) {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        func number(_ s: Substring) -> Int? {
            guard !s.isEmpty, s.count <= 10, s.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(s), n <= Int(Int32.max) else { return nil }
            return n
        }
        guard parts.count == 2, let n = number(parts[0]), let d = number(parts[1]), n > 0, d > 0 else {
            throw HeaderError("frame rate \(shown(token)) must be two positive numbers N:D (F30:1, F30000:1001)")
        }
        guard frameRates.contains(Double(n) / Double(d)) else {
            throw HeaderError("frame rate \(shown(token)) must be 0.01 to 1000 fps")
        }
    }

    private static func shown(_ s: String) -> String { s.utf8.count <= 24 ? s : String(s.prefix(24)) + "…" }

    struct HeaderError: Error, Equatable, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads from `fd` until the header line is complete (or the stream or
    /// `maximumLength` bytes end) and returns every byte read, so they can be
    /// replayed to the demuxer.
    /// Waits for each read (polling every 100 ms) until `shouldStop`
    /// says to give up: then nil, whatever was read.
    static func readHead(fd: Int32, shouldStop: () -> Bool = { false }) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while bytes.count < maximumLength, !bytes.contains(0x0A) {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 100) == 0 {
                if shouldStop() { return nil }
                continue
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, maximumLength - bytes.count)) }
            if n > 0 { bytes += chunk.prefix(n); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 100)
                continue
            }
            break
        }
        return bytes
    }

    /// The first bytes of the file at `path` (enough for the header line).
    static func readHead(path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: maximumLength)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return Array(bytes.prefix(max(0, n)))
    }
}
