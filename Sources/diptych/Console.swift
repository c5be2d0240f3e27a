#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Writes to the terminal or whatever reads the process's output. A reader
/// that went away (a closed pipe, `| head -1`, a dropped SSH session) must
/// never end a take: SIGPIPE is ignored and failed writes are dropped. A
/// failed write to stdout (the report, `--json`, the usage) is remembered
/// and reported when the process ends (`leave`): one line on stderr, exit
/// status 1 instead of 0.
enum Console {
    static let isTerminal = isatty(STDERR_FILENO) == 1

    /// The errno of the first failed write to stdout; 0 while none failed.
    private static let stdoutFailure = Atomic<Int32>(0)

    /// Once, before anything is written.
    static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// One line on stderr; on a terminal it first clears the progress line.
    static func line(_ s: String) { _ = write(STDERR_FILENO, (isTerminal ? "\r\u{1B}[K" : "") + s + "\n") }

    /// Text on stderr as it is (the progress line, the usage after a bad command line).
    static func raw(_ s: String) { _ = write(STDERR_FILENO, s) }

    /// Text on stdout (reports, `--json`, usage).
    static func out(_ s: String) {
        if let e = write(STDOUT_FILENO, s + "\n") { noteStdoutFailure(e) }
    }

    /// Flushes stdout (with what `print` buffered). When anything written to
    /// it was lost, says so on stderr and returns 1 for a `code` of 0;
    /// otherwise returns `code`.
    static func finish(_ code: Int32) -> Int32 {
        errno = 0
        if fflush(nil) != 0 { noteStdoutFailure(errno == 0 ? EIO : errno) }
        let e = stdoutFailure.load(ordering: .acquiring)
        guard e != 0 else { return code }
        line("diptych: cannot write to standard output: \(String(cString: strerror(e)))")
        return code == 0 ? 1 : code
    }

    private static func noteStdoutFailure(_ e: Int32) {
        _ = stdoutFailure.compareExchange(expected: 0, desired: e, ordering: .acquiringAndReleasing)
    }

    /// Writes all of `s` to `fd`; the errno when a write failed (EPIPE,
    /// EBADF, ENOSPC, ...: what is left is dropped).
    private static func write(_ fd: Int32, _ s: String) -> Int32? {
        var bytes = Array(s.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return n < 0 ? errno : EIO
        }
        return nil
    }
}

/// `diptych: MESSAGE` on stderr, then exit with `code`.
func fail(_ message: String, code: Int32) -> Never {
    Console.line("diptych: \(message)")
    leave(code)
}

/// Ends the process once a take is over (its outputs finalized): standard
/// output flushed (a failed write to it is reported, `Console.finish`), then
/// `_exit`. Worker threads (source readers, encoders) signal that they are
/// done before they have finished unwinding; `exit` would run the
/// libraries' destructors while such a thread is still freeing its
/// thread-local data (a double free in glibc's TSD teardown).
func leave(_ code: Int32) -> Never {
    _exit(Console.finish(code))
}
