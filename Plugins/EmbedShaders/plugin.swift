import Foundation
import PackagePlugin

/// Embeds every file of the package's top-level `Shaders/` folder into the
/// target as a Swift string constant (`EmbeddedShaders.sources["name.frag"]`).
@main
struct EmbedShaders: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let shaderDir = context.package.directoryURL.appending(path: "Shaders")
        let files = try FileManager.default.contentsOfDirectory(at: shaderDir, includingPropertiesForKeys: nil)
            .filter { ["vert", "frag", "comp", "glsl"].contains($0.pathExtension) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedShaders.swift")
        return [.buildCommand(
            displayName: "Embedding \(files.count) shaders",
            executable: try context.tool(named: "shader-embed").url,
            arguments: [output.path] + files.map(\.path),
            inputFiles: files,
            outputFiles: [output])]
    }
}
