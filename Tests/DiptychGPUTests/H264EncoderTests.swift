import CGLES
import DiptychCore
import Foundation
import Testing
@testable import DiptychGPU

/// NV12 pictures for the encoder: a textured background that pans, a block
/// that moves on its own, and noise, so every macroblock kind and motion shows up.
struct EncoderPattern {
    var width: Int
    var height: Int
    var seed: UInt64 = 1
    var noise = 6
    var pan = (dx: 3, dy: 1)

    var rowBytes: Int { (width + 3) / 4 * 4 }

    /// Frame `index` as the compute composite lays it out (Y rows, then UV rows, `rowBytes` each).
    func frame(_ index: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: rowBytes * (height + height / 2))
        var rng = seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        func random() -> Int {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
            return Int(rng % 1024)
        }
        let bx = (index * 5) % max(1, width - 24), by = (index * 3) % max(1, height - 24)
        for y in 0..<height {
            for x in 0..<width {
                let u = x + index * pan.dx, v = y + index * pan.dy
                var l = 60 + (u * 7 + v * 3) % 90 + ((u / 8 + v / 8) % 2) * 40
                if x >= bx && x < bx + 20 && y >= by && y < by + 20 { l = 230 - (x - bx) * 3 }
                if noise > 0 { l += random() % (2 * noise + 1) - noise }
                out[y * rowBytes + x] = UInt8(clamping: l)
            }
        }
        for y in 0..<height / 2 {
            for x in 0..<width / 2 {
                let u = x + index * pan.dx / 2, v = y + index * pan.dy / 2
                out[rowBytes * height + y * rowBytes + 2 * x] = UInt8(clamping: 100 + (u * 5) % 60 + (noise > 0 ? random() % 5 : 0))
                out[rowBytes * height + y * rowBytes + 2 * x + 1] = UInt8(clamping: 150 - (v * 3) % 50)
            }
        }
        return out
    }
}

struct EncodedRun {
    var stream: [UInt8] = []
    var pictureBytes: [Int] = []
    var reconstructions: [[UInt8]] = []
    var keyframes: [Bool] = []
    /// Each picture's macroblocks as their records hold them (raster order).
    var macroblocks: [[H264ComputeEncoder.MacroblockRecord]] = []
    /// Each picture's vectors (quarter samples, a macroblock each in raster order; zero in IDR pictures).
    var vectors: [[SIMD2<Int>]] { macroblocks.map { $0.map(\.mv) } }
}

/// Encodes `frames` pictures of `pattern` on a software context.
func encodeRun(_ pattern: EncoderPattern, frames: Int, settings: GPUH264Settings, rate: FrameRate = FrameRate(30),
               keyframesAt: Set<Int> = [], reconstruct: Bool = true, deblocking: Bool = true, subpel: Bool = true,
               frameOverride: ((Int) -> [UInt8])? = nil) throws -> EncodedRun {
    let context = try DisplayLadder.open(GPUSelection.software, log: { _ in })
    let format = H264StreamFormat(width: pattern.width, height: pattern.height, rate: rate, matrix: .bt709, range: .limited)
    let programs = try H264Programs(softwareRenderer: context.info.isSoftware)
    let encoder = try H264ComputeEncoder(format: format, settings: settings, programs: programs,
                                         bufferStorage: context.procs.bufferStorage, deblocking: deblocking, subpel: subpel)
    #expect(encoder.mapped == (context.procs.bufferStorage != nil))
    defer { encoder.release(); programs.release() }
    var source: GLuint = 0
    glGenBuffers(1, &source)
    defer { glDeleteBuffers(1, &source) }
    var run = EncodedRun()
    for i in 0..<frames {
        let bytes = frameOverride?(i) ?? pattern.frame(i)
        glBindBuffer(GL.shaderStorageBuffer, source)
        glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes.count), bytes, GL.dynamicDraw)
        glBindBuffer(GL.shaderStorageBuffer, 0)
        let pending = encoder.encode(source: source, rowBytes: pattern.rowBytes, uvOffset: pattern.rowBytes * pattern.height,
                                     pts: MediaTime(value: Int64(i), timescale: 30), keyframe: keyframesAt.contains(i))
        let picture = try encoder.collect(pending)
        run.stream += picture.data
        run.pictureBytes.append(picture.data.count)
        run.keyframes.append(picture.keyframe)
        if reconstruct {
            run.reconstructions.append(try encoder.reconstruction())
            run.macroblocks.append(try encoder.macroblockRecords())
        }
    }
    return run
}

/// Decodes an Annex B stream with FFmpeg's strictest checks into NV12 pictures (nil: FFmpeg failed).
func decodeStrictly(_ stream: [UInt8], width: Int, height: Int) throws -> (frames: [[UInt8]], log: String) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-h264-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let input = dir.appendingPathComponent("in.h264"), output = dir.appendingPathComponent("out.yuv")
    try Data(stream).write(to: input)
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    p.arguments = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-xerror", "-err_detect", "+bitstream+buffer+explode",
                   "-i", input.path, "-pix_fmt", "nv12", output.path]
    let err = Pipe()
    p.standardError = err
    try p.run()
    let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    guard p.terminationStatus == 0, let data = try? Data(contentsOf: output) else { return ([], "ffmpeg exit \(p.terminationStatus): \(log)") }
    let size = width * height * 3 / 2
    let bytes = [UInt8](data)
    return (stride(from: 0, to: bytes.count - size + 1, by: size).map { Array(bytes[$0..<$0 + size]) }, log)
}

