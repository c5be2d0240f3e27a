import Foundation
import Synchronization
import DiptychCore

/// Reads how hot the machine is. Injectable so tests and users can force a level.
public protocol ThermalMonitor: Sendable {
    /// The current thermal state, and a one-line description of what it came from.
    func read() -> (state: ThermalState, source: String)
}

/// Reads free bytes where the output is written. Injectable for tests.
public protocol StorageMonitor: Sendable {
    /// Free bytes available to an unprivileged writer at `path`'s folder, or
    /// nil when it cannot be told (a network URL, say).
    func freeBytes(at path: String) -> Int64?
}

/// Always reports the same state (`--thermal-state`).
public struct FixedThermalMonitor: ThermalMonitor {
    public let state: ThermalState
    public init(_ state: ThermalState) { self.state = state }
    public func read() -> (state: ThermalState, source: String) { (state, "forced") }
}

/// Reads Linux thermal zones (`/sys/class/thermal/thermal_zone*`) and hwmon
/// sensors (`/sys/class/hwmon/hwmon*/temp*_input`, GPU drivers report there)
/// and maps the hottest sensor against its own trip points:
/// at or above its critical trip → critical; within 5 °C of it, or at or above
/// a hot trip → serious; at or above a passive trip → fair; else nominal.
/// Sensors without trip points use 95 / 85 / 75 °C.
public struct SysfsThermalMonitor: ThermalMonitor {
    public let root: String
    public init(root: String = "/sys/class") { self.root = root }

    struct Reading { var name: String; var celsius: Double; var critical: Double?; var hot: Double?; var passive: Double? }

    static func state(of r: Reading) -> ThermalState {
        let critical = r.critical ?? 95
        if r.celsius >= critical { return .critical }
        if r.celsius >= critical - 5 || (r.hot.map { r.celsius >= $0 } ?? false) { return .serious }
        if r.critical == nil && r.hot == nil && r.celsius >= 85 { return .serious }
        if let p = r.passive { if r.celsius >= p { return .fair } } else if r.celsius >= 75 { return .fair }
        return .nominal
    }

    private func number(_ path: String) -> Double? {
        guard let s = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return Double(s.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    private func text(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func readings() -> [Reading] {
        var out: [Reading] = []
        let fm = FileManager.default
        let zones = (try? fm.contentsOfDirectory(atPath: "\(root)/thermal")) ?? []
        for z in zones where z.hasPrefix("thermal_zone") {
            let dir = "\(root)/thermal/\(z)"
            guard let milli = number("\(dir)/temp"), milli > -50_000 else { continue }
            var r = Reading(name: "\(z) (\(text("\(dir)/type") ?? "?"))", celsius: milli / 1000)
            for i in 0..<16 {
                guard let type = text("\(dir)/trip_point_\(i)_type"), let t = number("\(dir)/trip_point_\(i)_temp"), t > 0 else { continue }
                let c = t / 1000
                switch type {
                case "critical": r.critical = min(r.critical ?? c, c)
                case "hot": r.hot = min(r.hot ?? c, c)
                case "passive": r.passive = min(r.passive ?? c, c)
                default: break
                }
            }
            out.append(r)
        }
        let mons = (try? fm.contentsOfDirectory(atPath: "\(root)/hwmon")) ?? []
        for m in mons {
            let dir = "\(root)/hwmon/\(m)"
            let files = (try? fm.contentsOfDirectory(atPath: dir)) ?? []
            for f in files where f.hasPrefix("temp") && f.hasSuffix("_input") {
                let base = String(f.dropLast("_input".count))
                guard let milli = number("\(dir)/\(f)"), milli > -50_000 else { continue }
                var r = Reading(name: "\(m)/\(base) (\(text("\(dir)/name") ?? "?"))", celsius: milli / 1000)
                r.critical = number("\(dir)/\(base)_crit").map { $0 / 1000 }
                r.hot = number("\(dir)/\(base)_max").map { $0 / 1000 }
                out.append(r)
            }
        }
        return out
    }

    public func read() -> (state: ThermalState, source: String) {
        let all = readings()
        guard let worst = all.max(by: { Self.state(of: $0).severity < Self.state(of: $1).severity
                                        || (Self.state(of: $0) == Self.state(of: $1) && $0.celsius < $1.celsius) }) else {
            return (.nominal, "no thermal sensors")
        }
        return (Self.state(of: worst), "\(worst.name) at \(Int(worst.celsius.rounded())) °C")
    }
}

extension ThermalState {
    var severity: Int {
        switch self { case .nominal: 0; case .fair: 1; case .serious: 2; case .critical: 3 }
    }
}

/// Free space from `statvfs` on the output's folder.
public struct FileSystemStorageMonitor: StorageMonitor {
    public init() {}
    public func freeBytes(at path: String) -> Int64? {
        guard let file = FileIdentity(path) else { return nil }   // a stream or pipe: no disk
        let dir = URL(fileURLWithPath: file.path).deletingLastPathComponent().path
        var st = statvfs()
        guard statvfs(dir.isEmpty ? "." : dir, &st) == 0 else { return nil }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }
}

/// Reports a fixed number of free bytes, or a sequence of them (tests).
public final class ScriptedStorageMonitor: StorageMonitor, Sendable {
    private let values: Mutex<[Int64]>
    public init(_ values: [Int64]) { precondition(!values.isEmpty); self.values = Mutex(values) }
    public func freeBytes(at path: String) -> Int64? {
        values.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
    }
}
