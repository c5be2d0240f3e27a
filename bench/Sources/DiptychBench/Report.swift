import DiptychCore
import DiptychMedia
import Foundation

/// The table, the chart and the contact sheet.
enum Report {
    /// A result's path as its table cell: the path taken, without the setup
    /// after it; for a take's plan line (`plan: pass=… shortcut=…`), its pass
    /// and whether the direct copy was allowed.
    static func pathCell(_ path: String) -> String {
        if path.hasPrefix("plan: ") {
            let fields = Dictionary(path.split(separator: " ").compactMap { w -> (String, String)? in
                let kv = w.split(separator: "=", maxSplits: 1)
                return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
            }, uniquingKeysWith: { a, _ in a })
            return (fields["pass"] ?? "?") + (fields["shortcut"] == "direct-copy" ? " (direct copy where a plan allows it)" : "")
        }
        return String(path.split(separator: path.contains(";") ? ";" : ",", maxSplits: 1).first ?? Substring(path))
    }

    static func f(_ v: Double?, _ digits: Int = 1) -> String { v.map { String(format: "%.\(digits)f", $0) } ?? "–" }

    static func markdown(_ report: BenchReport) -> String {
        let m = report.machine
        var s = "## diptych bench\n\n"
        s += "Machine: \(m.cpu), \(m.cores) cores, \(m.memoryGiB) GiB, \(m.os)\n"
        if let g = m.gpu { s += "GPU: \(g)\n" }
        s += "Peers: \(m.ffmpeg ?? "ffmpeg not installed"); \(m.gstreamer ?? "GStreamer not installed")\n"
        s += "Command: `\(report.command)`\n\n"
        s += "| stage | layout | canvas | input | path | fps | × 60 fps | p50 / p99 ms | GPU ms upload · composite · nv12 | CPU ms/frame | FFmpeg fps (ours ÷) | GStreamer fps (ours ÷) |\n"
        s += "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |\n"
        for r in report.results {
            func peer(_ p: BenchPeer) -> String {
                guard let x = r.peers.first(where: { $0.peer == p }) else { return "" }
                guard let fps = x.fps else { return "skipped" }
                return "\(f(fps)) (\(f(x.ratio, 2))×)"
            }
            let lat = r.latencyP50Ms == nil ? "–" : "\(f(r.latencyP50Ms, 2)) / \(f(r.latencyP99Ms, 2))"
            let gpu = r.gpuUploadMs == nil && r.gpuCompositeMs == nil && r.gpuNV12Ms == nil ? "–"
                : "\(f(r.gpuUploadMs, 3)) · \(f(r.gpuCompositeMs, 3)) · \(f(r.gpuNV12Ms, 3))"
            s += "| \(r.stage.rawValue) | \(r.layout) | \(r.canvas) | \(r.input) | \(r.path.map(Report.pathCell) ?? "–") | \(f(r.fps)) | \(f(r.realtime60, 2)) | \(lat) | \(gpu) | \(f(r.cpuMsPerFrame, 2)) | \(peer(.ffmpeg)) | \(peer(.gstreamer)) |\n"
        }
        var notes: [String] = []
        for r in report.results {
            for n in r.notes { notes.append("\(r.stage.rawValue) \(r.layout) \(r.canvas) \(r.input): \(n)") }
            for p in r.peers { if let n = p.note { notes.append("\(p.peer.rawValue) \(r.layout) \(r.canvas): \(n)") } }
        }
        s += "\nfps: output frames per wall second, one stream pair; × 60 fps: fps / 60 (≥ 1 is real time at 60 fps). "
        s += "Latency: upload of the primary → its NV12 frame in host memory (composite stage). "
        s += "GPU ms: timer queries per output frame (direct-copy frames skip the passes they don't need). "
        s += "CPU ms/frame: user + system time of all threads (ours) or of the peer process, per output frame. "
        s += "Peers write the same frame count as ours (one output frame per primary frame, 60 fps): "
        s += "the secondary branch of `hstack`/`vstack` gets `fps=60` and the output `-r 60` (without them FFmpeg writes "
        s += "153,599 frames at 15360 fps for a 10 s take); GStreamer's secondary goes through `videorate`; counts are checked (the outputs' packets, read with libavformat).\n"
        if !notes.isEmpty { s += "\nNotes:\n" + notes.map { "- \($0)" }.joined(separator: "\n") + "\n" }
        let e2e = endToEnd(report.results)
        if !e2e.isEmpty { s += "\n" + e2e }
        if let c = report.concurrency { s += "\n" + pairs(c) }
        if let n = report.nvdec { s += "\n" + nvdec(n) }
        return s
    }

