import CGLES
import DiptychCore
import Foundation

/// The GPU encoder alone, for `diptych-gpu-bench --encode`: `streams`
/// encoders at one size on one context, each encoding the given NV12
/// pictures in turn (already on the GPU, so only the encoder is timed). Every
/// stream's picture of a round is encoded before the previous round's
/// bitstreams are collected, so the GPU works while the CPU frames NAL units.
public enum GPUEncodeBenchmark {
    public struct Result: Codable, Sendable {
        public var renderer: String
        /// Whether the bitstreams came back through persistently mapped buffers.
        public var mapped: Bool
        public var size: String
        public var streams: Int
        public var pictures: Int
        public var seconds: Double
        public var picturesPerSecond: Double
        public var bytesPerPicture: Double
        public var keyframes: Int
        /// Milliseconds of each pass per picture (only with `profile`: each pass waited for).
        public var passMs: [String: Double]
        /// From a picture's passes being recorded to its bitstream framed on the host, per picture.
        public var latencyP50Ms: Double
        public var latencyP99Ms: Double
        /// With `pace`: the slowest pictures, slowest first (where the tail comes from).
        public var slowest: [Slow] = []
    }

    /// One paced picture's latency and what it was: its stream, its index in
    /// the stream, whether it was an IDR, how many pictures its batch held,
    /// and how many IDR pictures were among them.
    public struct Slow: Codable, Sendable {
        public var stream: Int
        public var picture: Int
        public var keyframe: Bool
        public var batch: Int
        public var batchKeyframes: Int
        public var ms: Double
    }

