import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The stages of a take that CPU time is counted toward (`StageClock`).
public enum PipelineStage: String, CaseIterable, Sendable, Codable {
    /// Demuxing and decoding: the source readers and FFmpeg's decoder threads.
    case decode
    /// Uploads, GPU work and readbacks: the render loop, the render thread
    /// and the software rasterizer's threads.
    case render
    /// Building the encoder's NV12 frames on the CPU: the direct path's
    /// copies and scaled draws (I420 → NV12 included) and swscale conversions.
    case convert
    /// The encoder: its thread and the encoder library's threads.
    case encode
    /// Writing packets to the container (`av_interleaved_write_frame`).
    case mux
    /// Everything else (setup, signal handling, idle helpers).
    case other

    /// The thread name that counts a thread's time toward this stage
    /// (threads inherit their creator's name, so an encoder's or decoder's
    /// own threads started while it opens count too).
    public var threadName: String { "dp-\(rawValue)" }

    /// The stage a thread named `name` counts toward (`dp-STAGE`, or
    /// `dp-STAGE-TAG` for threads someone counts apart as well: `DecodeCPUClock`).
    static func of(threadName name: String) -> PipelineStage {
        if name.hasPrefix("dp-") {
            return PipelineStage(rawValue: String(name.dropFirst(3).prefix { $0 != "-" })) ?? .other
        }
        // Mesa's llvmpipe rasterizer threads and its shader cache thread.
        if name.hasPrefix("llvmpipe-") || name.contains(":disk$") || name.hasPrefix("gallium") { return .render }
        return .other
    }
}

/// CPU seconds by pipeline stage.
public struct StageTimes: Sendable, Codable, Hashable {
    public var decode = 0.0
    public var render = 0.0
    public var convert = 0.0
    public var encode = 0.0
    public var mux = 0.0
    public var other = 0.0

    public init() {}

    public subscript(_ s: PipelineStage) -> Double {
        get {
            switch s {
            case .decode: decode
            case .render: render
            case .convert: convert
            case .encode: encode
            case .mux: mux
            case .other: other
            }
        }
        set {
            switch s {
            case .decode: decode = newValue
            case .render: render = newValue
            case .convert: convert = newValue
            case .encode: encode = newValue
            case .mux: mux = newValue
            case .other: other = newValue
            }
        }
    }

    public var total: Double { PipelineStage.allCases.reduce(0) { $0 + self[$1] } }

    public static func - (a: StageTimes, b: StageTimes) -> StageTimes {
        var d = StageTimes()
        for s in PipelineStage.allCases { d[s] = a[s] - b[s] }
        return d
    }
}

/// Where the process's CPU time goes, by stage, from per-thread CPU clocks:
/// every thread counts toward the stage its name says (`PipelineStage.threadName`,
/// set by `name(_:)` on the project's threads and inherited by the threads
/// FFmpeg and x264 start while `naming(_:_:)` opens them), and `measure(_:_:)`
/// moves the time of a section of one thread to another stage (packets
/// muxed on the encoder thread, frames assembled on the render loop).
///
/// A thread's time is read when `sample()` runs, so the owners of threads
/// that end (readers, decoders, encoders, the GL context) sample first.
/// Process-wide: with several takes in one process the figures are theirs together.
public enum StageClock {
    private struct ThreadKey: Hashable { var tid: Int32; var start: UInt64 }
    private struct State {
        var threads: [ThreadKey: (stage: PipelineStage, seconds: Double)] = [:]
        var moved = StageTimes()
    }
    private static let state = Mutex(State())
    nonisolated(unsafe) private static var stackKey = pthread_key_t()
    private static let keyOnce: Void = {
        pthread_key_create(&stackKey) { p in if let p { Unmanaged<StageStack>.fromOpaque(p).release() } }
    }()
    private final class StageStack { var stages: [PipelineStage] = [] }

    /// Names the calling thread for `stage`.
    public static func name(_ stage: PipelineStage) { setName(stage.threadName) }

