import Testing
@testable import DiptychCore

/// docs/ARCHITECTURE.md, "Layout transitions": interpolated plans on the take's clock.
@Suite("Transitions") struct TransitionTests {
    let canvas = size(1280, 720)
    let primary = stream(1280, 720), secondary = stream(640, 360)

    /// Runs `frames` frames at `rate`, changing to `to` with `transition` at frame `changeAt`; the plans drawn.
    func run(from: Layout, to: Layout, transition: LayoutTransition?, rate: FrameRate, frames: Int, changeAt: Int = 2,
             startPTS: MediaTime = .zero) -> [CompositionPlan] {
        var a = LayoutAnimator(layout: from, frameDuration: rate.frameDuration)
        var out: [CompositionPlan] = []
        for i in 0..<frames {
            if i == changeAt { a.change(to: to, transition: transition) }
            out.append(a.plan(at: startPTS + rate.time(ofFrame: Int64(i)), canvas: canvas, primary: primary, secondary: secondary))
        }
        return out
    }

    func inset(_ p: CompositionPlan) -> DrawDescription { p.draws.first { $0.role == .secondary }! }

    @Test func easingsAreTheCSSCurvesEndingWhereTheyStart() {
        for e in Easing.allCases {
            #expect(e.apply(0) == 0 && e.apply(1) == 1, "\(e)")
            var last = -1.0
            for i in 0...100 {
                let y = e.apply(Double(i) / 100)
                #expect(y >= last, "\(e) not increasing at \(i)")
                last = y
            }
        }
        // CSS ease-in-out is symmetric about the middle; ease-in is below the diagonal, ease-out above.
        #expect(approx(Easing.easeInOut.apply(0.5), 0.5, 1e-6))
        #expect(approx(Easing.easeInOut.apply(0.25) + Easing.easeInOut.apply(0.75), 1, 1e-6))
        #expect(Easing.easeIn.apply(0.5) < 0.5 && Easing.easeOut.apply(0.5) > 0.5)
        // cubic-bezier(0.42, 0, 1, 1) at x = 0.5: 0.3153 (solved independently).
        #expect(approx(Easing.easeIn.apply(0.5), 0.31536, 1e-4))
        #expect(Easing.linear.apply(0.3) == 0.3)
    }

