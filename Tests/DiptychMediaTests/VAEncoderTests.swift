import Foundation
import Testing
import CFFmpeg
import CVA
import DiptychCore
@testable import DiptychMedia

/// The VA-API encoder's settings as a pure function of what its driver
/// offers, and the colour signalling every encoder's stream gets.
@Suite struct VAEncoderTests {
    init() { _ = quietFFmpeg }

    static let cbr = UInt32(VA_RC_CBR), vbr = UInt32(VA_RC_VBR), cqp = UInt32(VA_RC_CQP)

    /// Every row: entrypoints × offered rate controls × file or live.
    @Test(arguments: [
        (["VAEntrypointEncSlice"], cbr | vbr | cqp, false, false, VAEncoderTuning.RateControl.vbr, 20_000_000),
        (["VAEntrypointEncSlice"], cbr | vbr | cqp, true, false, .cbr, 10_000_000),
        (["VAEntrypointEncSlice", "VAEntrypointEncSliceLP"], cbr, false, false, .cbr, 10_000_000),
        (["VAEntrypointEncSliceLP"], vbr, true, true, .vbr, 20_000_000),
        (["VAEntrypointEncSliceLP"], cbr | vbr, false, true, .vbr, 20_000_000),
    ] as [([String], UInt32, Bool, Bool, VAEncoderTuning.RateControl, Int)])
    func tuning(entrypoints: [String], offered: UInt32, live: Bool, lowPower: Bool, rc: VAEncoderTuning.RateControl, peak: Int) {
        let t = VAEncoderTuning.choose(entrypoints: entrypoints, rateControls: offered, bitrate: 10_000_000, live: live)
        #expect(t.lowPower == lowPower)
        #expect(t.rateControl == rc)
        #expect(t.maxRate == peak && t.bufferSize == peak && t.bitrate == 10_000_000)
    }

    @Test func tuningDescriptions() {
        let vbr = VAEncoderTuning.choose(entrypoints: ["VAEntrypointEncSlice"], rateControls: VAEncoderTests.vbr, bitrate: 8_000_000, live: false)
        #expect(vbr.description == "VBR 8000 kbit/s (peak 16000 kbit/s)")
        let lp = VAEncoderTuning.choose(entrypoints: ["VAEntrypointEncSliceLP"], rateControls: VAEncoderTests.cbr, bitrate: 4_000_000, live: true)
        #expect(lp.description == "low-power entrypoint, CBR 4000 kbit/s")
        let none = VAEncoderTuning.choose(entrypoints: ["VAEntrypointEncSlice"], rateControls: VAEncoderTests.cqp, bitrate: 4_000_000, live: false)
        #expect(none.rateControl == nil)
        #expect(none.description == "the driver offers neither CBR nor VBR: FFmpeg's rate control")
    }

