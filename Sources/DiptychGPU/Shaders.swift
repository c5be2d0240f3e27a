/// Shader sources from the top-level `Shaders/` folder, embedded at build time.
public enum ShaderLibrary {
    /// Every embedded shader file, by file name.
    public static var sources: [String: String] { EmbeddedShaders.sources }
    public static func source(named name: String) -> String? { EmbeddedShaders.sources[name] }
}