    /// 400 ms at 60 fps is exactly 24 frames: the first the old layout, the
    /// 24th the new one, the inset moving one way in between.
    @Test(arguments: Easing.allCases) func aTransitionIsItsDurationInFramesAndMonotonic(_ easing: Easing) {
        let from = Layout.pip(PiPPlacement(corner: .topLeft)), to = Layout.pip(PiPPlacement(corner: .bottomRight))
        let rate = FrameRate(60)
        let plans = run(from: from, to: to, transition: LayoutTransition(milliseconds: 400, easing: easing), rate: rate, frames: 40)
        let a = from.resolve(canvas: canvas, primary: primary, secondary: secondary)
        let b = to.resolve(canvas: canvas, primary: primary, secondary: secondary)
        #expect(plans[0] == a && plans[1] == a)
        // The change applies at frame 2: frames 2...25 are the transition's 24.
        #expect(inset(plans[2]) == inset(a), "the first frame of the transition is the picture as it was")
        #expect(plans[25] == b, "the 24th frame is the new layout")
        #expect(plans[24] != b, "the 23rd frame is still in between")
        let between = plans[3...24].filter { $0 != a && $0 != b }.count
        #expect(between == 22)
        for i in 26..<40 { #expect(plans[i] == b) }
        for i in 3...25 {
            let p = inset(plans[i - 1]).destination, q = inset(plans[i]).destination
            #expect(q.x >= p.x && q.y >= p.y, "frame \(i): \(p) → \(q)")
        }
        #expect(LayoutTransition(milliseconds: 400).frames(at: rate.frameDuration) == 24)
        #expect(LayoutTransition(milliseconds: 400).frames(at: FrameRate(30000, 1001).frameDuration) == 12)
        #expect(LayoutTransition(milliseconds: 0).frames(at: rate.frameDuration) == 1)
    }

    /// The clock is the frames' timestamps, not the wall clock nor the frame
    /// count from zero: a take that starts late counts from the change.
    @Test func theClockIsTheFramesTimestamps() {
        let from = Layout.pip(), to = Layout.sideBySide
        let t = LayoutTransition(milliseconds: 500, easing: .linear)
        let plans = run(from: from, to: to, transition: t, rate: FrameRate(30), frames: 30, changeAt: 5, startPTS: MediaTime(seconds: 3600))
        let b = to.resolve(canvas: canvas, primary: primary, secondary: secondary)
        #expect(plans[5 + 14] == b && plans[5 + 13] != b)
        // Linear: the main picture's right edge moves by equal steps (±2 px, even edges).
        let edges = plans[5...19].map { $0.draws.first { $0.role == .primary }!.destination.maxX }
        let steps = zip(edges.dropFirst(), edges).map { $0 - $1 }
        #expect(steps.allSatisfy { $0 <= 0 } && steps.max()! - steps.min()! <= 2, "\(edges)")
    }

    /// A change during a transition starts from where the picture is.
    @Test func aChangeDuringATransitionStartsFromThePicture() {
        let a = Layout.pip(PiPPlacement(corner: .topLeft)), b = Layout.pip(PiPPlacement(corner: .bottomRight))
        let t = LayoutTransition(milliseconds: 400, easing: .linear)
        var anim = LayoutAnimator(layout: a, frameDuration: FrameRate(60).frameDuration)
        var plans: [CompositionPlan] = []
        for i in 0..<60 {
            if i == 1 { anim.change(to: b, transition: t) }
            if i == 13 { anim.change(to: a, transition: t) }
            plans.append(anim.plan(at: FrameRate(60).time(ofFrame: Int64(i)), canvas: canvas, primary: primary, secondary: secondary))
        }
        // Frame 13 is where frame 12 was (no jump), then the inset goes back.
        let d12 = inset(plans[12]).destination, d13 = inset(plans[13]).destination
        #expect(d13 == d12)
        for i in 14...36 { #expect(inset(plans[i]).destination.x <= inset(plans[i - 1]).destination.x) }
        #expect(plans[36] == a.resolve(canvas: canvas, primary: primary, secondary: secondary))
        #expect(!anim.isAnimating)
    }

    /// Without a transition (or at 0 ms) a change is a cut; a role only one
    /// layout shows fades; style and crops interpolate.
    @Test func cutsFadesAndStyles() {
        let cut = run(from: .pip(), to: .sideBySide, transition: nil, rate: FrameRate(30), frames: 4)
        #expect(cut[2] == Layout.sideBySide.resolve(canvas: canvas, primary: primary, secondary: secondary))
        let zero = run(from: .pip(), to: .sideBySide, transition: LayoutTransition(milliseconds: 0), rate: FrameRate(30), frames: 4)
        #expect(zero[2] == cut[2])

        let fade = run(from: .pip(), to: .primaryOnly, transition: LayoutTransition(milliseconds: 100, easing: .linear),
                       rate: FrameRate(50), frames: 10)
        // 100 ms at 50 fps: 5 frames; the inset fades 1, 0.75, 0.5, 0.25, then is gone.
        #expect(fade[2...5].map { inset($0).opacity } == [1, 0.75, 0.5, 0.25])
        #expect(!fade[6].draws.contains { $0.role == .secondary })

        var styled = Layout.pip()
        styled.insetStyle = DrawStyle(opacity: 0.5, cornerRadius: 40, borderWidth: 8, borderColor: .black)
        let s = run(from: .pip(), to: styled, transition: LayoutTransition(milliseconds: 100, easing: .linear), rate: FrameRate(50), frames: 8)
        #expect(inset(s[4]).opacity == 0.75 && inset(s[4]).cornerRadius == 20 && inset(s[4]).borderWidth == 4)
        #expect(inset(s[4]).borderColor == RGBAColor(r: 0.5, g: 0.5, b: 0.5, a: 1))

        // Crops interpolate: pip's full-canvas main picture to a side-by-side column.
        let sbs = run(from: .pip(), to: .sideBySide, transition: LayoutTransition(milliseconds: 100, easing: .linear),
                      rate: FrameRate(50), frames: 8)
        let main = sbs[4].draws.first { $0.role == .primary }!
        #expect(approx(main.crop.width, 0.75) && approx(main.crop.x, 0.125))
        // Even edges throughout.
        for p in sbs { for d in p.draws { #expect(d.destination.x % 2 == 0 && d.destination.width % 2 == 0 && d.destination.height % 2 == 0) } }
    }

    @Test func parsingAndValidation() throws {
        #expect(try LayoutTransition.parse("400") == LayoutTransition(milliseconds: 400, easing: .easeInOut))
        #expect(try LayoutTransition.parse("250ms:ease-in") == LayoutTransition(milliseconds: 250, easing: .easeIn))
        #expect(try LayoutTransition.parse("0:linear").milliseconds == 0)
        for bad in ["", "fast", "400:bounce", "-1", "10001", "nan", "400:"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try LayoutTransition.parse(bad) }
        }
        var c = TakeConfiguration()
        c.primary = .testPattern(name: "smpte", size: size(640, 360), rate: FrameRate(30)); c.output = "a.mp4"
        c.layoutSchedule = [ScheduledLayout(at: 1, layout: .sideBySide), ScheduledLayout(at: 2, layout: .stacked)]
        try c.validate()
        c.layoutSchedule = [ScheduledLayout(at: 2, layout: .sideBySide), ScheduledLayout(at: 1, layout: .stacked)]
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c.layoutSchedule = [ScheduledLayout(at: 5, layout: .sideBySide)]
        c.duration = 4
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }
}