    /// `sources`: NV12 pictures, `(width + 3) / 4 * 4` bytes a row, Y rows then UV rows.
    /// `pace`: each stream submits a picture every 1/pace s, stream i at i/N of
    /// an interval (independent sources' phases); the pictures due at once are
    /// recorded together (as a render thread records the frames queued when it
    /// wakes), and every picture is taken as soon as it is done; latency is
    /// then one picture's, from its submission to its bitstream on the host.
    public static func run(selection: GPUSelection, size: PixelSize, sources: [[UInt8]], streams: Int, rounds: Int,
                           settings: GPUH264Settings, profile: Bool, pace: Double? = nil, deblocking: Bool = true, subpel: Bool = true,
                           rasterOrder: H264RasterOrder? = nil, log: (String) -> Void) throws(GPUError) -> Result {
        let rig = try Rig(selection: selection, size: size, sources: sources, streams: streams, settings: settings,
                          deblocking: deblocking, subpel: subpel, rasterOrder: rasterOrder, log: log)
        defer { rig.release() }
        let (context, buffers, programs, encoders) = (rig.context, rig.buffers, rig.programs, rig.encoders)
        let rowBytes = rig.rowBytes
        for e in encoders { e.profiling = profile }
        func picture(_ k: Int) -> Int {
            // Forth and back through the pictures, so no stream jumps from the last to the first.
            let n = buffers.count
            guard n > 1 else { return 0 }
            let m = k % (2 * n - 2)
            return m < n ? m : 2 * n - 2 - m
        }
        if let pace {
            return try paced(context: context, encoders: encoders, programs: programs, buffers: buffers, picture: picture,
                             rowBytes: rowBytes, size: size, rounds: rounds, pace: pace)
        }
        var pending: [(H264ComputeEncoder.Pending, UInt64)?] = Array(repeating: nil, count: streams)
        var latencies: [Double] = []
        var bytes = 0, keyframes = 0, pictures = 0
        let warmup = 2
        var start: UInt64 = 0
        for round in 0..<(rounds + warmup + 1) {
            if round == warmup {
                glFinish()
                start = PassTimer.now()
                latencies = []; bytes = 0; keyframes = 0; pictures = 0
                for e in encoders { e.resetPassTimes() }
            }
            var next = pending
            if round < rounds + warmup {
                let jobs = encoders.enumerated().map { s, e in
                    H264ComputeEncoder.Job(encoder: e, source: buffers[picture(round + 3 * s)], rowBytes: rowBytes,
                                           uvOffset: rowBytes * size.height, pts: MediaTime(value: Int64(round), timescale: 60))
                }
                let t = PassTimer.now()
                for (s, p) in H264ComputeEncoder.encode(jobs, programs: programs).enumerated() { next[s] = (p, t) }
            } else {
                next = Array(repeating: nil, count: streams)
            }
            for (s, e) in encoders.enumerated() {
                guard let (p, t) = pending[s] else { continue }
                let picture = try e.collect(p)
                latencies.append(Double(PassTimer.now() - t) / 1e6)
                bytes += picture.data.count
                keyframes += picture.keyframe ? 1 : 0
                pictures += 1
            }
            pending = next
        }
        glFinish()
        let seconds = Double(PassTimer.now() - start) / 1e9
        latencies.sort()
        func pct(_ q: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))] }
        var passMs: [String: Double] = [:]
        if profile {
            for e in encoders { for (k, v) in e.passMs { passMs["\(k)", default: 0] += v / Double(max(1, pictures)) } }
        }
        return Result(renderer: context.info.renderer, mapped: encoders.first?.mapped ?? false, size: "\(size.width)x\(size.height)", streams: streams, pictures: pictures,
                      seconds: seconds, picturesPerSecond: Double(pictures) / seconds, bytesPerPicture: Double(bytes) / Double(max(1, pictures)),
                      keyframes: keyframes, passMs: passMs, latencyP50Ms: pct(0.5), latencyP99Ms: pct(0.99))
    }

    /// Encodes `rounds` pictures on each of `streams` encoders, a batch a
    /// round waited for, and returns stream 0's bitstream and its
    /// reconstruction after each picture (cropped NV12): where no decoder
    /// runs (the GPU machines), the two are carried back and compared with a
    /// decoder's pictures elsewhere (`diptych-gpu-bench --encode --dump`).
    public static func dump(selection: GPUSelection, size: PixelSize, sources: [[UInt8]], streams: Int, rounds: Int,
                            settings: GPUH264Settings, deblocking: Bool = true, subpel: Bool = true, rasterOrder: H264RasterOrder? = nil,
                            log: (String) -> Void) throws(GPUError) -> (stream: [UInt8], reconstructions: [UInt8], renderer: String) {
        let rig = try Rig(selection: selection, size: size, sources: sources, streams: streams, settings: settings,
                          deblocking: deblocking, subpel: subpel, rasterOrder: rasterOrder, log: log)
        defer { rig.release() }
        let (context, buffers, programs, encoders, rowBytes) = (rig.context, rig.buffers, rig.programs, rig.encoders, rig.rowBytes)
        var stream: [UInt8] = [], reconstructions: [UInt8] = []
        for round in 0..<rounds {
            let jobs = encoders.enumerated().map { s, e in
                H264ComputeEncoder.Job(encoder: e, source: buffers[(round + 3 * s) % buffers.count], rowBytes: rowBytes,
                                       uvOffset: rowBytes * size.height, pts: MediaTime(value: Int64(round), timescale: 60))
            }
            let pending = H264ComputeEncoder.encode(jobs, programs: programs)
            for (s, e) in encoders.enumerated() {
                let picture = try e.collect(pending[s])
                if s == 0 {
                    stream += picture.data
                    reconstructions += try e.reconstruction()
                }
            }
        }
        return (stream, reconstructions, context.info.renderer)
    }

    /// A benchmark's context, its source pictures in storage buffers, and
    /// `streams` encoders sharing one set of programs. Render thread only.
    private struct Rig {
        let context: GLContext
        let buffers: [GLuint]
        let programs: H264Programs
        let encoders: [H264ComputeEncoder]
        let rowBytes: Int

        init(selection: GPUSelection, size: PixelSize, sources: [[UInt8]], streams: Int, settings: GPUH264Settings,
             deblocking: Bool = true, subpel: Bool = true, rasterOrder: H264RasterOrder? = nil, log: (String) -> Void) throws(GPUError) {
            context = try DisplayLadder.open(selection, log: log)
            rowBytes = (size.width + 3) / 4 * 4
            var buffers = [GLuint](repeating: 0, count: sources.count)
            glGenBuffers(GLsizei(buffers.count), &buffers)
            for (i, s) in sources.enumerated() {
                glBindBuffer(GL.shaderStorageBuffer, buffers[i])
                glBufferData(GL.shaderStorageBuffer, GLsizeiptr(s.count), s, GL.dynamicDraw)
            }
            glBindBuffer(GL.shaderStorageBuffer, 0)
            let format = H264StreamFormat(width: size.width, height: size.height, rate: FrameRate(60), matrix: .bt709, range: .limited)
            let programs: H264Programs
            do { programs = try H264Programs(softwareRenderer: context.info.isSoftware, rasterOrder: rasterOrder) } catch {
                glDeleteBuffers(GLsizei(buffers.count), buffers)
                throw error
            }
            var encoders: [H264ComputeEncoder] = []
            do {
                for _ in 0..<streams {
                    encoders.append(try H264ComputeEncoder(format: format, settings: settings, programs: programs, depth: 2,
                                                           bufferStorage: context.procs.bufferStorage, deblocking: deblocking, subpel: subpel))
                }
            } catch {
                for e in encoders { e.release() }
                programs.release()
                glDeleteBuffers(GLsizei(buffers.count), buffers)
                throw error
            }
            self.buffers = buffers; self.programs = programs; self.encoders = encoders
        }

        func release() {
            for e in encoders { e.release() }
            programs.release()
            glDeleteBuffers(GLsizei(buffers.count), buffers)
        }
    }

    private static func paced(context: GLContext, encoders: [H264ComputeEncoder], programs: H264Programs, buffers: [GLuint],
                              picture: (Int) -> Int, rowBytes: Int, size: PixelSize, rounds: Int, pace: Double) throws(GPUError) -> Result {
        let n = encoders.count
        let interval = 1e9 / pace
        var pending: [[(H264ComputeEncoder.Pending, UInt64, batch: Int, batchKeyframes: Int)]] = Array(repeating: [], count: n)
        var submitted = [Int](repeating: 0, count: n)
        var latencies: [Double] = []
        var slow: [Slow] = []
        var bytes = 0, keyframes = 0, pictures = 0
        let start = PassTimer.now()
        let warmup = 2
        while pictures < n * rounds {
            let now = PassTimer.now()
            // Every stream whose next picture is due submits it; the pictures
            // due together are recorded in one batch, as a render thread
            // records the frames queued when it wakes.
            var due: [(stream: Int, job: H264ComputeEncoder.Job)] = []
            for s in 0..<n where submitted[s] < rounds + warmup {
                let at = start + UInt64((Double(submitted[s]) + Double(s) / Double(n)) * interval)
                guard now >= at else { continue }
                due.append((s, H264ComputeEncoder.Job(encoder: encoders[s], source: buffers[picture(submitted[s] + 3 * s)], rowBytes: rowBytes,
                                                      uvOffset: rowBytes * size.height, pts: MediaTime(value: Int64(submitted[s]), timescale: 60))))
                submitted[s] += 1
            }
            if !due.isEmpty {
                let recorded = H264ComputeEncoder.encode(due.map(\.job), programs: programs)
                let idrs = recorded.filter(\.idr).count
                for (d, p) in zip(due, recorded) { pending[d.stream].append((p, now, due.count, idrs)) }
            }
            // Every finished picture is taken at once.
            for s in 0..<n {
                while let (p, t, batch, batchKeyframes) = pending[s].first, encoders[s].isComplete(p) || pending[s].count >= 2 {
                    pending[s].removeFirst()
                    let pic = try encoders[s].collect(p)
                    if p.pts.value >= warmup {
                        let ms = Double(PassTimer.now() - t) / 1e6
                        latencies.append(ms)
                        slow.append(Slow(stream: s, picture: Int(p.pts.value), keyframe: p.idr, batch: batch, batchKeyframes: batchKeyframes, ms: ms))
                        if slow.count > 64 { slow.sort { $0.ms > $1.ms }; slow.removeLast(slow.count - 32) }
                        bytes += pic.data.count
                        keyframes += pic.keyframe ? 1 : 0
                        pictures += 1
                    }
                }
            }
            usleep(50)
        }
        let seconds = Double(PassTimer.now() - start) / 1e9
        latencies.sort()
        func pct(_ q: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))] }
        return Result(renderer: context.info.renderer, mapped: encoders.first?.mapped ?? false, size: "\(size.width)x\(size.height)",
                      streams: n, pictures: pictures, seconds: seconds, picturesPerSecond: Double(pictures) / seconds,
                      bytesPerPicture: Double(bytes) / Double(max(1, pictures)), keyframes: keyframes, passMs: [:],
                      latencyP50Ms: pct(0.5), latencyP99Ms: pct(0.99), slowest: Array(slow.sorted { $0.ms > $1.ms }.prefix(32)))
    }
}
