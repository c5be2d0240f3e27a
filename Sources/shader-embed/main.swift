// Writes a Swift file holding each shader source as a raw string literal.
// Usage: shader-embed OUTPUT.swift SHADER...
import Foundation

let args = CommandLine.arguments
guard args.count >= 2 else {
    FileHandle.standardError.write(Data("usage: shader-embed OUTPUT.swift SHADER...\n".utf8))
    exit(2)
}
var out = "// Generated from Shaders/ by the EmbedShaders plugin. Do not edit.\n"
out += "enum EmbeddedShaders {\n    static let sources: [String: String] = [\n"
for path in args.dropFirst(2) {
    let url = URL(fileURLWithPath: path)
    guard let text = try? String(contentsOf: url, encoding: .utf8) else {
        FileHandle.standardError.write(Data("shader-embed: cannot read \(path)\n".utf8))
        exit(1)
    }
    guard !text.contains("\"\"\"#####") else {
        FileHandle.standardError.write(Data("shader-embed: \(path) contains a forbidden delimiter\n".utf8))
        exit(1)
    }
    out += "        \"\(url.lastPathComponent)\": #####\"\"\"\n\(text)\n\"\"\"#####,\n"
}
out += "    ]\n}\n"
do {
    try out.write(to: URL(fileURLWithPath: args[1]), atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("shader-embed: cannot write \(args[1]): \(error)\n".utf8))
    exit(1)
}
