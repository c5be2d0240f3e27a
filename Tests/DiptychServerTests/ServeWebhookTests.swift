import DiptychCore
import Foundation
import Glibc
import Testing
@testable import DiptychServer

/// `--webhook`: the events of real takes POSTed by the real server through
/// libcurl to HTTP receivers on loopback (Python's http.server), which
/// check the HMAC-SHA256 signature with Python's own `hmac`; a receiver
/// that answers 500 first gets the event again.
@Suite(.serialized) struct ServeWebhookTests {
    /// An HTTP receiver on loopback: Python's ThreadingHTTPServer, answering
    /// the first `failFirst` POSTs with 500 and the rest with 200, printing
    /// one JSON line a request (its headers, body and whether the signature
    /// is the HMAC-SHA256 of the body with `secret`).
    final class Receiver {
        static let script = """
            import hashlib, hmac, http.server, json, sys, threading
            secret, fail_first = sys.argv[1].encode(), int(sys.argv[2])
            lock, count = threading.Lock(), [0]
            class Hook(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_POST(self):
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    with lock:
                        count[0] += 1
                        n = count[0]
                    status = 500 if n <= fail_first else 200
                    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
                    record = {"n": n, "status": status, "path": self.path,
                              "signed": hmac.compare_digest(expected, self.headers.get("X-Diptych-Signature", "")),
                              "event": self.headers.get("X-Diptych-Event"), "eventId": self.headers.get("X-Diptych-Event-Id"),
                              "delivery": self.headers.get("X-Diptych-Delivery"),
                              "contentType": self.headers.get("Content-Type"), "body": json.loads(body)}
                    print(json.dumps(record), flush=True)
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                def log_message(self, *args):
                    pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
            print(json.dumps({"port": server.server_address[1]}), flush=True)
            server.serve_forever()
            """
        let process = Process()
        let out: Drain
        let port: Int

