import Testing
@testable import DiptychCore

/// The one reader of the GPU path's variables: every value on its list is
/// taken, anything else is an error naming the variable. Tuning values are
/// no variables (the benchmarks set them with flags): setting one is an error.
@Suite struct GPURequestTests {
    @Test func defaultsWithoutVariables() throws {
        let r = try GPURequest(environment: ["PATH": "/usr/bin", "DIPTYCH_FFMPEG_LOG": "error"])
        #expect(r == GPURequest())
        #expect(r.readback == .auto && r.uploads == .auto && r.pictures == .auto)
        #expect(r.description == "defaults")
    }

    @Test func everyVariableTakesItsValues() throws {
        let r = try GPURequest(environment: [
            "DIPTYCH_GPU_READBACK": "gl", "DIPTYCH_CUDA_UPLOADS": "off", "DIPTYCH_GPU_PICTURES": "textures",
            "DIPTYCH_GPU_ENCODER_RECONSTRUCTION": "/tmp/r"])
        #expect(r.readback == .gl && r.uploads == .off && r.pictures == .textures && r.encoderReconstruction == "/tmp/r")
        #expect(r.given.count == 4 && r.description.contains("DIPTYCH_GPU_READBACK=gl"))
        #expect(GPURequest().encoderReconstruction == nil)
        #expect(try GPURequest(environment: ["DIPTYCH_GPU_PICTURES": "in-place"]).pictures == .inPlace)
    }

    @Test(arguments: [
        ("DIPTYCH_GPU_READBACK", "CUDA", "expected auto|gl|cuda"), ("DIPTYCH_CUDA_UPLOADS", "on", "expected auto|import|off"),
        ("DIPTYCH_GPU_PICTURES", "default", "expected auto|in-place|textures"), ("DIPTYCH_GPU_PICTURES", "device", "expected auto|in-place|textures"),
        ("DIPTYCH_GPU_PICTURES", "inplace", "expected auto|in-place|textures"),
        ("DIPTYCH_GPU_FENCES", "gl", "is not a setting"), ("DIPTYCH_GPU_FRAME_BATCH", "1", "is not a setting"),
        ("DIPTYCH_GPU_TIMER_QUERIES", "off", "is not a setting"), ("DIPTYCH_CUDA_COPIERS", "4", "is not a setting"),
        ("DIPTYCH_CUDA_STREAMING_COPY", "off", "is not a setting"), ("DIPTYCH_CUDA_PREMAP", "on", "is not a setting"),
        ("DIPTYCH_GPU_READBACK_HANDOVER", "semaphore", "is not a setting"),
        ("DIPTYCH_GPU_ENCODER_RECONSTRUCTION", "", "expected a folder"),
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
