import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A program to start: its path, arguments and where its output goes.
struct ChildCommand: Sendable {
    var executable: String
    var arguments: [String]
    /// Files for standard output and standard error (standard input is /dev/null).
    var stdoutPath: String
    var stderrPath: String

    /// The command as a shell would take it (for the report).
    var shown: String {
        ([executable] + arguments).map { a in
            a.contains(where: { " ;'[]|&".contains($0) }) ? "'" + a.replacingOccurrences(of: "'", with: "'\\''") + "'" : a
        }.joined(separator: " ")
    }
}

/// How one child ended: wall time from its start, its own CPU time and peak
/// memory (`wait4`), and its resident memory sampled while it ran.
struct ChildOutcome: Sendable {
    var status: Int32
    /// Killed at the deadline (it had not finished in time).
    var killed: Bool
    var seconds: Double
    var cpuSeconds: Double
    var peakRSSMiB: Double
    /// Minor page faults (first touches of memory).
    var minorFaults: Int = 0
    /// Resident memory (MiB) sampled every `ChildGroup.sampleInterval`.
    var rssSamples: [Double]
    var stderrTail: String

    /// Resident memory over the last fifth of the run minus over the second fifth:
    /// how much it grew once started (nil with fewer than 5 samples).
    var rssGrowthMiB: Double? {
        let n = rssSamples.count
        guard n >= 5 else { return nil }
        func mean(_ s: ArraySlice<Double>) -> Double { s.reduce(0, +) / Double(s.count) }
        return mean(rssSamples[(4 * n / 5)...]) - mean(rssSamples[(n / 5)..<(2 * n / 5)])
    }
}

/// Children started together and waited for together: `posix_spawn`, then
/// `wait4` per child (its own rusage), /proc/PID/statm sampled meanwhile.
/// Children still running at the deadline get SIGTERM, then SIGKILL.
enum ChildGroup {
    static let sampleInterval = 0.25
    static let pollInterval = 0.01

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    static func run(_ commands: [ChildCommand], deadline: Double) throws(SpawnError) -> [ChildOutcome] {
        var pids: [pid_t] = []
        let t0 = now()
        for c in commands {
            do throws(SpawnError) { pids.append(try spawn(c)) } catch {
                for p in pids { kill(p, SIGKILL); var st: Int32 = 0; waitpid(p, &st, 0) }
                throw error
            }
        }
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        var outcomes = [ChildOutcome?](repeating: nil, count: pids.count)
        var samples = [[Double]](repeating: [], count: pids.count)
        var killedAt: [Double?] = Array(repeating: nil, count: pids.count)
        var nextSample = t0
        while outcomes.contains(where: { $0 == nil }) {
            let t = now()
            if t >= nextSample {
                for (i, pid) in pids.enumerated() where outcomes[i] == nil {
                    if let rss = residentPages(pid) { samples[i].append(rss * page / 1_048_576) }
                }
                nextSample += sampleInterval
            }
            for (i, pid) in pids.enumerated() where outcomes[i] == nil {
                var status: Int32 = 0
                var ru = rusage()
                let r = wait4(pid, &status, WNOHANG, &ru)
                if r == pid || (r < 0 && errno == ECHILD) {
                    let cpu = Double(ru.ru_utime.tv_sec) + Double(ru.ru_utime.tv_usec) / 1e6
                        + Double(ru.ru_stime.tv_sec) + Double(ru.ru_stime.tv_usec) / 1e6
                    outcomes[i] = ChildOutcome(status: exitCode(status), killed: killedAt[i] != nil, seconds: now() - t0,
                                               cpuSeconds: cpu, peakRSSMiB: Double(ru.ru_maxrss) / 1024, minorFaults: Int(ru.ru_minflt),
                                               rssSamples: samples[i], stderrTail: tail(commands[i].stderrPath))
                } else if t - t0 > deadline {
                    if killedAt[i] == nil { kill(pid, SIGTERM); killedAt[i] = t } else if t - killedAt[i]! > 3 { kill(pid, SIGKILL) }
                }
            }
            usleep(UInt32(pollInterval * 1e6))
        }
        return outcomes.map { $0! }
    }

    static func spawn(_ c: ChildCommand) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, c.stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, c.stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // The child starts with no signal blocked and every signal at its
        // default action: the calling thread's mask (Dispatch blocks most
        // signals on its threads) and ignored signals would otherwise carry over.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([c.executable] + c.arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        let r = posix_spawn(&pid, c.executable, &actions, &attr, argv, environ)
        guard r == 0 else { throw SpawnError(description: "cannot start \(c.executable): \(String(cString: strerror(r)))") }
        return pid
    }

    static func residentPages(_ pid: pid_t) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? Double(fields[1]) : nil
    }

    static func exitCode(_ status: Int32) -> Int32 {
        let sig = status & 0x7f
        return sig == 0 ? (status >> 8) & 0xff : 128 + sig
    }

    static func tail(_ path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "" }
        return text.split(separator: "\n").suffix(3).joined(separator: " | ")
    }
}
