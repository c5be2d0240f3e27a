import DiptychCore
import DiptychOptions
import Foundation

/// Request bodies of the take routes, checked into values; every refusal
/// is one line naming the JSON field (`size`, `layout.pip.corner`, …).
enum TakeRequests {
    /// The JSON object of a body, or 400.
    static func object(_ body: Data) throws(RequestError) -> [String: Any] {
        guard !body.isEmpty else { throw .badRequest("request body: empty; expected a JSON object") }
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) } catch {
            throw .badRequest("request body: not valid JSON")
        }
        guard let o = parsed as? [String: Any] else { throw .badRequest("request body: expected a JSON object") }
        return o
    }

    /// `POST /v1/takes`: the same JSON as `diptych record --config`.
    /// `GET /v1/takes`'s query: `state` (a take state), `limit` (1 to 1000,
    /// default 1000), `after` (a take's id); any other name is refused.
    struct ListQuery: Equatable {
        var state: TakeState?
        var limit = 1000
        var after: String?
    }

    /// `GET /v1/takes/{id}/snapshot`'s query: `output` (0, the main output,
    /// by default) and `format` (`png`); any other name is refused.
    static func snapshotOutput(_ arguments: [String: String]) throws(RequestError) -> Int {
        var output = 0
        for (name, value) in arguments.sorted(by: { $0.key < $1.key }) {
            switch name {
            case "output":
                guard let n = Int(value), n >= 0 else { throw .badRequest("output '\(value)': expected an output's index (0 for the main output)") }
                output = n
            case "format":
                guard value == "png" else { throw .badRequest("format '\(value)': only png") }
            default:
                throw .badRequest("query '\(name)': unknown (output, format)")
            }
        }
        return output
    }

    static func listQuery(_ arguments: [String: String]) throws(RequestError) -> ListQuery {
        var q = ListQuery()
        for (name, value) in arguments.sorted(by: { $0.key < $1.key }) {
            switch name {
            case "state":
                guard let s = TakeState(rawValue: value) else {
                    throw .badRequest("state '\(value)': expected " + TakeState.allCases.map(\.rawValue).joined(separator: ", "))
                }
                q.state = s
            case "limit":
                guard let n = Int(value), (1...1000).contains(n) else { throw .badRequest("limit '\(value)': expected a whole number from 1 to 1000") }
                q.limit = n
            case "after":
                guard !value.isEmpty else { throw .badRequest("after '': expected a take's id") }
                q.after = value
            default:
                throw .badRequest("query '\(name)': unknown (state, limit, after)")
            }
        }
        return q
    }

    static func configuration(_ body: Data) throws(RequestError) -> TakeConfiguration {
        _ = try object(body)
        let c: TakeConfiguration
        do { c = try TakeConfiguration(jsonData: body, source: "request body") } catch { throw .badRequest(reason(error)) }
        do { try c.validate() } catch { throw .badRequest(describe(error)) }
        for (field, spec) in [("primary", c.primary), ("secondary", c.secondary)] where spec == .stdin {
            throw .badRequest("\(field) '-': a server take cannot read standard input; give a file, URL or testsrc")
        }
        return c
    }

    /// What a `PATCH /v1/takes/{id}` changes: the layout (`current` where
    /// the body has none), and the main output's texts and image overlays
    /// where it has them.
    struct TakePatch {
        var layout: Layout
        var transition: LayoutTransition?
        var changesLayout: Bool
        var texts: [TextOverlay]?
        var overlays: [ImageOverlay]?
    }

    /// `PATCH /v1/takes/{id}`: `{"layout": {…}}` applied over `current`
    /// (keys not given keep their values), with an optional `"transition":
    /// {"ms": 400, "easing": "ease-in-out"}` (absent: the take's), and/or
    /// `{"texts": […]}` and `{"overlays": […]}`, the main output's texts and
    /// images replaced from the next frame on. Unknown keys are 400 at every
    /// depth; known take fields other than `layout`, `transition`, `texts`
    /// and `overlays` are fixed once a take has started: 409 with the reason.
    static func patch(_ body: Data, current: Layout) throws(RequestError) -> TakePatch {
        guard !body.isEmpty else { throw .badRequest("request body: empty; expected a JSON object") }
        let json: JSONValue
        do { json = try JSONValue(parsing: body, source: "request body") } catch { throw .badRequest(error.reason == "not valid JSON" ? "request body: not valid JSON" : error.description) }
        guard case .object(let o) = json else { throw .badRequest("request body: expected a JSON object") }
        let takeKeys = Set(OptionParser.options(.json).compactMap { $0.key?.first })
        for key in o.keys.sorted() where !["layout", "transition", "texts", "overlays"].contains(key) {
            guard takeKeys.contains(key) else {
                throw .badRequest("\(ConfigurationError.quoted(key)): unknown key (expected layout, transition, texts or overlays)")
            }
            switch key {
            case "size": throw .conflict("size: the canvas size is frozen when a take starts; start a new take to change it")
            case "audio": throw .conflict("audio: whether a take has an audio track is frozen when it starts; start a new take to change it")
            default: throw .conflict("\(key): fixed once a take has started; PATCH changes only the layout, the texts and the overlays")
            }
        }
        var texts: [TextOverlay]?
        if let t = o["texts"] {
            do { texts = try OptionParser.decodeTexts(t, field: "texts") } catch { throw .badRequest(describe(error)) }
        }
        var overlays: [ImageOverlay]?
        if let v = o["overlays"] {
            do { overlays = try OptionParser.decodeOverlays(v, field: "overlays") } catch { throw .badRequest(describe(error)) }
        }
        guard o["layout"] != nil || texts != nil || overlays != nil else {
            throw .badRequest("request body: nothing to change; expected {\"layout\": {…}}, {\"texts\": […]} or {\"overlays\": […]}")
        }
        var layout = current
        if let patch = o["layout"] {
            do { layout = try OptionParser.decodeLayout(patch, field: "layout", base: current) } catch { throw .badRequest(describe(error)) }
            if let v = layout.validationError() { throw .badRequest(describe(v)) }
        }
        var transition: LayoutTransition?
        if let t = o["transition"], t != .null {
            do { transition = try OptionParser.decodeTransition(t, field: "transition") } catch { throw .badRequest(describe(error)) }
        }
        return TakePatch(layout: layout, transition: transition, changesLayout: o["layout"] != nil, texts: texts, overlays: overlays)
    }

    /// `POST /v1/takes/{id}/switch`: `{"role": "secondary", "source": "…"}`.
    static func switchRequest(_ body: Data) throws(RequestError) -> (StreamRole, SourceSpec) {
        let o = try object(body)
        for key in o.keys.sorted() where key != "role" && key != "source" {
            throw .badRequest("\(key): unknown key; expected role and source")
        }
        guard let r = o["role"] as? String else {
            throw .badRequest(o["role"] == nil ? "role: required, primary or secondary" : "role: expected a string, primary or secondary")
        }
        guard let role = StreamRole(rawValue: r) else { throw .badRequest("role '\(r)': expected primary or secondary") }
        guard let s = o["source"] as? String else {
            throw .badRequest("source: " + (o["source"] == nil ? "required" : "expected a string") + " (a file, URL, testsrc:… or none)")
        }
        let spec: SourceSpec
        do { spec = try SourceSpec.parse(s, field: "source") } catch { throw .badRequest(describe(error)) }
        if spec == .stdin { throw .badRequest("source '-': a server take cannot read standard input") }
        if spec == .none && role == .primary { throw .badRequest("source 'none': the primary cannot be removed") }
        return (role, spec)
    }

    // MARK: - Helpers

    /// The decoding reason without the file framing: `size: '12x0': …`.
    static func reason(_ e: ConfigurationError) -> String {
        let prefix = "invalid configuration: "
        return e.reason.hasPrefix(prefix) ? String(e.reason.dropFirst(prefix.count)) : e.reason
    }

    /// A validation error with its field named as in JSON (`--pip-size` → `layout.pip.size`, from the option table).
    static func describe(_ e: ConfigurationError) -> String {
        let field = e.field.hasPrefix("--") ? (Option.table.first { $0.flag == e.field }?.keyPath ?? e.field) : e.field
        return e.value.isEmpty ? "\(field): \(e.reason)" : "\(field) '\(ConfigurationError.quoted(e.value))': \(e.reason)"
    }
}
