import Diptych
import DiptychCore
import Foundation

/// `--webhook URL`: every event of `GET /v1/events` is also POSTed, as one
/// JSON object, to each receiver, signed with HMAC-SHA256 over the body
/// (`X-Diptych-Signature: sha256=HEX`, the key from `--webhook-secret-file`).
/// Each receiver has its own queue, thread and libcurl handle, so a slow or
/// dead receiver holds up neither a take, the HTTP front, nor the other
/// receivers: posting only appends to the queues. A failed attempt (no
/// answer, 408, 429, 5xx) is tried again after 1, 2, 4, 8 s (five attempts
/// in all); another status fails at once. A queue holds at most
/// `queueCapacity` events; when full, the oldest is dropped and counted.
/// On shutdown the queues get `drainTime` to empty, then what is in flight
/// is aborted and what is left is dropped.
final class Webhooks: Sendable {
    struct Counts: Sendable, Equatable {
        /// Events a receiver answered 2xx.
        var delivered = 0
        /// Events given up on (every attempt failed, or a status not worth retrying).
        var failed = 0
        /// Events dropped from a full queue, or left when the server stopped.
        var dropped = 0
        /// Attempts made again after a failure.
        var retries = 0
        /// Events waiting now.
        var queued = 0

        static func + (a: Counts, b: Counts) -> Counts {
            Counts(delivered: a.delivered + b.delivered, failed: a.failed + b.failed, dropped: a.dropped + b.dropped,
                   retries: a.retries + b.retries, queued: a.queued + b.queued)
        }
    }

    /// When attempts are made.
    struct RetryPolicy: Sendable {
        var attempts = 5
        var firstDelay: TimeInterval = 1
        var maxDelay: TimeInterval = 30
        /// Seconds one attempt may take, connecting included.
        var timeout: TimeInterval = 10
        var connectTimeout: TimeInterval = 5

        /// The wait before attempt `n + 1` (after `n` failed ones): doubling from `firstDelay`.
        func delay(after n: Int) -> TimeInterval { min(maxDelay, firstDelay * pow(2, Double(n - 1))) }
    }

    private let receivers: [WebhookReceiver]
    private let drainTime: TimeInterval

    init(urls: [String], signer: WebhookSigner, policy: RetryPolicy = RetryPolicy(), queueCapacity: Int = 1000,
         drainTime: TimeInterval = 5, log: @escaping @Sendable (String, ServerLog.Level) -> Void) throws(WebhookError) {
        receivers = try urls.map { (u) throws(WebhookError) in
            try WebhookReceiver(url: u, signer: signer, policy: policy, capacity: queueCapacity, log: log)
        }
        self.drainTime = drainTime
    }

    /// Queues `event` for every receiver (returns at once).
    func post(_ event: EventLog.Event) {
        let body = event.webhookBody
        for r in receivers { r.enqueue(event, body: body) }
    }

    var counts: Counts { receivers.reduce(Counts()) { $0 + $1.counts } }

    /// Lets the queues empty for up to `drainTime`, then aborts what is in
    /// flight and drops what is left; returns when every thread has ended.
    func stop() {
        let deadline = Date(timeIntervalSinceNow: drainTime)
        for r in receivers { r.close() }
        for r in receivers { r.finish(by: deadline) }
    }

    /// What a receiver is called in the log and in errors: no user, password,
    /// query or fragment (they may carry credentials).
    static func describe(_ url: String) -> String {
        guard var c = URLComponents(string: url) else { return String(url.prefix { $0 != "?" && $0 != "@" && $0 != "#" }) }
        c.user = nil; c.password = nil; c.query = nil; c.fragment = nil
        return c.string ?? "(webhook)"
    }

    /// Checks one `--webhook` value: an absolute http or https URL with a host.
    static func check(_ url: String) throws(ServerError) {
        func bad(_ why: String) -> ServerError { .badUsage("--webhook '\(describe(url))': \(why)") }
        guard !url.contains(where: { $0.isWhitespace || $0.isNewline }), let c = URLComponents(string: url), let scheme = c.scheme?.lowercased() else {
            throw bad("not a URL")
        }
        guard scheme == "http" || scheme == "https" else { throw bad("must be an http:// or https:// URL") }
        guard let host = c.host, !host.isEmpty else { throw bad("has no host") }
        guard c.fragment == nil else { throw bad("a fragment (#…) is never sent; leave it out") }
    }
}

extension EventLog.Event {
    /// The body a webhook receives: the event's fields as in `GET /v1/events`'
    /// `data:`, with `id` (the event's number) and `event` (its type).
    var webhookBody: Data {
        var object: [String: Any] = fields
        object["take"] = take
        object["time"] = ServerLog.timestamp(Date(timeIntervalSince1970: time))
        object["id"] = id
        object["event"] = type
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    }
}

