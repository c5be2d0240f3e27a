import Foundation
import DiptychCore

/// Reads and writes options through the table (`Option.table`): command
/// lines, the JSON form, and `--help`. What one scope accepts is exactly
/// the table's options of that scope.
public enum OptionParser {
    /// The table's options of `scope`.
    public static func options(_ scope: OptionScope) -> [Option] {
        Option.table.filter { !$0.scopes.isDisjoint(with: scope) }
    }

    /// The command-line reader for `scope`'s flags.
    public static func reader(_ scope: OptionScope) -> ArgumentReader {
        ArgumentReader(options(scope).compactMap { o in o.flag.map { ($0, o.takesValue) } })
    }

    /// Flags repeated to build a list; given on the command line, they
    /// replace the list a `--config` file had.
    static let listFlags: Set<String> = ["--switch-secondary", "--also-out", "--layout-at", "--overlay", "--text"]

    /// Parses a command line of `scope`. `--config FILE` is loaded first,
    /// wherever it appears; the other flags then apply in order and override
    /// it (a repeated flag: the last wins; list flags accumulate and replace
    /// the file's list). Does not call `validate()`.
    public static func parse(arguments: [String], scope: OptionScope,
                             into start: OptionValues = OptionValues()) throws(ConfigurationError) -> OptionValues {
        let given = try reader(scope).read(arguments)
        let configs = given.filter { $0.flag == "--config" }
        if configs.count > 1 { throw ConfigurationError(field: "--config", value: configs[1].value ?? "", reason: "given more than once") }
        var v = start
        if let path = configs.first?.value {
            v.take = try load(path: path, scope: scope.intersection([.embedded]).isEmpty ? [.json] : [.json, .embedded], into: v.take)
        }
        let byFlag = Dictionary(options(scope).compactMap { o in o.flag.map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
        var cleared: Set<String> = []
        for (flag, value) in given where flag != "--config" {
            if listFlags.contains(flag), cleared.insert(flag).inserted {
                switch flag {
                case "--switch-secondary": v.take.secondarySwitches = []
                case "--layout-at": v.take.layoutSchedule = []; v.layoutAtKinds = []
                case "--overlay": v.take.overlays = []
                case "--text": v.take.texts = []
                default: v.take.extraOutputs = []; v.alsoLayoutKinds = [:]
                }
            }
            try byFlag[flag]!.apply(&v, .text(value ?? ""), flag)
        }
        for (i, kind) in v.alsoLayoutKinds where i < v.take.extraOutputs.count {
            var l = v.take.layout
            l.kind = kind
            v.take.extraOutputs[i].layout = l
        }
        v.alsoLayoutKinds = [:]
        for e in v.layoutAtKinds {
            var l = v.take.layout
            l.kind = e.kind
            v.take.layoutSchedule.append(ScheduledLayout(at: e.at, layout: l))
        }
        v.layoutAtKinds = []
        return v
    }

    // MARK: JSON

    /// Reads a JSON configuration file; errors name the file and the key.
    public static func load(path: String, scope: OptionScope = [.json],
                            into start: TakeConfiguration = TakeConfiguration()) throws(ConfigurationError) -> TakeConfiguration {
        guard !path.isEmpty else { throw ConfigurationError(field: "--config", value: path, reason: "needs a file path") }
        let data = try readFile(path)
        return try decode(data, source: path, scope: scope, into: start)
    }

    /// Decodes the JSON form. Every key at every depth must be an option of
    /// `scope` (errors: `--config 'take.json': layout.pip.sise: unknown key ...`).
    public static func decode(_ data: Data, source: String, scope: OptionScope = [.json],
                              into start: TakeConfiguration = TakeConfiguration()) throws(ConfigurationError) -> TakeConfiguration {
        do {
            let json = try JSONValue(parsing: data, source: source)
            var v = OptionValues(take: start)
            try apply(json, scope: scope, to: &v)
            return v.take
        } catch {
            let detail = error.field == source || error.field.isEmpty ? error.reason
                : "\(error.field): " + (error.value.isEmpty ? "" : "'\(ConfigurationError.quoted(error.value))': ") + error.reason
            throw ConfigurationError(field: "--config", value: source, reason: "invalid configuration: \(detail)")
        }
    }

    /// Applies a JSON object's keys to `values`. `root` is the key path of
    /// `json` itself (`["layout"]` to apply only a layout object).
    public static func apply(_ json: JSONValue, scope: OptionScope, to values: inout OptionValues,
                             root: [String] = []) throws(ConfigurationError) {
        let known = options(scope).filter { $0.key != nil && $0.scopes.contains(.json) }
        try walk(json, path: root, known: known, into: &values)
    }

    private static func walk(_ json: JSONValue, path: [String], known: [Option], into v: inout OptionValues) throws(ConfigurationError) {
        let here = path.joined(separator: ".")
        guard case .object(let object) = json else {
            throw .json(here, json, "expected an object, found \(json.kindName)")
        }
        for key in object.keys.sorted() {
            let p = path + [key]
            let value = object[key]!
            let field = p.joined(separator: ".")
            if let o = known.first(where: { $0.key! == p }) {
                if case .null = value { continue }   // null: the default
                try o.apply(&v, .json(value), field)
            } else if known.contains(where: { $0.key!.count > p.count && Array($0.key!.prefix(p.count)) == p }) {
                try walk(value, path: p, known: known, into: &v)
            } else {
                let siblings = Set(known.compactMap { o -> String? in
                    guard o.key!.count > path.count, Array(o.key!.prefix(path.count)) == path else { return nil }
                    return o.key![path.count]
                }).sorted()
                throw .json(field, value, "unknown key (expected \(siblings.joined(separator: ", ")))")
            }
        }
    }

    /// The JSON form of `values`, keys of `scope` only.
    public static func encode(_ values: OptionValues, scope: OptionScope = [.json]) -> JSONValue {
        var out = JSONValue.object([:])
        for o in options(scope) where o.scopes.contains(.json) {
            guard let key = o.key, let j = o.read(values) else { continue }
            out.set(j, at: key[...])
        }
        return out
    }

    /// A layout object (`{"kind": "pip", "pip": {...}}`), read strictly.
    public static func decodeLayout(_ json: JSONValue, field: String, base: Layout = Layout()) throws(ConfigurationError) -> Layout {
        var v = OptionValues()
        v.take.layout = base
        do { try apply(json, scope: [.json], to: &v, root: ["layout"]) } catch {
            // Paths inside the object are relative to `field`, not to a take's "layout".
            var e = error
            if e.field.hasPrefix("layout") { e.field = field + e.field.dropFirst("layout".count) }
            throw e
        }
        return v.take.layout
    }

    /// One output: `{"out": URL, "format": "mp4", "layout": {...}}`, read strictly.
    public static func decodeOutput(_ json: JSONValue, field: String) throws(ConfigurationError) -> OutputSpec {
        try OptionCodec.decodeOutput(json, field: field)
    }

    /// Every key an output's object may have (`alsoOut`'s entries, the server's `POST .../outputs` body).
    public static var outputKeys: Set<String> { OptionCodec.outputKeys }

    /// A list of image overlays (`overlays`, a PATCH's), as the take's JSON has them.
    public static func decodeOverlays(_ json: JSONValue, field: String) throws(ConfigurationError) -> [ImageOverlay] {
        try OptionCodec.decodeOverlays(json, field: field)
    }

    /// A list of texts (`texts`, a PATCH's), as the take's JSON has them.
    public static func decodeTexts(_ json: JSONValue, field: String) throws(ConfigurationError) -> [TextOverlay] {
        try OptionCodec.decodeTexts(json, field: field)
    }

    /// A transition: `{"ms": 400, "easing": "ease-in-out"}` or `"400:ease-in-out"`, read strictly.
    public static func decodeTransition(_ json: JSONValue, field: String) throws(ConfigurationError) -> LayoutTransition {
        try OptionCodec.decodeTransition(json, field: field)
    }

    public static func encodeLayout(_ layout: Layout) -> JSONValue {
        var v = OptionValues()
        v.take.layout = layout
        return encode(v)["layout"] ?? .object([:])
    }

    // MARK: Help

    /// One line per option of `scope` that has a flag.
    public static func usage(_ scope: OptionScope) -> String {
        options(scope).compactMap { o -> String? in
            guard let flag = o.flag else { return nil }
            let head = "  " + flag + (o.placeholder.map { " " + $0 } ?? "")
            let pad = head.count < 30 ? String(repeating: " ", count: 30 - head.count) : "\n" + String(repeating: " ", count: 30)
            return head + pad + o.help
        }.joined(separator: "\n")
    }

    /// The `--config` file's bytes; the error says whether it is missing, a
    /// folder, empty, too large or unreadable.
    static func readFile(_ path: String) throws(ConfigurationError) -> Data {
        func refuse(_ reason: String) -> ConfigurationError { ConfigurationError(field: "--config", value: path, reason: reason) }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw refuse("no such file") }
        if isFolder.boolValue { throw refuse("is a folder") }
        guard let h = FileHandle(forReadingAtPath: path) else { throw refuse("cannot read file") }
        defer { try? h.close() }
        guard let data = (try? h.read(upToCount: JSONValue.maximumDocumentBytes + 1)) ?? nil else {
            // Foundation reads an empty file as nil.
            if (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) == 0 { throw refuse("is empty") }
            throw refuse("cannot read file")
        }
        if data.isEmpty { throw refuse("is empty") }
        guard data.count <= JSONValue.maximumDocumentBytes else {
            throw refuse("is larger than \(JSONValue.maximumDocumentBytes / 1024) KiB")
        }
        return data
    }
}
