import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychOptions

/// The option table is the one place an option is spelled: `--help`, the
/// command line, `--config` JSON (both ways) and the embedding API's option
/// strings accept exactly the options of their scope.
@Suite struct OptionTableTests {
    /// A value each option accepts, as command-line text (nil: a switch).
    static func sample(_ o: Option) -> String? {
        guard o.takesValue else { return nil }
        switch o.flag {
        case "--primary", "--secondary": return "testsrc:smpte:320x240@30"
        case "--out", "--also-out": return "x.ts"
        case "--preview", "--slate": return "p.png"
        case "--duration": return "3"
        case "--thermal-state": return "fair"
        case "--switch-secondary": return "1=testsrc:gradient"
        case "--also-layout": return "stacked"
        case "--also-size": return "320x180"
        case "--also-codec": return "hevc"
        case "--also-bitrate", "--also-maxrate", "--also-bufsize": return "800k"
        case "--also-preset": return "faster"
        case "--also-rate-divisor": return "2"
        case "--also-segment-time": return "2"
        case "--also-hls-list-size": return "3"
        case "--config": return nil
        case "--fps": return "30"
        case "--queue": return "8"
        case "--size": return "640x360"
        case "--format": return "mpegts"
        case "--pip-margin": return "3%"
        case "--background": return "102030"
        case "--over-budget": return "keep"
        case "--qp": return "20"
        case "--slices": return "4"
        case "--maxrate": return "4M"
        case "--bufsize": return "8M"
        case "--segment-time": return "10"
        case "--hls-list-size": return "3"
        case "--primary-fallback", "--secondary-fallback": return "testsrc:smpte"
        case "--transition": return "400:ease-out"
        case "--layout-at": return "1=side-by-side"
        case "--overlay": return "logo.png@0.1,0.1,0.2,0.2,0.8"
        case "--text": return "{timecode}@0.1,0.9,32,box=00000080"
        case "--primary-gain": return "-3dB"
        default:
            switch o.value(in: OptionValues()) {
            case .string(let s)?: return s
            case .number(let d)?: return d.rounded() == d ? String(Int(d)) : String(d)
            default: return nil
            }
        }
    }

