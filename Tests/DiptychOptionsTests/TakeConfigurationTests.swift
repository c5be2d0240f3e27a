import Foundation
import Testing
import DiptychCore
@testable import DiptychOptions

private func parse(_ line: String) throws(ConfigurationError) -> TakeConfiguration {
    try TakeConfiguration.parse(arguments: line.split(separator: " ").map(String.init))
}
private func tempPath(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("\(UUID().uuidString)-\(name)").path
}

@Suite struct TakeConfigurationParseTests {
    @Test func defaults() {
        let c = TakeConfiguration()
        #expect(c.bitrate == 10_000_000 && c.preset == "veryfast" && c.keyframeInterval == 1)
        #expect(c.encoder == .auto && c.codec == .h264 && c.audio == .primary && c.gpu == "auto" && c.decoder == .auto)
        #expect(c.layout == Layout() && c.layout.kind == .pip && c.canvasSize == nil && !c.json)
        #expect(c.secondary == SourceSpec.none && c.secondarySwitches.isEmpty)
    }

    @Test func parsesEveryFlag() throws {
        let c = try TakeConfiguration.parse(arguments: [
            "--primary", "testsrc:smpte:1920x1080@60", "--secondary", "cam.mp4", "--out", "take.ts",
            "--layout", "side-by-side", "--pip-corner", "top-left", "--pip-size", "25%", "--pip-margin", "16",
            "--size", "1080x1920", "--mirror-secondary", "--mirror-primary", "--rotate-primary", "90",
            "--rotate-secondary", "-90", "--encoder", "x264", "--codec", "hevc", "--bitrate", "2500k",
            "--preset", "medium", "--audio", "none", "--duration", "12.5", "--preview", "p.png",
            "--format", "mp4", "--thermal-state", "serious", "--secondary-timeout", "0.75", "--gpu", "/dev/dri/renderD129",
            "--json", "--switch-secondary", "5=testsrc:gradient", "--switch-secondary=7.5=b.mp4?x=1",
            "--keyframe-interval", "2", "--swap-roles", "--content-mode", "fit", "--background", "102030",
            "--decoder", "nvdec",
        ])
        #expect(c.decoder == .nvdec)
        #expect(c.primary == .testPattern(name: "smpte", size: .hd1080, rate: FrameRate(60)))
        #expect(c.secondary == .url("cam.mp4") && c.output == "take.ts")
        #expect(c.layout.kind == .sideBySide && c.layout.pip == PiPPlacement(corner: .topLeft, size: 0.25, margin: .pixels(16)))
        #expect(c.layout.swapRoles && c.layout.contentMode == .aspectFit && c.layout.background == RGBAColor(hex: "102030"))
        #expect(c.canvasSize == size(1080, 1920))
        #expect(c.primaryOrientation == Orientation(rotation: .r90, mirrored: true))
        #expect(c.secondaryOrientation == Orientation(rotation: .r270, mirrored: true))
        #expect(c.encoder == .x264 && c.codec == .hevc && c.bitrate == 2_500_000 && c.preset == "medium")
        #expect(c.audio == AudioMode.none && c.duration == 12.5 && c.preview == "p.png")
        #expect(c.format == .mp4 && c.container == .mp4)     // --format overrides the .ts extension
        #expect(c.thermalState == .serious && c.secondaryTimeout == 0.75 && c.gpu == "/dev/dri/renderD129")
        #expect(c.json && c.keyframeInterval == 2)
        #expect(c.secondarySwitches == [SecondarySwitch(time: 5, source: .testPattern(name: "gradient", size: .hd1080, rate: FrameRate(30))),
                                        SecondarySwitch(time: 7.5, source: .url("b.mp4?x=1"))])
        try c.validate()
    }

    @Test(arguments: [("8000000", 8_000_000), ("10M", 10_000_000), ("2500k", 2_500_000), ("1.5M", 1_500_000),
                      ("2500K", 2_500_000), ("1G", 1_000_000_000), ("-5M", -5_000_000), ("0", 0)])
    func bitrates(text: String, expected: Int) throws {
        #expect(try TakeConfiguration.parseBitrate(text) == expected)
    }

    @Test(arguments: ["auto", "software", "llvmpipe", "0", "3", "/dev/dri/renderD128", "surfaceless", "device:1",
                      "gbm:/dev/dri/renderD129", "device:software"])
    func gpuSelections(text: String) throws {
        #expect(try parse("--gpu \(text)").gpu == text)
    }

    @Test func encoderAndRateControl() throws {
        let c = try parse("--primary a.mp4 --out a.mp4 --encoder gpu --qp 24")
        #expect(c.encoder == .gpu && c.qp == 24 && c.maxrate == nil && c.bufsize == nil)
        try c.validate()
        let v = try parse("--primary a.mp4 --out a.mp4 --encoder x264 --maxrate 2.5M --bufsize 5M")
        #expect(v.maxrate == 2_500_000 && v.bufsize == 5_000_000)
        try v.validate()
        try parse("--primary a.mp4 --out a.mp4 --maxrate 4M").validate()   // a one-second buffer
    }

    @Test(arguments: [("take.mp4", ContainerFormat.mp4), ("a/b.MOV", .mp4), ("x.ts", .mpegts), ("take.MKV", .matroska), ("live/index.m3u8", .hls),
                      ("rtmp://host/app/key", .rtmp), ("srt://host:9000", .srt)])
    func containerIsInferredFromOutput(out: String, expected: ContainerFormat) throws {
        let c = try parse("--primary a.mp4 --out \(out)")
        #expect(c.container == expected)
        try c.validate()
    }

    /// Parse errors: (arguments, field, value, reason prefix).
    @Test(arguments: [
        ("--primary a.mp4 --bogus 3", "option", "--bogus", "unknown option"),
        ("--primary a.mp4 --out", "--out", "", "needs a value"),
        ("--primary --out x.mp4", "--primary", "", "needs a value"),
        ("a.mp4", "argument", "a.mp4", "unexpected argument"),
        ("--size 12x0", "--size", "12x0", "width and height must be positive"),
        ("--size big", "--size", "big", "expected WxH"),
        ("--size 20000x100", "--size", "20000x100", "width and height must be at most 16384"),
        ("--layout grid", "--layout", "grid", "unknown layout"),
        ("--pip-corner middle", "--pip-corner", "middle", "expected one of"),
        ("--pip-size huge", "--pip-size", "huge", "expected a fraction"),
        ("--pip-margin wide", "--pip-margin", "wide", "expected pixels"),
        ("--rotate-primary 45", "--rotate-primary", "45", "must be 0, 90, 180 or 270"),
        ("--rotate-secondary up", "--rotate-secondary", "up", "must be 0, 90, 180 or 270"),
        ("--encoder qsv", "--encoder", "qsv", "expected auto, vaapi, nvenc, x264 or gpu"),
        ("--qp 52", "--qp", "52", "expected a quantizer 0 to 51"),
        ("--qp -1", "--qp", "-1", "expected a quantizer 0 to 51"),
        ("--qp high", "--qp", "high", "expected a quantizer 0 to 51"),
        ("--maxrate fast", "--maxrate", "fast", "expected bits per second"),
        ("--bufsize big", "--bufsize", "big", "expected bits such as 20M"),
        ("--format flv", "--format", "flv", "expected mp4, mkv, mpegts, hls, rtmp or srt"),
        ("--codec av1", "--codec", "av1", "expected h264 or hevc"),
        ("--bitrate fast", "--bitrate", "fast", "expected bits per second"),
        ("--audio stereo", "--audio", "stereo", "expected primary, secondary, mix or none"),
        ("--duration forever", "--duration", "forever", "must be a number"),
        ("--format avi", "--format", "avi", "expected mp4, mkv, mpegts"),
        ("--thermal-state hot", "--thermal-state", "hot", "expected nominal"),
        ("--gpu cuda", "--gpu", "cuda", "expected auto, software"),
        ("--gpu=-1", "--gpu", "-1", "device index must be 0 or more"),
        ("--gpu vulkan:0", "--gpu", "vulkan:0", "expected auto, software"),
        ("--gpu device:x", "--gpu", "device:x", "expected auto, software"),
        ("--switch-secondary 5", "--switch-secondary", "5", "expected SECONDS=SRC"),
        ("--switch-secondary x=a.mp4", "--switch-secondary", "x=a.mp4", "time before '='"),
        ("--secondary testsrc:", "--secondary", "testsrc:", "expected testsrc:NAME"),
        ("--json=yes", "--json", "yes", "takes no value"),
        ("--background purple", "--background", "purple", "expected a colour"),
        ("--content-mode stretch", "--content-mode", "stretch", "expected fill or fit"),
        ("--decoder gpu", "--decoder", "gpu", "expected auto, cpu or nvdec"),
    ])
    func parseErrorsNameTheFlag(line: String, field: String, value: String, reason: String) {
        do {
            _ = try parse(line)
            Issue.record("expected an error for \(line)")
        } catch {
            #expect(error.field == field && error.value == value)
            #expect(error.reason.hasPrefix(reason), "\(error)")
            #expect(error.description == "\(field) '\(value)': \(error.reason)")
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func exampleErrorLine() {
        #expect(throws: ConfigurationError(field: "--size", value: "12x0", reason: "width and height must be positive")) {
            try parse("--size 12x0")
        }
        do { _ = try parse("--size 12x0") } catch {
            #expect(error.description == "--size '12x0': width and height must be positive")
        }
    }

    @Test func unknownOptionSuggestsTheNearestFlag() {
        #expect(throws: ConfigurationError(field: "option", value: "--pip-sise", reason: "unknown option (did you mean --pip-size?)")) {
            try parse("--pip-sise 0.3")
        }
        #expect(throws: ConfigurationError(field: "option", value: "--frobnicate", reason: "unknown option")) {
            try parse("--frobnicate")
        }
    }

    @Test func usageListsEveryFlag() {
        for flag in OptionParser.options(.record).compactMap(\.flag) {
            #expect(TakeConfiguration.usage.contains(flag + " "), "\(flag) missing from usage")
        }
    }

    @Test func lastFlagWinsAndStdinSource() throws {
        let c = try parse("--primary - --layout stacked --layout pip --bitrate 1M --bitrate 3M --out a.mp4")
        #expect(c.primary == .stdin && c.layout.kind == .pip && c.bitrate == 3_000_000)
    }
}

