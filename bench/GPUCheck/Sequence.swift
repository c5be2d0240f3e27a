import DiptychCore
import DiptychGPU
import Foundation

/// `frames` 1080p PiP frames as a take feeds them (a new primary every frame,
/// a new secondary every other frame, a mirrored rounded inset), pipelined,
/// against the same frames rendered one at a time. A frame that differs is
/// reported with the reference frame it equals, if any (a frame mixed up
/// with a neighbour), and the rows that differ (a frame partly written).
/// With `pageLocked`, the pipelined run's inputs are in its compositor's
/// upload storage (page-locked where uploads stage through CUDA).
func sequenceCheck(_ selection: GPUSelection, frames: Int = 240, pageLocked: Bool = false) throws -> String {
    let canvas = PixelSize(width: 1920, height: 1080)
    let plan = CompositionPlan(canvas: canvas, draws: [
        DrawDescription(role: .primary, destination: PixelRect(size: canvas)),
        DrawDescription(role: .secondary, destination: PixelRect(x: 1312, y: 724, width: 576, height: 324),
                        orientation: Orientation(rotation: .r0, mirrored: true), cornerRadius: 16, borderWidth: 2, zIndex: 1)])
    let primaries = (0..<frames).map { patternFrame(1920, 1080, .nv12, seed: $0) }
    let secondaries = (0..<(frames + 1) / 2).map { patternFrame(1280, 720, .nv12, seed: 1000 + $0) }
    func run(pipelined: Bool) throws -> [VideoFrame] {
        let c = try GPUCompositor(selection: selection)
        defer { c.shutdown() }
        let out = try c.addOutput(canvas: canvas)
        var got: [VideoFrame] = []
        let kept = { (f: VideoFrame) in pipelined && pageLocked ? c.copyIntoUploadStorage(f) : f }
        for i in 0..<frames {
            try c.upload(kept(primaries[i]), role: .primary)
            if i % 2 == 0 { try c.upload(kept(secondaries[i / 2]), role: .secondary) }
            try c.render(output: out, plan: plan, pts: MediaTime(value: Int64(i), timescale: 60))
            if pipelined {
                while let f = try c.nextNV12(wait: false) { got.append(f) }
            } else {
                got += try c.flush()
            }
        }
        got += try c.flush()
        guard got.count == frames else { throw Failure(description: "\(got.count) of \(frames) frames came back (pipelined: \(pipelined))") }
        return got
    }
    func bytes(_ f: VideoFrame) -> [UInt8] {
        var b: [UInt8] = []
        b.reserveCapacity(f.width * f.height * 3 / 2)
        for plane in 0..<2 {
            for y in 0..<(plane == 0 ? f.height : f.height / 2) {
                let row = UnsafeRawBufferPointer(start: f.planes[plane].baseAddress.advanced(by: y * f.planes[plane].stride), count: f.width)
                b.append(contentsOf: row)
            }
        }
        return b
    }
    let reference = try run(pipelined: false).map(bytes)
    let pipelined = try run(pipelined: true).map(bytes)
    var bad: [String] = []
    for i in 0..<frames where pipelined[i] != reference[i] {
        let equals = reference.indices.first { reference[$0] == pipelined[i] }
        let rowBytes = 1920
        var rows: [Int] = []
        for r in 0..<(1080 * 3 / 2) where pipelined[i][r * rowBytes..<(r + 1) * rowBytes] != reference[i][r * rowBytes..<(r + 1) * rowBytes] {
            rows.append(r)
        }
        let span = rows.isEmpty ? "" : "rows \(rows.first!)–\(rows.last!) (\(rows.count) of 1620, UV from 1080)"
        bad.append("frame \(i): \(equals.map { "equals frame \($0)" } ?? "equals no frame"), \(span)")
    }
    guard bad.isEmpty else {
        throw Failure(description: "\(bad.count) of \(frames) frames differ; " + bad.prefix(6).joined(separator: "; "))
    }
    return "\(frames) frames 1080p PiP, pipelined and one at a time identical"
        + (pageLocked ? " (pipelined inputs in upload storage)" : "")
}
