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
  --profile       wait for each pass and report its time (slower overall)
  --gpu SEL       auto|software|N|device|surfaceless|PLATFORM:DEVICE
  --json FILE     also write the result as JSON
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
    var size = PixelSize.hd1080, streams = 16, frames = 120, qp = 26, keyint = 250, profile = false
    var gpu = GPUSelection.auto
    var json: String?
    if CommandLine.arguments.contains("-h") || CommandLine.arguments.contains("--help") { print(encodeUsage); exit(0) }
    let valued = ["--size", "--streams", "--frames", "--qp", "--keyint", "--gpu", "--json"]
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
        case "--gpu": guard let g = GPUSelection(parsing: value) else { fail("--gpu '\(value)': expected auto|software|N|PLATFORM[:DEVICE]") }; gpu = g
        case "--json": json = value
        default: fail("unknown option \(a)\n\(encodeUsage)")
        }
    }
    let sources = encodeSources(size, count: 8)
    do {
        let r = try GPUEncodeBenchmark.run(selection: gpu, size: size, sources: sources, streams: streams, rounds: frames,
                                           settings: GPUH264Settings(qp: qp, keyframeInterval: keyint), profile: profile,
                                           log: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        print(String(format: "encode %@ %d streams qp %d: %.0f pictures/s (%d pictures in %.2f s), %.0f bytes/picture, latency p50 %.2f ms p99 %.2f ms [%@]",
                     r.size, r.streams, qp, r.picturesPerSecond, r.pictures, r.seconds, r.bytesPerPicture, r.latencyP50Ms, r.latencyP99Ms, r.renderer))
        if !r.passMs.isEmpty {
            print("passes (ms/picture): " + r.passMs.sorted { $0.key < $1.key }.map { String(format: "%@ %.3f", $0.key, $0.value) }.joined(separator: ", "))
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