@Suite struct TakeConfigurationValidateTests {
    static func valid() -> TakeConfiguration {
        var c = TakeConfiguration()
        c.primary = .url("a.mp4"); c.output = "out.mp4"
        return c
    }

    @Test func minimalIsValid() throws { try Self.valid().validate() }

    /// Invalid configurations: (change, field, reason prefix).
    @Test(arguments: [
        ("no primary", "--primary", "a primary stream is required"),
        ("no out", "--out", "is required"),
        ("empty out", "--out", "is required"),
        ("unknown container", "--out", "cannot tell the container"),
        ("format mismatch", "--format", "does not match"),
        ("both stdin", "--secondary", "only one stream"),
        ("odd size", "--size", "width and height must be even"),
        ("zero size", "--size", "width and height must be positive"),
        ("negative bitrate", "--bitrate", "must be positive"),
        ("zero bitrate", "--bitrate", "must be positive"),
        ("huge bitrate", "--bitrate", "must be at most"),
        ("empty preset", "--preset", "must be a preset name"),
        ("zero keyframe interval", "--keyframe-interval", "must be a positive"),
        ("zero duration", "--duration", "must be a positive"),
        ("negative duration", "--duration", "must be a positive"),
        ("infinite duration", "--duration", "must be a positive"),
        ("zero secondary timeout", "--secondary-timeout", "must be a positive"),
        ("pip size 0", "--pip-size", "must be between 0.05 and 1"),
        ("pip size 1.5", "--pip-size", "must be between 0.05 and 1"),
        ("negative pip margin", "--pip-margin", "pixels must be between"),
        ("pip margin fraction 0.5", "--pip-margin", "fraction must be"),
        ("custom rect out of range", "layout.custom.secondary", "must have a positive size"),
        ("inset opacity", "layout.insetStyle.opacity", "must be between 0 and 1"),
        ("switch before 0", "--switch-secondary", "time must be 0 or more"),
        ("switch after end", "--switch-secondary", "time is after the end"),
        ("switch to stdin", "--switch-secondary", "cannot switch to standard input"),
        ("empty preview", "--preview", "must be a file path"),
        ("bad gpu", "--gpu", "expected auto"),
        ("preview is the output", "--preview", "names an output of the take"),
        ("preview is an extra output", "--preview", "names an output of the take"),
        ("too many extra outputs", "--also-out", "at most 16 extra outputs"),
        ("pip size with another kind", "--pip-size", "must be between 0.05 and 1"),
        ("gpu encoder for hevc", "--encoder", "encodes H.264 only, not --codec hevc"),
        ("qp out of range", "--qp", "must be 0 to 51"),
        ("negative maxrate", "--maxrate", "must be positive"),
        ("huge bufsize", "--bufsize", "must be at most"),
        ("bufsize without maxrate", "--bufsize", "needs --maxrate"),
        ("maxrate with qp", "--maxrate", "cannot cap --qp 20"),
        ("zero slices", "--slices", "must be 1 to 256"),
        ("too many slices", "--slices", "must be 1 to 256"),
        ("slices for hevc", "--slices", "applies to H.264 (--codec h264), not --codec hevc"),
    ])
    func invalid(name: String, field: String, reason: String) {
        var c = Self.valid()
        switch name {
        case "no primary": c.primary = .none
        case "no out": c.output = nil
        case "empty out": c.output = ""
        case "unknown container": c.output = "take.avi"
        case "format mismatch": c.output = "rtmp://host/app"; c.format = .mp4
        case "both stdin": c.primary = .stdin; c.secondary = .stdin
        case "odd size": c.canvasSize = size(1921, 1080)
        case "zero size": c.canvasSize = size(0, 1080)
        case "negative bitrate": c.bitrate = -5
        case "zero bitrate": c.bitrate = 0
        case "huge bitrate": c.bitrate = 2_000_000_000
        case "empty preset": c.preset = ""
        case "zero keyframe interval": c.keyframeInterval = 0
        case "zero duration": c.duration = 0
        case "negative duration": c.duration = -1
        case "infinite duration": c.duration = .infinity
        case "zero secondary timeout": c.secondaryTimeout = 0
        case "pip size 0": c.layout.pip.size = 0
        case "pip size 1.5": c.layout.pip.size = 1.5
        case "negative pip margin": c.layout.pip.margin = .pixels(-2)
        case "pip margin fraction 0.5": c.layout.pip.margin = .fraction(0.5)
        case "custom rect out of range": c.layout = .custom(primary: .unit, secondary: nrect(0.8, 0, 0.5, 1))
        case "inset opacity": c.layout.insetStyle.opacity = -0.1
        case "switch before 0": c.secondarySwitches = [SecondarySwitch(time: -1, source: .url("b.mp4"))]
        case "switch after end": c.duration = 5; c.secondarySwitches = [SecondarySwitch(time: 5, source: .url("b.mp4"))]
        case "switch to stdin": c.secondarySwitches = [SecondarySwitch(time: 1, source: .stdin)]
        case "empty preview": c.preview = ""
        case "bad gpu": c.gpu = "nvidia"
        case "preview is the output": c.preview = "out.mp4"
        case "preview is an extra output": c.extraOutputs = [OutputSpec(out: "b.ts")]; c.preview = "b.ts"
        case "too many extra outputs": c.extraOutputs = (0..<17).map { OutputSpec(out: "o\($0).ts") }
        case "pip size with another kind": c.layout.kind = .sideBySide; c.layout.pip.size = 5
        case "gpu encoder for hevc": c.encoder = .gpu; c.codec = .hevc
        case "qp out of range": c.qp = 60
        case "negative maxrate": c.maxrate = -1; c.bufsize = 100
        case "huge bufsize": c.maxrate = 1000; c.bufsize = 2_000_000_000
        case "bufsize without maxrate": c.bufsize = 1_000_000
        case "maxrate with qp": c.qp = 20; c.maxrate = 1_000_000
        case "zero slices": c.slices = 0
        case "too many slices": c.slices = 257
        case "slices for hevc": c.slices = 2; c.codec = .hevc
        default: Issue.record("unknown case \(name)")
        }
        do {
            try c.validate()
            Issue.record("\(name) should be invalid")
        } catch {
            #expect(error.field == field, "\(name): \(error)")
            #expect(error.reason.hasPrefix(reason), "\(name): \(error)")
        }
    }

