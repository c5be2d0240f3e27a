import CFFmpeg

/// Versions of the FFmpeg libraries Diptych runs against.
public enum MediaLibraries {
    private static func format(_ v: UInt32) -> String { "\(v >> 16).\((v >> 8) & 0xff).\(v & 0xff)" }
    public static var versions: [(name: String, version: String)] {
        [("libavformat", format(avformat_version())),
         ("libavcodec", format(avcodec_version())),
         ("libavutil", format(avutil_version())),
         ("libswscale", format(swscale_version()))]
    }
}
