import DiptychCore
import DiptychGPU
import DiptychOptions
import Foundation

let encodeUsage = """
usage: diptych-gpu-bench --encode [options]
  The GPU H.264 encoder alone: N streams on one context, each encoding moving
  NV12 pictures already on the GPU (no upload, no composite).
  --size WxH      picture size (default 1920x1080)
  --streams N     encoders on the context (default 16)
  --frames N      pictures each stream encodes, after 2 warm-up rounds (default 120)
  --qp N          quantisation parameter (default 26)
  --keyint N      pictures from one IDR to the next (default 250)
  --slices N      slices a picture, whole macroblock rows each (default 1)
  --profile       wait for each pass and report its time (slower overall)
  --deblock on|off  the in-loop deblocking filter (default on, as every take has it; off times or dumps without it)
  --subpel on|off   quarter-sample motion (default on, as every take has it; off times or dumps without its two passes)
  --raster-order walk|wavefront  how the raster-order pass (P_Skip decisions, filter) keeps
                  the standard's order (default: walk on a hardware GPU, wavefront on a software
                  renderer; the walk there needs LP_NUM_THREADS=0, llvmpipe running work groups
                  one after another, and checks the walk's bits, not its waits)
  --pace FPS      each stream submits a picture every 1/FPS s, stream i at i/N of an interval,
                  and each picture is taken as soon as it is done (latency of one picture)
  --input FILE    raw NV12 pictures of --size, tightly packed (e.g. ffmpeg -i clip.mp4
                  -vf scale=1920:1080 -frames:v 16 -pix_fmt nv12 -f rawvideo FILE) instead of
                  the built-in moving pattern
  --gpu SEL       auto|software|N|device|surfaceless|PLATFORM:DEVICE
  --json FILE     also write the result as JSON
  --dump DIR      no timing: encode --frames pictures on each stream, a batch a round
                  waited for, and write stream 0's bitstream (DIR/stream0.h264) and its
                  reconstruction after each picture (DIR/recon0.nv12), to be compared
                  with a decoder's pictures where one runs:
                  ffmpeg -i DIR/stream0.h264 -f rawvideo -pix_fmt nv12 dec.nv12 && cmp dec.nv12 DIR/recon0.nv12
"""

/// Moving NV12 pictures (a panning texture, a block on its own path, noise), `(width + 3) / 4 * 4` bytes a row.
func encodeSources(_ size: PixelSize, count: Int) -> [[UInt8]] {
    let w = size.width, h = size.height, row = (w + 3) / 4 * 4
    return (0..<count).map { index in
        var out = [UInt8](repeating: 0, count: row * (h + h / 2))
        var rng: UInt64 = 0x9E37_79B9_7F4A_7C15 &* UInt64(index + 1)
        let bx = (index * 5) % max(1, w - 200), by = (index * 3) % max(1, h - 200)
        for y in 0..<h {
            for x in 0..<w {
                rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
                let u = x + index * 3, v = y + index
                var l = 60 + (u * 7 + v * 3) % 90 + ((u / 32 + v / 32) % 2) * 40
                if x >= bx && x < bx + 160 && y >= by && y < by + 160 { l = 230 - (x - bx) }
                l += Int(rng % 7) - 3
                out[y * row + x] = UInt8(clamping: l)
            }
        }
        for y in 0..<h / 2 {
            for x in 0..<w / 2 {
                out[row * h + y * row + 2 * x] = UInt8(clamping: 100 + ((x + index) * 5) % 60)
                out[row * h + y * row + 2 * x + 1] = UInt8(clamping: 150 - (y * 3) % 50)
            }
        }
        return out
    }
}