    @Test func slicesFromTheCommandLineAndTheConfigFile() throws {
        let c = try parse("--primary a.mp4 --out a.mp4 --slices 4")
        #expect(c.slices == 4)
        try c.validate()
        #expect(try parse("--primary a.mp4 --out a.mp4").slices == nil)
        #expect(throws: ConfigurationError(field: "--slices", value: "four", reason: "must be a whole number of slices, 1 to 256")) {
            try parse("--primary a.mp4 --out a.mp4 --slices four")
        }
    }

    @Test func pipSizeFromTheCommandLineIsValidatedWithItsValue() throws {
        let c = try parse("--primary a.mp4 --out a.mp4 --pip-size 0")
        #expect(throws: ConfigurationError(field: "--pip-size", value: "0.0",
                                           reason: "must be between 0.05 and 1 (fraction of the canvas's shorter side)")) {
            try c.validate()
        }
    }

    @Test func derivedValues() {
        var c = Self.valid()
        #expect(c.resolvedCanvas(primaryUprightSize: size(1281, 721)) == size(1280, 720))
        #expect(c.resolvedCanvas(primaryUprightSize: nil) == .hd1080)
        c.canvasSize = size(1080, 1920)
        #expect(c.resolvedCanvas(primaryUprightSize: size(1281, 721)) == size(1080, 1920))
        c.primaryOrientation = Orientation(rotation: .r90)
        #expect(c.geometry(.primary, sensorSize: .hd1080).uprightSize == size(1080, 1920))
        c.secondaryTimeout = 1.5
        #expect(c.clockConfiguration.beforeFirstFrame == .primaryOnly)      // no secondary: nothing to wait for
        c.secondary = .url("b.mp4")
        let clock = c.clockConfiguration
        #expect(clock.mode == .latest && clock.stallTimeout == MediaTime(seconds: 1.5))
        #expect(clock.beforeFirstFrame == .wait(upTo: MediaTime(seconds: 1.5)) && clock.afterEnd == .primaryOnlyAfter(.zero))
    }
}

