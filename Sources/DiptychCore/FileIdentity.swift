#if canImport(Glibc)
import Glibc
#endif

/// Which file a path or `file:` URL names, so that two spellings of one file
/// (`./in.mp4`, `file:///d/in.mp4`, a path through a linked folder, a hard
/// link) are found to be the same before a take writes over what it or
/// another take reads (docs/ARCHITECTURE.md, "Source policy").
public struct FileIdentity: Hashable, Sendable, CustomStringConvertible {
    /// Absolute, with every link resolved (the folder's, and the file's own when it exists).
    public let path: String
    /// Absolute as spelled, links not resolved (`/dev/stderr` stays that,
    /// though it resolves to wherever standard error goes).
    public let spelled: String
    /// Device and inode, when the file exists.
    public let device: UInt64?
    public let inode: UInt64?

    /// The file `value` names: a path, or a `file:` URL; nil for network
    /// URLs, pipes and other protocols, which name no file here.
    public init?(_ value: String) {
        guard !value.isEmpty, SourcePolicy.ffmpegProtocol(of: value) == "file" else { return nil }
        var p = Substring(value)
        if p.lowercased().hasPrefix("file:") {
            p = p.dropFirst(5)
            while p.hasPrefix("//") { p = p.dropFirst() }
        }
        guard !p.isEmpty else { return nil }
        var text = String(p)
        if !text.hasPrefix("/") {
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buf, buf.count) != nil else { return nil }
            text = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + text
        }
        spelled = text
        if let whole = FileIdentity.realPath(text) {
            path = whole
        } else {
            // The file does not exist yet: resolve its folder, keep its name.
            let slash = text.lastIndex(of: "/")!
            let folder = slash == text.startIndex ? "/" : String(text[..<slash])
            let name = String(text[text.index(after: slash)...])
            let resolved = FileIdentity.realPath(folder) ?? folder
            path = (resolved == "/" ? "" : resolved) + "/" + name
        }
        var st = stat()
        if stat(path, &st) == 0 {
            device = UInt64(st.st_dev); inode = UInt64(st.st_ino)
        } else {
            device = nil; inode = nil
        }
    }

    /// Whether both name one file (the same resolved path, or the same device and inode).
    public func isSame(as other: FileIdentity) -> Bool {
        if path == other.path { return true }
        if let d = device, let i = inode, d == other.device, i == other.inode { return true }
        return false
    }

    /// Why a recording may not be written here (a device, a FIFO, a
    /// folder, a file of the kernel's under /dev, /proc or /sys), nil when
    /// it may: only regular files, existing or new.
    public var unwritableReason: String? {
        for root in ["/dev", "/proc", "/sys"] {
            for p in [spelled, path] where p == root || p.hasPrefix(root + "/") { return "is under \(root), not a recording file" }
        }
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        // Standard output or error redirected to a file (a log) by another name.
        for fd: Int32 in [1, 2] {
            var std = stat()
            if fstat(fd, &std) == 0 && std.st_dev == st.st_dev && std.st_ino == st.st_ino {
                return "is this process's standard \(fd == 1 ? "output" : "error"), not a recording file"
            }
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "is a folder"
        default: return "is not a regular file (a device, FIFO or socket)"
        }
    }

    public var description: String { path }

    /// `path` absolute with every link resolved; nil (errno set) when it does not exist.
    public static func realPath(_ path: String) -> String? {
        guard let r = realpath(path, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }
}
