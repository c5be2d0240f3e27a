import CFFmpeg
import DiptychCore
import DiptychMedia
import Foundation
import Testing
@testable import Diptych
@testable import DiptychBench

/// The self-contained server build (scripts/build-server) configures FFmpeg
/// with only the components in scripts/server-ffmpeg-components. What Diptych's
/// code and tests use is derived here — from the code (containers, URL
/// schemes, encoders), from the benchmark's ffmpeg command lines (filters,
/// encoders, muxers) and from the files the tests make (their codecs and
/// containers) — and must all be in that list. Names are mapped to FFmpeg's
/// configure names with this machine's FFmpeg (Debian's full build).
@Suite struct ServerBuildTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// KIND → names, from the components file.
    static func components() throws -> [String: Set<String>] {
        let text = try String(contentsOfFile: root + "/scripts/server-ffmpeg-components", encoding: .utf8)
        var out: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let f = line.split(separator: " ")
            guard f.count >= 2 else { continue }
            out[String(f[0]), default: []].insert(String(f[1]))
        }
        return out
    }

    /// Every Swift source under the given folders of the repository.
    static func sources(_ folders: [String]) throws -> String {
        var all = ""
        for folder in folders {
            let base = root + "/" + folder
            for case let rel as String in FileManager.default.enumerator(atPath: base)! where rel.hasSuffix(".swift") {
                all += try String(contentsOfFile: base + "/" + rel, encoding: .utf8) + "\n"
            }
        }
        return all
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        let re = try! NSRegularExpression(pattern: pattern)
        return re.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// The decoder (configure name) for what an encoder writes: libx264 → h264.
    static func decoder(forEncoder name: String) -> String? {
        guard let enc = avcodec_find_encoder_by_name(name), let dec = avcodec_find_decoder(enc.pointee.id) else { return nil }
        return String(cString: dec.pointee.name)
    }

    /// The format name of a configure name: FFmpeg configures its raw PCM
    /// formats as `pcm_f32le` and names them `f32le`.
    static func formatName(_ configureName: String) -> String {
        configureName.hasPrefix("pcm_") ? String(configureName.dropFirst(4)) : configureName
    }

    /// The demuxer (configure name) that reads files named `*.ext`: mp4 → mov, mkv → matroska.
    static func demuxer(forExtension ext: String) -> String? {
        let muxer = av_guess_format(nil, "f.\(ext)", nil).map { String(cString: $0.pointee.name) }
        let input = muxer.flatMap { av_find_input_format($0) } ?? av_find_input_format(ext)
        return input.map { String(String(cString: $0.pointee.name).split(separator: ",")[0]) }
    }

    /// The filters of an ffmpeg filter graph: `[0:v]scale=1:2,hflip[s];[p][s]overlay=…` → scale, hflip, overlay.
    static func filters(inGraph graph: String) -> [String] {
        graph.split(separator: ";").flatMap { chain in
            chain.split(separator: ",").map { f in
                String(f.replacingOccurrences(of: #"\[[^\]]*\]"#, with: "", options: .regularExpression)
                    .split(separator: "=", maxSplits: 1)[0].split(separator: "@")[0])
            }
        }
    }

    /// Every ffmpeg command line the benchmark runs: the input files, each
    /// layout's peer, the NVDEC peer and its check.
    static func benchCommands() -> [[String]] {
        let peers = Peers(options: BenchOptions())
        let inputs = PeerCommandTests.inputs
        var commands = [EndToEndStage.inputArguments(pattern: EndToEndStage.patterns.primary, size: .hd1080, fps: 60, duration: 1, out: "p.mp4"),
                        EndToEndStage.inputArguments(pattern: EndToEndStage.patterns.secondary, size: .hd720, fps: 30, duration: 1, out: "s.mp4")]
        for layout in BenchOptions.allLayouts {
            let plan = CompositeStage.plan(layout, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
            commands.append(peers.ffmpegArguments(layout: layout, plan: plan, inputs: inputs, out: "o.mp4"))
        }
        let pip = CompositeStage.plan(.pip, canvas: .hd1080, primary: .hd1080, secondary: .hd720)
        for gpuOverlay in [true, false] {
            commands.append(peers.ffmpegCUDAArguments(plan: pip, inputs: inputs, out: "o.mp4", gpuOverlay: gpuOverlay))
        }
        return commands
    }

    static func values(of flag: String, in args: [String]) -> [String] {
        args.indices.filter { args[$0] == flag && $0 + 1 < args.count }.map { args[$0 + 1] }
    }

    @Test func containersAndSchemesTheCodeUses() throws {
        let c = try Self.components()
        for format in ContainerFormat.allCases {
            #expect(c["muxer"]?.contains(format.muxer) == true, "muxer \(format.muxer) (\(format))")
        }
        // Every protocol FFmpeg knows whose URLs Diptych takes as live sources
        // or as outputs; files and pipes (stdin) besides.
        var needed: Set<String> = ["file", "pipe"]
        for output in [0, 1] {
            var opaque: UnsafeMutableRawPointer? = nil
            while let name = avio_enum_protocols(&opaque, Int32(output)) {
                let scheme = String(cString: name)
                if TakeRun.isLive(.url("\(scheme)://host:1/x")) || ContainerFormat.infer(from: "\(scheme)://host:1/x") != nil {
                    needed.insert(scheme == "srt" ? "libsrt" : scheme)
                }
            }
        }
        #expect(needed.isSuperset(of: ["rtmp", "rtmps", "libsrt", "udp", "tcp", "http"]))
        for p in needed.sorted() { #expect(c["protocol"]?.contains(p) == true, "protocol \(p)") }
        // rtsp:// is a demuxer over tcp/udp/rtp, not a protocol.
        #expect(c["demuxer"]?.contains("rtsp") == true)
        for m in ["mpegts", "flv"] { #expect(c["demuxer"]?.contains(m) == true, "demuxer \(m) (live input)") }
        #expect(c["demuxer"]?.contains("yuv4mpegpipe") == true, "Y4M on standard input")
    }

    /// Every string literal in the media code that names an FFmpeg filter or
    /// bitstream filter (the deinterlacer, the frame-rate rewriter, the graph
    /// ends) is in the list.
    @Test func filtersTheCodeUses() throws {
        let c = try Self.components()
        let text = try Self.sources(["Sources/DiptychMedia"])
        let literals = Set(Self.matches(#""([a-z0-9_]+)""#, in: text))
        let filters = literals.filter { avfilter_get_by_name($0) != nil }
        let bsfs = literals.filter { av_bsf_get_by_name($0) != nil }
        #expect(filters.isSuperset(of: ["bwdif", "yadif", "buffer", "buffersink"]), "\(filters.sorted())")
        #expect(bsfs.isSuperset(of: ["h264_metadata", "hevc_metadata"]), "\(bsfs.sorted())")
        for f in filters.sorted() { #expect(c["filter"]?.contains(f) == true, "filter \(f)") }
        for b in bsfs.sorted() { #expect(c["bsf"]?.contains(b) == true, "bsf \(b)") }
    }

    @Test func encodersTheCodeUses() throws {
        let c = try Self.components()
        var needed: Set<String> = []
        for codec in VideoCodec.allCases { needed.insert(EncoderProbe.encoderNames(codec: codec).software) }
        // NVENC (`--encoder nvenc`), where the GPU has an engine.
        for codec in VideoCodec.allCases { needed.insert(NVENCFacts.encoderName(codec)) }
        needed.insert(String(cString: try #require(avcodec_find_encoder(AV_CODEC_ID_AAC)).pointee.name))
        needed.insert(String(cString: try #require(avcodec_find_encoder(AV_CODEC_ID_PNG)).pointee.name))
        for e in needed.sorted() { #expect(c["encoder"]?.contains(e) == true, "encoder \(e)") }
        // What Diptych writes, the same build reads back (hot swaps, previews, the benchmark's checks).
        for e in needed.sorted() {
            let d = try #require(Self.decoder(forEncoder: e))
            #expect(c["decoder"]?.contains(d) == true, "decoder \(d) (reads \(e))")
        }
    }

    @Test func whatTheBenchmarksFFmpegCommandsUse() throws {
        let c = try Self.components()
        let commands = Self.benchCommands()
        var filters: Set<String> = []
        for a in commands {
            for g in Self.values(of: "-filter_complex", in: a) + Self.values(of: "-vf", in: a) { filters.formUnion(Self.filters(inGraph: g)) }
            if a.contains("lavfi") { for i in Self.values(of: "-i", in: a) { filters.formUnion(Self.filters(inGraph: i)) } }
            for e in Self.values(of: "-c:v", in: a) { #expect(c["encoder"]?.contains(e) == true, "encoder \(e)") }
            for f in Self.values(of: "-f", in: a) where f != "lavfi" { #expect(c["muxer"]?.contains(f) == true, "muxer \(f)") }
        }
        #expect(filters.isSuperset(of: ["testsrc2", "overlay", "overlay_cuda", "scale_cuda", "hwdownload", "hstack", "vstack", "fps"]))
        for f in filters.sorted() { #expect(c["filter"]?.contains(f) == true, "filter \(f)") }
        #expect(c["indev"]?.contains("lavfi") == true)
        // The NVDEC check writes to the null muxer, which needs wrapped_avframe.
        #expect(c["muxer"]?.contains("null") == true && c["encoder"]?.contains("wrapped_avframe") == true)
    }

    /// The codecs and containers of every file the tests make with ffmpeg and read with Diptych.
    @Test func formatsTheTestsGenerate() throws {
        let c = try Self.components()
        let text = try Self.sources(["Tests", "bench/Tests"])
        var encoders = Set(Self.matches(#""-c:[va]", "([a-z0-9_]+)""#, in: text))
        encoders.formUnion(Self.matches(#"audioCodec: "([a-z0-9_]+)""#, in: text))
        // (pixel format, codec, extension) cases of the source tests.
        let cases = Self.matches(#"\("[a-z0-9]+", "([a-z0-9_]+)", "[a-z0-9]+""#, in: text)
        encoders.formUnion(cases)
        #expect(encoders.isSuperset(of: ["libx264", "mjpeg", "ffv1", "rawvideo", "aac"]))
        for e in encoders.sorted() {
            let d = try #require(Self.decoder(forEncoder: e), "no decoder for \(e)")
            #expect(c["decoder"]?.contains(d) == true, "decoder \(d) (files the tests make with \(e))")
        }
        var extensions = Set(Self.matches(#"path\("[A-Za-z0-9_.-]*\.([a-z0-9]+)"\)"#, in: text))
        extensions.formUnion(Self.matches(#"\("[a-z0-9]+", "[a-z0-9_]+", "([a-z0-9]+)""#, in: text))
        #expect(extensions.isSuperset(of: ["mp4", "mkv", "avi", "nut", "y4m", "ts", "m4a"]))
        // Extensions FFmpeg has no format for (the benchmark's .svg chart) are not media.
        for ext in extensions.sorted() {
            guard let d = Self.demuxer(forExtension: ext) else { continue }
            #expect(c["demuxer"]?.contains(d) == true, "demuxer \(d) (.\(ext) files the tests make)")
        }
        // `-f null` is where a test's ffmpeg throws its decoded output away (a muxer, not an input).
        // Either way round: streams the tests pipe in, or raw output they read (`-f f32le`: the audio tests' tones).
        for f in Set(Self.matches(#""-f", "([a-z0-9_]+)""#, in: text)) where f != "lavfi" && f != "null" {
            let listed = (c["demuxer"] ?? []).union(c["muxer"] ?? [])
            #expect(listed.contains { Self.formatName($0) == f }, "demuxer or muxer \(f) (the tests' -f \(f))")
        }
    }

    /// Camera capture in the archive: FFmpeg's V4L2 input is configured,
    /// with decoders for what cameras send (raw, MJPEG, H.264), and
    /// libavdevice is linked into diptych — the symbol the script forces
    /// out of the static archive is the one Diptych references weakly —
    /// and checked there with probe.
    @Test func cameraCaptureIsConfiguredAndLinked() throws {
        let c = try Self.components()
        #expect(c["indev"]?.contains("v4l2") == true)
        // The decoders for every format a camera is asked for (`CameraMode.ffmpegInputFormat`).
        var decoders: Set<String> = []
        for fourcc in ["YUYV", "UYVY", "YU12", "422P", "NV12", "RGB3", "BGR3", "GREY", "Y16", "MJPG", "JPEG", "H264"] {
            let name = try #require(CameraMode(format: fourcc, compressed: false, size: .hd720, rate: 30).ffmpegInputFormat, "\(fourcc)")
            decoders.insert(av_get_pix_fmt(name) != AV_PIX_FMT_NONE ? "rawvideo" : name)
        }
        #expect(decoders == ["rawvideo", "mjpeg", "h264"])
        for d in decoders.sorted() { #expect(c["decoder"]?.contains(d) == true, "decoder \(d) (camera frames)") }
        let script = try String(contentsOfFile: Self.root + "/scripts/build-server", encoding: .utf8)
        #expect(script.contains("pkg-config --static --libs-only-l --libs-only-other libavdevice libavformat"), "libavdevice's libraries, first")
        #expect(script.contains("[ \"$product\" = diptych ] && capture=(-Xlinker -u -Xlinker avdevice_register_all)"))
        #expect(script.contains("(libavdevice linked in)"), "the archive's diptych is checked for it")
        let shim = try String(contentsOfFile: Self.root + "/Sources/CV4L2/shim.h", encoding: .utf8)
        #expect(shim.contains("extern void avdevice_register_all(void) __attribute__((weak));"))
    }

    /// Every listed name is a real FFmpeg component (Debian's full build has them all),
    /// and the script configures NVDEC.
    @Test func listIsWellFormedAndTheScriptEnablesNVDEC() throws {
        let c = try Self.components()
        let kinds: Set<String> = ["decoder", "encoder", "hwaccel", "demuxer", "muxer", "protocol", "parser", "bsf", "filter", "indev"]
        #expect(Set(c.keys).isSubset(of: kinds))
        for d in c["decoder"] ?? [] { #expect(avcodec_find_decoder_by_name(d) != nil, "decoder \(d)") }
        for e in c["encoder"] ?? [] { #expect(avcodec_find_encoder_by_name(e) != nil, "encoder \(e)") }
        for m in c["muxer"] ?? [] { #expect(av_guess_format(Self.formatName(m), nil, nil) != nil, "muxer \(m)") }
        for d in c["demuxer"] ?? [] { #expect(av_find_input_format(Self.formatName(d)) != nil, "demuxer \(d)") }
        for h in c["hwaccel"] ?? [] { #expect(h.hasSuffix("_nvdec"), "hwaccel \(h)") }
        let script = try String(contentsOfFile: Self.root + "/scripts/build-server", encoding: .utf8)
        for flag in ["--enable-ffnvcodec", "--enable-nvdec", "--enable-cuvid", "--enable-nvenc", "--enable-libx264", "--enable-libx265",
                     "--disable-everything", "server-ffmpeg-components"] {
            #expect(script.contains(flag), "scripts/build-server: \(flag)")
        }
    }
}
