import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The threads a codec starts as it opens (FFmpeg's frame and slice
/// threads): found by a name of their own, which they inherit from the
/// thread that opens the codec, and made to yield to the rest of the process
/// where asked. A server lowers its CPU decoders' threads so the render
/// thread every take of a GL context waits on, and the takes' own threads,
/// are not preempted by bulk decoding (docs/ARCHITECTURE.md, "Where a server
/// decodes"). Any thread.
package enum CodecThreads {
    /// Runs `open` (a codec opening) with the calling thread named for
    /// `stage` and a tag of its own (`dp-decode-TAG`: the stage still counts
    /// it, `StageClock`), and returns the threads of this process that carry
    /// that name afterwards: those `open` started.
    package static func opening<E: Error>(_ stage: PipelineStage, _ open: () throws(E) -> Void) throws(E) -> [Int32] {
        let name = stage.threadName + "-" + String(tags.add(1, ordering: .relaxed).newValue % 0x10_0000, radix: 16)
        try StageClock.naming(threadName: name, open)
        return threads().filter { $0.name == name }.map(\.tid)
    }
    private static let tags = Atomic<Int>(0)

    /// The nice values a server's CPU decoders' threads may be given (`diptych serve --decode-nice`).
    package static let niceRange = 0...19

    /// Gives each of `tids` (threads of this process) the nice value `nice`
    /// where that lowers its priority; one already at that value or lower
    /// in priority keeps its own (raising a priority takes a privilege).
    /// Returns how many threads are at `nice` or below in priority afterwards.
    @discardableResult
    package static func yield(_ tids: [Int32], nice: Int) -> Int {
        precondition(niceRange.contains(nice), "nice \(nice) is outside \(niceRange)")
        var n = 0
        for tid in tids {
            guard let now = self.nice(ofThread: tid) else { continue }
            if now >= nice || setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid), Int32(nice)) == 0 { n += 1 }
        }
        return n
    }

    /// Thread `tid`'s nice value (a thread of this process; 0: the calling thread), nil once it has ended.
    package static func nice(ofThread tid: Int32) -> Int? {
        errno = 0
        let v = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid))
        return v == -1 && errno != 0 ? nil : Int(v)
    }

    /// This process's threads: id and name.
    package static func threads() -> [(tid: Int32, name: String)] {
        guard let dir = opendir("/proc/self/task") else { return [] }
        defer { closedir(dir) }
        var out: [(Int32, String)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let tid = Int32(name) else { continue }
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8)) ?? ""
            out.append((tid, comm.trimmingCharacters(in: .newlines)))
        }
        return out
    }
}