    /// The metadata filter writes the colour description into the VUI whatever
    /// the encoder wrote (here libx264 told nothing about colour), as it does
    /// for a VA driver that packs its own sequence headers.
    @Test(arguments: [(ColorMatrix.bt709, ColorRange.limited, AVCOL_PRI_BT709, AVCOL_SPC_BT709, AVCOL_RANGE_MPEG),
                      (.bt601, .full, AVCOL_PRI_SMPTE170M, AVCOL_SPC_SMPTE170M, AVCOL_RANGE_JPEG)])
    func colourIsSignalled(matrix: ColorMatrix, range: ColorRange, primaries: AVColorPrimaries, space: AVColorSpace,
                           avRange: AVColorRange) throws {
        let size = PixelSize(width: 160, height: 120), rate = FrameRate(30)
        let enc = try FFCodecContext(try #require(avcodec_find_encoder_by_name("libx264")))
        let (timeBase, _) = VideoEncoder.ticks(for: rate)
        enc.raw.pointee.width = 160; enc.raw.pointee.height = 120
        enc.raw.pointee.time_base = timeBase
        enc.raw.pointee.pix_fmt = AV_PIX_FMT_NV12
        enc.raw.pointee.max_b_frames = 0
        let options = FFDictionary()
        options.set("preset", "ultrafast")
        try enc.open(options)
        #expect(enc.raw.pointee.color_primaries == AVCOL_PRI_UNSPECIFIED)
        let bsf = try VideoEncoder.timingFilter(for: enc, codec: .h264, rate: rate, timeBase: timeBase, matrix: matrix, range: range)
        let src = try TestPatternSource(name: "smpte", size: size, rate: rate)
        var bytes: [UInt8] = []
        let packet = FFPacket()
        func drain() throws {
            while enc.receive(packet) == 0 {
                for p in try bsf.filter(FFPacket(moving: packet.raw)) {
                    bytes += UnsafeBufferPointer(start: p.raw.pointee.data, count: Int(p.raw.pointee.size))
                }
            }
        }
        for i in 0..<3 {
            let f = try #require(try src.nextFrame())
            let av = FFFrame()
            try av.allocate(format: AV_PIX_FMT_NV12, width: 160, height: 120)
            for plane in 0..<2 {
                let rows = plane == 0 ? 120 : 60
                let dst = try #require(diptych_frame_data(av.raw, Int32(plane)))
                for y in 0..<rows {
                    memcpy(dst + y * Int(diptych_frame_linesize(av.raw, Int32(plane))),
                           f.planes[plane].baseAddress + y * f.planes[plane].stride, 160)
                }
            }
            av.raw.pointee.pts = Int64(i) * 3000
            _ = enc.send(av.raw)
            try drain()
        }
        _ = enc.send(nil as UnsafeMutablePointer<AVFrame>?)
        try drain()
        let dir = TempDir(); defer { dir.remove() }
        let path = dir.path("colour.h264")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let probe = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                     "stream=color_primaries,color_space,color_range", "-of", "csv=p=0", path])
        let want = [String(cString: av_color_range_name(avRange)), String(cString: av_color_space_name(space)),
                    String(cString: av_color_primaries_name(primaries))]
        #expect(probe.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").map(String.init).sorted() == want.sorted(),
                "ffprobe: \(probe.output)")
    }

    /// What the VA import refuses before asking any driver. libva (scripts/setup
    /// installs it) has every call made: a misspelt symbol fails here.
    @Test func importNeedsTwoPlaneNV12() throws {
        guard case .success(let va) = VALibrary.shared else { Issue.record("libva does not load: \(VALibrary.shared)"); return }
        let dummy = UnsafeMutableRawPointer(bitPattern: 0x1000)!
        let rgba = DmaBufFrame(width: 64, height: 64, fourcc: DmaBufFrame.abgr8888, planes: [.init(fd: 0, stride: 256)])
        #expect(throws: VAImportError(reason: "the encoder takes NV12 dma-bufs of 2 planes, not AB24 with 1")) {
            _ = try VAImportedSurface(display: dummy, va: va, frame: rgba)
        }
        let odd = DmaBufFrame(width: 63, height: 64, fourcc: DmaBufFrame.nv12, planes: [.init(fd: 0, stride: 64), .init(fd: 0, offset: 4096, stride: 64)])
        #expect(throws: VAImportError(reason: "NV12 dma-buf 63x64 needs an even, non-zero size")) {
            _ = try VAImportedSurface(display: dummy, va: va, frame: odd)
        }
        let closed = DmaBufFrame(width: 64, height: 64, fourcc: DmaBufFrame.nv12, planes: [.init(fd: 9999, stride: 64), .init(fd: 9999, offset: 4096, stride: 64)])
        #expect(throws: VAImportError(reason: "plane 0 fd 9999: Bad file descriptor")) {
            _ = try VAImportedSurface(display: dummy, va: va, frame: closed)
        }
    }

    /// What `diptych probe` says of a driver's encode surfaces (vaQuerySurfaceAttributes).
    @Test func surfaceSupportDescriptions() {
        let prime2 = UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME_2), prime = UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_DRM_PRIME)
        let full = VASurfaceSupport(profile: "VAProfileH264High", nv12: true, memoryTypes: prime2 | prime | UInt32(VA_SURFACE_ATTRIB_MEM_TYPE_VA))
        #expect(full.description == "NV12 listed; memory types: DRM PRIME 2, DRM PRIME, VA")
        #expect(full.primeImport == true)
        let legacy = VASurfaceSupport(profile: "VAProfileH264High", nv12: true, memoryTypes: prime)
        #expect(legacy.description == "NV12 listed; memory types: DRM PRIME (no DRM PRIME 2 listed; the take's trial decides)")
        let silent = VASurfaceSupport(profile: "VAProfileHEVCMain", nv12: false, memoryTypes: nil)
        #expect(silent.description == "NV12 not listed; no memory types listed (the take's trial decides)")
        let report = VAAPIReport(directory: "/dev/dri", devices: [VADeviceReport(path: "/dev/dri/renderD128", vendor: "Mesa", vaVersion: "1.17",
            profiles: [VAProfileSupport(profile: "VAProfileH264High", entrypoints: ["VAEntrypointEncSlice"])], error: nil, encodeSurfaces: full)],
            problem: nil)
        #expect(report.description.contains("  encode surfaces (VAProfileH264High): NV12 listed; memory types: DRM PRIME 2, DRM PRIME, VA"))
    }

    /// Planes exported as two fds of one buffer are one VA object (one inode).
    @Test func bufferIdentity() throws {
        let fd = open("/dev/null", O_RDONLY), again = dup(fd)
        defer { close(fd); close(again) }
        #expect(VAImportedSurface.BufferKey(fd: fd) == VAImportedSurface.BufferKey(fd: again))
        let other = open("/dev/zero", O_RDONLY)
        defer { close(other) }
        #expect(VAImportedSurface.BufferKey(fd: fd) != VAImportedSurface.BufferKey(fd: other))
        #expect(VAImportedSurface.BufferKey(fd: -1) == nil)
    }
}
