import Foundation
import DiptychCore

/// A JSON document as a tree, for configuration files and request bodies:
/// the option table walks it key by key, so every unknown key at any depth
/// is reported with its path. Object keys keep no order (sorted on output).
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Largest document accepted (a configuration is a few hundred bytes).
    public static let maximumDocumentBytes = 1 << 20

    /// Parses `data`; errors name `source` (a file, or `request body`).
    public init(parsing data: Data, source: String) throws(ConfigurationError) {
        guard data.count <= JSONValue.maximumDocumentBytes else {
            throw ConfigurationError(field: source, value: "\(data.count) bytes",
                                     reason: "is larger than \(JSONValue.maximumDocumentBytes / 1024) KiB")
        }
        do { self = try JSONDecoder().decode(JSONValue.self, from: data) } catch {
            throw ConfigurationError(field: source, value: "", reason: "not valid JSON")
        }
        // A decoder keeps one of two equal keys silently; which one a reader sees is not to be guessed.
        if let key = JSONValue.duplicateKey(in: data) {
            throw ConfigurationError(field: source, value: key, reason: "the key appears twice in one object")
        }
    }

    /// The first key that appears twice in one object of `data` (valid
    /// JSON), with escapes decoded (`"a"` and `"\u0061"` are the same key).
    static func duplicateKey(in data: Data) -> String? {
        let bytes = [UInt8](data)
        var stack: [Set<String>?] = []   // per open container: keys so far (nil for an array)
        var expectKey = false
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "{"): stack.append([]); expectKey = true
            case UInt8(ascii: "["): stack.append(nil); expectKey = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = stack.popLast(); expectKey = false
            case UInt8(ascii: ","): expectKey = stack.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                var j = i + 1
                while j < bytes.count && bytes[j] != UInt8(ascii: "\"") { j += bytes[j] == UInt8(ascii: "\\") ? 2 : 1 }
                if expectKey, var keys = stack.last ?? nil {
                    let token = Data(bytes[i...min(j, bytes.count - 1)])
                    let key = (try? JSONDecoder().decode(String.self, from: token)) ?? String(decoding: token, as: UTF8.self)
                    if !keys.insert(key).inserted { return key }
                    stack[stack.count - 1] = keys
                    expectKey = false
                }
                i = j
            default: break
            }
            i += 1
        }
        return nil
    }

    /// Compact JSON text with sorted keys (`pretty`: indented).
    public func data(pretty: Bool = false) -> Data {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return (try? e.encode(self)) ?? Data("null".utf8)
    }

    public var text: String { String(decoding: data(), as: UTF8.self) }

    /// What kind of value this is, for error messages ("a string", "an object").
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "true or false"
        case .number: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "an object"
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let d = try? c.decode(Double.self) { self = .number(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        self = .object(try c.decode([String: JSONValue].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let d):
            if d.rounded() == d, abs(d) < 1e15 { try c.encode(Int64(d)) } else { try c.encode(d) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONValue {
    /// Builds an object from a key path and a leaf (`["layout","pip","corner"]`).
    public mutating func set(_ value: JSONValue, at path: ArraySlice<String>) {
        guard let key = path.first else { self = value; return }
        var object: [String: JSONValue]
        if case .object(let o) = self { object = o } else { object = [:] }
        var child = object[key] ?? .null
        child.set(value, at: path.dropFirst())
        object[key] = child
        self = .object(object)
    }
}
