import DiptychCore
import DiptychOptions
import Foundation

/// Any JSON document (the option table's `JSONValue`), so the views carry a
/// take's configuration and layout in the configuration's own JSON form,
/// the same one `POST` accepts.
typealias AnyJSON = JSONValue

extension JSONValue {
    /// The document in `data`, or null when it is not JSON.
    init(data: Data) { self = (try? JSONDecoder().decode(JSONValue.self, from: data)) ?? .null }
    var data: Data { data() }
}

/// A layout in the configuration's JSON form, and back.
enum LayoutJSON {
    static func value(_ layout: Layout) -> AnyJSON { OptionParser.encodeLayout(layout) }

    /// Decodes a layout object (errors name the key, e.g. `layout.pip.corner: …`).
    static func layout(_ value: AnyJSON) throws(ConfigurationError) -> Layout {
        try OptionParser.decodeLayout(value, field: "layout")
    }
}