    /// `--pairs`: the largest real-time count per runner and preset, what one
    /// frame costs there, every trial, and ours against FFmpeg's best.
    static func pairs(_ results: [ConcurrencyResult]) -> String {
        var s = "### Takes at once\n\n"
        s += "| preset | runner | real-time pairs | slowest take there | CPU s/frame (1 pair · there) | CPU busy there | GPU ms/frame · GPU % · NVDEC % there | peak MiB/take · growth | trials (pairs: slowest ×) |\n"
        s += "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |\n"
        for r in results {
            let b = r.best
            let trials = r.trials.map { "\($0.pairs): \($0.slowest.map { f($0, 2) } ?? "<1")\($0.realtime ? "" : "✗")" }.joined(separator: ", ")
            let gpu = b.map { "\(f($0.gpuMsPerFrame, 3)) · \(f($0.gpuBusyPercent, 0)) · \(f($0.decoderBusyPercent, 0))" } ?? "–"
            let mem = b.map { "\(f($0.peakMiBPerTake, 0)) · \(f($0.rssGrowthMiB, 1))" } ?? "–"
            let pairsText = r.note != nil && r.trials.isEmpty ? "skipped" : r.maxRealtimePairs.map(String.init) ?? "–"
            s += "| \(r.preset) | \(r.runner) | \(pairsText) | \(f(b?.slowest, 2)) | \(f(r.single?.cpuSecondsPerFrame, 4)) · \(f(b?.cpuSecondsPerFrame, 4)) "
            s += "| \(b.map { f($0.cpuBusy * 100, 0) + " %" } ?? "–") | \(gpu) | \(mem) | \(trials) |\n"
        }
        for preset in Array(Set(results.map(\.preset))).sorted() {
            let here = results.filter { $0.preset == preset }
            let peers = here.filter { !$0.runner.hasPrefix("diptych") && ($0.maxRealtimePairs ?? 0) > 0 }
            guard let best = peers.max(by: { a, b in
                (a.maxRealtimePairs!, -(a.best?.cpuSecondsPerFrame ?? .infinity)) < (b.maxRealtimePairs!, -(b.best?.cpuSecondsPerFrame ?? .infinity))
            }) else { continue }
            for ours in here where ours.runner.hasPrefix("diptych") {
                guard let n = ours.maxRealtimePairs else { continue }
                s += "\n\(preset): \(ours.runner) \(n) real-time pairs, FFmpeg's best (\(best.runner)) \(best.maxRealtimePairs!): "
                s += "\(f(Double(n) / Double(best.maxRealtimePairs!), 2))× as many"
                if let a = ours.single?.cpuSecondsPerFrame, let b = best.single?.cpuSecondsPerFrame {
                    s += "; CPU s/frame at 1 pair \(f(a / b, 2))× FFmpeg's"
                }
                if let a = ours.best?.cpuSecondsPerFrame, let b = best.best?.cpuSecondsPerFrame {
                    s += ", at each one's largest count \(f(a / b, 2))×"
                }
                s += ".\n"
            }
        }
        for r in results {
            for t in r.trials {
                guard let st = t.cpuMsPerFrameByStage else { continue }
                let parts = PipelineStage.allCases.map { "\($0.rawValue) \(f(st[$0], 2))" }.joined(separator: ", ")
                s += "\n\(r.runner) \(r.preset), \(t.pairs) at once: CPU ms per output frame by stage: \(parts).\n"
            }
        }
        var notes: [String] = []
        for r in results {
            if let n = r.note { notes.append("\(r.runner) \(r.preset): \(n)") }
            for t in r.trials { for n in t.notes { notes.append("\(r.runner) \(r.preset) \(t.pairs) at once: \(n)") } }
        }
        s += "\nEach take: \(results.first.map { "\($0.layout), \($0.canvas) 60 fps primary + \($0.secondary) 30 fps secondary, \(f($0.contentSeconds, 1)) s" } ?? ""), "
        s += "same preset, bitrate, keyframe interval (\(results.first.map { String(format: "%g", $0.keyframeSeconds) } ?? "–") s) and geometry for every runner. Real time: every take of the trial "
        s += "finished at ≥ \(f(results.first?.minSpeed, 2))× (its content seconds ÷ its wall seconds from start to exit) and wrote exactly the primary's "
        s += "frames and duration (read back with libavformat); a take still running after its content length is stopped (✗). "
        s += "CPU s/frame: user + system time of all takes ÷ output frames. GPU: nvidia-smi's utilization over the trial "
        s += "(GPU ms/frame = busy fraction × wall ÷ frames). Peak MiB: the largest peak RSS of one take; growth: its RSS "
        s += "over the last fifth minus the second fifth of the take.\n\n"
        var shown = Set<String>()
        for r in results where shown.insert(r.runner).inserted { s += "- \(r.runner) (\(r.summary), \(r.preset)): `\(r.command)`\n" }
        if !notes.isEmpty { s += "\nNotes:\n" + notes.map { "- \($0)" }.joined(separator: "\n") + "\n" }
        return s
    }

