import DiptychCore
import Foundation
import Synchronization

/// What happened to the takes, in order (`GET /v1/events`): created,
/// started, layout changed, source switched, output added or removed,
/// finished, failed. Each event has a number one more than the last; the
/// last `capacity` are kept, so a client that reconnects with
/// `Last-Event-ID` is given the ones it missed. Posted from any thread;
/// readers wait on the condition, never poll. `forward` is handed each
/// event as it is posted, in order (the webhooks' queues: it must not block).
final class EventLog: Sendable {
    struct Event: Sendable, Equatable {
        var id: Int
        var type: String
        var take: String
        var time: Double
        var fields: [String: String]

        /// The event as server-sent events frame it (`id:`, `event:`, one `data:` line of JSON).
        var frame: String {
            var object: [String: String] = fields
            object["take"] = take
            object["time"] = ServerLog.timestamp(Date(timeIntervalSince1970: time))
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return "id: \(id)\nevent: \(type)\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
        }
    }

    let capacity: Int
    private struct State {
        var events: [Event] = []
        var nextID = 1
        var closed = false
    }
    private let state = Condition(State())

    private let forward: (@Sendable (Event) -> Void)?

    init(capacity: Int = 10_000, forward: (@Sendable (Event) -> Void)? = nil) {
        self.capacity = capacity; self.forward = forward
    }

    func post(_ type: String, take: String, _ fields: [String: String] = [:]) {
        state.update { s in
            let event = Event(id: s.nextID, type: type, take: take, time: Date().timeIntervalSince1970, fields: fields)
            s.events.append(event)
            s.nextID += 1
            forward?(event)
            if s.events.count > capacity { s.events.removeFirst(s.events.count - capacity) }
        }
    }

    /// The events after `id` still kept; when there are none, waits up to
    /// `timeout` seconds for one. Nil once the log is closed.
    func after(_ id: Int, timeout: Double) -> [Event]? {
        state.wait(until: { $0.closed || ($0.events.last?.id ?? 0) > id }, timeout: timeout) { s, _ in
            s.closed ? nil : Array(s.events.drop { $0.id <= id })
        }
    }

    /// The number of the last event posted (0 before any).
    var lastID: Int { state.withLock { $0.nextID - 1 } }

    /// Ends every stream (the server is stopping).
    func close() { state.update { $0.closed = true } }
}

/// One `GET /v1/events` stream: the events after the one it resumes from,
/// then each as it is posted, and a comment every `heartbeat` seconds
/// while none comes (so no proxy or idle timeout ends a quiet stream).
final class EventStream: HTTPStream, Sendable {
    private let log: EventLog
    private let cursor: Mutex<Int>
    private let heartbeat: Double

    init(log: EventLog, after cursor: Int, heartbeat: Double = 10) {
        self.log = log; self.cursor = Mutex(cursor); self.heartbeat = heartbeat
    }

    func next() -> Data? {
        guard let events = log.after(cursor.withLock { $0 }, timeout: heartbeat) else { return nil }
        guard let last = events.last else { return Data(": keep-alive\n\n".utf8) }
        cursor.withLock { $0 = last.id }
        return Data(events.map(\.frame).joined().utf8)
    }
}
