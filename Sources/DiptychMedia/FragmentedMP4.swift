#if canImport(Glibc)
import Glibc
#endif

/// The length of a fragmented MP4, written once the take ends cleanly
/// (a hybrid MP4, as OBS writes them).
///
/// While recording the file is an ordinary fragmented MP4: `ftyp`, a `moov`
/// without samples (durations 0), a small `free` box reserved right after
/// it, then one `moof`+`mdat` per fragment. A process killed at any moment
/// leaves exactly that, playable up to the last complete fragment; readers
/// that trust the movie header show a wrong length (0 or a guess).
///
/// On a clean finish the `moov` is patched in place: `mvhd`, every `tkhd`
/// and `mdhd` get the real duration and a `mehd` (the whole movie's length)
/// goes into `mvex`, taking its bytes from the reserved `free` box, so no
/// fragment moves and the `mfra` index stays valid. The region (under 1 KiB)
/// is rewritten with one `pwrite` and flushed on its own.
enum FragmentedMP4 {
    /// The `free` box written after the header: room for a 64-bit `mehd`
    /// and for three `mdhd`s grown to version 1 (a take over 2^32 ticks, 13 h at 90 kHz).
    static let reservedBox: [UInt8] = [0, 0, 0, 96] + Array("free".utf8) + Array(repeating: 0, count: 88)

    /// One track's end: its last sample's end time in its media timescale
    /// (the `mdhd` timescale, the muxer's stream time base).
    struct TrackEnd: Sendable {
        var end: Int64
        var timescale: Int32
    }

    enum PatchError: Error, CustomStringConvertible {
        case io(String)
        case layout(String)
        var description: String {
            switch self {
            case .io(let s): return s
            case .layout(let s): return "unexpected MP4 layout: \(s)"
            }
        }
    }

