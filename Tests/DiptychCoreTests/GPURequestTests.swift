import Testing
@testable import DiptychCore

/// The one reader of the GPU path's variables: every value on its list is
/// taken, anything else is an error naming the variable.
@Suite struct GPURequestTests {
    @Test func defaultsWithoutVariables() throws {
        let r = try GPURequest(environment: ["PATH": "/usr/bin", "DIPTYCH_FFMPEG_LOG": "error"])
        #expect(r == GPURequest())
        #expect(r.readback == .auto && r.uploads == .auto && r.pictures == .auto && r.fences == .egl)
        #expect(r.frameBatch == 16 && r.timerQueries && r.copiers == 16 && r.streamingCopy)
        #expect(r.description == "defaults")
    }

    @Test func everyVariableTakesItsValues() throws {
        let r = try GPURequest(environment: [
            "DIPTYCH_GPU_READBACK": "gl", "DIPTYCH_CUDA_UPLOADS": "off", "DIPTYCH_GPU_PICTURES": "in-place",
            "DIPTYCH_GPU_FENCES": "gl", "DIPTYCH_GPU_FRAME_BATCH": "1", "DIPTYCH_GPU_TIMER_QUERIES": "off",
            "DIPTYCH_CUDA_COPIERS": "64", "DIPTYCH_CUDA_STREAMING_COPY": "off"])
        #expect(r.readback == .gl && r.uploads == .off && r.pictures == .inPlace && r.fences == .gl)
        #expect(r.frameBatch == 1 && !r.timerQueries && r.copiers == 64 && !r.streamingCopy)
        #expect(r.given.count == 8 && r.description.contains("DIPTYCH_GPU_READBACK=gl"))
    }

    @Test(arguments: [
        ("DIPTYCH_GPU_READBACK", "CUDA", "expected auto|gl|cuda"), ("DIPTYCH_CUDA_UPLOADS", "on", "expected auto|import|off"),
        ("DIPTYCH_GPU_PICTURES", "default", "expected auto|in-place|device|textures"), ("DIPTYCH_GPU_FENCES", "", "expected egl|gl"),
        ("DIPTYCH_GPU_FRAME_BATCH", "0", "expected 1 to 256"), ("DIPTYCH_GPU_FRAME_BATCH", "lots", "expected 1 to 256"),
        ("DIPTYCH_GPU_TIMER_QUERIES", "no", "expected on|off"), ("DIPTYCH_CUDA_COPIERS", "65", "expected 1 to 64"),
        ("DIPTYCH_CUDA_STREAMING_COPY", "1", "expected on|off"), ("DIPTYCH_CUDA_PREMAP", "on", "is not a setting"),
        ("DIPTYCH_GPU_READBACK_HANDOVER", "semaphore", "is not a setting"),
    ])
    func badValuesAreErrors(name: String, value: String, reason: String) {
        do throws(ConfigurationError) {
            _ = try GPURequest(environment: [name: value])
            Issue.record("\(name)=\(value) was taken")
        } catch {
            #expect(error.field == name && error.value == value && error.reason.hasPrefix(reason), "\(error)")
        }
    }
}
