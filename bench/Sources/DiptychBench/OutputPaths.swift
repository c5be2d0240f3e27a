import DiptychCore
import DiptychMedia
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The files a run writes at its end (`--json`, `--chart`, `--sheet`),
/// checked before anything runs, so a bad path costs no measurement.
extension BenchOptions {
    /// The output files this run writes, with their options: the chart when
    /// a stage gives table results, the sheet when the composite stage runs.
    var outputPaths: [(option: String, path: String)] {
        var out: [(String, String)] = []
        if let json { out.append(("--json", json)) }
        if let chart, stages.contains(.composite) || stages.contains(.endToEnd) { out.append(("--chart", chart)) }
        if let sheet, stages.contains(.composite) { out.append(("--sheet", sheet)) }
        return out
    }

    /// Throws, naming the option and the path, when an output file cannot
    /// be written: its folder is missing or not writable, it is a folder,
    /// or it exists and cannot be written.
    func checkOutputPaths() throws(BenchUsageError) {
        for (option, path) in outputPaths {
            // The chart and the sheet are written to a temporary name and renamed over the path.
            guard let why = Self.unwritable(path, replaced: option != "--json") else { continue }
            throw Self.refusal(option, path, why)
        }
    }

    /// `--json 'x': no such folder`; a default path says how to go without it.
    static func refusal(_ option: String, _ path: String, _ why: String) -> BenchUsageError {
        let defaults = BenchOptions()
        let isDefault = (option == "--chart" && path == defaults.chart) || (option == "--sheet" && path == defaults.sheet)
        return BenchUsageError("\(option) '\(ConfigurationError.quoted(path))': \(why)"
                               + (isDefault ? " (the default; \(option) none writes none)" : ""))
    }

    /// Why `path` cannot be written, or nil when it can. A file that is
    /// `replaced` (renamed over) must be a regular file if it exists: a
    /// device such as /dev/stdout is written in place or not at all.
    static func unwritable(_ path: String, replaced: Bool) -> String? {
        if path.isEmpty { return "is empty" }
        var st = stat()
        if stat(path, &st) == 0 {
            if (st.st_mode & S_IFMT) == S_IFDIR { return "is a folder" }
            if replaced && (st.st_mode & S_IFMT) != S_IFREG { return "is not a regular file" }
            return access(path, W_OK) == 0 ? nil : "cannot be written (\(String(cString: strerror(errno))))"
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard stat(folder, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return "no such folder" }
        return access(folder, W_OK | X_OK) == 0 ? nil : "cannot write in its folder (\(String(cString: strerror(errno))))"
    }

    /// A failed write at the end of a run as one line (no error dump):
    /// `--json 'x.json': No space left on device`.
    static func writeFailure(_ option: String, _ path: String, _ error: any Error) -> String {
        let reason: String
        if let media = error as? MediaError {
            reason = media.description
        } else {
            let ns = error as NSError
            if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
                reason = String(cString: strerror(Int32(posix.code)))
            } else if ns.domain == NSPOSIXErrorDomain {
                reason = String(cString: strerror(Int32(ns.code)))
            } else {
                reason = ns.localizedDescription
            }
        }
        let line = reason.split(whereSeparator: \.isNewline).joined(separator: " ")
        return "\(option) '\(ConfigurationError.quoted(path))': cannot write (\(line))"
    }
}
