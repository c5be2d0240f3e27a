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
            var out = ""
            for k in keys {
                if let i = k.intValue { out += "[\(i)]" } else { out += (out.isEmpty ? "" : ".") + k.stringValue }
            }
            return out
        }
        func at(_ keys: [any CodingKey], _ text: String) -> String {
            keys.isEmpty ? text : "\(path(keys)): \(text)"
        }
        func kind(_ type: Any.Type) -> String {
            let name = String(describing: type)
            if name.hasPrefix("Dictionary") { return "an object" }
            if name.hasPrefix("Array") { return "a list" }
            switch name {
            case "String": return "a string"
            case "Int", "Int32", "Int64", "Double", "Float": return "a number"
            case "Bool": return "true or false"
            default: return name
            }
        }
        let text: String
        switch error {
        case DecodingError.dataCorrupted(let c):
            text = c.codingPath.isEmpty ? "not valid JSON" : at(c.codingPath, c.debugDescription)
        case DecodingError.keyNotFound(let k, let c):
            text = at(c.codingPath + [k], "missing")
        case DecodingError.typeMismatch(let t, let c):
            text = at(c.codingPath, "expected \(kind(t))")
        case DecodingError.valueNotFound(let t, let c):
            text = at(c.codingPath, "expected \(kind(t)), found null")
        case let e as ConfigurationError:
            text = e.description
        default:
            text = "\(error)"
        }
        return text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}