    @Test func everyOptionIsInItsScopesAndNowhereElse() throws {
        let usage = TakeConfiguration.usage
        for o in Option.table {
            guard let flag = o.flag else { continue }
            #expect(usage.contains(flag + " ") == o.scopes.contains(.record), "\(flag) in --help")
            guard flag != "--config" else { continue }
            let value = Self.sample(o)
            var args = value.map { [flag, $0] } ?? [flag]
            if flag.hasPrefix("--also-") && flag != "--also-out" {
                args = ["--also-out", flag == "--also-hls-list-size" ? "y.m3u8" : "y.mp4"] + args
            }
            if flag == "--bufsize" { args = ["--maxrate", "4M"] + args }
            // diptych record
            let record = Result { () throws(ConfigurationError) in try TakeConfiguration.parse(arguments: args) }
            #expect((try? record.get()) != nil || !o.scopes.contains(.record), "\(flag) \(String(describing: value)) on the command line: \(record)")
            if case .failure(let e) = record, !o.scopes.contains(.record) { #expect(e.reason.contains("unknown option")) }
            // The embedding API (and so the C API, which parses through it).
            let embeddedArgs = args + (flag == "--size" ? [] : ["--size", "320x240"]) + (flag == "--fps" ? [] : ["--fps", "30"])
            let embedded = Result { () throws(EmbeddingError) in try EmbeddedConfiguration.parse(arguments: embeddedArgs) }
            if o.scopes.contains(.embedded) {
                #expect((try? embedded.get()) != nil || flag == "--secondary", "\(flag) in the embedding API: \(embedded)")
            } else {
                #expect((try? embedded.get()) == nil, "\(flag) must be refused by the embedding API")
            }
        }
    }

    /// Every JSON key the table writes is read back to the same value, and
    /// each is accepted on its own in a `--config` document.
    @Test func jsonRoundTripsEveryKey() throws {
        var v = OptionValues()
        v.take = try TakeConfiguration.parse(arguments: [
            "--primary", "a.mp4", "--secondary", "b.mp4", "--out", "t.mp4", "--duration", "4", "--preview", "p.png",
            "--thermal-state", "fair", "--switch-secondary", "2=testsrc:gradient", "--also-out", "s.ts",
            "--also-layout", "stacked", "--zoom-secondary", "1.5", "--pip-margin", "24", "--maxrate", "4M", "--bufsize", "8M",
            "--primary-fallback", "rtsp://b/live", "--secondary-fallback", "testsrc:smpte", "--source-reconnect-window", "12",
            "--transition", "250:linear", "--layout-at", "1=side-by-side", "--layout-at", "2.5=stacked",
            "--audio", "mix", "--primary-gain", "-3", "--secondary-gain", "-6.5", "--slices", "3"])
        v.take.layoutSchedule[1].transition = LayoutTransition(milliseconds: 600, easing: .easeIn)
        v.take.overlays = [ImageOverlay(image: "logo.png", rect: NormalizedRect(x: 0.1, y: 0.1, width: 0.2, height: 0.2)),
                           ImageOverlay(image: "bug.png", rect: NormalizedRect(x: 0, y: 0, width: 1, height: 1), opacity: 0.5, layer: .bottom)]
        v.take.extraOutputs[0].overlays = [ImageOverlay(image: "s.png", rect: NormalizedRect(x: 0.5, y: 0.5, width: 0.25, height: 0.25), opacity: 0.75)]
        v.take.layout.custom.primary = NormalizedRect(x: 0, y: 0, width: 0.5, height: 1)
        v.take.layout.insetStyle.cornerRadius = 12
        // Scheduled layouts are read over the take's (JSON entries merge over the layout before them).
        for i in v.take.layoutSchedule.indices { v.take.layoutSchedule[i].layout.custom.primary = v.take.layout.custom.primary }
        let json = OptionParser.encode(v)
        let back = try OptionParser.decode(json.data(), source: "test.json")
        #expect(back == v.take)
        for o in Option.table where o.scopes.contains(.json) {
            guard let key = o.key, let value = o.value(in: v) else { continue }
            var doc = JSONValue.object([:])
            doc.set(value, at: key[...])
            #expect(throws: Never.self, "\(key)") { _ = try OptionParser.decode(doc.data(), source: "one.json") }
        }
    }

    /// The encoder and rate-control options in every form: flags, `--config`
    /// JSON (numbers or text), the embedding API's option strings.
    @Test func encoderAndRateControlInEveryForm() throws {
        let flags = try TakeConfiguration.parse(arguments: ["--encoder", "gpu", "--qp", "20"])
        #expect(flags.encoder == .gpu && flags.qp == 20)
        let json = try OptionParser.decode(Data(#"{"encoder": "gpu", "qp": 31, "maxrate": "4M", "bufsize": 8000000, "slices": 4}"#.utf8), source: "t.json")
        #expect(json.encoder == .gpu && json.qp == 31 && json.maxrate == 4_000_000 && json.bufsize == 8_000_000 && json.slices == 4)
        var v = OptionValues()
        v.take = json
        #expect(try OptionParser.decode(OptionParser.encode(v).data(), source: "back.json") == json)
        let embedded = try EmbeddedConfiguration.parse(arguments: ["--size", "320x240", "--fps", "30", "--encoder", "gpu", "--qp", "28", "--slices", "2"])
        #expect(embedded.0.encoder == .gpu && embedded.0.qp == 28 && embedded.0.slices == 2)
        // H.264 only: one line naming both, when the session starts (DIPTYCH_ERR_INVALID_ARGUMENT).
        let hevc = try EmbeddedConfiguration.parse(arguments: ["--size", "320x240", "--fps", "30", "--encoder", "gpu", "--codec", "hevc"])
        do {
            try hevc.0.takeConfiguration(file: nil, format: nil).validate()
            Issue.record("accepted --encoder gpu --codec hevc")
        } catch {
            #expect("\(error)".hasPrefix("--encoder 'gpu': encodes H.264 only, not --codec hevc"), "\(error)")
        }
        #expect(TakeConfiguration.usage.contains("auto|vaapi|nvenc|x264|gpu"))
    }

    @Test func embeddingRefusesInputOptionsByName() {
        do {
            _ = try EmbeddedConfiguration.parse(arguments: ["--size", "320x240", "--fps", "30", "--primary", "a.mp4"])
            Issue.record("accepted --primary")
        } catch {
            #expect(error.code == .invalidArgument && error.message.contains("not an embedding option"), "\(error)")
        }
    }
}