func runEncodeBench() -> Never {
    var size = PixelSize.hd1080, streams = 16, frames = 120, qp = 26, keyint = 250, slices = 1, profile = false, deblock = true, subpel = true
    var gpu = GPUSelection.auto
    var json: String?
    var inputFile: String?
    var pace: Double?
    var dump: String?
    var rasterOrder: H264RasterOrder?
    if CommandLine.arguments.contains("-h") || CommandLine.arguments.contains("--help") { print(encodeUsage); exit(0) }
    let valued = ["--size", "--streams", "--frames", "--qp", "--keyint", "--slices", "--gpu", "--json", "--input", "--pace", "--deblock", "--subpel", "--dump", "--raster-order"]
    let reader = ArgumentReader(valued.map { ($0, true) } + ["--encode", "--profile"].map { ($0, false) })
    let given: [(flag: String, value: String?)]
    do { given = try reader.read(Array(CommandLine.arguments.dropFirst())) } catch { fail("\(error)") }
    for (a, v) in given {
        let value = v ?? ""
        switch a {
        case "--encode": break
        case "--profile": profile = true
        case "--size": guard let s = PixelSize(parsing: value) else { fail("--size expects WxH") }; size = s
        case "--streams": guard let n = Int(value), n >= 1 else { fail("--streams expects a positive number") }; streams = n
        case "--frames": guard let n = Int(value), n >= 1 else { fail("--frames expects a positive number") }; frames = n
        case "--qp": guard let n = Int(value), (0...51).contains(n) else { fail("--qp expects 0 to 51") }; qp = n
        case "--keyint": guard let n = Int(value), n >= 1 else { fail("--keyint expects a positive number") }; keyint = n
        case "--slices": guard let n = Int(value), (1...GPUH264Settings.maxSlices).contains(n) else { fail("--slices expects 1 to \(GPUH264Settings.maxSlices)") }; slices = n
        case "--gpu": guard let g = GPUSelection(parsing: value) else { fail("--gpu '\(value)': expected auto|software|N|PLATFORM[:DEVICE]") }; gpu = g
        case "--json": json = value
        case "--input": inputFile = value
        case "--pace": guard let v = Double(value), v > 0 else { fail("--pace expects pictures per second") }; pace = v
        case "--deblock": guard value == "on" || value == "off" else { fail("--deblock '\(value)': expected on or off") }; deblock = value == "on"
        case "--dump": dump = value
        case "--raster-order":
            guard let o = H264RasterOrder(rawValue: value) else { fail("--raster-order '\(value)': expected walk or wavefront") }
            rasterOrder = o
        case "--subpel": guard value == "on" || value == "off" else { fail("--subpel '\(value)': expected on or off") }; subpel = value == "on"
        default: fail("unknown option \(a)\n\(encodeUsage)")
        }
    }
    var sources = encodeSources(size, count: inputFile == nil ? 8 : 0)
    if let input = inputFile {
        guard size.width % 4 == 0, let data = FileManager.default.contents(atPath: input) else {
            fail("--input \(input): cannot read it (and --size needs a width divisible by 4)")
        }
        let frame = size.width * size.height * 3 / 2
        guard data.count >= frame else { fail("--input \(input): \(data.count) bytes hold no \(size.width)x\(size.height) NV12 picture") }
        let bytes = [UInt8](data)
        sources = stride(from: 0, through: bytes.count - frame, by: frame).map { Array(bytes[$0..<$0 + frame]) }
    }
    let settings = GPUH264Settings(qp: qp, keyframeInterval: keyint, slices: slices)
    let log: (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    // How the pictures are coded, as each line says it.
    let coding = "qp \(qp)\(slices > 1 ? " \(slices) slices" : "")\(deblock ? "" : " deblocking off")\(subpel ? "" : " whole-sample motion")"
        + (rasterOrder.map { " \($0.rawValue)" } ?? "")
    if let dump {
        do {
            let d = try GPUEncodeBenchmark.dump(selection: gpu, size: size, sources: sources, streams: streams, rounds: frames,
                                                settings: settings, deblocking: deblock, subpel: subpel, rasterOrder: rasterOrder, log: log)
            try FileManager.default.createDirectory(atPath: dump, withIntermediateDirectories: true)
            try Data(d.stream).write(to: URL(fileURLWithPath: dump + "/stream0.h264"))
            try Data(d.reconstructions).write(to: URL(fileURLWithPath: dump + "/recon0.nv12"))
            print("dump \(size) \(streams) streams \(frames) pictures \(coding): \(d.stream.count) bytes of stream 0 and its reconstructions in \(dump) [\(d.renderer)]")
            exit(0)
        } catch {
            fail("encode --dump: \(error)")
        }
    }
    do {
        let r = try GPUEncodeBenchmark.run(selection: gpu, size: size, sources: sources, streams: streams, rounds: frames,
                                           settings: settings, profile: profile, pace: pace, deblocking: deblock, subpel: subpel,
                                           rasterOrder: rasterOrder, log: log)
        let name = inputFile.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "pattern"
        let head = "encode \(r.size) \(name) \(r.streams) streams\(pace.map { " paced at \($0) fps" } ?? "") \(coding): "
        let rate = String(format: "%.0f pictures/s (%d pictures in %.2f s), %.0f bytes/picture, ", r.picturesPerSecond, r.pictures, r.seconds, r.bytesPerPicture)
        let latency = String(format: "latency p50 %.2f ms p99 %.2f ms", r.latencyP50Ms, r.latencyP99Ms)
        print(head + rate + latency + " [\(r.renderer)\(r.mapped ? ", mapped" : "")]")
        if !r.passMs.isEmpty {
            print("passes (ms/picture): " + r.passMs.sorted { $0.key < $1.key }.map { String(format: "%@ %.3f", $0.key, $0.value) }.joined(separator: ", "))
        }
        if !r.slowest.isEmpty {
            print("slowest: " + r.slowest.prefix(12).map { String(format: "%.1f ms (stream %d picture %d%@, batch %d, %d IDR)", $0.ms, $0.stream, $0.picture, $0.keyframe ? " IDR" : "", $0.batch, $0.batchKeyframes) }.joined(separator: "; "))
        }
        if let json {
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            try enc.encode(r).write(to: URL(fileURLWithPath: json))
        }
        exit(0)
    } catch {
        fail("encode: \(error)")
    }
}