/// One `--webhook` receiver: its queue, its delivery thread and its libcurl handle.
final class WebhookReceiver: Sendable {
    private struct Delivery { var event: EventLog.Event; var body: Data; var id: UUID }
    private struct State {
        var queue: [Delivery] = []
        var head = 0
        var closed = false
        var dropping = false
        var tally = Webhooks.Counts()
        /// The delivery thread has ended.
        var ended = false
    }

    private let url: String
    private let name: String
    private let signer: WebhookSigner
    private let policy: Webhooks.RetryPolicy
    private let capacity: Int
    private let log: @Sendable (String, ServerLog.Level) -> Void
    private let easy: CurlEasy
    /// Backoff sleeps wait on it; `finish` ends them at its deadline.
    private let stopping = StopSignal()
    private let state = Condition(State())

    init(url: String, signer: WebhookSigner, policy: Webhooks.RetryPolicy, capacity: Int,
         log: @escaping @Sendable (String, ServerLog.Level) -> Void) throws(WebhookError) {
        self.url = url; self.signer = signer; self.policy = policy; self.capacity = max(1, capacity); self.log = log
        name = Webhooks.describe(url)
        easy = try CurlEasy(timeout: policy.timeout, connectTimeout: policy.connectTimeout)
        JoinableThread.detached(name: "diptych.webhook", stackSize: nil) { [self] in run() }
    }

    var counts: Webhooks.Counts {
        state.withLock { var c = $0.tally; c.queued = $0.queue.count - $0.head; return c }
    }

    func enqueue(_ event: EventLog.Event, body: Data) {
        let (capacity, name, log) = (self.capacity, self.name, self.log)
        state.update { s in
            guard !s.closed else { return }
            if s.queue.count - s.head >= capacity {
                s.head += 1
                s.tally.dropped += 1
                if !s.dropping { log("webhook \(name): queue full (\(capacity) events); dropping the oldest until it catches up", .warning) }
                s.dropping = true
            }
            s.queue.append(Delivery(event: event, body: body, id: UUID()))
            if s.head > 256 && s.head * 2 > s.queue.count { s.queue.removeFirst(s.head); s.head = 0 }
        }
    }

    func close() { state.update { $0.closed = true } }

    /// Waits for the queue to empty until `deadline`, then aborts and drops the rest.
    func finish(by deadline: Date) {
        if !state.wait(until: { $0.ended }, timeout: deadline.timeIntervalSinceNow) {
            stopping.stop()
            easy.abort()
            state.wait(until: { $0.ended })
        }
    }

    /// The next delivery; nil once closed and empty, or aborted.
    private func next() -> Delivery? {
        let stopping = self.stopping
        return state.wait(until: { $0.head < $0.queue.count || $0.closed }) { s, _ in
            guard s.head < s.queue.count, !stopping.isStopped else { return nil }
            let d = s.queue[s.head]
            s.head += 1
            return d
        }
    }

    private func run() {
        while let d = next() { deliver(d) }
        let (name, log) = (self.name, self.log)
        state.update { s in
            let left = s.queue.count - s.head
            if left > 0 { log("webhook \(name): \(left) events not delivered (the server stopped)", .warning) }
            s.tally.dropped += left
            s.queue.removeAll(); s.head = 0
            s.ended = true
        }
    }

    private func deliver(_ d: Delivery) {
        let headers = ["Content-Type: application/json",
                       "User-Agent: diptych/\(DiptychVersion.string)",
                       "X-Diptych-Event: \(d.event.type)",
                       "X-Diptych-Event-Id: \(d.event.id)",
                       "X-Diptych-Delivery: \(d.id.uuidString.lowercased())",
                       "X-Diptych-Signature: \(signer.signature(d.body))"]
        var attempt = 1
        while true {
            let error: WebhookError
            do throws(WebhookError) {
                let status = try easy.post(url, headers: headers, body: d.body)
                if (200..<300).contains(status) {
                    state.withLock { $0.tally.delivered += 1; $0.dropping = false }
                    log("webhook \(name): event \(d.event.id) (\(d.event.type)) delivered, attempt \(attempt)", .debug)
                    return
                }
                error = .status(status)
            } catch let e {
                error = e
            }
            guard error.isTransient, attempt < policy.attempts, stopping.sleep(policy.delay(after: attempt)) else {
                state.withLock { $0.tally.failed += 1 }
                log("webhook \(name): event \(d.event.id) (\(d.event.type)) not delivered after \(attempt) attempt\(attempt == 1 ? "" : "s"): \(error)", .error)
                return
            }
            log("webhook \(name): event \(d.event.id) (\(d.event.type)), attempt \(attempt): \(error); trying again", .debug)
            state.withLock { $0.tally.retries += 1 }
            attempt += 1
        }
    }
}
