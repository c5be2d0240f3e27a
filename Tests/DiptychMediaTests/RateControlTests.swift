import Foundation
import Testing
import DiptychCore
@testable import DiptychMedia

/// `--qp`, `--maxrate` and `--bufsize` as libx264 runs them.
@Suite struct RateControlTests {
    init() { _ = quietFFmpeg }

    static let size = PixelSize(width: 320, height: 240)
    static let rate = FrameRate(30)

    /// Frames of noise (which no rate control can encode small), `count` of
    /// them, cycled: each frame differs from the one before.
    static func noise(_ count: Int) -> [VideoFrame] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            let f = VideoFrame.allocate(width: size.width, height: size.height, format: .nv12)
            let words = f.planes[0].storage.count / 8
            let p = UnsafeMutableRawPointer(mutating: f.planes[0].storage.base).bindMemory(to: UInt64.self, capacity: words)
            for i in 0..<words {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                p[i] = state
            }
            return f
        }
    }

    /// Encodes `seconds` of noise with `settings` and returns the bytes of every packet.
    static func encode(_ change: (inout VideoEncoderSettings) -> Void, seconds: Int = 10) throws -> [UInt8] {
        var s = VideoEncoderSettings(size: size, frameRate: rate, encoder: .x264, bitrate: 3_000_000, preset: "ultrafast")
        change(&s)
        let encoder = try PacketEncoder(settings: s)
        let frames = noise(30)
        var bytes: [UInt8] = []
        for k in 0..<(seconds * 30) {
            var f = frames[k % frames.count]
            f.pts = rate.time(ofFrame: Int64(k))
            for p in try encoder.encode(f) { bytes += p.data }
        }
        for p in try encoder.finish() { bytes += p.data }
        return bytes
    }

    /// libx264's own account of its settings (the SEI it writes into the first picture).
    static func x264Options(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes.prefix(4096).map { $0 >= 32 && $0 < 127 ? $0 : 32 }, as: UTF8.self)
        guard let r = text.range(of: "options: ") else { return "" }
        return String(text[r.upperBound...].prefix { $0 != "\u{0}" })
    }

    @Test func qpIsAConstantQuantizer() throws {
        let constant = Self.x264Options(try Self.encode({ $0.qp = 30 }, seconds: 1))
        #expect(constant.contains("rc=cqp") && constant.contains(" qp=30"), "\(constant)")
        let rated = Self.x264Options(try Self.encode({ _ in }, seconds: 1))
        #expect(rated.contains("rc=abr") && rated.contains("bitrate=3000"), "\(rated)")
        // Through the writer too: the option reaches the encoder the file is written with.
        let dir = TempDir(); defer { dir.remove() }
        var s = VideoEncoderSettings(size: Self.size, frameRate: Self.rate, encoder: .x264, preset: "ultrafast")
        s.qp = 18
        let writer = try MediaWriter(url: dir.path("qp.ts"), video: s)
        for (k, var f) in Self.noise(3).enumerated() { f.pts = Self.rate.time(ofFrame: Int64(k)); try writer.write(f) }
        try writer.finish()
        let file = Self.x264Options([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.path("qp.ts")))))
        #expect(file.contains("rc=cqp") && file.contains(" qp=18"), "\(file)")
    }

    /// A 10 s take of noise asked for 3 Mbit/s but capped at 500 kbit/s
    /// (one second's buffer) comes out within 10 % of the cap; uncapped it is far above.
    @Test(.timeLimit(.minutes(5)))
    func maxrateCapsTheRate() throws {
        let capped = try Self.encode({ $0.maxrate = 500_000; $0.bufsize = 500_000 })
        let options = Self.x264Options(capped)
        #expect(options.contains("vbv_maxrate=500") && options.contains("vbv_bufsize=500"), "\(options)")
        let cappedRate = Double(capped.count * 8) / 10
        #expect(cappedRate <= 550_000, "capped at 500 kbit/s: \(Int(cappedRate)) bit/s")
        let free = Double(try Self.encode({ _ in }).count * 8) / 10
        print("noise at 3 Mbit/s: \(Int(free)) bit/s; capped at 500 kbit/s: \(Int(cappedRate)) bit/s")
        #expect(free > 1.5 * cappedRate, "uncapped \(Int(free)) bit/s, capped \(Int(cappedRate)) bit/s")
        // A peak rate alone gets a one-second buffer.
        var s = VideoEncoderSettings(size: Self.size, frameRate: Self.rate)
        s.maxrate = 2_000_000
        #expect(s.vbvBuffer == 2_000_000)
        s.bufsize = 4_000_000
        #expect(s.vbvBuffer == 4_000_000)
    }
}