    /// Horizontal bars of fps per case, ours beside the peers, with the 60 fps
    /// line, on a log scale (rates from a few to thousands of frames a second
    /// side by side), a gridline at each 1, 2 and 5 of a decade.
    static func svg(_ report: BenchReport) -> String {
        struct Bar { var label: String; var value: Double; var color: String }
        var groups: [(String, [Bar])] = []
        for r in report.results {
            var bars = [Bar(label: "diptych", value: r.fps, color: "#2b6cb0")]
            for p in r.peers { if let v = p.fps, v.isFinite { bars.append(Bar(label: p.peer.rawValue, value: v, color: p.peer == .ffmpeg ? "#c05621" : "#2f855a")) } }
            groups.append(("\(r.stage.rawValue) · \(r.layout) · \(r.canvas) · \(r.input)", bars))
        }
        let values = groups.flatMap { $0.1.map(\.value) }.filter { $0 > 0 && $0.isFinite }
        // The decade below the smallest rate (so a 10 fps bar is a decade long, not a pixel).
        let lo = pow(10, (log10(min(10, values.min() ?? 10))).rounded(.up) - 1)
        let hi = pow(10, (log10(max(60, values.max() ?? 60) * 1.05)).rounded(.up))
        let left = 330.0, width = 520.0, barH = 14.0, gap = 10.0
        func xAt(_ v: Double) -> Double { left + (log10(max(v, lo)) - log10(lo)) / (log10(hi) - log10(lo)) * width }
        var y = 40.0
        var body = ""
        func esc(_ s: String) -> String { s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;") }
        for (title, bars) in groups {
            body += "<text x=\"\(left - 8)\" y=\"\(y + barH - 3)\" text-anchor=\"end\" font-size=\"11\">\(esc(title))</text>\n"
            for b in bars {
                let w = max(1, xAt(b.value) - left)
                body += "<rect x=\"\(left)\" y=\"\(y)\" width=\"\(String(format: "%.1f", w))\" height=\"\(barH - 2)\" fill=\"\(b.color)\"/>"
                body += "<text x=\"\(left + w + 4)\" y=\"\(y + barH - 4)\" font-size=\"10\">\(esc(b.label)) \(String(format: "%.1f", b.value))</text>\n"
                y += barH
            }
            y += gap
        }
        let x60 = xAt(60)
        let height = y + 20
        var grid = ""
        var decade = lo
        while decade <= hi {
            for m in [1.0, 2.0, 5.0] where decade * m <= hi {
                let v = decade * m, x = xAt(v)
                grid += "<line x1=\"\(String(format: "%.1f", x))\" y1=\"30\" x2=\"\(String(format: "%.1f", x))\" y2=\"\(height - 15)\" stroke=\"#e2e8f0\"/>"
                grid += "<text x=\"\(String(format: "%.1f", x))\" y=\"\(height - 5)\" font-size=\"9\" text-anchor=\"middle\" fill=\"#718096\">\(v >= 1 ? String(Int(v)) : String(format: "%g", v))</text>\n"
            }
            decade *= 10
        }
        var s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(left + width + 120))\" height=\"\(Int(height))\" font-family=\"sans-serif\">\n"
        s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        s += "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">diptych bench: output frames per second (higher is better, log scale)</text>\n"
        s += grid + body
        s += "<line x1=\"\(x60)\" y1=\"30\" x2=\"\(x60)\" y2=\"\(height - 15)\" stroke=\"#e53e3e\" stroke-dasharray=\"4 3\"/>"
        s += "<text x=\"\(x60 + 3)\" y=\"40\" font-size=\"10\" fill=\"#e53e3e\">60 fps</text>\n</svg>\n"
        return s
    }

