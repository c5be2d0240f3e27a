import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia
import DiptychOptions

/// Sources that listen for a publisher (docs/live.md, "Live sources"): the
/// take waits for an FFmpeg sender pushing to its SRT listener or RTMP
/// listen URL on loopback, treats a publisher that leaves and returns as a
/// reconnect, gives up after --listen-timeout, and the server's policy
/// decides which ports a take may listen on.
@Suite(.serialized) struct ListeningSourceTests {
    init() { _ = quietMedia }

    /// `ffmpeg` pushing `seconds` of a solid `colour` with a tone, at 30 fps in real time, as `format` to `url`.
    static func push(_ colour: String, seconds: Double, format: String, to url: String) -> [String] {
        ["-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "color=c=\(colour):size=320x240:rate=30",
         "-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*440*t):s=48000", "-t", "\(seconds)",
         "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-g", "15", "-pix_fmt", "yuv420p",
         "-c:a", "aac", "-f", format, url]
    }

    /// Runs the steps on another thread: a push to its end, a pause, or a
    /// wait (up to 30 s) until the take listens on a port (UDP for SRT).
    enum Step { case push(String, Double), pause(Double), listening(Int, udp: Bool) }
    static func publisher(_ steps: [Step], format: String, to url: String) -> DispatchGroup {
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            for step in steps {
                switch step {
                case .pause(let s): Thread.sleep(forTimeInterval: s)
                case .listening(let port, let udp): _ = LiveReceiver.waitBound(port: port, udp: udp, timeout: 30)
                case .push(let colour, let s): _ = try? run("/usr/bin/ffmpeg", push(colour, seconds: s, format: format, to: url), timeout: 30)
                }
            }
        }
        return group
    }

    /// The take listens for SRT; FFmpeg connects a second after it starts,
    /// leaves after 3 s and connects again 1.5 s later (another colour): the
    /// take starts with the first publisher, reconnects to the second, and
    /// the file has every frame, first blue, last red, with the audio.
    @Test(.timeLimit(.minutes(2))) func anSRTListenerStartsWithItsPublisherAndTakesItBack() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let group = Self.publisher([.pause(1), .push("blue", 3), .pause(1.5), .push("red", 5)], format: "mpegts",
                                   to: "srt://127.0.0.1:\(port)?mode=caller")
        let r = try runCLI(["record", "--primary", "srt://127.0.0.1:\(port)?mode=listener", "--secondary", "none",
                            "--out", dir.path("take.mp4"), "--duration", "6", "--json", "--preset", "ultrafast"])
        _ = group.wait(timeout: .now() + 30)
        #expect(r.status == 0, "\(r.stderr)")
        let summary = try SourceRecoveryTests.summary(r)
        let reconnect = try #require(summary.sourceSwitches.first, "\(r.stderr)")
        #expect(reconnect.reason == .reconnect && reconnect.role == "primary", "\(reconnect)")
        let file = try decodeAll(dir.path("take.mp4")).frames
        #expect(file.count == 180, "\(file.count) frames")
        SourceRecoveryTests.expectContiguous(file, "file")
        #expect(file.first.map { hue($0.frame, 160, 120) } == .blue)
        #expect(file.last.map { hue($0.frame, 160, 120) } == .red)
        #expect(summary.audio.contains("aac"), "\(summary.audio)")
    }

    /// The take listens for RTMP on the unspecified address; FFmpeg publishes once it listens.
    @Test(.timeLimit(.minutes(2))) func anRTMPListenURLStartsWithItsPublisher() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let group = Self.publisher([.listening(port, udp: false), .push("blue", 5)], format: "flv", to: "rtmp://127.0.0.1:\(port)/live/cam")
        let r = try runCLI(["record", "--primary", "rtmp://0.0.0.0:\(port)/live/cam", "--secondary", "testsrc:smpte:160x120@30",
                            "--out", dir.path("take.mp4"), "--duration", "2", "--json", "--preset", "ultrafast"])
        _ = group.wait(timeout: .now() + 30)
        #expect(r.status == 0, "\(r.stderr)")
        let file = try decodeAll(dir.path("take.mp4")).frames
        #expect(file.count == 60, "\(file.count) frames")
        #expect(file.first.map { hue($0.frame, 8, 8) } == .blue)
        let summary = try SourceRecoveryTests.summary(r)
        #expect(summary.audio.contains("aac"), "\(summary.audio)")
    }

    /// Nobody publishes: the take gives up after --listen-timeout, naming the source.
    @Test(.timeLimit(.minutes(3))) func aListenerWithoutPublisherGivesUpAfterItsTimeout() throws {
        let dir = Scratch(); defer { dir.remove() }
        let url = "srt://127.0.0.1:\(LiveReceiver.freePort())?mode=listener"
        let started = Date()
        let r = try runCLI(["record", "--primary", url, "--secondary", "none", "--listen-timeout", "1.5",
                            "--out", dir.path("take.mp4"), "--preset", "ultrafast"])
        let took = Date().timeIntervalSince(started)
        #expect(r.status != 0 && r.stderr.contains(url), "\(r.status): \(r.stderr)")
        #expect(took < 10, "gave up after \(took) s")
        #expect(!FileManager.default.fileExists(atPath: dir.path("take.mp4")))
    }

    /// Which URLs listen, and the server's policy: none without
    /// --allow-source-listen, only its ports with it; the command line any.
    @Test func listeningPolicy() throws {
        #expect(SourcePolicy.listening("srt://:9000?mode=listener")?.port == 9000)
        #expect(SourcePolicy.listening("srt://0.0.0.0:9000?latency=200000&mode=listener")?.scheme == "srt")
        #expect(SourcePolicy.listening("srt://cam:9000") == nil)
        #expect(SourcePolicy.listening("rtmp://0.0.0.0:1935/live/key")?.port == 1935)
        #expect(SourcePolicy.listening("rtmp://[::]:1935/live/key")?.port == 1935)
        #expect(SourcePolicy.listening("rtmp://cam.example/live/key") == nil)
        #expect(SourcePolicy.listening("tcp://0.0.0.0:7000?listen=1")?.port == 7000)
        #expect(SourcePolicy.listening("tcp://0.0.0.0:7000?listen=0") == nil)
        let server = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: true)
        guard case .failure(let none) = server.classify("srt://:9000?mode=listener") else { Issue.record("listening allowed"); return }
        #expect(none.reason.contains("--allow-source-listen"), "\(none)")
        let ports = SourcePolicy.server(inputRoot: nil, allowedNetworks: [], listensBeyondLoopback: true,
                                        listenPorts: try #require(SourcePolicy.parsePorts("1935,9000-9010")))
        #expect(try ports.classify("srt://0.0.0.0:9005?mode=listener").get() == .network(scheme: "srt", host: nil))
        #expect(try ports.classify("rtmp://0.0.0.0:1935/live/k").get() == .network(scheme: "rtmp", host: nil))
        guard case .failure(let other) = ports.classify("srt://:9011?mode=listener") else { Issue.record("port 9011 allowed"); return }
        #expect(other.reason.contains("port 9011") && other.reason.contains("1935,9000-9010"), "\(other)")
        #expect((try? ports.classify("rtmp://0.0.0.0/live/k").get()) == nil, "no port")
        #expect((try? SourcePolicy.commandLine.classify("srt://:9011?mode=listener").get()) != nil)
        #expect(SourcePolicy.parsePorts("80-70") == nil && SourcePolicy.parsePorts("0") == nil && SourcePolicy.parsePorts("x") == nil)
    }

    /// --listen-timeout in every form, and its refusals.
    @Test func listenTimeoutOption() throws {
        let c = try TakeConfiguration.parse(arguments: ["--primary", "srt://:9000?mode=listener", "--listen-timeout", "45", "--out", "o.mp4"])
        #expect(c.listenTimeout == 45 && c.openTimeout(.primary, c.primary) == 45 && c.openTimeout(.primary, .url("srt://h:1")) == 10)
        let json = try OptionParser.decode(Data(#"{"primary": "rtmp://0.0.0.0:1935/a/b", "listenTimeout": 5, "out": "o.mp4"}"#.utf8), source: "t.json")
        #expect(json.listenTimeout == 5)
        var bad = c
        bad.listenTimeout = 0
        #expect(throws: ConfigurationError.self) { try bad.validate() }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--listen-timeout", "-1", "--out", "/tmp/never.mp4"])
        #expect(r.status == 2 && r.stderr.contains("--listen-timeout"), "\(r.stderr)")
    }
}
