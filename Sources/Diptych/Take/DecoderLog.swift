import Foundation
import DiptychCore
import DiptychMedia
import Synchronization

/// Where one input stream of a take was decoded (the summary's `decoders`).
public struct StreamDecoding: Sendable, Codable, Hashable {
    /// `primary` or `secondary`.
    public var stream: String
    /// The input as named (a hot-swapped secondary has an entry of its own).
    public var input: String
    /// `cpu` or `nvdec`: where it started.
    public var decoder: String
    public var reason: String
    /// When it left NVDEC for the CPU mid-take, and why.
    public var fallback: DecoderFallback?
}

/// The decoders of a take's inputs as they open, and their falls back from
/// NVDEC (told on the readers' threads). Thread-safe.
final class DecoderLog: Sendable {
    private let streams = Mutex<[StreamDecoding]>([])

    /// Notes `input`'s decoder; returns `input`.
    func opened(_ role: StreamRole, _ input: any TakeInput) -> any TakeInput {
        guard let d = input.info.decoder else { return input }
        let entry = StreamDecoding(stream: role.rawValue, input: input.info.name, decoder: d.decoder.rawValue, reason: d.reason)
        streams.withLock { streams in
            // A source reopened (a reconnect, a list's failover and back) is listed once.
            if !streams.contains(entry) { streams.append(entry) }
        }
        return input
    }

    /// The latest stream of `role` left NVDEC.
    func fellBack(_ role: StreamRole, _ fallback: DecoderFallback) {
        streams.withLock { streams in
            guard let i = streams.lastIndex(where: { $0.stream == role.rawValue && $0.fallback == nil }) else { return }
            streams[i].fallback = fallback
        }
    }

    var entries: [StreamDecoding] { streams.withLock { $0 } }
}
