/// The answer of `StoragePolicy`.
public enum StorageDecision: Hashable, Sendable, CustomStringConvertible {
    /// Before a take: enough free space to start.
    case startAllowed
    /// Before a take: not enough free space; `reason` is one line for the user.
    case startRefused(reason: String)
    /// During a take: keep recording.
    case `continue`
    /// During a take: stop cleanly now (normal finalize path).
    case stop(reason: String)

    /// True for `.startAllowed` and `.continue`.
    public var mayRecord: Bool {
        switch self { case .startAllowed, .continue: true; case .startRefused, .stop: false }
    }
    public var description: String {
        switch self {
        case .startAllowed: "start allowed"
        case .startRefused(let r): "start refused: \(r)"
        case .continue: "continue"
        case .stop(let r): "stop: \(r)"
        }
    }
}

/// docs/ARCHITECTURE.md, "Failure paths", storage: need 200 MiB free to start a take; stop cleanly
/// when free space falls *below* 100 MiB. A pure function:
///
/// | recording | free bytes            | decision      |
/// |-----------|-----------------------|---------------|
/// | no        | ≥ startMinimum        | startAllowed  |
/// | no        | < startMinimum        | startRefused  |
/// | yes       | ≥ stopBelow           | continue      |
/// | yes       | < stopBelow           | stop          |
/// | any       | unknown (nil)         | startAllowed / continue |
///
/// Unknown free space (a network output, a failed statfs) never blocks.
public struct StoragePolicy: Hashable, Sendable {
    public static let mebibyte: Int64 = 1 << 20
    /// Free bytes needed to start (default 200 MiB).
    public var startMinimum: Int64
    /// Stop when free bytes fall below this (default 100 MiB).
    public var stopBelow: Int64

    public init(startMinimum: Int64 = 200 * StoragePolicy.mebibyte, stopBelow: Int64 = 100 * StoragePolicy.mebibyte) {
        self.startMinimum = startMinimum; self.stopBelow = stopBelow
    }
    public static let standard = StoragePolicy()

    public func decide(freeBytes: Int64?, recording: Bool) -> StorageDecision {
        guard let free = freeBytes else { return recording ? .continue : .startAllowed }
        if recording {
            return free < stopBelow
                ? .stop(reason: "free space \(Self.format(free)) is below \(Self.format(stopBelow))")
                : .continue
        }
        return free >= startMinimum
            ? .startAllowed
            : .startRefused(reason: "free space \(Self.format(free)) is below the \(Self.format(startMinimum)) needed to start")
    }

    /// Bytes in MiB with one decimal (`"99.9 MiB"`).
    public static func format(_ bytes: Int64) -> String {
        let tenths = (bytes * 10 + mebibyte / 2) / mebibyte
        return "\(tenths / 10).\(abs(tenths % 10)) MiB"
    }
}
