import Diptych
import DiptychCore
import Foundation
import Synchronization

/// What `state.json` holds for a take.
struct TakeRecord: Codable, Sendable {
    var id: String
    var state: TakeState
    var created: Date
    var updated: Date
    var load: TakeLoad
    var encoderThreads: Int
    /// The layout now, in the configuration's JSON form.
    var layout: AnyJSON?
    var error: String?
    var recovered: RecoveredOutput?
    /// Where the outputs added while the take ran write (open or removed
    /// since), so a restarted server still keeps other takes off them.
    var addedOutputs: [String]?
}

/// `--state-dir`: one folder per take under `takes/`, holding
/// `config.json` (the configuration as run), `state.json` (a `TakeRecord`,
/// rewritten at each change of state and when an output is added) and
/// `summary.json` (once finished).
/// Files are replaced atomically, so a crash leaves the last complete one.
final class StateStore: Sendable {
    let root: URL
    private let log: @Sendable (String) -> Void
    /// Serializes the writes; guards no data.
    private let writing = Mutex(())

    init(path: String, log: @escaping @Sendable (String) -> Void) throws(ServerError) {
        root = URL(fileURLWithPath: path).appendingPathComponent("takes")
        self.log = log
        do { try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true) } catch {
            throw .badUsage("--state-dir '\(path)': cannot create the folder (\(error.localizedDescription))")
        }
        guard FileManager.default.isWritableFile(atPath: root.path) else {
            throw .badUsage("--state-dir '\(path)': the folder is not writable")
        }
    }

    private func folder(_ id: String) -> URL { root.appendingPathComponent(id) }

    private static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted]
        e.dateEncodingStrategy = .iso8601
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return e
    }()

    /// Callers hold `writing`.
    private func write(_ data: Data, _ name: String, of id: String) {
        do {
            try FileManager.default.createDirectory(at: folder(id), withIntermediateDirectories: true)
            try data.write(to: folder(id).appendingPathComponent(name), options: .atomic)
        } catch {
            log("warning: state of take \(id): cannot write \(name) (\(error.localizedDescription))")
        }
    }

    /// Writes the take's configuration (once, at creation).
    func saveConfiguration(_ take: Take) {
        writing.withLock { _ in write(take.configuration.jsonData(), "config.json", of: take.id) }
    }

    /// Writes the take's state, and its summary once there is one.
    /// The snapshot is taken under the store's lock, so saves from several
    /// threads land in the order they saw the take (the last one wins).
    func save(_ take: Take) {
        writing.withLock { _ in
            let s = take.snapshot()
            let record = TakeRecord(id: s.id, state: s.state, created: s.created, updated: Date(), load: s.load,
                                    encoderThreads: s.encoderThreads, layout: LayoutJSON.value(s.layout), error: s.error, recovered: s.recovered,
                                    addedOutputs: s.everAdded.isEmpty ? nil : s.everAdded.map(\.out))
            if let d = try? Self.encoder.encode(record) { write(d, "state.json", of: s.id) }
            if let summary = s.summary, let d = try? Self.encoder.encode(summary) { write(d, "summary.json", of: s.id) }
        }
    }

    /// Forgets a take (one that never started).
    func remove(_ id: String) {
        writing.withLock { _ in try? FileManager.default.removeItem(at: folder(id)) }
    }

    /// Every take recorded, oldest first. A take recorded as running was
    /// running when the server stopped: it is returned `failed`, with what
    /// its output file holds, and saved so.
    func load() -> [Take] {
        let dec = JSONDecoder()
        dec.dateDecodingStrategy = .iso8601
        dec.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        var takes: [Take] = []
        for id in ids {
            let dir = folder(id)
            guard let stateData = try? Data(contentsOf: dir.appendingPathComponent("state.json")) else { continue }
            guard let record = try? dec.decode(TakeRecord.self, from: stateData), record.id == id,
                  let configData = try? Data(contentsOf: dir.appendingPathComponent("config.json")) else {
                log("warning: state folder \(dir.path): unreadable record; skipped")
                continue
            }
            let config: TakeConfiguration
            do { config = try TakeConfiguration(jsonData: configData, source: dir.appendingPathComponent("config.json").path) } catch {
                log("warning: \(error.description); skipped")
                continue
            }
            let summary = (try? Data(contentsOf: dir.appendingPathComponent("summary.json"))).flatMap {
                try? dec.decode(TakeSummary.self, from: $0)
            }
            let take = Take(record: record, configuration: config, summary: summary)
            if record.state.isActive {
                let out = config.output ?? ""
                let recovered = out.contains("://") ? RecoveredOutput(frames: 0, durationSeconds: 0, decodable: false,
                                                                      note: "a network output cannot be checked")
                    : config.splitsOutput ? MediaProbe.countFrames(segmentsOf: out)
                    : config.container == .hls ? MediaProbe.countFrames(hlsPlaylist: out) : MediaProbe.countFrames(out)
                take.markCrashed(recovered, previous: record.state)
                log("take \(id) was \(record.state.rawValue) when the server stopped: failed; \(out) holds \(recovered.frames) decodable frames")
                save(take)
            }
            takes.append(take)
        }
        return takes.sorted { $0.created < $1.created }
    }
}