/// PSNR of the luma of `a` against the cropped source picture.
func lumaPSNR(_ recon: [UInt8], _ source: [UInt8], width: Int, height: Int, rowBytes: Int) -> Double {
    var se = 0.0
    for y in 0..<height { for x in 0..<width { let d = Double(recon[y * width + x]) - Double(source[y * rowBytes + x]); se += d * d } }
    let mse = se / Double(width * height)
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

/// The first differing picture and byte, for a failure message.
func firstDifference(_ decoded: [[UInt8]], _ recon: [[UInt8]], width: Int) -> String {
    for (i, (d, r)) in zip(decoded, recon).enumerated() where d != r {
        let j = d.indices.first { d[$0] != r[$0] }!
        let luma = width * (d.count * 2 / 3 / width)
        let where_ = j < luma ? "Y (\(j % width), \(j / width))" : "UV (\((j - luma) % width), \((j - luma) / width))"
        return "picture \(i) differs first at \(where_): decoded \(d[j]), reconstructed \(r[j])"
    }
    return "pictures: decoded \(decoded.count), reconstructed \(recon.count)"
}

/// The NAL units of an Annex B stream: where each starts (its start code) and its type.
func nalUnits(_ stream: [UInt8]) -> [(at: Int, type: UInt8)] {
    var starts: [(at: Int, type: UInt8)] = []
    var i = 0
    while i + 3 < stream.count {
        if stream[i] == 0 && stream[i + 1] == 0 && stream[i + 2] == 1 { starts.append((i, stream[i + 3] & 31)); i += 3 } else { i += 1 }
    }
    return starts
}

/// first_mb_in_slice of the slice NAL unit whose header byte is at `at` (ue(v), read
/// from its first bytes: no emulation prevention byte comes that early here).
func firstMacroblock(_ stream: [UInt8], at: Int) -> Int {
    var bit = (at + 1) * 8, zeros = 0
    func next() -> Int { defer { bit += 1 }; return Int(stream[bit / 8] >> UInt8(7 - bit % 8)) & 1 }
    while next() == 0 { zeros += 1 }
    var v = 1
    for _ in 0..<zeros { v = v << 1 | next() }
    return v - 1
}

/// The access units of an Annex B stream: where each begins and its slices'
/// first_mb_in_slice (a unit begins at an SPS, or at a slice whose first
/// macroblock is 0, after a slice).
func accessUnits(_ stream: [UInt8]) -> [(start: Int, slices: [Int])] {
    var units: [(start: Int, slices: [Int])] = []
    for s in nalUnits(stream) where s.type == 1 || s.type == 5 || s.type == 7 {
        let first = s.type == 7 ? 0 : firstMacroblock(stream, at: s.at + 3)
        if units.isEmpty { units.append((0, [])) } else if !units[units.count - 1].slices.isEmpty && first == 0 { units.append((s.at, [])) }
        if s.type != 7 { units[units.count - 1].slices.append(first) }
    }
    return units
}

/// Each access unit's slices (`accessUnits`).
func accessUnitSlices(_ stream: [UInt8]) -> [[Int]] { accessUnits(stream).map(\.slices) }

/// Bytes of each access unit (`accessUnits`).
func pictureSizes(_ stream: [UInt8]) -> [Int] {
    let units = accessUnits(stream)
    return units.indices.map { (($0 + 1 < units.count ? units[$0 + 1].start : stream.count)) - units[$0].start }
}

/// Encodes, decodes strictly and checks every decoded picture against the reconstruction; returns the run.
@discardableResult
func expectBitExact(_ pattern: EncoderPattern, frames: Int, settings: GPUH264Settings, keyframesAt: Set<Int> = [],
                    deblocking: Bool = true, subpel: Bool = true, frameOverride: ((Int) -> [UInt8])? = nil) throws -> EncodedRun {
    let run = try encodeRun(pattern, frames: frames, settings: settings, keyframesAt: keyframesAt, deblocking: deblocking,
                            subpel: subpel, frameOverride: frameOverride)
    let (decoded, log) = try decodeStrictly(run.stream, width: pattern.width, height: pattern.height)
    #expect(decoded.count == frames, "\(log)")
    // (A Bool, so a failure names the first difference instead of printing every picture.)
    let exact = decoded == run.reconstructions
    #expect(exact, "\(firstDifference(decoded, run.reconstructions, width: pattern.width))")
    return run
}

/// Mean luma PSNR of a run against the pictures it encoded.
func meanPSNR(_ run: EncodedRun, _ source: (Int) -> [UInt8], _ pattern: EncoderPattern) -> Double {
    let all = run.reconstructions.indices.map {
        lumaPSNR(run.reconstructions[$0], source($0), width: pattern.width, height: pattern.height, rowBytes: pattern.rowBytes)
    }
    return all.reduce(0, +) / Double(max(1, all.count))
}

/// A picture of saturated 8x8 tiles (0 and 255 luma, 16 and 240 chroma), `inverted` swapping them:
/// the largest residuals a picture can have, in intra and in inter prediction.
func saturatedFrame(_ pattern: EncoderPattern, inverted: Bool) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
    for y in 0..<pattern.height {
        for x in 0..<pattern.width where ((x / 8 + y / 8) % 2 == 0) != inverted { out[y * pattern.rowBytes + x] = 255 }
    }
    for y in 0..<pattern.height / 2 {
        for x in 0..<pattern.width {
            out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + x] = ((x / 8 + y / 4) % 2 == 0) != inverted ? 240 : 16
        }
    }
    return out
}

/// A picture of regions for the intra modes (320x160: five rows of twenty
/// macroblocks above, five below). Luma: columns alike, rows alike, a slope
/// (above: what Intra_16x16's vertical, horizontal and plane predict inside
/// each region), flat tiles, and a grating at one of eight angles a 4x4
/// block (below: DC, and Intra_4x4's directions). Chroma a texture a
/// macroblock: flat, rows alike, columns alike, a slope.
func intraModeFrame(_ pattern: EncoderPattern) -> [UInt8] {
    var out = [UInt8](repeating: 128, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
    let mbWidth = (pattern.width + 15) / 16
    for y in 0..<pattern.height {
        for x in 0..<pattern.width {
            let mbX = x / 16, below = y >= 80
            let l: Double
            switch (below, mbX * 3 / mbWidth) {
            case (false, 0): l = Double(40 + (x * 11) % 180)                       // columns alike
            case (false, 1): l = Double(40 + (y * 11) % 180)                       // rows alike
            case (false, _): l = 30 + Double(x) * 0.6 + Double(y) * 0.9            // a slope
            case (true, 0): l = Double(60 + ((x / 16 + y / 16) * 37) % 120)        // flat tiles
            default:                                                               // a grating a 4x4 block
                let angle = Double((x / 4 * 3 + y / 4 * 5) % 8) * .pi / 8
                l = 128 + 90 * sin((Double(x) * cos(angle) + Double(y) * sin(angle)) * 2 * .pi / 5)
            }
            out[y * pattern.rowBytes + x] = UInt8(clamping: Int(l.rounded()))
        }
    }
    for y in 0..<pattern.height / 2 {
        for x in 0..<pattern.width / 2 {
            let k = (y / 8) * mbWidth + x / 8, lx = Double(x % 8), ly = Double(y % 8)
            for c in 0..<2 {
                let v: Double
                switch (k + c) % 4 {
                case 0: v = 90 + Double((k * 29) % 80)                     // flat
                case 1: v = 70 + ly * 14                                   // rows alike
                case 2: v = 70 + lx * 14                                   // columns alike
                default: v = 60 + lx * 9 + ly * 7                          // a slope
                }
                out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + 2 * x + c] = UInt8(clamping: Int(v.rounded()))
            }
        }
    }
    return out
}

