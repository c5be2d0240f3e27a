import CGLES
import DiptychCore
import Foundation

/// Timings of one pass (upload, composite or NV12 convert).
public struct GPUPassStats: Hashable, Sendable, Codable {
    /// Passes recorded.
    public var count = 0
    /// CPU time spent recording the pass (submission, copies), milliseconds.
    public var cpuTotalMs = 0.0
    /// GPU time from GL_EXT_disjoint_timer_query, for the passes measured.
    public var gpuCount = 0
    public var gpuTotalMs = 0.0
    public var gpuLastMs: Double?
    public init() {}
    public var cpuMeanMs: Double { count == 0 ? 0 : cpuTotalMs / Double(count) }
    public var gpuMeanMs: Double? { gpuCount == 0 ? nil : gpuTotalMs / Double(gpuCount) }
}

/// Per-pass timings for the benchmark. GPU times need GL_EXT_disjoint_timer_query;
/// without it only the CPU fallback is filled.
public struct GPUStats: Hashable, Sendable, Codable {
    public var timerQueries = false
    public var upload = GPUPassStats()
    public var composite = GPUPassStats()
    public var nv12 = GPUPassStats()
    public var framesRendered = 0
    public var framesDelivered = 0
    /// Frames rendered by one compute pass (composite and NV12 together).
    public var framesCompute = 0
    /// Frames rendered by the fragment passes (composite, then NV12).
    public var framesFragment = 0
    /// Frames that took the direct-copy path (planes copied, only the region above them rendered).
    public var framesDirect = 0
    /// Direct-copy frames whose rendered region was reused from an earlier frame (same uploads, nothing beneath showing).
    public var regionsReused = 0
    /// Scaled CPU draws copied from an earlier frame's sampling (the same picture at the same place).
    public var scaledReused = 0
    /// CUDA frames copied into stream textures (CUDA–GL interop), and the
    /// map/unmap pairs that copied them (several frames share one).
    public var cudaFrames = 0
    public var cudaMaps = 0
    /// CPU time of those copies' calls on the render thread, milliseconds.
    public var cudaCPUMs = 0.0
    /// Submissions whose fence has not signalled yet.
    public var inFlight = 0
    public init() {}
}

/// GPU (timer query) and CPU timing per pass. Render thread only.
///
/// A timer query makes the GPU finish the work before it and stops
/// transfers overlapping it, so only one pass in `sampleInterval` of each kind
/// is timed (the mean of those samples is the GPU time per pass). The plan's
/// tuning turns them off (`GPUTuning.timerQueries`).
final class PassTimer {
    static let sampleInterval = 8
    enum Pass: Int, CaseIterable { case upload, composite, nv12 }
    private let getResult: PFNGLGETQUERYOBJECTUI64VEXTPROC?
    private var free: [GLuint] = []
    private var all: [GLuint] = []
    private var pending: [(Pass, GLuint)] = []
    private var cpuStart: UInt64 = 0
    private var active: Pass?
    /// Whether the active pass has a query.
    private var activeQuery = false
    private var passCounts = [0, 0, 0]
    var stats = GPUStats()

    init(timerQuery: Bool, getResult: PFNGLGETQUERYOBJECTUI64VEXTPROC?) {
        self.getResult = timerQuery ? getResult : nil
        stats.timerQueries = self.getResult != nil
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func begin(_ pass: Pass) {
        assert(active == nil, "pass \(pass) begun inside \(String(describing: active))")
        cancel()
        active = pass
        cpuStart = PassTimer.now()
        passCounts[pass.rawValue] += 1
        activeQuery = getResult != nil && (passCounts[pass.rawValue] - 1) % PassTimer.sampleInterval == 0
        guard activeQuery else { return }
        let q: GLuint
        if let f = free.popLast() { q = f } else {
            var n: GLuint = 0
            glGenQueries(1, &n); all.append(n); q = n
        }
        glBeginQuery(GL.timeElapsedEXT, q)
        pending.append((pass, q))
    }

    func end(_ pass: Pass) {
        assert(active == pass)
        guard active == pass else { return }
        active = nil
        if activeQuery { glEndQuery(GL.timeElapsedEXT) }
        let ms = Double(PassTimer.now() - cpuStart) / 1e6
        update(pass) { $0.count += 1; $0.cpuTotalMs += ms }
    }

    /// Abandons an open pass after an error (no sample).
    func cancel() {
        guard active != nil else { return }
        if activeQuery { glEndQuery(GL.timeElapsedEXT) }
        active = nil
    }

    /// Collects finished queries without blocking.
    func poll() {
        guard let getResult, !pending.isEmpty else { return }
        var disjoint: GLint = 0
        glGetIntegerv(GL.gpuDisjointEXT, &disjoint)
        let limit = pending.count - (active != nil && activeQuery ? 1 : 0)
        var done = 0
        while done < limit, let (pass, q) = pending.first {
            var available: GLuint = 0
            glGetQueryObjectuiv(q, GL.queryResultAvailable, &available)
            guard available != 0 else { break }
            var ns: GLuint64 = 0
            getResult(q, GL.queryResult, &ns)
            pending.removeFirst()
            done += 1
            free.append(q)
            // Disjoint periods (and nonsense values a driver may report) are dropped.
            if disjoint == 0 && ns < 60_000_000_000 {
                let ms = Double(ns) / 1e6
                update(pass) { $0.gpuCount += 1; $0.gpuTotalMs += ms; $0.gpuLastMs = ms }
            }
        }
    }

    func reset() {
        let t = stats.timerQueries
        stats = GPUStats(); stats.timerQueries = t
    }

    private func update(_ pass: Pass, _ f: (inout GPUPassStats) -> Void) {
        switch pass {
        case .upload: f(&stats.upload)
        case .composite: f(&stats.composite)
        case .nv12: f(&stats.nv12)
        }
    }

    func deleteAll() {
        if !all.isEmpty { glDeleteQueries(GLsizei(all.count), all) }
        all.removeAll(); free.removeAll(); pending.removeAll()
    }
}
