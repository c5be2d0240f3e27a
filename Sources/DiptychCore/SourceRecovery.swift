#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a take keeps a role's picture when its source goes away
/// (docs/ARCHITECTURE.md, "Source recovery"): which sources are reopened,
/// how long and how often, when a priority list fails over and back, and
/// which timestamps start a new timeline. Pure values and functions; the
/// input stage applies them.
public struct SourceRecovery: Hashable, Sendable {
    /// `--source-reconnect-window`: seconds a lost role keeps reopening its
    /// sources (and trying the rest of its list) before it gives up; 0: never.
    public var window: Double
    /// `--source-failback`: seconds a higher source of a list must deliver
    /// without a gap before the take goes back to it.
    public var failback: Double
    /// Seconds the shown source may be silent (or lost) before a lower one
    /// of the list is shown instead.
    public var grace: Double

    public init(window: Double = TakeConfiguration.defaultSourceReconnectWindow,
                failback: Double = TakeConfiguration.defaultSourceFailback, grace: Double = SourceRecovery.defaultGrace) {
        self.window = window; self.failback = failback; self.grace = grace
    }

    public static let defaultGrace = 1.0
    /// The first reopen waits this long after a loss, each failed one twice
    /// as long as the one before, up to `maximumBackoff`.
    public static let firstBackoff = 0.5
    public static let maximumBackoff = 8.0
    /// A source whose frames stop for longer than this is no longer "steady"
    /// (its failback clock starts again).
    public static let steadyGap = 1.0

    /// Seconds before the next reopen after `failures` failed ones in a row (0: the first).
    public static func backoff(afterFailures failures: Int) -> Double {
        min(maximumBackoff, firstBackoff * Double(1 << min(max(failures, 0), 10)))
    }

    /// Whether `spec` is a network stream that can be reopened: RTMP, RTSP,
    /// SRT, UDP, RTP, TCP, HTTP(S) and HLS pulls. Files, FIFOs, devices,
    /// standard input and patterns are not.
    public static func isNetwork(_ spec: SourceSpec) -> Bool {
        guard case .url(let u) = spec, u.contains("://"), let scheme = u.split(separator: ":").first?.lowercased() else { return false }
        return networkSchemes.contains(scheme) || scheme.hasPrefix("hls+")
    }

    /// Whether `spec` names a local camera (`v4l2:/dev/videoN`, `camera:N`):
    /// a live source like a network stream (no seeking, live timing), reopened
    /// when it fails or stops delivering (`isReopened`).
    public static func isCamera(_ spec: SourceSpec) -> Bool {
        guard case .url(let u) = spec else { return false }
        return u.hasPrefix("v4l2:") || u.hasPrefix("camera:")
    }

    /// Whether a lost `spec` is reopened within the reconnect window: a
    /// network stream (`isNetwork`) or a camera (`isCamera`).
    public static func isReopened(_ spec: SourceSpec) -> Bool { isNetwork(spec) || isCamera(spec) }

    static let networkSchemes: Set<String> = ["rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp", "tcp", "http", "https", "hls"]

    /// Whether a live stream's next timestamp `next` after `previous` starts
    /// a new timeline (a sender that restarted, reset or wrapped): it goes
    /// back, stands still, or leaps ahead by more than half a second and ten
    /// frame times.
    public static func isDiscontinuity(previous: MediaTime, next: MediaTime, frameDuration: MediaTime) -> Bool {
        if next <= previous { return true }
        let leap = max(0.5, frameDuration.seconds * 10)
        return (next - previous).seconds > leap
    }

    /// What a switch between two sources of a role's list is called: back to
    /// the one lost (`reconnect`), to a lower one (`failover`), to a higher
    /// one (`failback`).
    public static func reason(from: Int, to: Int) -> SourceSwitchReason {
        to == from ? .reconnect : to > from ? .failover : .failback
    }
}

/// Why the take changed the source a role shows (`SourceRecovery.reason`).
public enum SourceSwitchReason: String, Hashable, Sendable, Codable {
    /// The lost source was reopened and delivers again.
    case reconnect
    /// A lower source of the list took over from a lost or silent one.
    case failover
    /// A higher source of the list delivered steadily and took over again.
    case failback
}