extension GPU {
    @Suite struct H264Encoder {
        @Test("Every intra mode: Intra_16x16's four, Intra_4x4's nine and chroma's four, each in an IDR made to want it, decoded exactly")
        func everyIntraMode() throws {
            let pattern = EncoderPattern(width: 320, height: 160)
            let run = try expectBitExact(pattern, frames: 1, settings: GPUH264Settings(qp: 22)) { _ in intraModeFrame(pattern) }
            let mbs = try #require(run.macroblocks.first)
            let i16 = mbs.filter { !$0.inter && !$0.intra4x4 }, i4 = mbs.filter(\.intra4x4)
            #expect(Set(i16.map(\.lumaMode)) == [0, 1, 2, 3], "Intra_16x16 modes: \(i16.map(\.lumaMode))")
            #expect(Set(i4.flatMap(\.intra4x4Modes)) == Set(0...8), "Intra_4x4 modes: \(Set(i4.flatMap(\.intra4x4Modes)).sorted())")
            #expect(Set(mbs.map(\.chromaMode)) == [0, 1, 2, 3], "chroma modes: \(Set(mbs.map(\.chromaMode)).sorted())")
        }

        @Test("QP 0 and 51, with the largest residuals there are", arguments: [0, 51])
        func extremeQP(qp: Int) throws {
            let pattern = EncoderPattern(width: 48, height: 32)
            // Textured pictures, then saturated tiles that invert every picture (levels at their limits).
            try expectBitExact(pattern, frames: 4, settings: GPUH264Settings(qp: qp, keyframeInterval: 250))
            let run = try expectBitExact(pattern, frames: 4, settings: GPUH264Settings(qp: qp, keyframeInterval: 250)) {
                saturatedFrame(pattern, inverted: $0 % 2 == 1)
            }
            if qp == 0 { #expect(meanPSNR(run, { saturatedFrame(pattern, inverted: $0 % 2 == 1) }, pattern) > 40) }
        }

        @Test("The deblocking filter: a blocky picture at a high QP is filtered exactly as a decoder does, and nearer the source")
        func deblocking() throws {
            // Smooth shading moving a little a picture: coarse quantisation leaves steps at block edges.
            let pattern = EncoderPattern(width: 64, height: 48)
            func shaded(_ i: Int) -> [UInt8] {
                var out = [UInt8](repeating: 128, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
                for y in 0..<pattern.height {
                    for x in 0..<pattern.width { out[y * pattern.rowBytes + x] = UInt8(40 + (3 * (x + i) + 2 * y) % 160) }
                }
                for y in 0..<pattern.height / 2 {
                    for x in 0..<pattern.width { out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + x] = UInt8(100 + (x + 2 * y + i) % 50) }
                }
                return out
            }
            let settings = GPUH264Settings(qp: 40, keyframeInterval: 250)
            let on = try expectBitExact(pattern, frames: 4, settings: settings, frameOverride: shaded)
            let off = try expectBitExact(pattern, frames: 4, settings: settings, deblocking: false, frameOverride: shaded)
            // The filter moved samples of every picture, IDR and P (whose prediction then starts from filtered samples).
            for i in 0..<4 { #expect(on.reconstructions[i] != off.reconstructions[i], "picture \(i) unfiltered") }
            #expect(meanPSNR(on, shaded, pattern) > meanPSNR(off, shaded, pattern))
            // The picture's thresholds (Tables 8-15 to 8-17): luma at QP 40, chroma at its QP 36.
            let d = H264Deblocking(qp: 40)
            #expect(d.thresholds == 80 | 13 << 8 | 50 << 16 | 11 << 24)
            #expect(d.lumaTC0 == 4 | 5 << 8 | 7 << 16 && d.chromaTC0 == 2 | 3 << 8 | 4 << 16)
            let low = H264Deblocking(qp: 15)
            #expect(low.thresholds == 0 && low.lumaTC0 == 0 && low.chromaTC0 == 0)
        }

        @Test("diptych-gpu-bench --dump encodes as asked: without the filter, or without sub-sample motion, stream 0 is an encoder's without it",
              arguments: [(false, true), (true, false)])
        func benchmarkDump(deblocking: Bool, subpel: Bool) throws {
            let pattern = EncoderPattern(width: 64, height: 48)
            let settings = GPUH264Settings(qp: 30, keyframeInterval: 250)
            let dump = try GPUEncodeBenchmark.dump(selection: .software, size: PixelSize(width: pattern.width, height: pattern.height),
                                                   sources: (0..<3).map { pattern.frame($0) }, streams: 2, rounds: 3, settings: settings,
                                                   deblocking: deblocking, subpel: subpel, log: { _ in })
            // (The dump's streams run at 60 pictures a second.)
            let run = try encodeRun(pattern, frames: 3, settings: settings, rate: FrameRate(60), deblocking: deblocking, subpel: subpel)
            let full = try encodeRun(pattern, frames: 3, settings: settings, rate: FrameRate(60), reconstruct: false)
            #expect(dump.stream.elementsEqual(run.stream), "stream 0 differs from the encoder's")
            #expect(dump.reconstructions.elementsEqual(run.reconstructions.joined()), "reconstructions differ from the encoder's")
            #expect(!run.stream.elementsEqual(full.stream), "the tool left out changes nothing here")
        }

        /// `diptych-gpu-bench`, built beside the tests.
        static var gpuBench: URL? {
            let dirs = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                        Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                        URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")]
            return dirs.map { $0.appendingPathComponent("diptych-gpu-bench") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
        }

        /// Stream 0 and its reconstructions from `diptych-gpu-bench --encode --gpu software --dump` with `arguments`.
        static func benchDump(_ arguments: [String], environment: [String: String] = [:]) throws -> (stream: Data, reconstructions: Data) {
            let bench = try #require(gpuBench, "diptych-gpu-bench is not built")
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-walk-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: dir) }
            let p = Process()
            p.executableURL = bench
            p.arguments = ["--encode", "--gpu", "software", "--dump", dir.path] + arguments
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            p.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            p.standardError = errors
            try p.run()
            let said = errors.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            try #require(p.terminationStatus == 0, "diptych-gpu-bench \(arguments.joined(separator: " ")): \(String(decoding: said, as: UTF8.self))")
            return (try Data(contentsOf: dir.appendingPathComponent("stream0.h264")), try Data(contentsOf: dir.appendingPathComponent("recon0.nv12")))
        }

        /// The walk (a work group a macroblock row, each waiting on the row
        /// above) is what a hardware GPU runs, for the raster-order pass and
        /// for an IDR's intra pass; llvmpipe runs it in order only on one
        /// thread, where no row ever waits: so this checks the walks'
        /// decisions, intra modes, strengths and filtering, not their waits
        /// (which only a GPU exercises).
        @Test("The raster-order pass as a walk gives the wavefront's bits (llvmpipe on one thread)", .timeLimit(.minutes(5)), arguments: [
            (200, 120, ["--slices", "2"]), (160, 96, ["--slices", "1", "--qp", "40"]), (96, 144, ["--slices", "3", "--keyint", "3"]),
        ])
        func walkGivesTheWavefrontsBits(width: Int, height: Int, coding: [String]) throws {
            let common = ["--size", "\(width)x\(height)", "--streams", "2", "--frames", "6"] + coding
            let wavefront = try Self.benchDump(common + ["--raster-order", "wavefront"])
            let walk = try Self.benchDump(common + ["--raster-order", "walk"], environment: ["LP_NUM_THREADS": "0"])
            #expect(!wavefront.stream.isEmpty && wavefront.reconstructions.count == 6 * width * height * 3 / 2)
            #expect(walk.stream == wavefront.stream, "the walk's bitstream differs from the wavefront's")
            #expect(walk.reconstructions == wavefront.reconstructions, "the walk's reconstructions differ from the wavefront's")
        }

        @Test("Sizes that are not multiples of 16, odd macroblock counts, a single macroblock", arguments: [
            (16, 16), (18, 18), (50, 34), (80, 16), (16, 80), (46, 30),
        ])
        func oddSizes(width: Int, height: Int) throws {
            let pattern = EncoderPattern(width: width, height: height, pan: (dx: 2, dy: -1))
            let run = try expectBitExact(pattern, frames: 4, settings: GPUH264Settings(qp: 24, keyframeInterval: 3))
            #expect(run.keyframes == [true, false, false, true])
            #expect(meanPSNR(run, pattern.frame, pattern) > 30)
        }

        @Test("Slices of whole rows: a NAL unit each, nothing predicted or filtered across their edges", arguments: [
            (64, 80, 2), (64, 80, 5), (48, 112, 3), (46, 30, 2), (96, 64, 4), (32, 32, 5),
        ])
        func slices(width: Int, height: Int, slices: Int) throws {
            let pattern = EncoderPattern(width: width, height: height, pan: (dx: 3, dy: -2))
            let run = try expectBitExact(pattern, frames: 6, settings: GPUH264Settings(qp: 28, keyframeInterval: 4, slices: slices))
            #expect(run.keyframes == [true, false, false, false, true, false])
            // ⌈rows / slices⌉ rows a slice: 5 rows in 2 slices are 3 + 2; in 3, 7 rows are 3 + 3 + 1.
            let mbWidth = (width + 15) / 16, rows = (height + 15) / 16
            let sliceRows = (rows + min(slices, rows) - 1) / min(slices, rows)
            let firsts = Array(stride(from: 0, to: rows, by: sliceRows).map { $0 * mbWidth })
            #expect(accessUnitSlices(run.stream) == Array(repeating: firsts, count: 6))
            #expect(meanPSNR(run, pattern.frame, pattern) > 30)
        }

        @Test("A static picture in slices: every slice of a P picture is its header and one skip run")
        func staticSlices() throws {
            let pattern = EncoderPattern(width: 96, height: 96, noise: 0)
            let run = try expectBitExact(pattern, frames: 5, settings: GPUH264Settings(qp: 26, slices: 3)) { _ in pattern.frame(0) }
            let sizes = pictureSizes(run.stream)
            #expect(accessUnitSlices(run.stream) == Array(repeating: [0, 12, 24], count: 5))
            for s in sizes.suffix(3) { #expect(s < 3 * 16, "P picture of \(s) bytes (all: \(sizes))") }
        }

        @Test("No slices or more than 256 is refused; more than the picture has rows is a slice a row")
        func sliceLimits() throws {
            for n in [0, 257] {
                let error = #expect(throws: GPUError.self) { try GPUH264Settings(slices: n).validate() }
                #expect(error.map(String.init(describing:)) == "GPU encoder: \(n) slices: a picture takes 1 to 256")
            }
            let format = H264StreamFormat(width: 64, height: 32, rate: FrameRate(30), matrix: .bt709, range: .limited)
            #expect(H264ComputeEncoder.sliceRows(3, of: format) == 1)
            #expect(H264ComputeEncoder.sliceRows(2, of: format) == 1)
            #expect(H264ComputeEncoder.sliceRows(1, of: format) == 2)
            let tall = H264StreamFormat(width: 64, height: 112, rate: FrameRate(30), matrix: .bt709, range: .limited)
            #expect(H264ComputeEncoder.sliceRows(3, of: tall) == 3)   // 7 rows: 3 + 3 + 1
            #expect(H264ComputeEncoder.sliceRows(4, of: tall) == 2)   // 2 + 2 + 2 + 1
        }

        @Test("A static picture is almost all P_Skip: long skip runs, the slice ending in one")
        func staticPicture() throws {
            let pattern = EncoderPattern(width: 96, height: 64, noise: 0)
            let run = try expectBitExact(pattern, frames: 5, settings: GPUH264Settings(qp: 26)) { _ in pattern.frame(0) }
            // Once the first P picture has refined what the IDR left, a P picture of 24 skipped
            // macroblocks is a slice header and one skip run: a few bytes.
            let sizes = pictureSizes(run.stream)
            #expect(sizes.count == 5)
            for s in sizes.suffix(3) { #expect(s < 16, "P picture of \(s) bytes (all: \(sizes))") }
        }

        @Test("A still scene under faint noise: P macroblocks drop isolated small levels (decimation)")
        func decimation() throws {
            // One still picture, every frame with its own faint luma noise (−2 to 2).
            let still = EncoderPattern(width: 96, height: 64, noise: 0)
            let base = still.frame(0)
            let source: (Int) -> [UInt8] = { i in
                var out = base
                var rng = UInt64(i + 1) &* 0x9E37_79B9_7F4A_7C15
                for k in 0..<(still.rowBytes * still.height) {
                    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
                    out[k] = UInt8(clamping: Int(out[k]) + Int(rng % 5) - 2)
                }
                return out
            }
            let run = try expectBitExact(still, frames: 6, settings: GPUH264Settings(qp: 22), frameOverride: source)
            // Without decimation these P pictures took 111–194 bytes each; with it 18–73.
            let sizes = pictureSizes(run.stream)
            #expect(sizes.count == 6)
            for s in sizes.dropFirst() { #expect(s < 100, "P picture of \(s) bytes (all: \(sizes))") }
        }

        @Test("A scene cut inside a P run")
        func sceneCut() throws {
            let a = EncoderPattern(width: 64, height: 48, seed: 3)
            let b = EncoderPattern(width: 64, height: 48, seed: 9, noise: 20, pan: (dx: -5, dy: 2))
            let source: (Int) -> [UInt8] = { i in i < 3 ? a.frame(i) : b.frame(i + 40).map { 255 - $0 } }
            let run = try expectBitExact(a, frames: 6, settings: GPUH264Settings(qp: 28), frameOverride: source)
            #expect(meanPSNR(run, source, a) > 28)
            #expect(run.keyframes == [true, false, false, false, false, false])
            // The cut's P picture codes its macroblocks as Intra_16x16 where that beats P:
            // 1,140 bytes here, 1,508 with every macroblock P.
            let sizes = pictureSizes(run.stream)
            #expect(sizes[3] < 1_300, "the cut's P picture: \(sizes[3]) bytes (all: \(sizes))")
        }

        @Test("Motion that speeds up beyond 16 samples a picture is followed (P pictures a fraction of the IDR)")
        func farMotion() throws {
            // A window over a smooth texture gathering speed as a camera does: 10, 14, then 18
            // samples right a picture, and 5, 9, 16 up; each picture's search starts from the
            // vectors of the one before.
            let pattern = EncoderPattern(width: 128, height: 64)
            let xs = [0, 10, 24, 42], ys = [30, 25, 16, 0]
            let tw = 128 + 42, th = 64 + 30
            let texture = (0..<(tw * th)).map { i -> UInt8 in
                let x = Double(i % tw), y = Double(i / tw)
                let l = 128 + 50 * sin(x * 0.07 + y * 0.03) + 40 * cos(y * 0.09 - x * 0.02) + 20 * sin(x * 0.21) * cos(y * 0.17)
                return UInt8(l.rounded())
            }
            let source: (Int) -> [UInt8] = { i in
                var out = [UInt8](repeating: 128, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
                let ox = xs[i], oy = ys[i]
                for y in 0..<pattern.height {
                    for x in 0..<pattern.width { out[y * pattern.rowBytes + x] = texture[(oy + y) * tw + ox + x] }
                }
                return out
            }
            let run = try expectBitExact(pattern, frames: 4, settings: GPUH264Settings(qp: 26), frameOverride: source)
            #expect(meanPSNR(run, source, pattern) > 30)
            let sizes = pictureSizes(run.stream)
            // Each P picture codes the strip the motion uncovers; the last one (18, −16) took 372
            // bytes against an IDR of 658, 602 with vectors bounded to ±16.
            for s in sizes.dropFirst() { #expect(s * 10 < sizes[0] * 7, "P picture of \(s) bytes against an IDR of \(sizes[0])") }
        }

        @Test("Motion by fractions of a sample, out over every edge: predicted from the quarter sample as a decoder does", arguments: [
            (0.25, 0.0), (-0.5, 0.75), (1.75, -1.25), (-2.5, -0.5),
        ])
        func subSampleMotion(dx: Double, dy: Double) throws {
            // A smooth texture panned by (dx, dy) samples a picture: the picture's
            // content leaves over two edges and comes in over the others.
            let pattern = EncoderPattern(width: 64, height: 48)
            let source: (Int) -> [UInt8] = { i in
                var out = [UInt8](repeating: 128, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
                for y in 0..<pattern.height {
                    for x in 0..<pattern.width {
                        let u = Double(x) + dx * Double(i), v = Double(y) + dy * Double(i)
                        let l = 128 + 60 * sin(u * 0.31 + v * 0.07) + 40 * cos(v * 0.23 - u * 0.05)
                        out[y * pattern.rowBytes + x] = UInt8(l.rounded())
                    }
                }
                for y in 0..<pattern.height / 2 {
                    for x in 0..<pattern.width {
                        let u = Double(x / 2) + dx * Double(i) / 2, v = Double(y) + dy * Double(i) / 2
                        out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + x] = UInt8((128 + 30 * sin(u * 0.2 + v * 0.1)).rounded())
                    }
                }
                return out
            }
            let settings = GPUH264Settings(qp: 24)
            let quarter = try expectBitExact(pattern, frames: 5, settings: settings, frameOverride: source)
            let whole = try expectBitExact(pattern, frames: 5, settings: settings, subpel: false, frameOverride: source)
            // Vectors with a fraction, pointing outside the picture at its edges.
            let p = quarter.vectors.dropFirst().flatMap { $0 }
            let fractional = p.filter { $0.x & 3 != 0 || $0.y & 3 != 0 }
            #expect(fractional.count * 2 > p.count, "\(fractional.count) of \(p.count) vectors with a fraction")
            #expect(whole.vectors.allSatisfy { $0.allSatisfy { $0.x & 3 == 0 && $0.y & 3 == 0 } })
            // Fewer bytes for the P pictures than whole-sample vectors take, for as good a picture.
            let q = pictureSizes(quarter.stream).dropFirst().reduce(0, +), w = pictureSizes(whole.stream).dropFirst().reduce(0, +)
            #expect(q * 10 < w * 9, "P pictures: \(q) bytes with quarter samples, \(w) with whole ones")
            #expect(meanPSNR(quarter, source, pattern) > meanPSNR(whole, source, pattern) - 0.3)
        }

        @Test("A 720p picture, IDR and P: every macroblock row decided and filtered in the standard's order, as a decoder does")
        func largePicture() throws {
            // 45 macroblock rows: more than a dispatch's share of one llvmpipe
            // thread, where a row waiting on another thread's rows once ended early.
            let pattern = EncoderPattern(width: 1280, height: 720, noise: 3, pan: (dx: 2, dy: 1))
            let run = try expectBitExact(pattern, frames: 3, settings: GPUH264Settings(qp: 30))
            #expect(meanPSNR(run, pattern.frame, pattern) > 30)
        }

        @Test("P_Skip decided in the standard's order: a pan under faint noise is almost all P_Skip, exactly as a decoder derives it")
        func pSkipInOrder() throws {
            // A smooth texture pans 2 samples right and 1 down a picture under luma
            // noise that quantises to nothing: every macroblock's vector is its neighbours'.
            let pattern = EncoderPattern(width: 160, height: 96)
            let source: (Int) -> [UInt8] = { i in
                var out = [UInt8](repeating: 128, count: pattern.rowBytes * (pattern.height + pattern.height / 2))
                var rng = UInt64(i + 1) &* 0x9E37_79B9_7F4A_7C15
                for y in 0..<pattern.height {
                    for x in 0..<pattern.width {
                        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
                        let u = Double(x - 2 * i), v = Double(y - i)
                        let l = 128 + 50 * sin(u * 0.19 + v * 0.05) + 40 * cos(v * 0.17 - u * 0.04) + Double(Int(rng % 3) - 1)
                        out[y * pattern.rowBytes + x] = UInt8(l.rounded())
                    }
                }
                for y in 0..<pattern.height / 2 {
                    for x in 0..<pattern.width / 2 {
                        let u = Double(x - i), v = Double(y) - Double(i) / 2
                        out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + 2 * x] = UInt8((128 + 30 * sin(u * 0.3 + v * 0.1)).rounded())
                        out[pattern.rowBytes * pattern.height + y * pattern.rowBytes + 2 * x + 1] = UInt8((128 + 30 * cos(v * 0.25 - u * 0.1)).rounded())
                    }
                }
                return out
            }
            let run = try expectBitExact(pattern, frames: 5, settings: GPUH264Settings(qp: 32), frameOverride: source)
            for (i, mbs) in run.macroblocks.enumerated().dropFirst(2) {
                // Inside the picture (on the left and top edges the P_Skip vector is zero,
                // as a neighbour is missing, and the strips the pan uncovers are coded).
                let interior = mbs.enumerated().filter { $0.offset % 10 > 0 && $0.offset >= 10 }.map(\.element)
                let skipped = interior.filter(\.skipped).count
                #expect(skipped * 10 >= interior.count * 8, "picture \(i): \(skipped) of \(interior.count) macroblocks inside skipped")
                // The skipped macroblocks inside carry the pan's vector (−2, −1), within a quarter sample.
                let inside = interior.filter(\.skipped).map(\.mv)
                #expect(inside.allSatisfy { abs($0.x + 8) <= 1 && abs($0.y + 4) <= 1 },
                        "picture \(i): vectors of skipped macroblocks \(Set(inside.map { "\($0)" }))")
            }
        }

        @Test("Motion that points outside the picture at every edge", arguments: [
            (6, 4), (-6, -4), (7, -5), (-3, 6),
        ])
        func edgeMotion(dx: Int, dy: Int) throws {
            let pattern = EncoderPattern(width: 64, height: 48, noise: 2, pan: (dx: dx, dy: dy))
            let run = try expectBitExact(pattern, frames: 5, settings: GPUH264Settings(qp: 22))
            #expect(meanPSNR(run, pattern.frame, pattern) > 32)
        }
    

        /// The quality benchmark's encoder (bench/h264-quality.py): each line of the job file that
        /// DIPTYCH_H264_BENCH names is `input.nv12 width height frames qp output.h264`. Off unless the variable is set.
        @Test("Benchmark entry: encodes the NV12 files a job file lists",
              .enabled(if: ProcessInfo.processInfo.environment["DIPTYCH_H264_BENCH"] != nil,
                       "run by bench/h264-quality.py (DIPTYCH_H264_BENCH names its job file)"))
        func benchmarkEntry() throws {
            let jobs = try String(contentsOfFile: ProcessInfo.processInfo.environment["DIPTYCH_H264_BENCH"]!, encoding: .utf8)
            for line in jobs.split(separator: "\n") where !line.hasPrefix("#") {
                let f = line.split(separator: " ").map(String.init)
                guard f.count == 6 || (f.count == 7 && f[6].hasPrefix("slices=")), let w = Int(f[1]), let h = Int(f[2]),
                      let frames = Int(f[3]), let qp = Int(f[4]), let slices = f.count == 7 ? Int(f[6].dropFirst(7)) : 1 else {
                    Issue.record("job line '\(line)': expected input.nv12 width height frames qp output.h264 [slices=N]")
                    continue
                }
                let input = try Data(contentsOf: URL(fileURLWithPath: f[0]))
                let pattern = EncoderPattern(width: w, height: h)
                let size = pattern.rowBytes * h * 3 / 2
                try #require(w % 4 == 0 && input.count >= size * frames, "\(f[0]): \(input.count) bytes for \(frames) frames of \(w)x\(h)")
                let started = Date()
                let run = try encodeRun(pattern, frames: frames, settings: GPUH264Settings(qp: qp, slices: slices)) { i in [UInt8](input[(i * size)..<((i + 1) * size)]) }
                try Data(run.stream).write(to: URL(fileURLWithPath: f[5]))
                print("bench \(f[5]) \(run.stream.count) bytes, \(run.keyframes.filter { $0 }.count) IDR, \(Date().timeIntervalSince(started)) s")
            }
        }

        @Test("Decoded pictures equal the encoder's reconstruction, byte for byte", arguments: [
            (48, 32, 26), (64, 48, 30), (40, 24, 20),
        ])
        func bitExact(width: Int, height: Int, qp: Int) throws {
            let pattern = EncoderPattern(width: width, height: height)
            let run = try encodeRun(pattern, frames: 6, settings: GPUH264Settings(qp: qp, keyframeInterval: 4))
            let (decoded, log) = try decodeStrictly(run.stream, width: width, height: height)
            #expect(decoded.count == 6, "\(log)")
            let exact = decoded == run.reconstructions
            #expect(exact, "\(firstDifference(decoded, run.reconstructions, width: width))")
            #expect(run.keyframes == [true, false, false, false, true, false])
            for i in 0..<decoded.count {
                #expect(lumaPSNR(run.reconstructions[i], pattern.frame(i), width: width, height: height, rowBytes: pattern.rowBytes) > 30)
            }
        }

        @Test("A bit rate is met within 10 % over 10 s, through a scene change, and the VBV buffer never runs dry")
        func bitrate() throws {
            let pattern = EncoderPattern(width: 96, height: 64)
            let other = EncoderPattern(width: 96, height: 64, seed: 7, noise: 12, pan: (dx: -5, dy: 2))
            let target = 300_000, fps = 30, frames = 300
            let settings = GPUH264Settings(keyframeInterval: 60, bitrate: target, maxrate: target, bufsize: target / 2)
            let run = try encodeRun(pattern, frames: frames, settings: settings, rate: FrameRate(Int32(fps)), reconstruct: false,
                                    frameOverride: { $0 < 150 ? pattern.frame($0) : other.frame($0) })
            let bits = run.pictureBytes.reduce(0, +) * 8
            let rate = Double(bits) / (Double(frames) / Double(fps))
            #expect(abs(rate - Double(target)) / Double(target) < 0.10, "\(Int(rate)) bit/s against \(target)")
            for half in [0..<150, 150..<300] {
                let r = Double(run.pictureBytes[half].reduce(0, +) * 8) / 5
                #expect(abs(r - Double(target)) / Double(target) < 0.15, "\(half): \(Int(r)) bit/s against \(target)")
            }
            // The VBV buffer: full at the start, filled at maxrate, emptied by each picture (NAL bytes, a bound on the slice bits).
            var buffer = Double(target / 2) * 0.9
            var lowest = buffer
            for b in run.pictureBytes {
                buffer = min(Double(target / 2), buffer + Double(target) / Double(fps)) - Double(b * 8)
                lowest = min(lowest, buffer)
            }
            #expect(lowest >= 0, "the VBV buffer fell to \(Int(lowest)) bits")
            let (decoded, log) = try decodeStrictly(run.stream, width: 96, height: 64)
            #expect(decoded.count == frames, "\(log)")
        }

        @Test("Settings out of range are refused, naming the value")
        func badSettings() {
            #expect(throws: GPUError.self) { try GPUH264Settings(qp: 52).validate() }
            #expect(throws: GPUError.self) { try GPUH264Settings(bitrate: 1_000_000, maxrate: 2_000_000).validate() }
            #expect(throws: GPUError.self) { try GPUH264Settings(bitrate: 1_000_000, maxrate: 500_000, bufsize: 1_000_000).validate() }
            #expect(throws: GPUError.self) { try GPUH264Settings(keyframeInterval: 0).validate() }
            do { try GPUH264Settings(qp: 60).validate() } catch { #expect(error.description.contains("QP 60")) }
        }

        @Test("The encoder's programs compiled ahead (as a server does at start) serve the context's first encoder, and are compiled once")
        func preparedPrograms() throws {
            let c = try makeCompositor(pass: .compute)
            defer { c.shutdown() }
            _ = try c.prepareGPUEncoder()
            let programs = try c.withRenderer { r throws(GPUError) in ObjectIdentifier(try r.context.h264Programs()) }
            _ = try c.prepareGPUEncoder()
            #expect(try c.withRenderer { r throws(GPUError) in ObjectIdentifier(try r.context.h264Programs()) } == programs)
            let out = try c.addOutput(canvas: PixelSize(width: 64, height: 48))
            let stream = try c.attachEncoder(output: out, settings: GPUH264Settings(qp: 26), rate: FrameRate(30))
            #expect(stream.parameterSets.starts(with: [0, 0, 0, 1, 0x67]))
        }

        @Test("A compositor's output encoded on the GPU decodes to its reconstruction, near the frames its NV12 readback gives")
        func compositorOutput() throws {
            // Each picture's reconstruction written as the render thread collects it (DIPTYCH_GPU_ENCODER_RECONSTRUCTION).
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-recon-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            var request = GPURequest()
            request.encoderReconstruction = folder.path
            let c = try makeCompositor(request: request, pass: .compute)
            defer { c.shutdown() }
            let canvas = PixelSize(width: 128, height: 72)
            let plan = CompositionPlan(canvas: canvas, background: RGBAColor(r: 0, g: 0, b: 0.4, a: 1), draws: [
                DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
                DrawDescription(role: .secondary, destination: PixelRect(x: 80, y: 40, width: 40, height: 24), zIndex: 1)])
            let reference = try c.addOutput(canvas: canvas)
            let encoded = try c.addOutput(canvas: canvas)
            let stream = try c.attachEncoder(output: encoded, settings: GPUH264Settings(qp: 18, keyframeInterval: 5), rate: FrameRate(30))
            #expect(stream.width == 128 && stream.height == 72)
            #expect(stream.parameterSets.starts(with: [0, 0, 0, 1, 0x67]))
            var readbacks: [VideoFrame] = []
            var pictures: [GPUEncodedPicture] = []
            let frames = 8
            for i in 0..<frames {
                try c.upload(ComputePath.picture(128, 72, .nv12, seed: i), role: .primary)
                try c.upload(ComputePath.picture(40, 24, .rgba, seed: 3 * i), role: .secondary)
                let pts = MediaTime(value: Int64(i), timescale: 30)
                try c.render(output: reference, plan: plan, pts: pts)
                try c.render(output: encoded, plan: plan, pts: pts, readback: false)
                while let p = try c.nextEncoded(wait: false) { pictures.append(p) }
                readbacks += try c.flush()
            }
            while let p = try c.nextEncoded(wait: true) { pictures.append(p) }
            // llvmpipe has timer queries: the render thread timed its batches on the GPU, and the encoder's passes
            // at the end of each. Every batch is done (the pictures were waited for); the render thread collects
            // their timestamps after the item it runs next, which the second hop waits for.
            _ = c.stats
            _ = c.stats
            let load = c.renderThreadLoad
            #expect(load.gpuBatches >= 1 && load.gpuEncoderSeconds > 0 && load.gpuEncoderSeconds + load.gpuUploadSeconds <= load.gpuBatchSeconds,
                    "\(load)")
            // Each timed batch's pictures: at least one a batch whose encoder was timed, at most every picture.
            #expect(load.gpuEncodedPictures >= 1 && load.gpuEncodedPictures <= frames, "\(load)")
            // Two pictures are IDRs (0 and 5): at most two timed batches ran an intra wavefront, and at least one did.
            #expect(load.gpuEncoderIDRBatches >= 1 && load.gpuEncoderIDRBatches <= 2, "\(load)")
            #expect(pictures.map(\.picture.pts.value) == (0..<Int64(frames)).map { $0 })
            #expect(pictures.map(\.picture.keyframe) == [true, false, false, false, false, true, false, false])
            // IDR pictures three below the constant QP (x264's ipratio), P pictures at it.
            #expect(pictures.allSatisfy { $0.output == encoded && $0.qp == ($0.picture.keyframe ? 15 : 18) })
            let (decoded, log) = try decodeStrictly(pictures.flatMap(\.picture.data), width: 128, height: 72)
            try #require(decoded.count == frames, "\(log)")
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            try #require(files.count == 1 && files[0].hasSuffix("-128x72.nv12"), "\(files)")
            let reconstruction = [UInt8](try Data(contentsOf: folder.appendingPathComponent(files[0])))
            #expect(decoded.flatMap { $0 } == reconstruction, "\(firstDifference(decoded, stride(from: 0, to: reconstruction.count, by: 128 * 108).map { Array(reconstruction[$0..<$0 + 128 * 108]) }, width: 128))")
            for i in 0..<frames {
                var y = [UInt8]()
                for row in 0..<72 { for x in 0..<128 { y.append(readbacks[i].byte(plane: 0, x, row)) } }
                let psnr = lumaPSNR(decoded[i], y, width: 128, height: 72, rowBytes: 128)
                #expect(psnr > 38, "picture \(i): luma PSNR \(psnr) dB against the readback")
            }
        }

        @Test("In a batch with an IDR, streams whose IDR is due within a quarter of their interval take theirs with it")
        func idrsGrouped() throws {
            let context = try DisplayLadder.open(GPUSelection.software, log: { _ in })
            let programs = try H264Programs(softwareRenderer: context.info.isSoftware)
            defer { programs.release() }
            let p = EncoderPattern(width: 32, height: 32)
            let bytes = p.frame(0)
            var source: GLuint = 0
            glGenBuffers(1, &source)
            defer { glDeleteBuffers(1, &source) }
            glBindBuffer(GL.shaderStorageBuffer, source)
            glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes.count), bytes, GL.dynamicDraw)
            glBindBuffer(GL.shaderStorageBuffer, 0)
            let f = H264StreamFormat(width: 32, height: 32, rate: FrameRate(30), matrix: .bt709, range: .limited)
            // Three streams with an IDR every 8 pictures, starting at pictures 0, 1 and 4 of the batches below.
            let starts = [0, 1, 4]
            var encoders: [H264ComputeEncoder] = []
            defer { for e in encoders { e.release() } }
            for _ in starts { encoders.append(try H264ComputeEncoder(format: f, settings: GPUH264Settings(qp: 26, keyframeInterval: 8), programs: programs, depth: 2)) }
            var idrs = [[Int]](repeating: [], count: starts.count)
            for frame in 0..<20 {
                let members = encoders.indices.filter { frame >= starts[$0] }
                let jobs = members.map { H264ComputeEncoder.Job(encoder: encoders[$0], source: source, rowBytes: p.rowBytes,
                                                                 uvOffset: p.rowBytes * p.height, pts: MediaTime(value: Int64(frame), timescale: 30)) }
                let pending = H264ComputeEncoder.encode(jobs, programs: programs)
                for (i, m) in members.enumerated() {
                    _ = try encoders[m].collect(pending[i])
                    if pending[i].idr { idrs[m].append(frame) }
                }
            }
            // Stream 1 (7 pictures since its IDR at 1 when stream 0's falls due at 8) joins it; stream 2 (4 since) does not.
            #expect(idrs[0] == [0, 8, 16])
            #expect(idrs[1] == [1, 8, 16])
            #expect(idrs[2] == [4, 12])
        }

        @Test("Pictures of several streams recorded in one batch (IDR and P mixed, different sizes) each decode to their reconstruction")
        func batch() throws {
            let context = try DisplayLadder.open(GPUSelection.software, log: { _ in })
            let programs = try H264Programs(softwareRenderer: context.info.isSoftware)
            defer { programs.release() }
            let patterns = [EncoderPattern(width: 48, height: 32), EncoderPattern(width: 64, height: 48, seed: 3),
                            EncoderPattern(width: 32, height: 32, seed: 5, pan: (dx: -2, dy: 2))]
            let keyints = [3, 4, 2]
            var encoders: [H264ComputeEncoder] = []
            defer { for e in encoders { e.release() } }
            var sources = [GLuint](repeating: 0, count: patterns.count)
            glGenBuffers(GLsizei(sources.count), &sources)
            defer { glDeleteBuffers(GLsizei(sources.count), sources) }
            for (i, p) in patterns.enumerated() {
                let f = H264StreamFormat(width: p.width, height: p.height, rate: FrameRate(30), matrix: .bt709, range: .limited)
                encoders.append(try H264ComputeEncoder(format: f, settings: GPUH264Settings(qp: 24 + 2 * i, keyframeInterval: keyints[i]),
                                                       programs: programs, depth: 2))
            }
            var streams = [[UInt8]](repeating: [], count: patterns.count)
            var recon = [[[UInt8]]](repeating: [], count: patterns.count)
            for frame in 0..<5 {
                var jobs: [H264ComputeEncoder.Job] = []
                for (i, p) in patterns.enumerated() {
                    let bytes = p.frame(frame)
                    glBindBuffer(GL.shaderStorageBuffer, sources[i])
                    glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes.count), bytes, GL.dynamicDraw)
                    jobs.append(H264ComputeEncoder.Job(encoder: encoders[i], source: sources[i], rowBytes: p.rowBytes,
                                                       uvOffset: p.rowBytes * p.height, pts: MediaTime(value: Int64(frame), timescale: 30)))
                }
                glBindBuffer(GL.shaderStorageBuffer, 0)
                let pending = H264ComputeEncoder.encode(jobs, programs: programs)
                for (i, e) in encoders.enumerated() {
                    streams[i] += try e.collect(pending[i]).data
                    recon[i].append(try e.reconstruction())
                }
            }
            for (i, p) in patterns.enumerated() {
                let (decoded, log) = try decodeStrictly(streams[i], width: p.width, height: p.height)
                #expect(decoded.count == 5, "stream \(i): \(log)")
                let exact = decoded == recon[i]
                #expect(exact, "stream \(i): \(firstDifference(decoded, recon[i], width: p.width))")
            }
        }
    }
}

