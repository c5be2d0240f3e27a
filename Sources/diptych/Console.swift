#if canImport(Glibc)
import Glibc
#endif

/// Writes to the terminal or whatever reads the process's output. A reader
/// that went away (a closed pipe, `| head -1`, a dropped SSH session) must
/// never end a take: SIGPIPE is ignored and failed writes are dropped.
enum Console {
    static let isTerminal = isatty(STDERR_FILENO) == 1

    /// Once, before anything is written.
    static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// One line on stderr; on a terminal it first clears the progress line.
    static func line(_ s: String) { write(STDERR_FILENO, (isTerminal ? "\r\u{1B}[K" : "") + s + "\n") }

    /// Text on stderr as it is (the progress line).
    static func raw(_ s: String) { write(STDERR_FILENO, s) }

    /// Text on stdout (reports, `--json`).
    static func out(_ s: String) { write(STDOUT_FILENO, s + "\n") }

    private static func write(_ fd: Int32, _ s: String) {
        var bytes = Array(s.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return   // EPIPE, EBADF, ...: nobody reads; drop it
        }
    }
}

/// `diptych: MESSAGE` on stderr, then exit with `code`.
func fail(_ message: String, code: Int32) -> Never {
    Console.line("diptych: \(message)")
    leave(code)
}

/// Ends the process once a take is over (its outputs finalized): standard
/// output flushed, then `_exit`. Worker threads (source readers, encoders)
/// signal that they are done before they have finished unwinding; `exit`
/// would run the libraries' destructors while such a thread is still
/// freeing its thread-local data (a double free in glibc's TSD teardown).
func leave(_ code: Int32) -> Never {
    fflush(nil)
    _exit(code)
}
