import Foundation

/// The server's log on standard error, one message a line: text
/// (`diptych serve: take ID: message`) or, with `--log-format json`, one
/// JSON object a line: `time` (UTC, milliseconds), `level` (`info`,
/// `error`), `message`, and where they apply `take` (the take's id) and
/// `event` (`listening`, `calibration-failed`, `draining`, `stopped`, `start-failed`).
public struct ServerLog: Sendable {
    public enum Format: String, Sendable, CaseIterable { case text, json }
    public enum Level: String, Sendable, CaseIterable, Comparable {
        case debug, info, warning, error
        private var rank: Int { Self.allCases.firstIndex(of: self)! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    public let format: Format
    /// The least level written.
    public let minimum: Level
    private let write: @Sendable (String) -> Void

    public init(format: Format, minimum: Level = .info,
                write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }) {
        self.format = format; self.minimum = minimum; self.write = write
    }

    /// One message (none below `minimum`).
    public func callAsFunction(_ message: String, level: Level = .info, take: String? = nil, event: String? = nil) {
        guard level >= minimum else { return }
        write(line(message, level: level, take: take, event: event, at: Date()))
    }

    /// The line of one message (`at`: its time).
    public func line(_ message: String, level: Level = .info, take: String? = nil, event: String? = nil, at time: Date) -> String {
        switch format {
        case .text:
            return "diptych serve: " + (take.map { "take \($0): " } ?? "") + message
        case .json:
            var object: [String: String] = ["time": Self.timestamp(time), "level": level.rawValue, "message": message]
            if let take { object["take"] = take }
            if let event { object["event"] = event }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// RFC 3339 in UTC with milliseconds (`2026-12-04T05:01:02.345Z`).
    static func timestamp(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(999, ms))
    }
}
