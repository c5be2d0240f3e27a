import Testing
@testable import DiptychCore

private func ms(_ v: Int64) -> MediaTime { MediaTime(value: v, timescale: 1000) }

@Suite struct FrameClockTests {
    /// Rule 1: a 60 fps primary and a 30 fps secondary give 60 output frames,
    /// each secondary frame shown twice, none dropped.
    @Test func primary60Secondary30() {
        var clock = FrameClock<Int>()
        let rate = FrameRate(60)
        for i in 0..<60 {
            let pts = rate.time(ofFrame: Int64(i))
            if i % 2 == 0 { clock.pushSecondary(i / 2, pts: FrameRate(30).time(ofFrame: Int64(i / 2)), now: pts) }
            let d = clock.tick(primaryPTS: pts, now: pts)
            #expect(d.outputPTS == pts)
            #expect(d.secondary?.payload == i / 2)
            #expect(d.secondary?.showCount == 1 + i % 2)
        }
        let c = clock.counters
        #expect(c.outputFrames == 60 && c.compositeFrames == 60 && c.primaryOnlyFrames == 0)
        #expect(c.secondaryFramesReceived == 30 && c.secondaryFramesShown == 30)
        #expect(c.secondaryFramesRepeated == 30 && c.secondaryRepeatShows == 30 && c.secondaryFramesDropped == 0)
    }

    /// A 30 fps primary and a 60 fps secondary: every other secondary frame is
    /// replaced before it is shown (dropped); output still follows the primary.
    @Test func primary30Secondary60() {
        var clock = FrameClock<Int>()
        for i in 0..<30 {
            let pts = FrameRate(30).time(ofFrame: Int64(i))
            clock.pushSecondary(2 * i, pts: FrameRate(60).time(ofFrame: Int64(2 * i)), now: pts)
            clock.pushSecondary(2 * i + 1, pts: FrameRate(60).time(ofFrame: Int64(2 * i + 1)), now: pts)
            #expect(clock.tick(primaryPTS: pts, now: pts).secondary?.payload == 2 * i + 1)
        }
        #expect(clock.counters.outputFrames == 30)
        #expect(clock.counters.secondaryFramesDropped == 30 && clock.counters.secondaryFramesShown == 30)
        #expect(clock.counters.secondaryFramesRepeated == 0)
    }

    /// Output timestamps are exactly the primary's: same value, same timescale.
    @Test(arguments: [MediaTime(value: 1001, timescale: 30000), MediaTime(value: 3003, timescale: 90000), MediaTime(value: 7, timescale: 1)])
    func outputTimestampIsThePrimarys(pts: MediaTime) {
        var clock = FrameClock<String>()
        clock.pushSecondary("s", pts: ms(123), now: .zero)
        guard case .composite(let out, let frame) = clock.tick(primaryPTS: pts, now: .zero) else {
            Issue.record("expected a composite"); return
        }
        #expect(out.value == pts.value && out.timescale == pts.timescale)
        #expect(frame.offset == pts - ms(123))
    }

