#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reading and writing the small JSON files Diptych keeps (take
/// configurations, saved PiP placements), with errors that name the file.
enum JSONFile {
    /// The file's bytes, or a `ConfigurationError` naming `field` and `path`.
    static func read(path: String, field: String) throws(ConfigurationError) -> Data {
        do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ConfigurationError(field: field, value: path, reason: "cannot read file")
        }
    }
    /// Writes `data` to `path` atomically, or throws a `ConfigurationError` naming `path`.
    static func write(_ data: Data, toPath path: String) throws(ConfigurationError) {
        do { try data.write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw ConfigurationError(field: "output file", value: path, reason: "cannot write file")
        }
    }
    /// A one-line description of a decoding error: the key path and what was wrong.
    static func describe(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        let text: String
        switch error {
        case DecodingError.dataCorrupted(let c):
            text = c.codingPath.isEmpty ? "not valid JSON" : "\(path(c.codingPath)): \(c.debugDescription)"
        case DecodingError.keyNotFound(let k, let c):
            text = "\(path(c.codingPath + [k])): missing"
        case DecodingError.typeMismatch(let t, let c):
            text = "\(path(c.codingPath)): expected \(t)"
        case DecodingError.valueNotFound(let t, let c):
            text = "\(path(c.codingPath)): expected \(t), found null"
        case let e as ConfigurationError:
            text = e.description
        default:
            text = "\(error)"
        }
        return text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}
