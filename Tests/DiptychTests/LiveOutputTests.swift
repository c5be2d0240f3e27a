import Foundation
import Testing
@testable import Diptych
import DiptychCore
import DiptychMedia

/// Live outputs with real receivers on loopback: pacing, reconnects, a
/// receiver that never returns, an interrupted primary, thermal pressure.
@Suite(.serialized) struct LiveOutputTests {
    init() { _ = quietMedia }

    static func clip(_ dir: Scratch, seconds: Int) throws -> String {
        let path = dir.path("clip\(seconds).mp4")
        let r = try run("/usr/bin/ffmpeg", ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
                                             "-t", "\(seconds)", "-pix_fmt", "yuv420p", path])
        try #require(r.status == 0)
        return path
    }

    static func frameCount(_ path: String) throws -> Int { try decodeAll(path).frames.count }

    /// A 10 s file streamed over SRT leaves at the file's rate: every frame
    /// arrives, spread over 10 s, not in the 2 s it takes to encode.
    @Test(.timeLimit(.minutes(2))) func srtIsPacedAtRealTime() throws {
        let dir = Scratch(); defer { dir.remove() }
        let clip = try Self.clip(dir, seconds: 10)
        let url = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: url, path: dir.path("got.ts"))
        let sender = url + "?latency=1000000"   // SRT options pass through from the URL (FFmpeg counts microseconds)
        let r = try runCLI(["record", "--primary", clip, "--secondary", "none", "--out", sender, "--json", "--preset", "ultrafast"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(receiver.waitForEnd(timeout: 20))
        #expect(try Self.frameCount(receiver.path) == 300)
        #expect(abs(receiver.arrivalSpan - 10) <= 0.3, "frames arrived over \(receiver.arrivalSpan) s")
        #expect(r.stderr.contains("pacing at the primary's real-time rate"))
    }

    /// A UDP secondary whose sender restarts (its timestamps from zero again,
    /// as a restarted encoder's are) goes on being shown: the new timeline is
    /// rebased at the take's time, not dropped as old.
    @Test(.timeLimit(.minutes(2))) func aUDPSecondaryThatRestartsGoesOn() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let url = "udp://127.0.0.1:\(port)"
        @Sendable func sender() throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            p.arguments = ["-v", "error", "-re", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=30", "-t", "3", "-c:v", "libx264",
                           "-preset", "ultrafast", "-tune", "zerolatency", "-g", "15", "-pix_fmt", "yuv420p", "-f", "mpegts", url]
            p.standardInput = FileHandle.nullDevice
            try p.run()
            return p
        }
        let senders = DispatchGroup()
        senders.enter()
        DispatchQueue.global().async {
            defer { senders.leave() }
            // Sent once the take has bound the port: what comes before is lost.
            _ = LiveReceiver.waitBound(port: port, udp: true, timeout: 30)
            for _ in 0..<2 { (try? sender())?.waitUntilExit() }
        }
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", url, "--realtime", "on",
                            "--duration", "7", "--secondary-timeout", "4", "--out", dir.path("o.mp4"), "--json", "--preset", "ultrafast"])
        _ = senders.wait(timeout: .now() + 20)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("secondary timestamps jumped"), "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        // 180 frames sent, the first few before the take opened the stream.
        #expect(summary.secondaryFramesShown >= 140, "\(summary.secondaryFramesShown) of 180 secondary frames shown")
    }

    /// SIGINT while a live output is reconnecting to a receiver that accepts
    /// and never answers ends the take at once (the attempt in progress is
    /// stopped), with the outage and the frames it lost in the summary.
    @Test(.timeLimit(.minutes(2))) func sigintDuringAReconnectEndsAtOnce() throws {
        let dir = Scratch(); defer { dir.remove() }
        let port = LiveReceiver.freePort()
        let url = "rtmp://127.0.0.1:\(port)/live/take"
        let receiver = try LiveReceiver(url: url, path: dir.path("got.ts"))
        final class Box: @unchecked Sendable { var silent: Int32 = -1; var signalled: Date? }
        let box = Box()
        defer { if box.silent >= 0 { close(box.silent) } }
        // Timed kills run on threads of their own: a dispatch queue's work can wait behind a loaded suite's.
        Thread {
            Thread.sleep(forTimeInterval: 3)
            receiver.kill()
            box.silent = LiveReceiver.silentListener(port: port)
        }.start()
        // The first attempt comes a second after the loss and waits up to 10 s for an answer: SIGINT lands in
        // it, 6 s after the receiver went (so a loss a loaded machine notices up to 5 s late is still in time).
        let started = Date()
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "none", "--out", url,
                            "--duration", "60", "--json", "--preset", "ultrafast"], signal: SIGINT, after: 9, timeout: 60)
        let took = Date().timeIntervalSince(started) - 9
        #expect(took < 3, "the take ended \(took) s after SIGINT")
        #expect(r.stderr.contains("reconnecting for up to"), "\(r.stderr)")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.outages.count == 1 && summary.outages[0].recovered == false, "\(summary.outages)")
        #expect((summary.lostFrames ?? 0) > 0, "\(summary)")
    }

    /// An RTMP receiver killed at 3 s and started again at 6 s gets frames
    /// again; the file beside the stream has every frame.
    @Test(.timeLimit(.minutes(2))) func rtmpReconnectsAndTheFileHasEveryFrame() throws {
        let dir = Scratch(); defer { dir.remove() }
        let clip = try Self.clip(dir, seconds: 14)
        let port = LiveReceiver.freePort()
        let url = "rtmp://127.0.0.1:\(port)/live/take"
        let first = try LiveReceiver(url: url, path: dir.path("first.ts"))
        final class Box: @unchecked Sendable { var second: LiveReceiver? }
        let box = Box()
        // The second receiver's start is waited for (on a loaded machine ffmpeg may take seconds to listen).
        let restarted = DispatchGroup()
        restarted.enter()
        Thread {
            Thread.sleep(forTimeInterval: 3)
            first.kill()
            Thread.sleep(forTimeInterval: 3)
            box.second = try? LiveReceiver(url: url, path: dir.path("second.ts"))
            restarted.leave()
        }.start()
        let r = try runCLI(["record", "--primary", clip, "--secondary", "none", "--out", url, "--also-out", dir.path("file.mp4"),
                            "--json", "--preset", "ultrafast"])
        #expect(r.status == 0, "\(r.stderr)")
        _ = restarted.wait(timeout: .now() + 20)
        let second = try #require(box.second)
        #expect(second.waitForEnd(timeout: 20))
        #expect(try Self.frameCount(dir.path("file.mp4")) == 420)
        #expect(try Self.frameCount(second.path) > 60, "the restarted receiver got frames again")
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.outages.contains { $0.recovered }, "\(summary.outages)")
        #expect(r.stderr.contains("reconnected after"))
        // The summary counts what was sent and what the outage lost: together every frame. Of the
        // frames sent, those the second receiver did not get are the ones before the loss (the
        // killed first receiver's file is not complete enough to count).
        let lost = try #require(summary.lostFrames)
        #expect(lost > 30 && summary.frames + lost == 420, "sent \(summary.frames), lost \(lost)")
        let outage = try #require(summary.outages.first { $0.recovered })
        let beforeLoss = summary.frames - (try Self.frameCount(second.path))
        #expect(abs(Double(beforeLoss) - outage.at * 30) <= 15, "sent \(summary.frames), \(beforeLoss) before the loss at \(outage.at) s")
    }

    /// A receiver that never comes back: the stream is closed after the
    /// reconnect window, the file completes, and the exit status says so.
    @Test(.timeLimit(.minutes(2))) func receiverThatNeverReturnsIsClosedAfterTheWindow() throws {
        let dir = Scratch(); defer { dir.remove() }
        let clip = try Self.clip(dir, seconds: 8)
        let url = "rtmp://127.0.0.1:\(LiveReceiver.freePort())/live/gone"
        let receiver = try LiveReceiver(url: url, path: dir.path("gone.ts"))
        // On a thread of its own: a dispatch queue's work can wait behind a loaded suite's until the take is over.
        Thread { Thread.sleep(forTimeInterval: 2); receiver.kill() }.start()
        let r = try runCLI(["record", "--primary", clip, "--secondary", "none", "--out", url, "--also-out", dir.path("file.mp4"),
                            "--reconnect-window", "2", "--preset", "ultrafast"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("output \(url) failed") && r.stderr.contains("gave up reconnecting"), "\(r.stderr)")
        #expect(try Self.frameCount(dir.path("file.mp4")) == 240)
    }

    /// A Y4M pipe that stops writing for 2 s: the live stream keeps its
    /// cadence with held frames, the file pauses with continuous timestamps.
    @Test(.timeLimit(.minutes(2))) func pausedPrimaryKeepsTheLiveCadence() throws {
        let dir = Scratch(); defer { dir.remove() }
        let y4m = dir.path("in.y4m")
        try #require(try run("/usr/bin/ffmpeg", ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
                                                  "-frames:v", "120", "-pix_fmt", "yuv420p", y4m]).status == 0)
        let data = try Data(contentsOf: URL(fileURLWithPath: y4m))
        let header = data.prefix { $0 != 0x0A }.count + 1
        let frameBytes = 6 + 320 * 240 * 3 / 2
        let pipe = Pipe()
        DispatchQueue.global().async {
            let h = pipe.fileHandleForWriting
            h.write(data.prefix(header))
            // Frame i at its time from the first (which waits for the take to read), 2 s later from frame 60:
            // a sleep a frame would fall behind on a loaded machine, and the live stream would hold frames for it.
            var start = Date()
            for i in 0..<120 {
                let due = start.addingTimeInterval(Double(i) / 30 + (i >= 60 ? 2 : 0))
                if due > Date() { Thread.sleep(until: due) }
                h.write(data.subdata(in: (header + i * frameBytes)..<(header + (i + 1) * frameBytes)))
                if i == 0 { start = Date() }
            }
            try? h.close()
        }
        let url = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: url, path: dir.path("live.ts"))
        let r = try runCLI(["record", "--primary", "-", "--secondary", "none", "--out", url + "?latency=1000000", "--also-out", dir.path("file.mp4"),
                            "--json", "--preset", "ultrafast"], stdin: pipe.fileHandleForReading)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(receiver.waitForEnd(timeout: 20))
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect((50...70).contains(summary.heldFrames), "\(summary.heldFrames) held frames")
        let file = try decodeAll(dir.path("file.mp4")).frames
        #expect(file.count == 120)
        for (i, f) in file.enumerated() { #expect(f.pts == FrameRate(30).time(ofFrame: Int64(i)), "file frame \(i) at \(f.pts)") }
        let live = try decodeAll(receiver.path).frames
        #expect(live.count == 120 + summary.heldFrames, "written \(summary.frames), dropped \(summary.droppedFrames), first \(String(describing: live.first?.pts)), last \(String(describing: live.last?.pts))")
        for (a, b) in zip(live, live.dropFirst()) { #expect(abs((b.pts - a.pts).seconds - 1.0 / 30) < 0.002) }
    }

    /// `--thermal-state serious` on a live take: the secondary is dropped at
    /// the next frame and the stream goes on with the primary alone.
    @Test(.timeLimit(.minutes(3))) func seriousThermalStateGoesPrimaryOnly() throws {
        let dir = Scratch(); defer { dir.remove() }
        let url = "srt://127.0.0.1:\(LiveReceiver.freePort())"
        let receiver = try LiveReceiver(url: url, path: dir.path("hot.ts"))
        let r = try runCLI(["record", "--primary", "testsrc:counter:320x240@30", "--secondary", "testsrc:solid-ff0000:160x120@30",
                            "--out", url + "?latency=1000000", "--duration", "2", "--thermal-state", "serious", "--json", "--preset", "ultrafast"])
        #expect(r.status == 0, "\(r.stderr)")
        receiver.waitForEnd(timeout: 10)
        let summary = try JSONDecoder().decode(TakeSummary.self, from: Data(r.stdout.utf8))
        #expect(summary.frames == 60 && summary.primaryOnlyFrames == 60)
        #expect(summary.warnings.contains { $0.contains("primary stream alone") })
    }
}