@Suite struct H264SyntaxTests {
    /// The standard's rule byte by byte (7.4.1), to check the fast one against.
    static func reference(_ rbsp: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0, 0, 0, 1, 0x65]
        var zeros = 0
        for b in rbsp {
            if zeros >= 2 && b <= 3 { out.append(3); zeros = 0 }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }

    @Test("Emulation prevention bytes go exactly where the standard puts them")
    func emulationPrevention() {
        var rng: UInt64 = 12345
        for length in [0, 1, 2, 3, 4, 7, 64, 1000] {
            for _ in 0..<50 {
                let rbsp: [UInt8] = (0..<length).map { _ in
                    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
                    let r = rng % 10
                    return r < 5 ? 0 : (r < 8 ? UInt8(r - 4) : UInt8(truncatingIfNeeded: rng >> 8))
                }
                var out: [UInt8] = []
                NALUnit.annexB(type: 5, refIDC: 3, rbsp: rbsp, into: &out)
                #expect(out == Self.reference(rbsp), "\(rbsp)")
            }
        }
    }

    @Test("Parameter sets: Constrained Baseline, the level from the size and rate, cropping to the picture")
    func parameterSets() {
        let f = H264StreamFormat(width: 1920, height: 1080, rate: FrameRate(60), matrix: .bt709, range: .limited)
        #expect(f.levelIDC == 42)
        #expect(Array(f.sps.prefix(3)) == [66, 0xC0, 42])
        #expect(H264StreamFormat(width: 1280, height: 720, rate: FrameRate(30), matrix: .bt709, range: .limited).levelIDC == 31)
        #expect(H264StreamFormat(width: 3840, height: 2160, rate: FrameRate(30), matrix: .bt709, range: .limited).levelIDC == 51)
    }
}