    /// Writes the durations of `tracks` (in `trak` order) into the file at `path`.
    static func writeDuration(path: String, tracks: [TrackEnd]) throws(PatchError) {
        // O_DSYNC: the pwrite returns once its own bytes are on disk (Linux
        // syncs just the written range, not the whole take).
        let fd = open(path, O_RDWR | O_CLOEXEC | O_DSYNC)
        guard fd >= 0 else { throw .io("reopen: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // ftyp, moov and the reserved free box sit at the start; a few KiB at most.
        var head = [UInt8](repeating: 0, count: 1 << 16)
        let n = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw .io("read: \(String(cString: strerror(errno)))") }
        head.removeLast(head.count - n)
        var boxes = MP4Boxes(head)
        guard let ftyp = boxes.next(), ftyp.type == "ftyp", let moov = boxes.next(), moov.type == "moov",
              let free = boxes.next(), free.type == "free" else {
            throw .layout("expected ftyp, moov, free at the start")
        }
        let patched = try patchedMoov(Array(head[moov.range]), tracks: tracks)
        let grown = patched.count - moov.range.count
        guard grown <= free.range.count - 8 else { throw .layout("reserved space too small") }
        var region = patched
        region += box(type: "free", payload: [UInt8](repeating: 0, count: free.range.count - 8 - grown))
        let written = region.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(moov.range.lowerBound)) }
        guard written == region.count else { throw .io("write: \(String(cString: strerror(errno)))") }
    }

    /// What a fragmented MP4 cut short holds once `cutToLastFragment` has
    /// run: each track's end and the samples of the first track (the video).
    struct Kept: Sendable {
        var tracks: [TrackEnd]
        var firstTrackSamples: Int
    }

    /// A file whose writing failed mid-fragment (a full disk): cut after its
    /// last complete `moof`+`mdat`, then the length of what it holds is
    /// written in (`writeDuration`, in place, needing no new space). Returns
    /// what it holds. Reads box headers and the small boxes only.
    static func cutToLastFragment(path: String) throws(PatchError) -> Kept {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw .io("reopen: \(String(cString: strerror(errno)))") }
        var st = stat()
        guard fstat(fd, &st) == 0 else { close(fd); throw .io("stat: \(String(cString: strerror(errno)))") }
        let size = Int(st.st_size)
        func read(_ offset: Int, _ count: Int) -> [UInt8] {
            var b = [UInt8](repeating: 0, count: max(0, min(count, size - offset)))
            let n = b.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            return Array(b.prefix(max(0, n)))
        }
        /// The box at `offset`: its type and size, nil when its header or body runs past the end.
        func header(_ offset: Int) -> (type: String, size: Int)? {
            let h = read(offset, 16)
            guard h.count >= 8 else { return nil }
            var n = Int(be(h, 0, 4))
            if n == 1 { guard h.count == 16 else { return nil }; n = Int(be(h, 8, 8)) }
            guard n >= 8, offset + n <= size else { return nil }
            return (String(decoding: h[4..<8], as: UTF8.self), n)
        }
        var offset = 0
        var tracks: [(id: UInt32, timescale: Int32, defaultDuration: UInt32, end: Int64)] = []
        var samples = 0
        var keptEnd = 0
        var pendingMoof: (samples: Int, ends: [Int: Int64])?
        while let box = header(offset) {
            switch box.type {
            case "moov":
                tracks = movieTracks(read(offset, box.size))
                keptEnd = offset + box.size
            case "moof":
                pendingMoof = fragment(read(offset, box.size), tracks: tracks.map { ($0.id, $0.defaultDuration) })
            case "mdat":
                if let m = pendingMoof {
                    samples += m.samples
                    for (i, end) in m.ends { tracks[i].end = max(tracks[i].end, end) }
                    keptEnd = offset + box.size
                }
                pendingMoof = nil
            default:
                if pendingMoof == nil { keptEnd = offset + box.size }
            }
            offset += box.size
        }
        let cut = ftruncate(fd, off_t(keptEnd))
        close(fd)
        guard cut == 0 else { throw .io("truncate: \(String(cString: strerror(errno)))") }
        guard !tracks.isEmpty else { throw .layout("no moov") }
        let ends = tracks.map { TrackEnd(end: $0.end, timescale: $0.timescale) }
        try writeDuration(path: path, tracks: ends)
        return Kept(tracks: ends, firstTrackSamples: samples)
    }

    /// Each `trak`'s id and media timescale, and its `trex` default sample duration, in `trak` order.
    static func movieTracks(_ moov: [UInt8]) -> [(id: UInt32, timescale: Int32, defaultDuration: UInt32, end: Int64)] {
        var defaults: [UInt32: UInt32] = [:]
        if let mvex = MP4Boxes(moov, from: 8).first(where: { $0.type == "mvex" }) {
            for trex in MP4Boxes(moov, from: mvex.range.lowerBound + 8, to: mvex.range.upperBound) where trex.type == "trex" {
                let o = trex.range.lowerBound
                defaults[UInt32(be(moov, o + 12, 4))] = UInt32(be(moov, o + 20, 4))
            }
        }
        return MP4Boxes(moov, from: 8).filter { $0.type == "trak" }.compactMap { trak in
            let boxes = Array(MP4Boxes(moov, from: trak.range.lowerBound + 8, to: trak.range.upperBound))
            guard let tkhd = boxes.first(where: { $0.type == "tkhd" }), let mdia = boxes.first(where: { $0.type == "mdia" }),
                  let mdhd = MP4Boxes(moov, from: mdia.range.lowerBound + 8, to: mdia.range.upperBound).first(where: { $0.type == "mdhd" })
            else { return nil }
            let id = UInt32(be(moov, tkhd.range.lowerBound + (moov[tkhd.range.lowerBound + 8] == 1 ? 28 : 20), 4))
            let timescale = Int32(truncatingIfNeeded: be(moov, mdhd.range.lowerBound + (moov[mdhd.range.lowerBound + 8] == 1 ? 28 : 20), 4))
            return (id, timescale, defaults[id] ?? 0, 0)
        }
    }

    /// One `moof`: the samples of the first track, and each track's end
    /// (`tfdt` plus its samples' durations), by index in `tracks`.
    static func fragment(_ moof: [UInt8], tracks: [(id: UInt32, defaultDuration: UInt32)]) -> (samples: Int, ends: [Int: Int64]) {
        var samples = 0
        var ends: [Int: Int64] = [:]
        for traf in MP4Boxes(moof, from: 8) where traf.type == "traf" {
            var index: Int?
            var duration: UInt32 = 0
            var start: Int64 = 0
            var total: Int64 = 0
            var count = 0
            for b in MP4Boxes(moof, from: traf.range.lowerBound + 8, to: traf.range.upperBound) {
                let o = b.range.lowerBound
                let flags = Int(be(moof, o + 9, 3))
                switch b.type {
                case "tfhd":
                    let id = UInt32(be(moof, o + 12, 4))
                    index = tracks.firstIndex { $0.id == id }
                    duration = index.map { tracks[$0].defaultDuration } ?? 0
                    var f = o + 16
                    if flags & 0x1 != 0 { f += 8 }
                    if flags & 0x2 != 0 { f += 4 }
                    if flags & 0x8 != 0 { duration = UInt32(be(moof, f, 4)) }
                case "tfdt":
                    start = Int64(bitPattern: be(moof, o + 12, moof[o + 8] == 1 ? 8 : 4))
                case "trun":
                    let n = Int(be(moof, o + 12, 4))
                    count += n
                    var f = o + 16
                    if flags & 0x1 != 0 { f += 4 }
                    if flags & 0x4 != 0 { f += 4 }
                    let stride = [0x100, 0x200, 0x400, 0x800].filter { flags & $0 != 0 }.count * 4
                    for i in 0..<n {
                        total += Int64(flags & 0x100 != 0 && f + i * stride + 4 <= b.range.upperBound ? UInt32(be(moof, f + i * stride, 4)) : duration)
                    }
                default: break
                }
            }
            guard let index else { continue }
            ends[index] = max(ends[index] ?? 0, start + total)
            if index == 0 { samples += count }
        }
        return (samples, ends)
    }

    /// The big-endian number of `width` bytes at `o`.
    static func be(_ b: [UInt8], _ o: Int, _ width: Int) -> UInt64 {
        guard o >= 0, o + width <= b.count else { return 0 }
        return (0..<width).reduce(0) { $0 << 8 | UInt64(b[o + $1]) }
    }

    /// `moov` with the durations set and a `mehd` added to `mvex` (children keep their order).
    static func patchedMoov(_ moov: [UInt8], tracks: [TrackEnd]) throws(PatchError) -> [UInt8] {
        var children = MP4Boxes(moov, from: 8).map { (type: $0.type, bytes: Array(moov[$0.range])) }
        guard let mvhd = children.firstIndex(where: { $0.type == "mvhd" }),
              let mvex = children.firstIndex(where: { $0.type == "mvex" }) else { throw .layout("no mvhd or mvex") }
        let movieTimescale = Int64(field(children[mvhd].bytes, version0: 20, version1: 28, width32: true))
        let traks = children.indices.filter { children[$0].type == "trak" }
        guard traks.count == tracks.count, movieTimescale > 0 else { throw .layout("\(traks.count) traks for \(tracks.count) streams") }
        var movieDuration: Int64 = 0
        for (i, t) in zip(traks, tracks) {
            guard t.timescale > 0 else { throw .layout("no timescale") }
            movieDuration = max(movieDuration, (t.end * movieTimescale + Int64(t.timescale) / 2) / Int64(t.timescale))
            children[i].bytes = try patchTrak(children[i].bytes, media: t.end)
        }
        // mvhd: duration (32-bit at 24 in version 0, 64-bit at 32 in version 1);
        // tkhd (first in each trak): duration at 28 / 36, in the movie timescale.
        setField(&children[mvhd].bytes, at: 0, version0: 24, version1: 32, value: movieDuration)
        for i in traks { setField(&children[i].bytes, at: 8, version0: 28, version1: 36, value: movieDuration) }
        let mehd = movieDuration <= Int64(UInt32.max)
            ? box(type: "mehd", payload: [0, 0, 0, 0] + be32(UInt32(movieDuration)))
            : box(type: "mehd", payload: [1, 0, 0, 0] + be64(UInt64(movieDuration)))
        let old = children[mvex].bytes
        let rest = MP4Boxes(old, from: 8).filter { $0.type != "mehd" }.flatMap { Array(old[$0.range]) }
        children[mvex].bytes = box(type: "mvex", payload: mehd + rest)
        return box(type: "moov", payload: children.flatMap(\.bytes))
    }

    /// `trak` with its `tkhd` first (patched by the caller) and `mdia/mdhd` set to `media` ticks.
    static func patchTrak(_ trak: [UInt8], media: Int64) throws(PatchError) -> [UInt8] {
        var out = trak
        var children = MP4Boxes(trak, from: 8)
        guard let tkhd = children.next(), tkhd.type == "tkhd",
              let mdia = MP4Boxes(trak, from: 8).first(where: { $0.type == "mdia" }),
              let mdhd = MP4Boxes(trak, from: mdia.range.lowerBound + 8, to: mdia.range.upperBound).first(where: { $0.type == "mdhd" })
        else { throw .layout("trak without tkhd or mdia/mdhd") }
        // mdhd: duration at 24 (version 0, 32-bit) or 32 (version 1, 64-bit).
        guard out[mdhd.range.lowerBound + 8] == 0 && media > Int64(UInt32.max) else {
            setField(&out, at: mdhd.range.lowerBound, version0: 24, version1: 32, value: media)
            return out
        }
        // Too long for version 0: the mdhd becomes version 1, its mdia and trak grow with it.
        var grown = version1(Array(trak[mdhd.range]), middle: 4)
        setField(&grown, at: 0, version0: 24, version1: 32, value: media)
        let mdiaBytes = Array(trak[mdia.range])
        let newMdia = box(type: "mdia", payload: MP4Boxes(mdiaBytes, from: 8).flatMap { $0.type == "mdhd" ? grown : Array(mdiaBytes[$0.range]) })
        return box(type: "trak", payload: MP4Boxes(trak, from: 8).flatMap { $0.type == "mdia" ? newMdia : Array(trak[$0.range]) })
    }

    /// A version-0 `mvhd`, `tkhd` or `mdhd` as version 1: creation and
    /// modification times and the duration widened to 64 bits; `middle` is
    /// the bytes between the times and the duration (4: the timescale; 8 for
    /// `tkhd`: track id and a reserved word).
    static func version1(_ b: [UInt8], middle: Int) -> [UInt8] {
        guard b.count >= 24 + middle, b[8] == 0 else { return b }
        func u32(_ o: Int) -> UInt64 { (0..<4).reduce(0) { $0 << 8 | UInt64(b[o + $1]) } }
        let type = String(decoding: b[4..<8], as: UTF8.self)
        let payload = [1] + Array(b[9..<12]) + be64(u32(12)) + be64(u32(16)) + Array(b[20..<20 + middle])
            + be64(u32(20 + middle)) + Array(b[(24 + middle)...])
        return box(type: type, payload: payload)
    }

    // MARK: Box bytes

    static func be32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
    static func be64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }
    static func box(type: String, payload: [UInt8]) -> [UInt8] { be32(UInt32(8 + payload.count)) + Array(type.utf8) + payload }

    /// The field of a full box at `at` (box start) found at `version0`/`version1`
    /// bytes from the box start, 32-bit in version 0 (or always when `width32`).
    static func field(_ b: [UInt8], at: Int = 0, version0: Int, version1: Int, width32: Bool = false) -> UInt64 {
        let v1 = b[at + 8] == 1
        let o = at + (v1 ? version1 : version0)
        let width = v1 && !width32 ? 8 : 4
        return (0..<width).reduce(0) { $0 << 8 | UInt64(b[o + $1]) }
    }

    static func setField(_ b: inout [UInt8], at: Int, version0: Int, version1: Int, value: Int64) {
        let v1 = b[at + 8] == 1
        let bytes = v1 ? be64(UInt64(value)) : be32(UInt32(clamping: value))
        let o = at + (v1 ? version1 : version0)
        b.replaceSubrange(o..<o + bytes.count, with: bytes)
    }
}

/// Iterates the boxes in `bytes[from..<to]` (32-bit and 64-bit sizes).
struct MP4Boxes: Sequence, IteratorProtocol {
    struct Box { let type: String; let range: Range<Int> }
    let bytes: [UInt8]
    var offset: Int
    let end: Int
    init(_ bytes: [UInt8], from: Int = 0, to: Int? = nil) { self.bytes = bytes; offset = from; end = to ?? bytes.count }
    mutating func next() -> Box? {
        guard offset + 8 <= end else { return nil }
        var size = (0..<4).reduce(0) { $0 << 8 | Int(bytes[offset + $1]) }
        if size == 1, offset + 16 <= end { size = (8..<16).reduce(0) { $0 << 8 | Int(bytes[offset + $1]) } }
        if size == 0 { size = end - offset }
        guard size >= 8, offset + size <= end else { return nil }
        let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
        defer { offset += size }
        return Box(type: type, range: offset..<offset + size)
    }
}