    /// Tiles of one composite per layout, each scaled down (box filter) to
    /// `tileWidth`, two columns, in the order given, each with its label in
    /// its top-left corner.
    static func contactSheet(_ tiles: [(label: String, frame: VideoFrame)], tileWidth: Int = 640) -> VideoFrame? {
        guard !tiles.isEmpty else { return nil }
        let frames = tiles.map(\.frame)
        let cols = min(2, frames.count), rows = (frames.count + cols - 1) / cols
        let aspect = Double(frames[0].height) / Double(frames[0].width)
        let tw = tileWidth, th = Int(Double(tileWidth) * aspect) & ~1, pad = 8
        let W = cols * tw + (cols + 1) * pad, H = rows * th + (rows + 1) * pad
        let sheet = VideoFrame.allocate(width: W, height: H, format: .rgba)
        let d = sheet.planes[0].storage.mutableBase.assumingMemoryBound(to: UInt8.self)
        for i in 0..<(W * H) { d[4 * i] = 32; d[4 * i + 1] = 32; d[4 * i + 2] = 32; d[4 * i + 3] = 255 }
        for (k, f) in frames.enumerated() {
            let ox = pad + (k % cols) * (tw + pad), oy = pad + (k / cols) * (th + pad)
            let src = f.planes[0].baseAddress.assumingMemoryBound(to: UInt8.self), stride = f.planes[0].stride
            for y in 0..<th {
                let y0 = y * f.height / th, y1 = max(y0 + 1, (y + 1) * f.height / th)
                for x in 0..<tw {
                    let x0 = x * f.width / tw, x1 = max(x0 + 1, (x + 1) * f.width / tw)
                    var acc = (0, 0, 0), n = 0
                    for sy in y0..<y1 { for sx in x0..<x1 {
                        let p = sy * stride + sx * 4
                        acc.0 += Int(src[p]); acc.1 += Int(src[p + 1]); acc.2 += Int(src[p + 2]); n += 1
                    } }
                    let o = ((oy + y) * W + ox + x) * 4
                    d[o] = UInt8(acc.0 / n); d[o + 1] = UInt8(acc.1 / n); d[o + 2] = UInt8(acc.2 / n)
                }
            }
            let scale = tw >= 320 ? 2 : 1
            TileFont.draw(tiles[k].label, into: d, width: W, height: H, x: ox + 4 * scale, y: oy + 4 * scale, scale: scale)
        }
        return sheet
    }
}
