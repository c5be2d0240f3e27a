import Testing
@testable import DiptychCore

private let h200 = "NVIDIA H200 (CUDA device 0)"
private func engine(_ codec: String, _ chroma: ChromaSubsampling = .yuv420, _ depth: Int = 8, supported: Bool = true,
                    max: Int = 8192, macroblocks: Int = 262_144) -> NVDECStatus {
    .available(device: h200, support: NVDECCodecSupport(codec: codec, chroma: chroma, bitDepth: depth, supported: supported, engines: 7,
                                                        maxSize: PixelSize(width: max, height: max), minSize: PixelSize(width: 48, height: 16),
                                                        maxMacroblocks: macroblocks))
}
private func traits(_ codec: String = "h264", depth: Int = 8, chroma: ChromaSubsampling = .yuv420, _ w: Int = 1920, _ h: Int = 1080,
                    interlaced: Bool = false, ffmpeg: Bool = true) -> StreamDecodeTraits {
    StreamDecodeTraits(codec: codec, profile: codec == "h264" ? "High" : nil, bitDepth: depth, chroma: chroma,
                       size: PixelSize(width: w, height: h), interlaced: interlaced, nvdecDecoder: ffmpeg ? codec : nil)
}

@Suite struct DecoderPolicyTests {
    @Test func cpuIsAlwaysTheCPU() throws {
        let d = try DecoderPolicy.decide(.cpu, stream: traits(), nvdec: engine("h264"))
        #expect(d == DecoderDecision(.cpu, reason: "--decoder cpu"))
    }

    @Test func autoAndNVDECTakeTheEngineWhereItDecodes() throws {
        for (s, status) in [(traits(), engine("h264")), (traits("hevc", depth: 10), engine("hevc", .yuv420, 10)),
                            (traits("av1", 3840, 2160), engine("av1")), (traits("vp9", 1280, 720), engine("vp9"))] {
            for choice in [DecoderChoice.auto, .nvdec] {
                let d = try DecoderPolicy.decide(choice, stream: s, nvdec: status)
                #expect(d.decoder == .nvdec)
                #expect(d.reason == "NVDEC on \(h200): \(s.summary)")
            }
        }
        #expect(traits().summary == "h264 High 4:2:0 8-bit 1920x1080")
    }

    struct Obstacle: Sendable {
        var stream: StreamDecodeTraits
        var status: NVDECStatus
        var why: String
        init(_ stream: StreamDecodeTraits, _ status: NVDECStatus, _ why: String) { self.stream = stream; self.status = status; self.why = why }
    }

    /// Each obstacle: `auto` decodes on the CPU and says why; `nvdec` refuses with the same words.
    @Test(arguments: [
        Obstacle(traits(), NVDECStatus.unavailable("no NVIDIA CUDA driver: libcuda.so.1: cannot open shared object file"),
         "no NVIDIA CUDA driver: libcuda.so.1: cannot open shared object file"),
        Obstacle(traits(), NVDECStatus.unavailable("the compositor runs on llvmpipe (Mesa), not on an NVIDIA GPU"),
         "the compositor runs on llvmpipe (Mesa), not on an NVIDIA GPU"),
        Obstacle(traits("prores"), engine("prores"), "prores is decoded on the CPU (NVDEC is used for H.264, HEVC, AV1 and VP9)"),
        Obstacle(traits(ffmpeg: false), engine("h264"), "this FFmpeg has no NVDEC decoder for h264"),
        Obstacle(traits(interlaced: true), engine("h264"), "interlaced video is deinterlaced on the CPU"),
        Obstacle(traits("hevc", chroma: .yuv422), engine("hevc", .yuv422), "4:2:2 video: NVDEC frames reach the compositor as 4:2:0 only"),
        Obstacle(traits("hevc", chroma: .yuv444), engine("hevc", .yuv444), "4:4:4 video: NVDEC frames reach the compositor as 4:2:0 only"),
        Obstacle(traits("hevc", depth: 12), engine("hevc", .yuv420, 12), "12-bit video: NVDEC frames reach the compositor as 8 or 10 bits only"),
        Obstacle(traits(depth: 10), engine("h264", .yuv420, 10, supported: false), "this GPU's NVDEC does not decode h264 4:2:0 10-bit"),
        Obstacle(traits("av1"), engine("av1", supported: false), "this GPU's NVDEC does not decode av1 4:2:0 8-bit"),
        Obstacle(traits("av1"), NVDECStatus.available(device: h200, support: nil), "this GPU's NVDEC does not decode av1 4:2:0 8-bit"),
        Obstacle(traits("h264", 8192, 4320), engine("h264", max: 4096, macroblocks: 65536),
         "8192x4320 exceeds this GPU's NVDEC limit for h264 (4096x4096, 65536 macroblocks)"),
        Obstacle(traits("h264", 4096, 4096), engine("h264", max: 4096, macroblocks: 36864),
         "4096x4096 exceeds this GPU's NVDEC limit for h264 (4096x4096, 36864 macroblocks)"),
        Obstacle(traits("h264", 32, 32), engine("h264"), "32x32 is below this GPU's NVDEC minimum for h264 (48x16)"),
    ] as [Obstacle])
    func obstacles(o: Obstacle) throws {
        let s = o.stream, status = o.status, why = o.why
        #expect(DecoderPolicy.obstacle(stream: s, nvdec: status) == why)
        #expect(try DecoderPolicy.decide(.auto, stream: s, nvdec: status) == DecoderDecision(.cpu, reason: why))
        #expect(throws: DecoderUnavailable(why)) { try DecoderPolicy.decide(.nvdec, stream: s, nvdec: status) }
    }

    @Test func capabilitiesReadAsOneLine() {
        let s = NVDECCodecSupport(codec: "hevc", chroma: .yuv420, bitDepth: 10, supported: true, engines: 7,
                                  maxSize: PixelSize(width: 8192, height: 8192), minSize: PixelSize(width: 144, height: 144), maxMacroblocks: 262_144)
        #expect(s.description == "hevc 4:2:0 10-bit: 144x144 to 8192x8192, at most 262144 macroblocks, 7 engines")
        #expect(NVDECCodecSupport(codec: "av1", chroma: .yuv444, bitDepth: 8, supported: false).description == "av1 4:4:4 8-bit: no")
    }

    @Test func cudaFramePlanesHaveTheirRowBytes() {
        let f = CUDAFrame(width: 1918, height: 1081, format: .p010, planes: [.init(address: 1 << 20, pitch: 4096), .init(address: 1 << 22, pitch: 4096)], device: 0)
        #expect(f.rowBytes(plane: 0) == 3836 && f.rowBytes(plane: 1) == 3836)
        #expect(f.rows(plane: 0) == 1081 && f.rows(plane: 1) == 541)
        let n = CUDAFrame(width: 1920, height: 1080, format: .nv12, planes: f.planes, device: 0)
        #expect(n.rowBytes(plane: 0) == 1920 && n.rowBytes(plane: 1) == 1920 && n.rows(plane: 1) == 540)
    }
}