    /// Runs `body` with the calling thread named for `stage` (so threads it
    /// starts count toward that stage), then gives the thread its name back.
    public static func naming<T, E: Error>(_ stage: PipelineStage, _ body: () throws(E) -> T) throws(E) -> T {
        try naming(threadName: stage.threadName, body)
    }

    /// Runs `body` with the calling thread named `name` (see `PipelineStage.of(threadName:)`).
    package static func naming<T, E: Error>(threadName name: String, _ body: () throws(E) -> T) throws(E) -> T {
        let old = currentName()
        setName(name)
        defer { setName(old) }
        return try body()
    }

    /// Runs `body`, counting the CPU time it takes on this thread toward `stage`.
    public static func measure<T, E: Error>(_ stage: PipelineStage, _ body: () throws(E) -> T) throws(E) -> T {
        let stack = currentStack()
        let outer = stack.stages.last ?? PipelineStage.of(threadName: currentName())
        stack.stages.append(stage)
        let t0 = threadSeconds()
        defer {
            let d = threadSeconds() - t0
            stack.stages.removeLast()
            state.withLock {
                $0.moved[stage] += d
                $0.moved[outer] -= d
            }
        }
        return try body()
    }

    /// Reads every thread's CPU time now.
    public static func sample() {
        let me = glibcGettid()
        var seen: [(ThreadKey, PipelineStage, Double)] = []
        guard let dir = opendir("/proc/self/task") else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let tid = Int32(name) else { continue }
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let comm = String(stat[stat.index(after: open)..<close])
            // Field 22 (starttime) is the 20th after the name: tells a reused thread id apart.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            let start = fields.count > 19 ? UInt64(fields[19]) ?? 0 : 0
            guard let seconds = tid == me ? threadSeconds() : cpuSeconds(ofThread: tid) else { continue }
            seen.append((ThreadKey(tid: tid, start: start), PipelineStage.of(threadName: comm), seconds))
        }
        state.withLock { for (k, stage, s) in seen { $0.threads[k] = (stage, s) } }
    }

    /// CPU seconds per stage of every thread sampled so far (each at its
    /// last sample), with the time `measure` moved. Samples first.
    public static func times() -> StageTimes {
        sample()
        return state.withLock {
            var t = $0.moved
            for (_, v) in $0.threads { t[v.stage] += v.seconds }
            return t
        }
    }

    /// Thread `tid`'s CPU seconds (a thread of this process), nil once it has ended.
    package static func cpuSeconds(ofThread tid: Int32) -> Double? {
        var ts = timespec()
        // The kernel's per-thread CPU clock: CPUCLOCK_SCHED (2) with the per-thread bit (4), as glibc builds it.
        guard clock_gettime(clockid_t(truncatingIfNeeded: (~tid) << 3 | 6), &ts) == 0 else { return nil }
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// This thread's CPU time, seconds.
    public static func threadSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private static func currentStack() -> StageStack {
        _ = keyOnce
        if let p = pthread_getspecific(stackKey) { return Unmanaged<StageStack>.fromOpaque(p).takeUnretainedValue() }
        let s = StageStack()
        pthread_setspecific(stackKey, Unmanaged.passRetained(s).toOpaque())
        return s
    }

    private static func currentName() -> String {
        var buf = [CChar](repeating: 0, count: 16)
        _ = glibcGetname(pthread_self(), &buf, buf.count)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Names the calling thread (at most 15 bytes are kept).
    package static func setName(_ name: String) {
        _ = glibcSetname(pthread_self(), String(decoding: name.utf8.prefix(15), as: UTF8.self))
    }
}

// GNU extensions the Glibc module does not import (glibc 2.30+ has gettid).
@_silgen_name("gettid") private func glibcGettid() -> Int32
@_silgen_name("pthread_getname_np") private func glibcGetname(_ thread: pthread_t, _ name: UnsafeMutablePointer<CChar>, _ length: Int) -> Int32
@_silgen_name("pthread_setname_np") private func glibcSetname(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
