import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia

/// Why a take ended. Every reason goes through the same finalize path.
public enum StopReason: Hashable, Sendable, CustomStringConvertible {
    /// The primary stream ended: the normal end of a take.
    case endOfPrimary
    /// `--duration` was reached.
    case durationReached
    /// Stopped by the host program or a signal (SIGINT, SIGTERM).
    case requested(String)
    /// The primary stream stopped delivering (interrupted, disconnected, failed to decode).
    case primaryInterrupted(String)
    /// The machine reached the critical thermal state.
    case thermalCritical(String)
    /// Free space fell below the stop threshold.
    case storageLow(freeBytes: Int64)
    /// A write failed because the disk is full.
    case storageFull(MediaError)
    /// The output could not be written (network error, I/O error).
    case outputFailed(MediaError)
    /// The GPU failed (the context was lost more often than it could be rebuilt).
    case gpuFailed(GPUError)

    /// Whether the take ended the way the user asked (exit status 0).
    public var isNormal: Bool {
        switch self {
        case .endOfPrimary, .durationReached, .requested: return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .endOfPrimary: return "end of primary stream"
        case .durationReached: return "duration reached"
        case .requested(let why): return "stopped (\(why))"
        case .primaryInterrupted(let why): return "primary stream interrupted: \(why)"
        case .thermalCritical(let why): return "stopped: critical thermal state (\(why))"
        case .storageLow(let free): return "stopped: storage low (\(free / (1 << 20)) MiB free, need 100 MiB to continue)"
        case .storageFull(let why): return "stopped: storage full (\(why))"
        case .outputFailed(let why): return "stopped: output failed (\(why))"
        case .gpuFailed(let why): return "stopped: GPU failed (\(why))"
        }
    }
}

/// A stream that went away or came back mid-take (`SessionHooks.streamChange`).
public enum StreamChange: Sendable, Equatable {
    /// The secondary delivered nothing for `secondaryTimeout` (its last frame
    /// is held), or failed; `reason` says which.
    case sourceLost(StreamRole, reason: String)
    /// A stalled secondary delivers again; a lost role shows a source again
    /// (reopened, or another of its list).
    case sourceBack(StreamRole)
    /// The role shows another source of its priority list (`reason`:
    /// `failover`, `failback`), or the one it lost again (`reconnect`).
    case sourceSwitched(StreamRole, from: String, to: String, reason: SourceSwitchReason)
    /// A live output's write failed; it is reopened with backoff
    /// (`output`: the output's index, 0 the main one; `out`: where it writes).
    case outputLost(output: Int, out: String, reason: String)
    /// A lost live output was reopened after `seconds` down.
    case outputBack(output: Int, out: String, seconds: Double)
    /// The output's NVENC session failed mid-take and the software encoder
    /// went on from there (docs/ARCHITECTURE.md, "Encoder paths").
    case encoderFellBack(output: Int, out: String, EncoderFallback)
}

/// A point an output frame passes on its way to the file (`SessionHooks.frameEvent`).
public enum FrameEvent: Sendable {
    /// The render loop took the primary frame.
    case primaryTaken
    /// The output frame made from it was written.
    case written
}

/// Progress of a running take, reported about every half second.
public struct TakeProgress: Sendable {
    public var frames: Int
    public var mediaSeconds: Double
    public var wallSeconds: Double
    public var fps: Double { wallSeconds > 0 ? Double(frames) / wallSeconds : 0 }
    public var realtimeFactor: Double { wallSeconds > 0 ? mediaSeconds / wallSeconds : 0 }
    public var secondaryRepeated: Int
    public var secondaryDropped: Int
    /// A split main output's files so far (`--segment-time`), the last one
    /// still being written; empty for an output written whole.
    public var segments: [WrittenSegment] = []
    /// What each role shows now (primary first; the secondary when the take has one).
    public var sources: [SourceStatus] = []
    /// The sources' switches so far (reconnects, failovers, failbacks).
    public var sourceSwitches: [SourceSwitchRecord] = []
}

/// What one role shows now (`TakeProgress.sources`).
public struct SourceStatus: Sendable, Codable, Hashable {
    /// `primary` or `secondary`.
    public var role: String
    /// The source shown, nil while the role has none (lost).
    public var source: String?
    /// Its place in the role's priority list (0: the first), nil while lost.
    public var index: Int?
    /// Sources in the role's list.
    public var listed: Int
    /// Whether the role has lost its source and is reopening it (or trying its list).
    public var lost: Bool
    /// Switches of the role so far.
    public var switches: Int
}

