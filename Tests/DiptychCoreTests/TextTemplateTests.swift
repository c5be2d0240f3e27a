import Testing
@testable import DiptychCore

/// Text templates (docs/record.md, "Text"): fields expanded from the take's
/// clock, the timecode exact at the output rate, bad templates refused.
@Suite struct TextTemplateTests {
    func clock(_ frame: Int64, _ rate: FrameRate) -> TextClock {
        TextClock(time: rate.time(ofFrame: frame), rate: rate, wallClock: 0, take: "cam-a")
    }

    /// At 60 fps every frame has its own code, 60 a second, from the clock's
    /// timestamps (rational: no drift over an hour); at 30 fps likewise.
    @Test func timecodeIsExactAtTheOutputRate() {
        let r60 = FrameRate(60)
        #expect(clock(0, r60).timecode == "00:00:00:00")
        #expect(clock(59, r60).timecode == "00:00:00:59")
        #expect(clock(60, r60).timecode == "00:00:01:00")
        #expect(clock(60 * 3600 - 1, r60).timecode == "00:59:59:59")
        #expect(clock(60 * 3600 + 61, r60).timecode == "01:00:01:01")
        let r30 = FrameRate(30)
        #expect(clock(29, r30).timecode == "00:00:00:29")
        #expect(clock(30 * 61 + 7, r30).timecode == "00:01:01:07")
        // Each of 216,000 frames (an hour at 60 fps) gives the next code: seconds and frames never skip or repeat.
        var last = -1
        for n in Int64(0)..<216_000 where n % 997 == 0 || n % 60 == 59 || n % 60 == 0 {
            let tc = clock(n, r60).timecode.split(separator: ":").map { Int($0)! }
            let index = ((tc[0] * 60 + tc[1]) * 60 + tc[2]) * 60 + tc[3]
            #expect(index == Int(n)); #expect(index > last); last = index
        }
        // Timestamps in another timescale (90 kHz) round to the frame they stand for.
        let t = TextClock(time: MediaTime(value: 90_000 * 2 + 1500, timescale: 90_000), rate: r60, wallClock: 0, take: "")
        #expect(t.frame == 121 && t.timecode == "00:00:02:01")
        // 30000/1001 counts 30 a second (non-drop).
        #expect(clock(30, FrameRate(30000, 1001)).timecode == "00:00:01:00")
        #expect(clock(24 * 3600 * 60, r60).timecode == "00:00:00:00", "hours wrap at 24")
    }

    @Test func fieldsExpand() throws {
        let t = try TextTemplate(parsing: "{take} #{frame} {timecode} {{x}} {time:%Y}", field: "t")
        var c = clock(125, FrameRate(25))
        c.wallClock = 86_400 * 365.25 * 30   // mid-1999 or 2000 in any time zone
        let s = t.expand(c)
        #expect(s.hasPrefix("cam-a #125 00:00:05:00 {x} "), "\(s)")
        #expect(s.hasSuffix("2000") || s.hasSuffix("1999"), "\(s)")
        let constant = try TextTemplate(parsing: "Camera 2", field: "t")
        #expect(!t.isConstant && constant.isConstant)
        let time = try TextTemplate(parsing: "{time}", field: "t").expand(c)
        #expect(time.count == 8 && time.split(separator: ":").count == 3, "\(time)")
    }

    @Test func badTemplatesNameTheField() {
        for (text, reason) in [("{clock}", "unknown field {clock}"), ("{timecode", "a { without its }"), ("a } b", "a lone }"),
                               ("{time:}", "unknown field {time:}")] {
            #expect(throws: ConfigurationError(field: "texts[0].text", value: text, reason: reason + (reason.hasPrefix("unknown") ? "; expected {time}, {time:FORMAT}, {timecode}, {frame} or {take}" : reason.hasPrefix("a {") ? " (write {{ for a brace)" : " (write }} for a brace)"))) {
                try TextTemplate(parsing: text, field: "texts[0].text")
            }
        }
    }

    /// The anchor is even; a text's draw is an overlay draw above its layer's images.
    @Test func anchorAndDraw() {
        let o = TextOverlay(text: "x", x: 0.5, y: 0.333, size: 20, layer: .bottom)
        let a = o.anchor(in: PixelSize(width: 1920, height: 1080))
        #expect(a.x == 960 && a.y == 360)
        let d = o.draw(id: 1_000_003, destination: PixelRect(x: 960, y: 360, width: 40, height: 24), order: 2)
        #expect(d.overlay == 1_000_003 && d.zIndex == -998 && d.destination.width == 40)
    }
}
