import Testing
@testable import DiptychGPU
@Test func shadersAreEmbedded() { #expect(ShaderLibrary.source(named: "fullscreen.vert") != nil) }