        init(secret: String, failFirst: Int = 0) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", Self.script, secret, String(failFirst)]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardInput = FileHandle.nullDevice
            try process.run()
            out = Drain(pipe.fileHandleForReading)
            let deadline = Date(timeIntervalSinceNow: 20)
            var found: Int?
            while found == nil && Date() < deadline && process.isRunning {
                found = Self.lines(out.text).first?["port"] as? Int
                if found == nil { Thread.sleep(forTimeInterval: 0.02) }
            }
            port = try #require(found, "the receiver did not start")
        }
        // SIGKILL: the test process's children start with SIGTERM blocked.
        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) }; process.waitUntilExit() }

        static func lines(_ text: String) -> [[String: Any]] {
            text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }

        /// The requests received so far.
        var requests: [[String: Any]] { Self.lines(out.text).filter { $0["n"] != nil } }

        /// Waits until `condition` holds for the requests received (or `timeout`).
        @discardableResult
        func wait(timeout: Double = 30, _ condition: ([[String: Any]]) -> Bool) -> [[String: Any]] {
            let deadline = Date(timeIntervalSinceNow: timeout)
            while !condition(requests) && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            return requests
        }
    }

    static var hasPython: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") }

    static func types(_ requests: [[String: Any]]) -> [String] { requests.compactMap { $0["event"] as? String } }

    @Test(.enabled(if: hasPython, "the receivers are Python's http.server (scripts/setup installs python3)"))
    func eventsOfATakeArriveSignedAndAFailedOneIsRetried() throws {
        let dir = Scratch(); defer { dir.remove() }
        let secret = UUID().uuidString
        try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: dir.path("hook-secret")))
        let steady = try Receiver(secret: secret)
        let flaky = try Receiver(secret: secret, failFirst: 1)
        let server = try ServeProcess(["--webhook", "http://127.0.0.1:\(steady.port)/hook",
                                       "--webhook", "http://127.0.0.1:\(flaky.port)/flaky?token=kept-out-of-the-log",
                                       "--webhook-secret-file", "hook-secret"], in: dir.path)
        let created = try server.request("POST", "/v1/takes", json([
            "primary": "testsrc:counter:320x180@30", "out": "w.mp4", "duration": 4, "realtime": "on", "preset": "ultrafast"]))
        let id = try #require(created.json["id"] as? String, "\(created.text)")
        _ = try server.waitForTake(id) { frames($0) > 3 }
        #expect(try server.request("PATCH", "/v1/takes/\(id)", json(["layout": ["kind": "side-by-side"]])).status == 200)
        try server.waitForTake(id) { state($0) == "finished" }

        let expected = ["created", "started", "layout-changed", "finished"]
        let got = steady.wait { Self.types($0).count >= 4 }
        #expect(Self.types(got) == expected, "\(got)")
        #expect(got.allSatisfy { $0["signed"] as? Bool == true && $0["status"] as? Int == 200 && $0["path"] as? String == "/hook" })
        #expect(got.allSatisfy { $0["contentType"] as? String == "application/json" })
        let bodies = got.compactMap { $0["body"] as? [String: Any] }
        #expect(bodies.allSatisfy { $0["take"] as? String == id && $0["time"] is String })
        #expect(bodies.map { $0["event"] as? String ?? "" } == expected)
        let ids = bodies.compactMap { $0["id"] as? Int }
        #expect(ids.count == 4 && zip(ids, ids.dropFirst()).allSatisfy { $0 + 1 == $1 }, "\(ids)")
        #expect(got.map { $0["eventId"] as? String } == ids.map { String($0) })
        #expect(bodies.last?["frames"] as? String == "120", "\(bodies.last ?? [:])")
        #expect(bodies.first { $0["event"] as? String == "layout-changed" }?["kind"] as? String == "side-by-side")

        // The flaky receiver answered 500 to the first POST; the same delivery came again and every event arrived.
        let retried = flaky.wait { Self.types($0).filter { $0 == "finished" }.count >= 1 }
        #expect(retried.count == 5, "\(retried)")
        #expect(retried.allSatisfy { $0["signed"] as? Bool == true && $0["path"] as? String == "/flaky?token=kept-out-of-the-log" })
        if retried.count == 5 {
            #expect(retried[0]["status"] as? Int == 500 && retried[1]["status"] as? Int == 200)
            #expect(retried[0]["delivery"] as? String == retried[1]["delivery"] as? String && retried[0]["delivery"] is String)
            #expect(Self.types(retried) == ["created"] + expected)
        }

        // The last delivery is counted once its answer is back.
        var metrics = try server.request("GET", "/metrics").text
        let deadline = Date(timeIntervalSinceNow: 10)
        while !metrics.contains("diptych_webhook_events_total{outcome=\"delivered\"} 8") && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            metrics = try server.request("GET", "/metrics").text
        }
        #expect(metrics.contains("diptych_webhook_events_total{outcome=\"delivered\"} 8"), "\(metrics)")
        #expect(metrics.contains("diptych_webhook_events_total{outcome=\"failed\"} 0"))
        #expect(metrics.contains("diptych_webhook_events_total{outcome=\"dropped\"} 0"))
        #expect(metrics.contains("diptych_webhook_retries_total 1"))

        server.signal(SIGTERM)
        #expect(server.waitForExit() == 0)
        // Neither the key nor the URL's query reaches the log.
        #expect(!server.stderr.text.contains(secret) && !server.stderr.text.contains("kept-out-of-the-log"), "\(server.stderr.text)")
        #expect(server.stderr.text.contains("webhooks: http://127.0.0.1:\(steady.port)/hook, http://127.0.0.1:\(flaky.port)/flaky"))
    }

    /// Bad webhook options: one line naming the option, exit 2, before anything starts.
    @Test func badWebhookOptionsExitTwo() throws {
        let dir = Scratch(); defer { dir.remove() }
        let secret = "0123456789abcdef-not-to-be-logged"
        try Data(secret.utf8).write(to: URL(fileURLWithPath: dir.path("ok")))
        try Data("short".utf8).write(to: URL(fileURLWithPath: dir.path("short")))
        let cases: [([String], String)] = [
            (["--webhook", "ftp://127.0.0.1/x", "--webhook-secret-file", "ok"], "--webhook 'ftp://127.0.0.1/x': must be an http:// or https:// URL"),
            (["--webhook", "127.0.0.1:9/x", "--webhook-secret-file", "ok"], "--webhook"),
            (["--webhook", "http:///x", "--webhook-secret-file", "ok"], "--webhook 'http:///x'"),
            (["--webhook", "http://127.0.0.1:9/x"], "--webhook: needs --webhook-secret-file"),
            (["--webhook-secret-file", "ok"], "--webhook-secret-file: given without --webhook"),
            (["--webhook", "http://127.0.0.1:9/x", "--webhook-secret-file", "short"], "--webhook-secret-file 'short': the secret must be at least 16 bytes"),
            (["--webhook", "http://127.0.0.1:9/x", "--webhook-secret-file", "missing"], "--webhook-secret-file 'missing': cannot read the file"),
        ]
        for (args, message) in cases {
            let server = try ServeProcess(args, in: dir.path, waitForListening: false)
            #expect(server.waitForExit() == 2, "\(args)")
            let lines = server.stderr.text.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(message), "\(args): \(server.stderr.text)")
            #expect(!server.stderr.text.contains(secret))
        }
    }

    /// RFC 4231's second test case through libcrypto's HMAC().
    @Test func signatureIsHMACSHA256() throws {
        let signer = try WebhookSigner(key: Array("Jefe".utf8))
        #expect(signer.signature(Data("what do ya want for nothing?".utf8))
            == "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    /// A receiver that never answers (a socket that listens and never
    /// accepts): the queue stays bounded, dropping the oldest, and stopping
    /// aborts the POST in flight instead of waiting out its timeout.
    @Test func fullQueueDropsTheOldestAndStopDoesNotWait() throws {
        let (fd, port) = loopbackSocket()
        defer { close(fd) }
        try #require(port != 0)
        try #require(listen(fd, 16) == 0)

        var policy = Webhooks.RetryPolicy()
        policy.timeout = 30
        let hooks = try Webhooks(urls: ["http://127.0.0.1:\(port)/silent"], signer: WebhookSigner(key: Array("k".utf8)),
                                 policy: policy, queueCapacity: 3, drainTime: 0.5) { _, _ in }
        func post(_ i: Int) { hooks.post(EventLog.Event(id: i, type: "created", take: "t", time: 0, fields: [:])) }
        post(1)
        let deadline = Date(timeIntervalSinceNow: 10)
        while hooks.counts.queued > 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        for i in 2...10 { post(i) }
        let before = hooks.counts
        // One in flight, three queued, six dropped.
        #expect(before.queued == 3 && before.dropped == 6 && before.delivered == 0, "\(before)")
        let started = Date()
        hooks.stop()
        #expect(Date().timeIntervalSince(started) < 5, "stop waited for the silent receiver")
        let after = hooks.counts
        #expect(after.delivered == 0 && after.failed == 1 && after.dropped == 9 && after.queued == 0, "\(after)")
    }
}
