import Testing
@testable import DiptychMedia
@Test func reportsLibraryVersions() { #expect(MediaLibraries.versions.count == 4) }
