import DiptychCore
import Foundation

/// Any JSON document, so the views can carry a take's configuration and
/// layout in the configuration's own JSON form (`TakeConfiguration.jsonData`),
/// the same one `POST` accepts.
enum AnyJSON: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([AnyJSON])
    case object([String: AnyJSON])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([AnyJSON].self) { self = .array(a) }
        else { self = .object(try c.decode([String: AnyJSON].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    init(data: Data) { self = (try? JSONDecoder().decode(AnyJSON.self, from: data)) ?? .null }

    subscript(key: String) -> AnyJSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    var data: Data { (try? JSONEncoder().encode(self)) ?? Data("null".utf8) }
}

/// A layout in the configuration's JSON form, and back.
enum LayoutJSON {
    static func value(_ layout: Layout) -> AnyJSON {
        var c = TakeConfiguration()
        c.layout = layout
        return AnyJSON(data: c.jsonData())["layout"] ?? .null
    }

    /// Decodes a layout object (errors name the key, e.g. `layout.pip.corner: …`).
    static func layout(_ value: AnyJSON) throws(ConfigurationError) -> Layout {
        try TakeConfiguration(jsonData: AnyJSON.object(["layout": value]).data, source: "layout").layout
    }
}
