import Testing
@testable import DiptychMedia
@Test func reportsLibraryVersions() {
    #expect(MediaLibraries.versions.map(\.name) == ["libavformat", "libavcodec", "libavutil", "libswscale", "libavfilter"])
}
