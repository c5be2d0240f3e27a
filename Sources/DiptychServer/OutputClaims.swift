import DiptychCore
import Foundation

/// Which files a server's takes write, so that no take writes over another
/// take's file: every path of a new take or added output is checked against
/// the takes writing now (their output, extra outputs, preview and the
/// outputs added while they run) and against the recordings finished takes
/// left, while those files exist.
enum OutputClaims {
    /// The files `config` writes, each with the request field that names it
    /// (network outputs are not files and are not claimed).
    static func files(_ config: TakeConfiguration) -> [(field: String, path: String)] {
        var f: [(field: String, path: String)] = []
        if let o = config.output { f.append(("out", o)) }
        for (i, o) in config.extraOutputs.enumerated() { f.append(("alsoOut[\(i)].out", o.out)) }
        if let p = config.preview { f.append(("preview", p)) }
        return f.filter { isFile($0.path) }
    }

    static func isFile(_ path: String) -> Bool { FileIdentity(path) != nil }

    /// The fields of `files(config)` that name split outputs (their files are `SegmentNaming`'s, not the name itself).
    static func splitFields(_ config: TakeConfiguration) -> Set<String> {
        var f: Set<String> = config.splitsOutput ? ["out"] : []
        for (i, o) in config.extraOutputs.enumerated() where o.splits { f.insert("alsoOut[\(i)].out") }
        return f
    }

    /// The split outputs `take` writes: its main output, extra outputs and added ones that split.
    static func splitOutputs(of take: Take) -> [String] {
        let c = take.configuration
        return ((c.splitsOutput ? [c.output].compactMap { $0 } : []) + (c.extraOutputs + take.addedOutputs).filter(\.splits).map(\.out)).filter(isFile)
    }

    /// The recordings of `take` (its output, extra outputs and those added
    /// while it runs; a split output's files, once it has ended).
    static func recordings(of take: Take) -> [String] {
        let segments = (take.summary?.segments ?? []) + (take.summary?.outputs.flatMap { $0.segments ?? [] } ?? [])
        return (files(take.configuration).filter { $0.field != "preview" }.map(\.path) + take.addedOutputs.map(\.out) + segments.map(\.path))
            .filter(isFile)
    }

    /// Whether the file `id` is one of the files a split output `out` writes
    /// (`out-0001.mp4`, … in its folder: `SegmentNaming`).
    static func isSegment(_ id: FileIdentity, of out: String) -> Bool {
        guard let o = FileIdentity(out) else { return false }
        func folder(_ p: String) -> Substring { p[..<(p.lastIndex(of: "/") ?? p.startIndex)] }
        return folder(id.path) == folder(o.path) && SegmentNaming.isSegment(SegmentNaming.lastComponent(id.path), of: o.path)
    }

    /// The HLS playlists `take` writes (its output and extra outputs, and those added while it runs).
    static func hlsOutputs(of take: Take) -> [String] {
        let c = take.configuration
        var specs = c.extraOutputs + take.addedOutputs
        if let o = c.output { specs.insert(OutputSpec(out: o, format: c.format), at: 0) }
        return specs.filter { $0.container == .hls && isFile($0.out) }.map(\.out)
    }

    /// Whether the file `id` is one an HLS output `playlist` writes beside it
    /// (its initialization segment or a media segment: `HLSNaming`).
    static func isHLSFile(_ id: FileIdentity, of playlist: String) -> Bool {
        guard let p = FileIdentity(playlist) else { return false }
        func folder(_ p: String) -> Substring { p[..<(p.lastIndex(of: "/") ?? p.startIndex)] }
        return folder(id.path) == folder(p.path) && HLSNaming.isFile(SegmentNaming.lastComponent(id.path), of: p.path)
    }

    /// Every file `take` writes while it runs.
    static func written(by take: Take) -> [String] {
        files(take.configuration).map(\.path) + take.addedOutputs.map(\.out).filter(isFile)
    }

    /// The files `take` reads: its inputs, slate, scheduled switches, overlay images and texts' fonts.
    static func reads(of take: Take) -> [String] {
        let c = take.configuration
        var r: [String] = []
        for spec in [c.primary, c.secondary] + c.secondarySwitches.map(\.source) { if case .url(let u) = spec { r.append(u) } }
        if let s = c.slate { r.append(s) }
        r += (c.overlays + c.extraOutputs.flatMap(\.overlays)).map(\.image)
        r += (c.texts + c.extraOutputs.flatMap(\.texts)).compactMap(\.font)
        return r.filter { FileIdentity($0) != nil }
    }

    /// Why `path` (asked for as `field`) may not be written, among `takes`
    /// and the paths `reserved` by outputs being opened; nil when it may.
    /// Paths are compared as files (`FileIdentity`), not as text.
    /// `split`: `path` is a split output, so its files are checked, not the name itself.
    static func conflict(_ field: String, _ path: String, takes: [Take], retired: [TakeRegistry.Retired] = [],
                         reserved: Set<String> = [], split: Bool = false) -> RequestError? {
        guard let id = FileIdentity(path) else { return nil }
        func same(_ other: String) -> Bool { FileIdentity(other).map { $0.isSame(as: id) } ?? false }
        if reserved.contains(where: same) { return .conflict("\(field) '\(path)': another output is being opened on it") }
        for t in takes {
            if t.state.isActive {
                if written(by: t).contains(where: same) { return .conflict("\(field) '\(path)': take \(t.id) is writing it") }
                // A running split output writes its numbered files; a new split output would write those of its own.
                if splitOutputs(of: t).contains(where: { isSegment(id, of: $0) }) {
                    return .conflict("\(field) '\(path)': take \(t.id) is writing it (a file of its split output)")
                }
                // A running HLS take writes its segments beside its playlist.
                if let hit = hlsOutputs(of: t).first(where: { isHLSFile(id, of: $0) }) {
                    return .conflict("\(field) '\(path)': take \(t.id) is writing it (a file of its HLS output \(hit))")
                }
                if split, let hit = written(by: t).first(where: { FileIdentity($0).map { isSegment($0, of: id.path) } ?? false }) {
                    return .conflict("\(field) '\(path)': its files would include '\(hit)', which take \(t.id) is writing")
                }
                if reads(of: t).contains(where: same) { return .conflict("\(field) '\(path)': take \(t.id) is reading it") }
            } else if recordings(of: t).contains(where: same) && FileManager.default.fileExists(atPath: id.path) {
                return .conflict("\(field) '\(path)': holds the recording of take \(t.id) (\(t.state.rawValue)); "
                    + "choose another name, or remove the file first")
            }
        }
        for r in retired where r.recordings.contains(where: same) && FileManager.default.fileExists(atPath: id.path) {
            return .conflict("\(field) '\(path)': holds the recording of take \(r.id) (\(r.state.rawValue)); "
                + "choose another name, or remove the file first")
        }
        return nil
    }
}