@Suite struct TakeConfigurationJSONTests {
    static func full() throws -> TakeConfiguration {
        var c = try parse("--primary testsrc:counter:1280x720@30000/1001 --secondary rtsp://cam/1 --out rtmp://h/app --layout stacked "
            + "--size 720x1280 --rotate-secondary 270 --mirror-secondary --bitrate 6M --duration 30 --thermal-state fair --gpu 1 "
            + "--switch-secondary 10=none --pip-margin 0.05 --json --preview p.png --format rtmp --audio none --decoder cpu")
        c.layout.insetStyle = DrawStyle(opacity: 0.8, cornerRadius: 12, borderWidth: 3, borderColor: RGBAColor(r: 1, g: 0, b: 0))
        return c
    }

    @Test func roundTripsThroughData() throws {
        let c = try Self.full()
        let data = c.jsonData()
        #expect(try TakeConfiguration(jsonData: data) == c)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""primary" : "testsrc:counter:1280x720@30000\/1001""#) || text.contains(#""primary" : "testsrc:counter:1280x720@30000/1001""#))
        #expect(text.contains(#""size" : "720x1280""#))
        #expect(text.contains(#""decoder" : "cpu""#))
        #expect(TakeConfiguration().jsonData().count > 0)
        #expect(try TakeConfiguration(jsonData: TakeConfiguration().jsonData()) == TakeConfiguration())
    }