    @Test func beforeFirstFramePrimaryOnly() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(beforeFirstFrame: .primaryOnly))
        for i in 0..<3 {
            #expect(clock.tick(primaryPTS: ms(Int64(i) * 33), now: ms(Int64(i) * 33))
                == .primaryOnly(pts: ms(Int64(i) * 33), reason: .secondaryNotStarted))
        }
        clock.pushSecondary(7, pts: ms(90), now: ms(95))
        let d = clock.tick(primaryPTS: ms(99), now: ms(100))
        #expect(d.secondary?.payload == 7 && d.secondary?.age == ms(5))
        #expect(clock.counters.outputFrames == 4 && clock.counters.primaryOnlyFrames == 3)
    }

    @Test func beforeFirstFrameWaitsThenComposites() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(beforeFirstFrame: .wait(upTo: ms(500))))
        #expect(clock.tick(primaryPTS: .zero, now: ms(0)) == .wait(until: ms(500)))
        #expect(clock.tick(primaryPTS: .zero, now: ms(200)) == .wait(until: ms(500)))
        clock.pushSecondary(1, pts: .zero, now: ms(300))
        #expect(clock.tick(primaryPTS: .zero, now: ms(300)).secondary?.payload == 1)
        #expect(clock.counters.waits == 2 && clock.counters.outputFrames == 1)
    }

    @Test func waitRunsOutIntoPrimaryOnly() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(beforeFirstFrame: .wait(upTo: ms(500))))
        #expect(clock.tick(primaryPTS: .zero, now: ms(0)) == .wait(until: ms(500)))
        #expect(clock.tick(primaryPTS: .zero, now: ms(500)) == .primaryOnly(pts: .zero, reason: .secondaryNotStarted))
        #expect(clock.tick(primaryPTS: ms(33), now: ms(533)) == .primaryOnly(pts: ms(33), reason: .secondaryNotStarted))
        #expect(clock.counters.outputFrames == 2 && clock.counters.waits == 1)
    }

    @Test func secondaryEndsHoldLast() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(afterEnd: .holdLast))
        clock.pushSecondary(9, pts: .zero, now: ms(0))
        _ = clock.tick(primaryPTS: .zero, now: ms(0))
        clock.secondaryEnded(now: ms(1000))
        for now in [ms(2000), ms(60_000)] {
            let f = clock.tick(primaryPTS: now, now: now).secondary
            #expect(f?.payload == 9 && f?.age == now)
        }
        #expect(clock.counters.secondaryFramesRepeated == 1 && clock.counters.secondaryRepeatShows == 2)
    }

    @Test func secondaryEndsPrimaryOnlyAfterTimeout() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(afterEnd: .primaryOnlyAfter(ms(1000)), collectsDiscarded: true))
        clock.pushSecondary(9, pts: .zero, now: ms(0))
        _ = clock.tick(primaryPTS: .zero, now: ms(0))
        clock.secondaryEnded(now: ms(1000))
        #expect(clock.tick(primaryPTS: ms(1500), now: ms(1500)).secondary?.payload == 9)
        #expect(clock.takeDiscarded().isEmpty)
        #expect(clock.tick(primaryPTS: ms(2000), now: ms(2000)) == .primaryOnly(pts: ms(2000), reason: .secondaryEnded))
        #expect(clock.takeDiscarded() == [9])           // the held frame is released for recycling
        #expect(clock.heldFrameID == nil)
        // A new stream resumes compositing.
        clock.pushSecondary(10, pts: ms(2100), now: ms(2100))
        #expect(clock.tick(primaryPTS: ms(2100), now: ms(2100)).secondary?.payload == 10)
    }

    @Test func stalledSecondaryFallsBackAndResumes() {
        let config = FrameClockConfiguration(afterEnd: .primaryOnlyAfter(.zero), stallTimeout: ms(500))
        var clock = FrameClock<Int>(configuration: config)
        clock.pushSecondary(1, pts: .zero, now: ms(0))
        #expect(clock.tick(primaryPTS: ms(100), now: ms(100)).secondary?.payload == 1)
        #expect(clock.tick(primaryPTS: ms(499), now: ms(499)).secondary?.payload == 1)
        #expect(clock.tick(primaryPTS: ms(500), now: ms(500)) == .primaryOnly(pts: ms(500), reason: .secondaryStalled))
        clock.pushSecondary(2, pts: ms(700), now: ms(700))
        #expect(clock.tick(primaryPTS: ms(700), now: ms(700)).secondary?.payload == 2)
        #expect(clock.counters.outputFrames == 4 && clock.counters.primaryOnlyFrames == 1)
    }

    /// A stall's hold is the stall timeout, once: a hold after an explicit
    /// end (as a take sets both to `--secondary-timeout`) is not added to it.
    @Test func aStallIsHeldForItsTimeoutOnce() {
        let config = FrameClockConfiguration(afterEnd: .primaryOnlyAfter(ms(500)), stallTimeout: ms(500))
        var stalled = FrameClock<Int>(configuration: config)
        stalled.pushSecondary(1, pts: .zero, now: ms(0))
        #expect(stalled.tick(primaryPTS: ms(499), now: ms(499)).secondary?.payload == 1)
        #expect(stalled.tick(primaryPTS: ms(500), now: ms(500)) == .primaryOnly(pts: ms(500), reason: .secondaryStalled))
        var ended = FrameClock<Int>(configuration: config)
        ended.pushSecondary(1, pts: .zero, now: ms(0))
        ended.secondaryEnded(now: ms(100))
        #expect(ended.tick(primaryPTS: ms(599), now: ms(599)).secondary?.payload == 1)
        #expect(ended.tick(primaryPTS: ms(600), now: ms(600)) == .primaryOnly(pts: ms(600), reason: .secondaryEnded))
    }

    @Test func primaryEndEndsTheTake() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(collectsDiscarded: true))
        clock.pushSecondary(1, pts: .zero, now: .zero)
        _ = clock.tick(primaryPTS: .zero, now: .zero)
        clock.pushSecondary(2, pts: ms(33), now: ms(33))
        clock.primaryEnded()
        #expect(clock.tick(primaryPTS: ms(33), now: ms(33)) == .endOfTake)
        #expect(clock.tick(primaryPTS: ms(66), now: ms(66)).outputPTS == nil)
        #expect(clock.counters.outputFrames == 1 && clock.counters.secondaryFramesDropped == 1)
        #expect(Set(clock.takeDiscarded()) == [1, 2])
    }

    @Test func nearestPairsByTimestamp() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(mode: .nearest(tolerance: ms(10))))
        for p in [0, 33, 66] as [Int64] { clock.pushSecondary(Int(p), pts: ms(p), now: ms(p)) }
        let a = clock.tick(primaryPTS: ms(40), now: ms(70)).secondary
        #expect(a?.payload == 33 && a?.isSynchronized == true && a?.offset == ms(7))
        #expect(clock.counters.secondaryFramesDropped == 1)           // frame 0 can never be nearest again
        // 50: 33 is 17 away, 66 is 16 away: none in tolerance → hold 33, unsynchronized.
        let b = clock.tick(primaryPTS: ms(50), now: ms(80)).secondary
        #expect(b?.payload == 33 && b?.isSynchronized == false && b?.showCount == 2)
        let c = clock.tick(primaryPTS: ms(67), now: ms(90)).secondary
        #expect(c?.payload == 66 && c?.isSynchronized == true)
        #expect(clock.counters.outputFrames == 3 && clock.counters.secondaryFramesShown == 2)
    }

    @Test func nearestHoldsNewestOldFrameWhenNothingIsInTolerance() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(mode: .nearest(tolerance: ms(5))))
        for p in [0, 10, 20, 200] as [Int64] { clock.pushSecondary(Int(p), pts: ms(p), now: ms(p)) }
        let f = clock.tick(primaryPTS: ms(100), now: ms(200)).secondary
        #expect(f?.payload == 20 && f?.isSynchronized == false)
        #expect(clock.counters.secondaryFramesDropped == 2 && clock.pendingCount == 1)
        #expect(clock.tick(primaryPTS: ms(198), now: ms(210)).secondary?.payload == 200)
    }

    @Test func nearestWithOnlyFutureFramesIsPrimaryOnly() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(mode: .nearest(tolerance: ms(5))))
        clock.pushSecondary(1, pts: ms(500), now: .zero)
        #expect(clock.tick(primaryPTS: .zero, now: .zero) == .primaryOnly(pts: .zero, reason: .secondaryNotStarted))
        #expect(clock.tick(primaryPTS: ms(498), now: .zero).secondary?.payload == 1)
    }

    @Test func nearestQueueIsBounded() {
        var clock = FrameClock<Int>(configuration: FrameClockConfiguration(mode: .nearest(tolerance: ms(5)), maximumPending: 3))
        for i in 0..<5 { clock.pushSecondary(i, pts: ms(Int64(i) * 10), now: .zero) }
        #expect(clock.pendingCount == 3 && clock.counters.secondaryFramesDropped == 2)
        #expect(clock.tick(primaryPTS: ms(21), now: .zero).secondary?.payload == 2)
    }

    /// Rule 9: hot swap holds the frame on screen until the new stream's first frame.
    @Test func hotSwapDoesNotStall() {
        var clock = FrameClock<String>(configuration: FrameClockConfiguration(beforeFirstFrame: .wait(upTo: ms(1000))))
        clock.pushSecondary("A", pts: .zero, now: .zero)
        #expect(clock.tick(primaryPTS: .zero, now: .zero).secondary?.payload == "A")
        clock.pushSecondary("B", pts: ms(33), now: ms(33))
        clock.replaceSecondary(now: ms(33))
        let held = clock.tick(primaryPTS: ms(33), now: ms(33))
        #expect(held.secondary?.payload == "A" && held.outputPTS == ms(33))    // no wait, no gap
        clock.pushSecondary("C", pts: ms(9000), now: ms(60))
        #expect(clock.tick(primaryPTS: ms(66), now: ms(66)).secondary?.payload == "C")
        #expect(clock.counters.secondaryFramesDropped == 1 && clock.counters.outputFrames == 3 && clock.counters.waits == 0)
    }

    /// A replacement stream that never delivers falls back to the primary after the stall timeout.
    @Test func hotSwapToADeadStreamFallsBack() {
        var clock = FrameClock<String>(configuration: FrameClockConfiguration(afterEnd: .primaryOnlyAfter(.zero), stallTimeout: ms(500)))
        clock.pushSecondary("A", pts: .zero, now: .zero)
        _ = clock.tick(primaryPTS: .zero, now: .zero)
        clock.replaceSecondary(now: ms(1000))
        #expect(clock.tick(primaryPTS: ms(1400), now: ms(1400)).secondary?.payload == "A")
        #expect(clock.tick(primaryPTS: ms(1500), now: ms(1500)) == .primaryOnly(pts: ms(1500), reason: .secondaryStalled))
    }

    /// Generic payload: a reference type (a texture, say) is handed back as is.
    final class Texture: Sendable { let name: String; init(_ name: String) { self.name = name } }
    @Test func holdsAnyPayload() {
        var clock = FrameClock<Texture>()
        let t = Texture("tex0")
        let id = clock.pushSecondary(t, pts: .zero, now: .zero)
        let f = clock.tick(primaryPTS: .zero, now: .zero).secondary
        #expect(f?.payload === t && f?.id == id && clock.heldFrameID == id)
        #expect(clock.pushSecondary(Texture("tex1"), pts: .zero, now: .zero) > id)
    }
}
