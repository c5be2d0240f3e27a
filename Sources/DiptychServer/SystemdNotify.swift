import Foundation
import Glibc

/// Tells systemd how the server is doing (`Type=notify` units:
/// `contrib/diptych-serve.service`): `READY=1` once calibration has ended,
/// `STOPPING=1` when SIGTERM starts the drain, a `STATUS=` line beside each,
/// and `WATCHDOG=1` every second (every half `WatchdogSec` where that is
/// shorter) from the server's sampler thread while the server runs. Through libsystemd's own `sd_notify`, loaded at run time, so the
/// binary needs no libsystemd where no systemd runs it. Reads `NOTIFY_SOCKET`
/// and `WATCHDOG_USEC` (docs/ENVIRONMENT.md); with no `NOTIFY_SOCKET` it is
/// not made.
final class SystemdNotifier: Sendable {
    private typealias Notify = @convention(c) (Int32, UnsafePointer<CChar>) -> Int32
    /// The library handle, kept open for the process's life (`notify` points into it).
    private nonisolated(unsafe) let library: UnsafeMutableRawPointer
    private nonisolated(unsafe) let notify: Notify
    /// Half the unit's watchdog interval; nil when the unit has none.
    let watchdogInterval: TimeInterval?

    /// Nil when systemd did not start the process (no `NOTIFY_SOCKET`);
    /// throws when it did but libsystemd cannot be loaded.
    init?(environment: [String: String]) throws(ServerError) {
        guard let socket = environment["NOTIFY_SOCKET"], !socket.isEmpty else { return nil }
        guard let h = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL) else {
            throw .runtime("NOTIFY_SOCKET is set (\(socket)) but libsystemd.so.0 cannot be loaded: \(String(cString: dlerror()))")
        }
        guard let sym = dlsym(h, "sd_notify") else {
            dlclose(h)
            throw .runtime("libsystemd.so.0 has no sd_notify")
        }
        library = h
        notify = unsafeBitCast(sym, to: Notify.self)
        if let v = environment["WATCHDOG_USEC"] {
            guard let usec = UInt64(v), usec > 0 else { throw .badUsage("WATCHDOG_USEC '\(v)': not a positive number of microseconds") }
            watchdogInterval = Double(usec) / 2e6
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends `lines` (`KEY=value` each) in one message.
    func send(_ lines: String...) {
        _ = lines.joined(separator: "\n").withCString { notify(0, $0) }
    }

    func ready(status: String) { send("READY=1", "STATUS=\(status)") }
    func stopping(status: String) { send("STOPPING=1", "STATUS=\(status)") }
    func watchdog() { send("WATCHDOG=1") }
}
