import Foundation

/// The bearer token from `--token-file`, compared in constant time.
public struct BearerToken: Sendable {
    private let token: [UInt8]

    /// Reads the token (surrounding whitespace trimmed). Errors name the file.
    public init(file path: String) throws(ServerError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .badUsage("--token-file '\(path)': cannot read the file")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw .badUsage("--token-file '\(path)': the file is empty") }
        guard !text.contains(where: { $0.isWhitespace }) else {
            throw .badUsage("--token-file '\(path)': the token must be one word (no spaces or line breaks)")
        }
        token = Array(text.utf8)
    }

    init(_ text: String) { token = Array(text.utf8) }

    /// Whether an `Authorization` header carries this token (`Bearer <token>`).
    /// The comparison takes the same time wherever the bytes differ.
    public func accepts(authorization header: String?) -> Bool {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return false }
        return Self.constantTimeEqual(Array(header.utf8.dropFirst(7)), token)
    }

    /// Compares every byte of the longer input whatever the contents; only
    /// the lengths (not secret) decide the running time.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
        let n = max(a.count, b.count)
        for i in 0..<n {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            diff |= x ^ y
        }
        return diff == 0 && a.count == b.count
    }
}

/// `--output-root`: the folder take outputs and previews must lie in.
/// Network outputs (`rtmp://`, `rtmps://`, `srt://`) are not paths and pass;
/// other URL schemes are refused while a root is set.
public struct OutputRoot: Sendable {
    /// The root, absolute, symbolic links resolved.
    public let path: String

    /// `option` names the flag in errors (`--output-root`, `--input-root`).
    public init(_ path: String, option: String = "--output-root") throws(ServerError) {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue else {
            throw .badUsage("\(option) '\(path)': not a folder")
        }
        self.path = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
    }

    public static let networkSchemes = ["rtmp", "rtmps", "srt"]

    /// The path a take writes `value` to (relative paths are taken from the
    /// root), or a `field`-naming reason why it may not.
    public func confine(_ value: String, field: String) -> Result<String, RequestError> {
        if let scheme = Self.scheme(of: value) {
            if Self.networkSchemes.contains(scheme) { return .success(value) }
            return .failure(.badRequest("\(field) '\(value)': only files under the output root and rtmp://, rtmps:// or srt:// URLs are allowed"))
        }
        if value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return .failure(.badRequest("\(field) '\(value.debugDescription.dropFirst().dropLast())': control characters are not allowed in a path"))
        }
        let parts = value.split(separator: "/", omittingEmptySubsequences: true)
        if parts.contains("..") {
            return .failure(.badRequest("\(field) '\(value)': '..' is not allowed (outputs stay under the output root)"))
        }
        let absolute = value.hasPrefix("/") ? value : path + "/" + value
        // Resolve links in the folder (the file itself need not exist yet).
        let url = URL(fileURLWithPath: absolute)
        let folder = url.deletingLastPathComponent().resolvingSymlinksInPath().standardizedFileURL.path
        let resolved = folder + "/" + url.lastPathComponent
        guard folder == path || folder.hasPrefix(path.hasSuffix("/") ? path : path + "/") else {
            return .failure(.badRequest("\(field) '\(value)': is outside the output root \(path)"))
        }
        // The file itself must not be a link either: writing through it would leave the root.
        var st = stat()
        if lstat(resolved, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK {
            return .failure(.badRequest("\(field) '\(value)': is a symbolic link (outputs stay under the output root)"))
        }
        return .success(resolved)
    }

    /// The URL scheme of `value` (`rtmp` in `rtmp://host/app`), lower-cased, if it has one.
    static func scheme(of value: String) -> String? {
        guard let colon = value.firstIndex(of: ":") else { return nil }
        let s = value[..<colon]
        guard s.count >= 2, let first = s.first, first.isLetter,
              s.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) else { return nil }
        return s.lowercased()
    }
}
