import CFFmpeg
import DiptychCore

/// How interlaced pictures are stored: which field comes first in time.
public enum FieldOrder: String, Hashable, Sendable, Codable {
    case topFirst = "top field first"
    case bottomFirst = "bottom field first"

    /// The order a stream's parameters state, or nil for progressive or unknown.
    init?(_ order: AVFieldOrder) {
        switch order {
        case AV_FIELD_TT, AV_FIELD_TB: self = .topFirst
        case AV_FIELD_BB, AV_FIELD_BT: self = .bottomFirst
        default: return nil
        }
    }
}

/// Deinterlaces decoded frames before they leave a source, with FFmpeg's
/// `bwdif` (`yadif` where bwdif is missing) through libavfilter: one
/// progressive frame per decoded frame (`mode=send_frame`, so the frame rate
/// and timestamps are kept), each frame's own field order (`parity=auto`),
/// frames flagged progressive passed through untouched (`deint=interlaced`).
/// The graph is rebuilt when the frame size or format changes.
final class Deinterlacer {
    /// The filter in use (`bwdif` or `yadif`).
    let filter: String
    private var graph: FFFilterGraph
    private var shape: (width: Int32, height: Int32, format: Int32)
    private let timeBase: AVRational
    /// Frames the previous graph still held when the frame shape changed.
    private var pending: [FFFrame] = []
    /// Frames deinterlaced (or passed through) so far.
    private(set) var framesIn = 0

    /// The filter used when available.
    static var preferredFilter: String { FFFilterGraph.has("bwdif") ? "bwdif" : "yadif" }

    init(width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational) throws(FFmpegError) {
        filter = Deinterlacer.preferredFilter
        self.timeBase = timeBase
        shape = (width, height, format.rawValue)
        graph = try Deinterlacer.graph(filter, width: width, height: height, format: format, timeBase: timeBase)
    }

    private static func graph(_ filter: String, width: Int32, height: Int32, format: AVPixelFormat,
                              timeBase: AVRational) throws(FFmpegError) -> FFFilterGraph {
        try FFFilterGraph(filters: "\(filter)=mode=send_frame:parity=auto:deint=interlaced", width: width, height: height,
                          format: format, timeBase: timeBase, sampleAspect: AVRational(num: 1, den: 1))
    }

    /// Hands a decoded frame over (its references are taken); nil flushes
    /// at the end of the stream.
    func push(_ frame: FFFrame?) throws(FFmpegError) {
        if let frame, (frame.width, frame.height, frame.raw.pointee.format) != shape {
            // A new picture size or format: drain the old graph, start another.
            try graph.push(nil)
            while true {
                let f = FFFrame()
                guard graph.pull(into: f) == 0 else { break }
                pending.append(f)
            }
            shape = (frame.width, frame.height, frame.raw.pointee.format)
            graph = try Deinterlacer.graph(filter, width: frame.width, height: frame.height, format: frame.pixelFormat, timeBase: timeBase)
        }
        if frame != nil { framesIn += 1 }
        try graph.push(frame)
    }

    /// The next progressive frame into `frame`: 0, EAGAIN (push more) or EOF (flushed).
    func pull(into frame: FFFrame) -> Int32 {
        if !pending.isEmpty { frame.take(from: pending.removeFirst()); return 0 }
        return graph.pull(into: frame)
    }
}