/// A role's change of source (`TakeSummary.sourceSwitches`), at a frame boundary.
public struct SourceSwitchRecord: Sendable, Codable, Hashable {
    /// `primary` or `secondary`.
    public var role: String
    /// Take time of the first frame from `to` (the live outputs' timeline, seconds).
    public var at: Double
    public var from: String
    public var to: String
    /// `reconnect`, `failover` or `failback` (`SourceSwitchReason`).
    public var reason: SourceSwitchReason
    /// Wall seconds the role had no new frame before `to` delivered (0 for a failback).
    public var downSeconds: Double
}

/// What a finished take produced. `--json` prints this.
public struct TakeSummary: Sendable, Codable {
    public var output: String
    public var frames: Int
    public var durationSeconds: Double
    public var frameRate: String
    public var canvas: String
    public var encoder: String
    public var encoderReason: String
    /// How frames reached the encoder: `vaapi-zero-copy`, `nvenc`, `vaapi-upload`,
    /// `gpu` (the GPU's H.264 encoder), `software` (`EncoderPath`), or `none` (frames only).
    public var encoderPath: String
    public var audio: String
    public var gpu: String
    public var wallSeconds: Double
    public var fps: Double
    public var realtimeFactor: Double
    public var secondaryFramesShown: Int
    public var secondaryRepeated: Int
    public var secondaryDropped: Int
    public var primaryOnlyFrames: Int
    public var gpuRebuilds: Int
    public var hotSwaps: Int
    public var stopReason: String
    public var normalStop: Bool
    public var warnings: [String]
    public var preview: String?
    /// Timestamp of the frame the preview shows.
    public var previewSeconds: Double?
    /// The outputs besides the main one (`--also-out`, added while running), as they ended.
    public var outputs: [OutputSummary] = []
    /// A split main output's files (`--segment-time`), in order: each file's
    /// path, frames, and start and length in seconds on the take's timeline
    /// (each file's own timestamps start at 0). Nil for an output written whole.
    public var segments: [WrittenSegment]?
    /// The main output's NVENC session failed mid-take and the software
    /// encoder went on from there (`encoder` names the one the take began with).
    public var encoderFallback: EncoderFallback?
    /// Frames live outputs repeated (the last frame or the slate) while the primary was interrupted.
    public var heldFrames = 0
    /// Every change of source of either role: a lost network source reopened
    /// (`reconnect`), a priority list failing over or back, in order.
    public var sourceSwitches: [SourceSwitchRecord] = []
    /// Frames the main output dropped because the network could not keep up (live outputs only).
    public var droppedFrames = 0
    /// Times the main output (a live stream) was disconnected and reopened.
    public var outages: [OutputOutage] = []
    /// Frames the main output (a live stream that reconnects) lost while it
    /// was disconnected; `frames` counts only those it sent. Nil for outputs
    /// that do not reconnect.
    public var lostFrames: Int?
    /// The process's CPU seconds by pipeline stage from the start of the
    /// take's setup to its end (`StageClock`; with several takes in one
    /// process, theirs together).
    public var cpuStages: StageTimes?
    /// Where each input stream was decoded and why (`--decoder`).
    public var decoders: [StreamDecoding] = []
    /// What every frame of the take's compositor did (`GPUPlan`; CUDA frames
    /// through host memory where taking them on the GPU failed).
    public var gpuPlan: GPUPlan?
}

/// What one more output of a take received.
public struct OutputSummary: Sendable, Codable, Hashable {
    public var output: String
    /// Frames the output took (for a live stream that reconnects: sent, not lost to an outage).
    public var frames: Int
    /// Why it closed early, if it did.
    public var failure: String?
    /// Frames dropped because the network could not keep up (live outputs).
    public var dropped = 0
    /// Disconnections of a live output and how long each lasted.
    public var outages: [OutputOutage] = []
    /// Frames lost while it was disconnected (nil for outputs that do not reconnect).
    public var lost: Int?
    /// Its canvas (`1280x720`), rate (`30`, `15`, `30000/1001`) and bit rate
    /// in bits per second (nil with a constant quantizer): the take's, or
    /// its own (`alsoOut`'s `size`, `rateDivisor`, `bitrate`).
    public var canvas: String?
    public var frameRate: String?
    public var bitrate: Int?
    /// A split output's files (its `segmentTime` on an MP4 or Matroska file), as `TakeSummary.segments`.
    public var segments: [WrittenSegment]?
    /// Its NVENC session failed mid-take and the software encoder went on from there.
    public var encoderFallback: EncoderFallback?
}

/// A live output's disconnection: when (take time) and for how long.
public struct OutputOutage: Sendable, Codable, Hashable {
    public var at: Double
    public var seconds: Double
    /// Whether the output came back (false: closed after the reconnect window).
    public var recovered: Bool
}
