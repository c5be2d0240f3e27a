import Foundation
import Testing
@testable import Diptych
import DiptychMedia

/// A host that pushes both streams from one thread, with the secondary's
/// timestamps leading the primary's: once only primary frames can make room,
/// a blocking secondary push returns an error instead of waiting forever,
/// and the take goes on.
@Suite(.serialized) struct EmbeddedPushOrderTests {
    @Test func aSecondaryFarAheadIsRefusedNotAHang() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ahead-\(UUID().uuidString).mp4").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var c = EmbeddedConfiguration(canvas: PixelSize(width: 64, height: 64), frameRate: FrameRate(30))
        c.gpu = "software"
        c.preset = "ultrafast"
        c.secondaryTimeout = 0.5
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(file: path))
        let lead: Int64 = 25
        var refused = 0, primaries = 0
        for i in 0..<Int64(45) {
            do {
                try s.push(solidFrame(32, 32, (0, 0, 200), pts: MediaTime(value: i + lead, timescale: 30)), to: .secondary)
            } catch {
                #expect(error.code == .timestamp && error.message.contains("after the primary's"), "\(error)")
                refused += 1
            }
            try s.push(solidFrame(64, 64, (200, 0, 0), pts: MediaTime(value: i, timescale: 30)), to: .primary)
            primaries += 1
        }
        #expect(refused > 0 && primaries == 45)
        let summary = try s.finish()
        #expect(summary.frames == 45)
        let source = try MediaSources.open(.url(path))
        defer { source.close() }
        var n = 0
        while try source.nextFrame() != nil { n += 1 }
        #expect(n == 45)
    }

    /// A pause longer than one MP4 frame can last (2^31 ticks at 90 kHz,
    /// 6.6 h) is refused at the push, not written as wrong timestamps.
    @Test func anMP4GapBeyondOneFramesDurationIsRefused() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gap-\(UUID().uuidString).mp4").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var c = EmbeddedConfiguration(canvas: PixelSize(width: 64, height: 64), frameRate: FrameRate(30))
        c.gpu = "software"
        c.preset = "ultrafast"
        c.hasSecondary = false
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(file: path))
        let frame = { (t: Int64) in solidFrame(64, 64, (200, 0, 0), pts: MediaTime(value: t, timescale: 1)) }
        try s.push(frame(0), to: .primary)
        do { try s.push(frame(23_862), to: .primary); Issue.record("a 6.6 h gap was accepted") } catch {
            #expect(error.code == .timestamp && error.message.contains("more than an MP4 track holds"), "\(error)")
        }
        try s.push(frame(23_000), to: .primary)
        #expect(try s.finish().frames == 2)
    }
}
