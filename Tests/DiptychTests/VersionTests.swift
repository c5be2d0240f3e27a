import Testing
@testable import Diptych
@Test func versionIsSet() { #expect(!DiptychVersion.string.isEmpty) }
