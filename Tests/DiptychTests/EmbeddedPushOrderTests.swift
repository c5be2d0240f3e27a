import Foundation
import Testing
@testable import Diptych
import DiptychMedia

/// A host that pushes both streams from one thread, with the secondary's
/// timestamps leading the primary's: once only primary frames can make room,
/// a blocking secondary push returns an error instead of waiting forever,
/// and the take goes on.
@Suite(.serialized) struct EmbeddedPushOrderTests {
    /// A 64x64, 30 fps session on the software GPU, with or without a secondary.
    static func config(secondary: Bool) -> EmbeddedConfiguration {
        var c = EmbeddedConfiguration(canvas: PixelSize(width: 64, height: 64), frameRate: FrameRate(30))
        c.gpu = "software"
        c.preset = "ultrafast"
        c.hasSecondary = secondary
        return c
    }

    @Test func aSecondaryFarAheadIsRefusedNotAHang() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ahead-\(UUID().uuidString).mp4").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var c = Self.config(secondary: true)
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
        let c = Self.config(secondary: false)
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(file: path))
        let frame = { (t: Int64) in solidFrame(64, 64, (200, 0, 0), pts: MediaTime(value: t, timescale: 1)) }
        try s.push(frame(0), to: .primary)
        do { try s.push(frame(23_862), to: .primary); Issue.record("a 6.6 h gap was accepted") } catch {
            #expect(error.code == .timestamp && error.message.contains("more than an MP4 track holds"), "\(error)")
        }
        try s.push(frame(23_000), to: .primary)
        #expect(try s.finish().frames == 2)
    }

    /// A callback that calls `finish()` or a blocking push on its own session
    /// gets a state error (either would wait for the callback itself); the
    /// host's own `finish()` then ends the take with every frame.
    @Test func callingBackIntoTheSessionFromACallbackIsAnError() throws {
        final class Box: @unchecked Sendable {
            let lock = NSLock()
            var session: EmbeddedSession?
            var errors: [EmbeddingError] = []
        }
        let box = Box()
        let c = Self.config(secondary: false)
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { f in
            guard let s = box.lock.withLock({ box.session }) else { return }
            do throws(EmbeddingError) { _ = try s.finish() } catch { box.lock.withLock { box.errors.append(error) } }
            do throws(EmbeddingError) {
                try s.push(solidFrame(64, 64, (1, 2, 3), pts: MediaTime(value: f.pts.value + 1_000, timescale: f.pts.timescale)), to: .primary)
            } catch {
                box.lock.withLock { box.errors.append(error) }
            }
        }))
        box.lock.withLock { box.session = s }
        for i in 0..<5 { try s.push(solidFrame(64, 64, (200, 0, 0), pts: MediaTime(value: Int64(i), timescale: 30)), to: .primary) }
        #expect(try s.finish().frames == 5)
        let errors = box.lock.withLock { box.errors }
        #expect(errors.count == 10 && errors.allSatisfy { $0.code == .state }, "\(errors)")
        #expect(errors.contains { $0.message.contains("finish called from one of the session's callbacks") })
        #expect(errors.contains { $0.message.contains("blocking push from one of the session's callbacks") })
    }

    /// A callback may push (blocking) into another session: the guard is per session.
    @Test func aCallbackMayPushIntoAnotherSession() throws {
        let c = Self.config(secondary: false)
        let b = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { _ in }))
        final class Failures: @unchecked Sendable { let lock = NSLock(); var list: [EmbeddingError] = [] }
        let failures = Failures()
        let a = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onRGBA: { f in
            do throws(EmbeddingError) { try b.push(solidFrame(64, 64, (0, 0, 200), pts: f.pts), to: .primary) } catch {
                failures.lock.withLock { failures.list.append(error) }
            }
        }))
        for i in 0..<5 { try a.push(solidFrame(64, 64, (200, 0, 0), pts: MediaTime(value: Int64(i), timescale: 30)), to: .primary) }
        #expect(try a.finish().frames == 5)
        #expect(try b.finish().frames == 5)
        #expect(failures.lock.withLock { failures.list }.isEmpty)
    }

    /// Packets carry their primary frame's pts exactly as pushed, in the
    /// host's timescale, even where it does not divide 90 kHz.
    @Test func packetsCarryThePushedTimestampsExactly() throws {
        let got = Collected()
        let c = Self.config(secondary: false)
        let s = try EmbeddedSession(configuration: c, outputs: EmbeddedOutputs(onPacket: { got.add(packet: $0) }))
        let pushed = (0..<12).map { MediaTime(value: 5_123_456 + Int64($0) * 33_335, timescale: 1_000_000) }
        for t in pushed { try s.push(solidFrame(64, 64, (200, 0, 0), pts: t), to: .primary) }
        _ = try s.finish()
        #expect(got.packets.map(\.pts) == pushed)
        #expect(got.packets.allSatisfy { $0.dts == $0.pts })
    }
}
