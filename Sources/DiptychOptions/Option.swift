import DiptychCore

/// Where an option may be given.
public struct OptionScope: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// `diptych record` flags (and `--help`).
    public static let record = OptionScope(rawValue: 1)
    /// The embedding API's option strings (`EmbeddedConfiguration.parse`, the C API).
    public static let embedded = OptionScope(rawValue: 2)
    /// A key of the JSON form (`--config FILE`, the server's request bodies).
    public static let json = OptionScope(rawValue: 4)
    public static let all: OptionScope = [.record, .embedded, .json]
    /// Options about inputs or a whole take, which an embedding host does not have.
    public static let take: OptionScope = [.record, .json]
}

/// What the option table fills in: a take's configuration, plus the two
/// values only an embedding host gives (no source can tell them).
public struct OptionValues: Hashable, Sendable {
    public var take = TakeConfiguration()
    /// `--fps RATE`: the nominal output rate of pushed streams.
    public var fps: FrameRate?
    /// `--queue N`: frames each push queue holds.
    public var queue = 4
    /// `--also-layout KIND` by output index, applied over the final `--layout` once every flag is read.
    var alsoLayoutKinds: [Int: LayoutKind] = [:]
    /// `--layout-at SECONDS=KIND` in the order given, each applied over the final `--layout` once every flag is read.
    var layoutAtKinds: [LayoutAt] = []
    public init(take: TakeConfiguration = TakeConfiguration()) { self.take = take }
    struct LayoutAt: Hashable, Sendable { var at: Double; var kind: LayoutKind }
}

/// A value as given: text from the command line, or a JSON value.
public enum OptionInput: Sendable {
    case text(String)
    case json(JSONValue)
}

/// One option: its command-line flag, its JSON key path, its help line,
/// where it may be given, how it is read and how it is written back. The
/// table of these (`Option.table`) is the only place an option is spelled:
/// the command-line reader, `--help`, the JSON form (both ways), the
/// embedding API and the server all derive from it.
public struct Option: Sendable {
    /// `--pip-corner`; nil for options only the JSON form has.
    public let flag: String?
    /// `["layout", "pip", "corner"]`; nil for command-line-only options (`--config`).
    public let key: [String]?
    /// The value's name in `--help` (`WxH`); nil for a switch (no value).
    public let placeholder: String?
    public let help: String
    public let scopes: OptionScope
    let apply: @Sendable (inout OptionValues, OptionInput, _ field: String) throws(ConfigurationError) -> Void
    /// The value to write in the JSON form; nil leaves the key out.
    let read: @Sendable (OptionValues) -> JSONValue?

    /// This option's value in `values`, as the JSON form writes it (nil: left out).
    public func value(in values: OptionValues) -> JSONValue? { read(values) }

    public var takesValue: Bool { placeholder != nil }
    /// The JSON key path as text (`layout.pip.corner`).
    public var keyPath: String? { key?.joined(separator: ".") }

    /// Longest text value accepted anywhere (paths, URLs, preset names).
    public static let maximumTextLength = 4096

    /// An option whose value is text on the command line and a string (or,
    /// where the text is a number, a number) in JSON.
    static func text(_ flag: String?, _ key: [String]?, _ placeholder: String, _ help: String, scopes: OptionScope = .all,
                     set: @escaping @Sendable (inout OptionValues, String, String) throws(ConfigurationError) -> Void,
                     get: @escaping @Sendable (OptionValues) -> JSONValue?) -> Option {
        Option(flag: flag, key: key, placeholder: placeholder, help: help, scopes: scopes, apply: { v, input, field throws(ConfigurationError) in
            let text: String
            switch input {
            case .text(let t): text = t
            case .json(.string(let s)): text = s
            case .json(.number(let d)): text = d.rounded() == d && abs(d) < 1e15 ? String(Int64(d)) : String(d)
            case .json(let other):
                throw ConfigurationError(field: field, value: "", reason: "expected a string, found \(other.kindName)")
            }
            guard text.utf8.count <= maximumTextLength else {
                throw ConfigurationError(field: field, value: text, reason: "is longer than \(maximumTextLength) characters")
            }
            try set(&v, text, field)
        }, read: get)
    }

    /// A switch on the command line (`--mirror-secondary`), true or false in JSON.
    static func toggle(_ flag: String?, _ key: [String]?, _ help: String, scopes: OptionScope = .all,
                       set: @escaping @Sendable (inout OptionValues, Bool) -> Void,
                       get: @escaping @Sendable (OptionValues) -> Bool) -> Option {
        Option(flag: flag, key: key, placeholder: nil, help: help, scopes: scopes, apply: { v, input, field throws(ConfigurationError) in
            switch input {
            case .text: set(&v, true)
            case .json(.bool(let b)): set(&v, b)
            case .json(let other):
                throw ConfigurationError(field: field, value: "", reason: "expected true or false, found \(other.kindName)")
            }
        }, read: { .bool(get($0)) })
    }

    /// An option only the JSON form has (structured values: rectangles, colours).
    static func json(_ key: [String], _ help: String, scopes: OptionScope = [.json],
                     set: @escaping @Sendable (inout OptionValues, JSONValue, String) throws(ConfigurationError) -> Void,
                     get: @escaping @Sendable (OptionValues) -> JSONValue?) -> Option {
        Option(flag: nil, key: key, placeholder: "JSON", help: help, scopes: scopes, apply: { v, input, field throws(ConfigurationError) in
            guard case .json(let j) = input else {
                throw ConfigurationError(field: field, value: "", reason: "only the JSON form has this option")
            }
            try set(&v, j, field)
        }, read: get)
    }
}

extension ConfigurationError {
    /// An error about a JSON value at `field`.
    /// The value is not echoed: the reason says what kind of value was expected.
    static func json(_ field: String, _ value: JSONValue, _ reason: String) -> ConfigurationError {
        ConfigurationError(field: field, value: "", reason: reason)
    }
}
