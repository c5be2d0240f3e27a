import DiptychCore

/// The one command-line reader every executable uses: `--flag value`,
/// `--flag=value` and value-less switches, checked against the flags a
/// command knows. A value may not start with `--` (that is the next flag).
/// Errors name the argument: an unknown flag (with the nearest known one),
/// a missing value, a value given to a switch, a stray word.
public struct ArgumentReader: Sendable {
    /// The flags a command knows: name (`--size`) → whether it takes a value.
    public let flags: [String: Bool]

    public init(flags: [String: Bool]) { self.flags = flags }

    /// Flags from `(name, takesValue)` pairs.
    public init(_ pairs: [(String, Bool)]) { self.init(flags: Dictionary(pairs, uniquingKeysWith: { a, _ in a })) }

    /// The flags and values in the order given (`value` is nil for switches).
    public func read(_ arguments: [String]) throws(ConfigurationError) -> [(flag: String, value: String?)] {
        var out: [(flag: String, value: String?)] = []
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            guard arg.hasPrefix("--"), arg.utf8.count > 2 else {
                throw ConfigurationError(field: "argument", value: arg, reason: "unexpected argument; options start with --")
            }
            var flag = arg
            var inline: String?
            if let eq = arg.firstIndex(of: "=") {
                flag = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...])
            }
            guard let takesValue = flags[flag] else { throw unknown(flag) }
            if !takesValue {
                if let v = inline { throw ConfigurationError(field: flag, value: v, reason: "takes no value") }
                out.append((flag, nil))
                continue
            }
            if let v = inline { out.append((flag, v)); continue }
            guard i < arguments.count, !arguments[i].hasPrefix("--") else {
                throw ConfigurationError(field: flag, value: "", reason: "needs a value")
            }
            out.append((flag, arguments[i]))
            i += 1
        }
        return out
    }

    /// `option '--pip-sise': unknown option (did you mean --pip-size?)`.
    public func unknown(_ flag: String) -> ConfigurationError {
        var reason = "unknown option"
        if let near = ArgumentReader.nearest(flag, in: flags.keys.sorted()) { reason += " (did you mean \(near)?)" }
        return ConfigurationError(field: "option", value: flag, reason: reason)
    }

    /// The candidate within edit distance 2 of `word`, if any.
    static func nearest(_ word: String, in candidates: [String]) -> String? {
        guard word.utf8.count <= 64 else { return nil }
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            if a.isEmpty { return b.count }
            if b.isEmpty { return a.count }
            var row = Array(0...b.count)
            for i in 1...a.count {
                var previous = row[0]
                row[0] = i
                for j in 1...b.count {
                    let old = row[j]
                    row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                    previous = old
                }
            }
            return row[b.count]
        }
        let best = candidates.map { ($0, distance(Array(word), Array($0))) }.min { $0.1 < $1.1 }
        guard let (name, d) = best, d <= 2 else { return nil }
        return name
    }
}
