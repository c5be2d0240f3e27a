import DiptychCore
import Foundation

/// The end-to-end tables: speed, memory and CPU against the peers (medians
/// of the alternating runs, with their spread), and where our CPU time goes.
extension Report {
    static func endToEnd(_ results: [BenchResult]) -> String {
        let rows = results.filter { $0.stage == .endToEnd && $0.runs != nil }
        guard !rows.isEmpty else { return "" }
        func range(_ v: [Double], _ digits: Int = 1) -> String {
            guard let lo = v.min(), let hi = v.max() else { return "" }
            return " (\(f(lo, digits))–\(f(hi, digits)))"
        }
        var s = "### End to end, whole processes\n\n"
        s += "| layout | canvas | preset | runs | diptych fps | FFmpeg fps | ÷ FFmpeg | GStreamer fps | ÷ GStreamer "
        s += "| peak MiB: diptych · FFmpeg · GStreamer | memory ÷ FFmpeg | CPU ms/frame: diptych · FFmpeg · GStreamer | RSS growth MiB (diptych) |\n"
        s += "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |\n"
        for r in rows {
            let runs = r.runs ?? []
            let ff = r.peers.first { $0.peer == .ffmpeg }, gs = r.peers.first { $0.peer == .gstreamer }
            func fps(_ p: PeerResult?) -> String { p?.fps.map { f($0) + range(p?.runs?.map(\.fps) ?? []) } ?? "–" }
            func ratio(_ p: PeerResult?) -> String { p?.ratio.map { f($0, 2) + "×" + range(p?.ratioRange ?? [], 2) } ?? "–" }
            let growth = runs.compactMap(\.rssGrowthMiB)
            s += "| \(r.layout) | \(r.canvas) | \(r.preset ?? "–") | \(runs.count) | \(f(r.fps))\(range(runs.map(\.fps))) "
            s += "| \(fps(ff)) | \(ratio(ff)) | \(fps(gs)) | \(ratio(gs)) "
            s += "| \(f(r.peakRSSMiB, 0)) · \(f(ff?.peakRSSMiB, 0)) · \(f(gs?.peakRSSMiB, 0)) | \(f(ff?.memoryRatio, 2))× "
            s += "| \(f(r.cpuMsPerFrame, 2)) · \(f(ff?.cpuMsPerFrame, 2)) · \(f(gs?.cpuMsPerFrame, 2)) "
            s += "| \(growth.isEmpty ? "–" : f(median(growth), 1)) |\n"
        }
        s += "\nEvery figure is the median of the runs (range in brackets); ÷: our speed (fps) over the peer's, the median of "
        s += "the paired runs' ratios. Each run is a whole process from start to exit (`wait4`): peak MiB is its peak "
        s += "resident memory, CPU its user + system time; RSS growth: resident memory over the last fifth of the run minus "
        s += "over the second fifth (sampled every \(f(ChildGroup.sampleInterval, 2)) s).\n\n"
        s += "Diptych's CPU ms per output frame by stage (its stage timers; medians):\n\n"
        s += "| layout | canvas | preset | decode | upload/render/readback | convert | encode | mux | other | total |\n"
        s += "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        for r in rows {
            guard let m = r.stageMsPerFrame else { continue }
            s += "| \(r.layout) | \(r.canvas) | \(r.preset ?? "–") | \(f(m.decode, 2)) | \(f(m.render, 2)) | \(f(m.convert, 2)) "
            s += "| \(f(m.encode, 2)) | \(f(m.mux, 2)) | \(f(m.other, 2)) | \(f(m.total, 2)) |\n"
        }
        s += "\nStages: decode (demuxing, the decoders' threads), upload/render/readback (the render loop, the GL thread, "
        s += "the software rasterizer's threads), convert (the NV12 frame assembled on the CPU: copies and scaled draws, "
        s += "I420 → NV12, and any swscale conversion), encode (the encoder thread and x264's), mux (writing packets), "
        s += "other (start-up, exit and everything else).\n\n"
        for r in rows {
            guard let c = r.command else { continue }
            s += "- \(r.layout) \(r.canvas) \(r.preset ?? ""): `\(c)`\n"
            for p in r.peers { if let pc = p.command { s += "  - \(p.peer.rawValue): `\(pc)`\n" } }
        }
        return s
    }
}