    @Test func configFileThenFlagsOverride() throws {
        let path = tempPath("take.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("""
        { "primary": "a.mp4", "secondary": "b.mp4", "out": "file.mp4", "bitrate": "4M", "size": {"width": 1280, "height": 720},
          "layout": { "kind": "pip", "pip": { "corner": "top-left", "size": 0.2 } },
          "rotatePrimary": 180, "gpu": 2, "switchSecondary": [ { "at": 3, "source": "c.mp4" } ] }
        """.utf8).write(to: URL(fileURLWithPath: path))
        let fromFile = try TakeConfiguration.load(path: path)
        #expect(fromFile.bitrate == 4_000_000 && fromFile.canvasSize == size(1280, 720) && fromFile.gpu == "2")
        #expect(fromFile.layout.pip.corner == .topLeft && fromFile.layout.pip.size == 0.2)
        #expect(fromFile.primaryOrientation.rotation == .r180 && fromFile.secondarySwitches.count == 1)

        // --config is read first wherever it appears; the flags override it.
        let c = try TakeConfiguration.parse(arguments: ["--pip-corner", "bottom-left", "--config", path, "--out", "cli.ts",
                                                        "--switch-secondary", "1=d.mp4", "--switch-secondary", "2=e.mp4"])
        #expect(c.output == "cli.ts" && c.container == .mpegts && c.primary == .url("a.mp4") && c.bitrate == 4_000_000)
        #expect(c.layout.pip.corner == .bottomLeft && c.layout.pip.size == 0.2)
        #expect(c.secondarySwitches.map(\.time) == [1, 2])
        try c.validate()
    }

    @Test func missingConfigFileNamesTheFile() {
        #expect(throws: ConfigurationError(field: "--config", value: "/no/such/take.json", reason: "no such file")) {
            try TakeConfiguration.parse(arguments: ["--config", "/no/such/take.json"])
        }
    }

    /// An empty file and a folder say what they are.
    @Test func emptyConfigFileAndFolderSayWhatTheyAre() throws {
        let empty = tempPath("empty.json"), folder = tempPath("configs")
        try Data().write(to: URL(fileURLWithPath: empty))
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: empty); try? FileManager.default.removeItem(atPath: folder) }
        #expect(throws: ConfigurationError(field: "--config", value: empty, reason: "is empty")) {
            try TakeConfiguration.parse(arguments: ["--config", empty])
        }
        #expect(throws: ConfigurationError(field: "--config", value: folder, reason: "is a folder")) {
            try TakeConfiguration.parse(arguments: ["--config", folder])
        }
    }

    @Test(arguments: [
        ("{ not json", "not valid JSON"),
        (#"{"layout": {"kind": "grid"}}"#, "layout.kind: unknown layout 'grid'"),
        (#"{"primary": "testsrc:"}"#, "primary: 'testsrc:': expected testsrc:NAME"),
        (#"{"pipCorner": "top-left"}"#, "pipCorner: unknown key"),
        (#"{"rotatePrimary": 45}"#, "rotatePrimary: '45': must be 0, 90, 180 or 270"),
        (#"{"bitrate": true}"#, "bitrate: expected bits per second"),
        (#"{"size": 5}"#, "size: expected \"WxH\""),
        (#"{"switchSecondary": [{"at": 1}]}"#, "switchSecondary[0].source: missing"),
        (#"{"size": "12x0"}"#, "size: '12x0': width and height must be positive"),
        (#"{"gpu": "cuda"}"#, "gpu: 'cuda': expected auto"),
        (#"{"decoder": "cuvid"}"#, "decoder: 'cuvid': expected auto, cpu or nvdec"),
        (#"{"decoder": 1}"#, "decoder: '1': expected auto, cpu or nvdec"),
        (#"[1, 2]"#, "invalid configuration: expected an object"),
        // Numbers too large for an integer, or fractions where a whole number belongs: errors, never a trap or a truncation.
        (#"{"size": {"width": 1e30, "height": 240}}"#, "size.width: expected a whole number from 1 to 16384"),
        (#"{"size": {"width": 320, "height": -1e30}}"#, "size.height: expected a whole number from 1 to 16384"),
        (#"{"size": {"width": 320.7, "height": 240}}"#, "size.width: expected a whole number"),
        (#"{"layout": {"pip": {"margin": 1e30}}}"#, "layout.pip.margin: expected a whole number from 0 to 4096"),
        (#"{"layout": {"pip": {"margin": {"pixels": 1e30}}}}"#, "layout.pip.margin.pixels: expected a whole number from 0 to 4096"),
        (#"{"layout": {"pip": {"margin": {"pixels": 2.5}}}}"#, "layout.pip.margin.pixels: expected a whole number"),
    ])
    func invalidConfigFileNamesFileAndKey(json: String, reason: String) throws {
        let path = tempPath("bad.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try TakeConfiguration.parse(arguments: ["--config", path])
            Issue.record("expected an error for \(json)")
        } catch {
            #expect(error.field == "--config" && error.value == path)
            #expect(error.reason.contains(reason), "\(error)")
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func configGivenTwiceIsAnError() {
        #expect(throws: ConfigurationError.self) { try parse("--config a.json --config b.json") }
    }

    @Test func saveAndLoad() throws {
        let path = tempPath("saved.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let c = try Self.full()
        try c.save(toPath: path)
        #expect(try TakeConfiguration.load(path: path) == c)
    }
}

/// `--transition` and `--layout-at` (docs/record.md, "Layout changes and transitions").
@Suite struct LayoutScheduleOptionTests {
    @Test func flagsBuildTheScheduleOverTheFinalLayout() throws {
        let c = try parse("--primary a.mp4 --out t.mp4 --layout-at 2=side-by-side --transition 400:ease-in --pip-corner top-left --layout-at 5=pip")
        #expect(c.layoutTransition == LayoutTransition(milliseconds: 400, easing: .easeIn))
        #expect(c.layoutSchedule.map(\.at) == [2, 5])
        #expect(c.layoutSchedule.map(\.layout.kind) == [.sideBySide, .pip])
        #expect(c.layoutSchedule.allSatisfy { $0.layout.pip.corner == .topLeft && $0.transition == nil })
        try c.validate()
    }

    @Test func jsonEntriesMergeOverTheOneBefore() throws {
        let c = try TakeConfiguration(jsonData: Data("""
        { "primary": "a.mp4", "out": "t.mp4", "layout": {"pip": {"corner": "top-left"}}, "transition": {"ms": 300},
          "layoutSchedule": [ {"at": 1, "layout": {"pip": {"size": 0.2}}},
                              {"at": 2.5, "layout": {"kind": "stacked"}, "transition": {"ms": 800, "easing": "linear"}} ] }
        """.utf8))
        #expect(c.layoutTransition == LayoutTransition(milliseconds: 300, easing: .easeInOut))
        let s = c.layoutSchedule
        #expect(s.count == 2 && s[0].layout.pip.corner == .topLeft && s[0].layout.pip.size == 0.2 && s[0].transition == nil)
        #expect(s[1].layout.kind == .stacked && s[1].layout.pip.size == 0.2 && s[1].transition == LayoutTransition(milliseconds: 800, easing: .linear))
        try c.validate()
    }

    @Test(arguments: [
        ("--transition fast", "--transition", "expected MS[:EASING]"),
        ("--transition 400:bounce", "--transition", "unknown easing"),
        ("--transition 20000", "--transition", "0 to 10000 ms"),
        ("--layout-at 2", "--layout-at", "expected SECONDS=KIND"),
        ("--layout-at 2=grid", "--layout-at", "unknown layout"),
    ]) func badValuesNameTheFlag(_ line: String, _ field: String, _ reason: String) {
        do {
            _ = try parse("--primary a.mp4 --out t.mp4 " + line)
            Issue.record("accepted \(line)")
        } catch {
            #expect(error.field == field && error.reason.contains(reason), "\(error)")
        }
    }

    @Test func scheduleErrorsNameTheEntry() throws {
        for (json, field, reason) in [
            (#"[{"at": 1}]"#, "layoutSchedule[0].layout", "missing"),
            (#"[{"layout": {}}]"#, "layoutSchedule[0].at", "missing"),
            (#"[{"at": 1, "layout": {"knd": "pip"}}]"#, "layoutSchedule[0].layout.knd", "unknown key"),
            (#"[{"at": 1, "layout": {}, "transition": {"ms": 1, "easing": "x"}}]"#, "layoutSchedule[0].transition.easing", "unknown easing"),
            (#"[{"at": 1, "layout": {}, "when": 2}]"#, "layoutSchedule[0].when", "unknown key"),
            (#"{"at": 1}"#, "layoutSchedule", "expected a list"),
        ] {
            do {
                _ = try OptionParser.decode(Data(#"{"layoutSchedule": \#(json)}"#.utf8), source: "t.json")
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.reason.contains(field) && error.reason.contains(reason), "\(json): \(error)")
            }
        }
        var c = try parse("--primary a.mp4 --out t.mp4 --layout-at 3=stacked --layout-at 1=pip")
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c = try parse("--primary a.mp4 --out t.mp4 --duration 2 --layout-at 3=stacked")
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }
}

/// `--overlay` and JSON `overlays` (docs/record.md, "Overlays").
@Suite struct OverlayOptionTests {
    @Test func flagsAndJSON() throws {
        let c = try parse("--primary a.mp4 --out t.mp4 --overlay logo.png@0.8,0.05,0.15,0.1 --overlay dir/a@b.png@0,0,1,1,0.5,bottom")
        #expect(c.overlays == [ImageOverlay(image: "logo.png", rect: nrect(0.8, 0.05, 0.15, 0.1)),
                               ImageOverlay(image: "dir/a@b.png", rect: nrect(0, 0, 1, 1), opacity: 0.5, layer: .bottom)])
        try c.validate()
        let j = try TakeConfiguration(jsonData: Data("""
        { "primary": "a.mp4", "out": "t.mp4", "overlays": [{"image": "l.png", "rect": {"x": 0, "y": 0, "width": 0.5, "height": 0.5}, "opacity": 0.8, "z": "top"}],
          "alsoOut": [{"out": "b.ts", "overlays": [{"image": "m.png", "rect": {"x": 0.5, "y": 0.5, "width": 0.5, "height": 0.5}, "z": "bottom"}]}] }
        """.utf8))
        #expect(j.overlays == [ImageOverlay(image: "l.png", rect: nrect(0, 0, 0.5, 0.5), opacity: 0.8)])
        #expect(j.extraOutputs[0].overlays == [ImageOverlay(image: "m.png", rect: nrect(0.5, 0.5, 0.5, 0.5), layer: .bottom)])
    }

    @Test func badOverlaysNameTheField() {
        for (line, reason) in [("--overlay logo.png", "expected IMAGE@X,Y,W,H"), ("--overlay logo.png@0,0,1", "expected IMAGE@X,Y,W,H"),
                               ("--overlay logo.png@0.5,0.5,0.6,0.1", "within 0...1"), ("--overlay logo.png@0,0,1,1,2", "between 0 and 1"),
                               ("--overlay @0,0,1,1", "expected IMAGE@X,Y,W,H")] {
            do {
                _ = try parse("--primary a.mp4 --out t.mp4 " + line)
                Issue.record("accepted \(line)")
            } catch {
                #expect(error.field.hasPrefix("--overlay") && error.reason.contains(reason), "\(line): \(error)")
            }
        }
        for (json, field) in [(#"[{"rect": {"x": 0, "y": 0, "width": 1, "height": 1}}]"#, "overlays[0].image"),
                              (#"[{"image": "a.png"}]"#, "overlays[0].rect"),
                              (#"[{"image": "a.png", "rect": {"x": 0, "y": 0, "width": 1, "height": 1}, "z": "middle"}]"#, "overlays[0].z"),
                              (#"[{"image": "a.png", "rect": {"x": 0, "y": 0, "width": 1, "height": 1}, "alpha": 1}]"#, "overlays[0].alpha")] {
            do {
                _ = try OptionParser.decode(Data(#"{"overlays": \#(json)}"#.utf8), source: "t.json")
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.reason.contains(field), "\(json): \(error)")
            }
        }
        var c = TakeConfiguration()
        c.primary = .url("a.mp4"); c.output = "t.mp4"
        c.overlays = Array(repeating: ImageOverlay(image: "a.png", rect: nrect(0, 0, 1, 1)), count: 9)
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }
}

/// `--text` and JSON `texts` (docs/record.md, "Text").
@Suite struct TextOptionTests {
    @Test func flagsAndJSON() throws {
        let c = try parse("--primary a.mp4 --out t.mp4 --text {timecode}@0.05,0.9 --text a@b@0.5,0.1,32,color=FF0000,outline=2:00FF00,box=00000080:6,font=f.ttf,opacity=0.5,align=center,bottom")
        #expect(c.texts == [TextOverlay(text: "{timecode}", x: 0.05, y: 0.9),
                            TextOverlay(text: "a@b", x: 0.5, y: 0.1, size: 32, color: RGBAColor(hex: "FF0000")!, font: "f.ttf", outlineWidth: 2,
                                        outlineColor: RGBAColor(hex: "00FF00")!, box: RGBAColor(hex: "00000080")!, boxPadding: 6, opacity: 0.5,
                                        layer: .bottom, align: .center)])
        try c.validate()
        let j = try TakeConfiguration(jsonData: Data("""
        { "primary": "a.mp4", "out": "t.mp4", "texts": [{"text": "Take {take}", "x": 0.1, "y": 0.2, "size": 20, "outline": {"width": 1.5}, "box": {"padding": 3}, "z": "top", "align": "right"}],
          "alsoOut": [{"out": "b.ts", "texts": [{"text": "{frame}", "x": 0, "y": 0, "color": "00FF00"}]}] }
        """.utf8))
        #expect(j.texts == [TextOverlay(text: "Take {take}", x: 0.1, y: 0.2, size: 20, outlineWidth: 1.5, box: RGBAColor(r: 0, g: 0, b: 0, a: 0.5),
                                        boxPadding: 3, align: .right)])
        #expect(j.extraOutputs[0].texts == [TextOverlay(text: "{frame}", x: 0, y: 0, color: RGBAColor(hex: "00FF00")!)])
        // The JSON form round-trips through the option table.
        let again = try TakeConfiguration(jsonData: c.jsonData())
        #expect(again.texts == c.texts)
    }

    @Test func badTextsNameTheInput() {
        for (line, field, reason) in [("--text hello", "--text", "expected TEMPLATE@X,Y"), ("--text a@0.5", "--text", "expected TEMPLATE@X,Y"),
                                      ("--text a@1.5,0", "--text.x", "fractions of the canvas"), ("--text a@0,0,2", "--text.size", "must be 4...1000 pixels"),
                                      ("--text {clock}@0,0", "--text", "unknown field {clock}"), ("--text a@0,0,color=red", "--text color", "RRGGBB"),
                                      ("--text a@0,0,outline=99", "--text.outline", "0...50"), ("--text a@0,0,size=big", "--text size", "whole pixels"),
                                      ("--text a@0,0,weight=bold", "--text", "unknown key 'weight'"), ("--text a@0,0,align=justify", "--text align", "left, center or right"),
                                      ("--text a@0,0,opacity=2", "--text.opacity", "between 0 and 1"), ("--text @0,0", "--text", "expected TEMPLATE@X,Y")] {
            do {
                _ = try parse("--primary a.mp4 --out t.mp4 " + line)
                Issue.record("accepted \(line)")
            } catch {
                #expect(error.field == field && error.reason.contains(reason), "\(line): \(error)")
                #expect(!"\(error)".contains("\n"))
            }
        }
        for (json, field) in [(#"[{"x": 0, "y": 0}]"#, "texts[0].text"), (#"[{"text": "a"}]"#, "texts[0]"),
                              (#"[{"text": "a", "x": 0, "y": 0, "z": "middle"}]"#, "texts[0].z"),
                              (#"[{"text": "a", "x": 0, "y": 0, "size": 0.5}]"#, "texts[0].size"),
                              (#"[{"text": "a", "x": 0, "y": 0, "outline": {"color": "000000"}}]"#, "texts[0].outline"),
                              (#"[{"text": "{nope}", "x": 0, "y": 0}]"#, "texts[0].text"),
                              (#"[{"text": "a", "x": 0, "y": 0, "weight": 1}]"#, "texts[0].weight")] {
            do {
                _ = try OptionParser.decode(Data(#"{"texts": \#(json)}"#.utf8), source: "t.json")
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.field.contains(field) || error.reason.contains(field), "\(json): \(error)")
            }
        }
        // Images and texts together: at most 8 an output.
        var c = TakeConfiguration()
        c.primary = .url("a.mp4"); c.output = "t.mp4"
        c.overlays = Array(repeating: ImageOverlay(image: "a.png", rect: nrect(0, 0, 1, 1)), count: 5)
        c.texts = Array(repeating: TextOverlay(text: "x", x: 0, y: 0), count: 4)
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c.texts.removeLast()
        #expect(throws: Never.self) { try c.validate() }
    }
}
