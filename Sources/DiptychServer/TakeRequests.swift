import DiptychCore
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
    static func configuration(_ body: Data) throws(RequestError) -> TakeConfiguration {
        let o = try object(body)
        if let layout = o["layout"] { try checkLayoutKeys(layout) }
        let c: TakeConfiguration
        do { c = try TakeConfiguration(jsonData: body, source: "request body") } catch { throw .badRequest(reason(error)) }
        do { try c.validate() } catch { throw .badRequest(describe(error)) }
        for (field, spec) in [("primary", c.primary), ("secondary", c.secondary)] where spec == .stdin {
            throw .badRequest("\(field) '-': a server take cannot read standard input; give a file, URL or testsrc")
        }
        return c
    }

    /// `PATCH /v1/takes/{id}`: `{"layout": {…}}` merged into `current`.
    /// Unknown keys are 400; known take fields other than `layout` are
    /// fixed once a take has started: 409 with the reason.
    static func patchedLayout(_ body: Data, current: Layout) throws(RequestError) -> Layout {
        let o = try object(body)
        for key in o.keys.sorted() where key != "layout" {
            // A key the configuration does not know fails to decode on its own.
            let probe = (try? JSONSerialization.data(withJSONObject: [key: o[key]!], options: [.fragmentsAllowed])) ?? Data()
            do { _ = try TakeConfiguration(jsonData: probe, source: "request body") } catch {
                if error.reason.contains("unknown key") { throw .badRequest(reason(error)) }
            }
        }
        for key in o.keys.sorted() where key != "layout" {
            switch key {
            case "size": throw .conflict("size: the canvas size is frozen when a take starts; start a new take to change it")
            case "audio": throw .conflict("audio: whether a take has an audio track is frozen when it starts; start a new take to change it")
            default: throw .conflict("\(key): fixed once a take has started; PATCH changes only the layout")
            }
        }
        guard let patch = o["layout"] else { throw .badRequest("request body: nothing to change; expected {\"layout\": {…}}") }
        guard let patchObject = patch as? [String: Any] else { throw .badRequest("layout: expected an object") }
        try checkLayoutKeys(patchObject)
        guard let currentObject = (try? JSONSerialization.jsonObject(with: LayoutJSON.value(current).data)) as? [String: Any],
              let merged = try? JSONSerialization.data(withJSONObject: ["layout": merge(currentObject, patchObject)]) else {
            throw .failed("layout: cannot merge the change into the current layout")
        }
        let c: TakeConfiguration
        do { c = try TakeConfiguration(jsonData: merged, source: "request body") } catch { throw .badRequest(reason(error)) }
        if let v = c.layout.validationError() { throw .badRequest(describe(v)) }
        return c.layout
    }

    /// `POST /v1/takes/{id}/switch`: `{"role": "secondary", "source": "…"}`.
    static func switchRequest(_ body: Data) throws(RequestError) -> (StreamRole, SourceSpec) {
        let o = try object(body)
        for key in o.keys.sorted() where key != "role" && key != "source" {
            throw .badRequest("\(key): unknown key; expected role and source")
        }
        guard let r = o["role"] as? String else { throw .badRequest("role: required, primary or secondary") }
        guard let role = StreamRole(rawValue: r) else { throw .badRequest("role '\(r)': expected primary or secondary") }
        guard let s = o["source"] as? String else { throw .badRequest("source: required (a file, URL, testsrc:… or none)") }
        let spec: SourceSpec
        do { spec = try SourceSpec.parse(s, field: "source") } catch { throw .badRequest(describe(error)) }
        if spec == .stdin { throw .badRequest("source '-': a server take cannot read standard input") }
        if spec == .none && role == .primary { throw .badRequest("source 'none': the primary cannot be removed") }
        return (role, spec)
    }

    // MARK: - Helpers

    private static let layoutKeys = ["kind", "pip", "custom", "swapRoles", "zOrder", "contentMode", "background", "insetStyle"]
    private static let nestedKeys = ["pip": ["corner", "size", "margin"], "custom": ["primary", "secondary"],
                                     "insetStyle": ["opacity", "cornerRadius", "borderWidth", "borderColor"]]

    /// Whether the configuration's own decoder refuses unknown layout keys.
    private static let decoderChecksLayoutKeys: Bool =
        (try? TakeConfiguration(jsonData: Data(#"{"layout": {"no such key": 0}}"#.utf8))) == nil

    /// Layout objects must not carry unknown keys (a typo is not ignored);
    /// checked here unless the configuration decoder does it itself.
    static func checkLayoutKeys(_ value: Any) throws(RequestError) {
        guard !decoderChecksLayoutKeys, let o = value as? [String: Any] else { return }
        for key in o.keys.sorted() {
            guard layoutKeys.contains(key) else {
                throw .badRequest("layout.\(key): unknown key; expected one of \(layoutKeys.joined(separator: ", "))")
            }
            if let allowed = nestedKeys[key], let inner = o[key] as? [String: Any] {
                for k in inner.keys.sorted() where !allowed.contains(k) {
                    throw .badRequest("layout.\(key).\(k): unknown key; expected one of \(allowed.joined(separator: ", "))")
                }
            }
        }
    }

    static func merge(_ base: [String: Any], _ patch: [String: Any]) -> [String: Any] {
        var out = base
        for (k, v) in patch {
            if let b = out[k] as? [String: Any], let p = v as? [String: Any] { out[k] = merge(b, p) } else { out[k] = v }
        }
        return out
    }

    /// The decoding reason without the file framing: `size: '12x0': …`.
    static func reason(_ e: ConfigurationError) -> String {
        let prefix = "invalid configuration: "
        return e.reason.hasPrefix(prefix) ? String(e.reason.dropFirst(prefix.count)) : e.reason
    }

    /// A validation error with its field named as in JSON (`--pip-size` → `layout.pip.size`).
    static func describe(_ e: ConfigurationError) -> String {
        "\(jsonName(e.field)) '\(e.value)': \(e.reason)"
    }

    static func jsonName(_ flag: String) -> String {
        guard flag.hasPrefix("--") else { return flag }
        let special = ["--layout": "layout.kind", "--pip-corner": "layout.pip.corner", "--pip-size": "layout.pip.size",
                       "--pip-margin": "layout.pip.margin", "--swap-roles": "layout.swapRoles",
                       "--content-mode": "layout.contentMode", "--background": "layout.background"]
        if let s = special[flag] { return s }
        let words = flag.dropFirst(2).split(separator: "-")
        return words.enumerated().map { $0.offset == 0 ? String($0.element) : $0.element.capitalized }.joined()
    }
}
