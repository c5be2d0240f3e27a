import Foundation
import DiptychCore

/// The command-line and JSON forms of a take's configuration, from the option table.
///
/// JSON form (every key optional):
/// ```json
/// { "primary": "testsrc:smpte:1920x1080@30", "secondary": "selfie.mp4",
///   "out": "take.mp4", "format": "mp4", "size": "1080x1920",
///   "layout": { "kind": "pip", "pip": { "corner": "top-right", "size": 0.3, "margin": { "pixels": 32 } },
///               "zoomSecondary": 1.5 },
///   "rotatePrimary": 90, "rotateSecondary": 270, "mirrorPrimary": false, "mirrorSecondary": true,
///   "encoder": "auto", "codec": "h264", "bitrate": "10M", "preset": "veryfast", "keyframeInterval": 1,
///   "audio": "primary", "duration": 10, "preview": "take.png", "thermalState": "nominal",
///   "secondaryTimeout": 2, "gpu": "auto", "json": false,
///   "switchSecondary": [ { "at": 5, "source": "testsrc:gradient" } ],
///   "alsoOut": [ { "out": "srt://127.0.0.1:9000", "layout": { "kind": "side-by-side" } } ] }
/// ```
/// Unknown keys are errors at every depth (a typo should not be silently ignored).
extension TakeConfiguration {
    /// Parses `diptych record` options (the arguments after the subcommand).
    public static func parse(arguments: [String]) throws(ConfigurationError) -> TakeConfiguration {
        try OptionParser.parse(arguments: arguments, scope: .record).take
    }

    /// Loads a JSON configuration file; errors name the file and the key.
    public static func load(path: String) throws(ConfigurationError) -> TakeConfiguration {
        try OptionParser.load(path: path)
    }

    /// Decodes the JSON form; errors name `source` (the file) and the key.
    public init(jsonData data: Data, source: String = "JSON") throws(ConfigurationError) {
        self = try OptionParser.decode(data, source: source)
    }

    /// The JSON form (sorted keys, pretty-printed); `load` reads it back.
    public func jsonData() -> Data {
        OptionParser.encode(OptionValues(take: self)).data(pretty: true)
    }

    /// Writes the JSON form to `path`.
    public func save(toPath path: String) throws(ConfigurationError) {
        do { try jsonData().write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw ConfigurationError(field: "output file", value: path, reason: "cannot write file")
        }
    }

    /// Help text for `diptych record` options.
    public static var usage: String {
        """
        diptych record --primary SRC [--secondary SRC] --out FILE|URL [options]
          SRC: a media file or URL, testsrc:NAME[:WxH[@FPS]], a camera (v4l2:/dev/videoN, camera:N), - (Y4M on stdin) or none

        """ + OptionParser.usage(.record)
    }
}
