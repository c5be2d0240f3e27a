// The C API (include/diptych.h) over `EmbeddedSession`.
//
// Every entry point validates its arguments before touching Swift APIs that
// have preconditions, and turns every failure into a status code plus a
// thread-local message: no Swift trap is reachable from C through a
// documented use (or a misuse the header lists).
import CDiptych
import Diptych
import DiptychGPU
import DiptychMedia
import Synchronization
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Last error (thread-local)

private let errorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { free($0) }
    return key
}()

nonisolated(unsafe) private let emptyString: UnsafeMutablePointer<CChar> = strdup("")!  // never written

private func setError(_ message: String) {
    if let old = pthread_getspecific(errorKey) { free(old) }
    pthread_setspecific(errorKey, strdup(message))
}

private func fail(_ status: Int32, _ message: String) -> Int32 {
    setError(message)
    return status
}

private func fail(_ e: EmbeddingError) -> Int32 { fail(e.code.rawValue, e.message) }

// MARK: - Live handles

/// One C handle: the session and the outputs' callbacks it calls.
final class CSession: Sendable {
    let session: EmbeddedSession
    init(session: EmbeddedSession) { self.session = session }
}

/// The live sessions, by handle address: a NULL or destroyed handle is
/// refused instead of dereferenced. Holds the strong references.
private final class Registry: Sendable {
    /// By the handle's address.
    private let live = Mutex<[UInt: CSession]>([:])
    private static func key(_ p: UnsafeMutableRawPointer) -> UInt { UInt(bitPattern: p) }
    func add(_ s: CSession) -> OpaquePointer {
        let p = Unmanaged.passUnretained(s).toOpaque()
        live.withLock { $0[Self.key(p)] = s }
        return OpaquePointer(p)
    }
    func lookup(_ h: OpaquePointer?) -> CSession? {
        guard let h else { return nil }
        let k = Self.key(UnsafeMutableRawPointer(h))
        return live.withLock { $0[k] }
    }
    func remove(_ h: OpaquePointer?) -> CSession? {
        guard let h else { return nil }
        let k = Self.key(UnsafeMutableRawPointer(h))
        return live.withLock { $0.removeValue(forKey: k) }
    }
}
private let registry = Registry()

private func session(_ h: OpaquePointer?, _ function: String) -> CSession? {
    if let s = registry.lookup(h) { return s }
    setError(h == nil ? "\(function): session is NULL" : "\(function): not a live session handle (destroyed, or never created)")
    return nil
}

// MARK: - Conversions

private func strings(_ argv: UnsafePointer<UnsafePointer<CChar>?>?, _ argc: Int32, _ function: String) throws(EmbeddingError) -> [String] {
    guard argc >= 0 else { throw EmbeddingError(.invalidArgument, "\(function): argc \(argc) is negative") }
    if argc == 0 { return [] }
    guard let argv else { throw EmbeddingError(.invalidArgument, "\(function): argv is NULL with argc \(argc)") }
    var out: [String] = []
    for i in 0..<Int(argc) {
        guard let p = argv[i] else { throw EmbeddingError(.invalidArgument, "\(function): argv[\(i)] is NULL") }
        out.append(String(cString: p))
    }
    return out
}

private func pixelFormat(_ v: Int32) -> PixelFormat? {
    switch v {
    case DIPTYCH_FORMAT_RGBA: .rgba
    case DIPTYCH_FORMAT_BGRA: .bgra
    case DIPTYCH_FORMAT_NV12: .nv12
    case DIPTYCH_FORMAT_I420: .i420
    default: nil
    }
}

private func cFormat(_ f: PixelFormat) -> Int32 {
    switch f {
    case .rgba: DIPTYCH_FORMAT_RGBA
    case .bgra: DIPTYCH_FORMAT_BGRA
    case .nv12: DIPTYCH_FORMAT_NV12
    case .i420: DIPTYCH_FORMAT_I420
    }
}

private func role(_ v: Int32) -> StreamRole? {
    switch v { case DIPTYCH_PRIMARY: .primary; case DIPTYCH_SECONDARY: .secondary; default: nil }
}

private func tuple4<T>(_ t: (T, T, T, T)) -> [T] { [t.0, t.1, t.2, t.3] }

/// Checks a pushed CPU frame against its description and copies its planes.
private func copyFrame(_ f: diptych_frame, role: StreamRole) throws(EmbeddingError) -> VideoFrame {
    let name = "\(role) frame"
    guard let format = pixelFormat(f.format) else {
        throw EmbeddingError(.badFrame, "\(name): format \(f.format) is not one of DIPTYCH_FORMAT_RGBA/BGRA/NV12/I420")
    }
    do { try FrameValidator.checkSize(width: Int(f.width), height: Int(f.height), format: format) }
    catch { throw EmbeddingError(.badFrame, "\(name): \(error)") }
    guard f.timescale > 0 else { throw EmbeddingError(.timestamp, "\(name): timescale \(f.timescale) must be positive") }
    let width = Int(f.width), height = Int(f.height)
    let data = tuple4(f.data), strides = tuple4(f.stride), sizes = tuple4(f.size)
    var planes: [FramePlane] = []
    for i in 0..<format.planeCount {
        guard let p = data[i] else { throw EmbeddingError(.badFrame, "\(name): data[\(i)] is NULL (\(format.rawValue) has \(format.planeCount) planes)") }
        let stride = Int(strides[i])
        do { try FrameValidator.checkPlane(i, format: format, width: width, height: height, stride: stride, available: sizes[i]) }
        catch { throw EmbeddingError(.badFrame, "\(name): \(error)") }
        let needed = stride * (format.planeHeight(plane: i, height: height) - 1) + format.minimumStride(plane: i, width: width)
        let storage = FrameStorage(copying: UnsafeRawBufferPointer(start: p, count: needed))
        planes.append(FramePlane(storage: storage, offset: 0, stride: stride))
    }
    return VideoFrame(width: width, height: height, format: format, planes: planes,
                      pts: MediaTime(value: f.pts, timescale: f.timescale))
}

private func emptyCFrame() -> diptych_frame {
    diptych_frame(width: 0, height: 0, format: 0, reserved: 0, data: (nil, nil, nil, nil), stride: (0, 0, 0, 0),
                  size: (0, 0, 0, 0), pts: 0, timescale: 1, reserved2: 0)
}

/// Calls `body` with the C view of `frame` (pointers valid during the call).
private func withCFrame(_ frame: VideoFrame, _ body: (UnsafePointer<diptych_frame>) -> Void) {
    var c = emptyCFrame()
    c.width = Int32(frame.width); c.height = Int32(frame.height); c.format = cFormat(frame.format)
    var data: [UnsafePointer<UInt8>?] = [nil, nil, nil, nil]
    var strides: [Int32] = [0, 0, 0, 0], sizes = [0, 0, 0, 0]
    for (i, p) in frame.planes.prefix(4).enumerated() {
        data[i] = p.baseAddress.assumingMemoryBound(to: UInt8.self)
        strides[i] = Int32(p.stride)
        sizes[i] = max(0, p.availableBytes)
    }
    c.data = (data[0], data[1], data[2], data[3])
    c.stride = (strides[0], strides[1], strides[2], strides[3])
    c.size = (sizes[0], sizes[1], sizes[2], sizes[3])
    c.pts = frame.pts.value; c.timescale = frame.pts.timescale
    withExtendedLifetime(frame) { withUnsafePointer(to: c) { body($0) } }
}

/// The C callbacks of one session, called from its threads.
private final class COutputs: @unchecked Sendable {   // the host's C callbacks and its `user` pointer, immutable; the host makes them callable from any thread
    let o: diptych_outputs
    init(_ o: diptych_outputs) { self.o = o }

    func outputs() -> EmbeddedOutputs {
        var e = EmbeddedOutputs()
        e.rgbaInterval = max(1, Int(o.rgba_interval))
        if let cb = o.on_rgba { e.onRGBA = { f in withCFrame(f) { cb(self.o.user, $0) } } }
        if let cb = o.on_nv12 { e.onNV12 = { f in withCFrame(f) { cb(self.o.user, $0) } } }
        if let cb = o.on_packet {
            e.onPacket = { p in
                p.data.withUnsafeBufferPointer { bytes in
                    var c = diptych_packet(data: bytes.baseAddress, size: bytes.count, pts: p.pts.value,
                                           dts: p.dts.converted(to: p.pts.timescale).value,
                                           duration: p.duration.converted(to: p.pts.timescale).value,
                                           timescale: p.pts.timescale, keyframe: p.isKeyframe ? 1 : 0)
                    withUnsafePointer(to: &c) { cb(self.o.user, $0) }
                }
            }
        }
        if let cb = o.on_dmabuf {
            e.onDmaBuf = { d in
                var c = diptych_dmabuf()
                c.width = Int32(d.buffer.width); c.height = Int32(d.buffer.height); c.fourcc = d.buffer.fourcc
                c.plane_count = Int32(min(4, d.buffer.planes.count))
                c.modifier = d.buffer.modifier ?? 0x00ff_ffff_ffff_ffff
                var fds: [Int32] = [-1, -1, -1, -1], offsets: [UInt32] = [0, 0, 0, 0], strides: [UInt32] = [0, 0, 0, 0]
                for (i, p) in d.buffer.planes.prefix(4).enumerated() {
                    fds[i] = p.fd; offsets[i] = UInt32(clamping: p.offset); strides[i] = UInt32(clamping: p.stride)
                }
                c.fd = (fds[0], fds[1], fds[2], fds[3])
                c.offset = (offsets[0], offsets[1], offsets[2], offsets[3])
                c.stride = (strides[0], strides[1], strides[2], strides[3])
                c.pts = d.pts.value; c.timescale = d.pts.timescale
                withUnsafePointer(to: &c) { cb(self.o.user, $0, d.syncFenceFD) }
            }
        }
        return e
    }

    var log: @Sendable (String) -> Void {
        guard let cb = o.on_log else { return { _ in } }
        return { line in line.withCString { cb(self.o.user, $0) } }
    }
}

// MARK: - Entry points

@_cdecl("diptych_outputs_init")
public func cOutputsInit(_ outputs: UnsafeMutablePointer<diptych_outputs>?) {
    guard let outputs else { return }
    outputs.pointee = diptych_outputs()
    outputs.pointee.struct_size = UInt32(MemoryLayout<diptych_outputs>.size)
    outputs.pointee.rgba_interval = 1
}

nonisolated(unsafe) private let versionString: UnsafeMutablePointer<CChar> = strdup(DiptychVersion.string)!  // never written

@_cdecl("diptych_version")
public func cVersion() -> UnsafePointer<CChar> { UnsafePointer(versionString) }

@_cdecl("diptych_last_error")
public func cLastError() -> UnsafePointer<CChar> {
    if let p = pthread_getspecific(errorKey) { return UnsafePointer(p.assumingMemoryBound(to: CChar.self)) }
    return UnsafePointer(emptyString)
}

@_cdecl("diptych_free")
public func cFree(_ p: UnsafeMutableRawPointer?) { free(p) }

@_cdecl("diptych_session_create")
public func cSessionCreate(_ argv: UnsafePointer<UnsafePointer<CChar>?>?, _ argc: Int32,
                           _ outputs: UnsafePointer<diptych_outputs>?,
                           _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    let fn = "diptych_session_create"
    guard let out else { return fail(DIPTYCH_ERR_INVALID_ARGUMENT, "\(fn): session (the result pointer) is NULL") }
    out.pointee = nil
    var o = diptych_outputs()
    if let outputs {
        let size = outputs.pointee.struct_size
        guard size == UInt32(MemoryLayout<diptych_outputs>.size) else {
            return fail(DIPTYCH_ERR_INVALID_ARGUMENT, "\(fn): outputs->struct_size is \(size), expected \(MemoryLayout<diptych_outputs>.size) (call diptych_outputs_init first)")
        }
        o = outputs.pointee
        guard o.rgba_interval >= 0 else { return fail(DIPTYCH_ERR_INVALID_ARGUMENT, "\(fn): outputs->rgba_interval \(o.rgba_interval) is negative") }
    }
    do throws(EmbeddingError) {
        let args = try strings(argv, argc, fn)
        let (config, file, format) = try EmbeddedConfiguration.parse(arguments: args)
        let callbacks = COutputs(o)
        var outs = callbacks.outputs()
        outs.file = file
        outs.fileFormat = format
        let s = try EmbeddedSession(configuration: config, outputs: outs, log: callbacks.log)
        out.pointee = registry.add(CSession(session: s))
        return DIPTYCH_OK
    } catch {
        return fail(error)
    }
}

@_cdecl("diptych_session_push_frame")
public func cSessionPushFrame(_ h: OpaquePointer?, _ role: Int32, _ frame: UnsafePointer<diptych_frame>?, _ flags: Int32) -> Int32 {
    let fn = "diptych_session_push_frame"
    guard let s = session(h, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let r = pushRole(role, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let mode = pushMode(flags, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let frame else { return fail(DIPTYCH_ERR_INVALID_ARGUMENT, "\(fn): frame is NULL") }
    // A non-blocking push that would find the queue full returns before copying the planes.
    if mode == .nonBlocking && s.session.queueIsFull(r) { return DIPTYCH_WOULD_BLOCK }
    do throws(EmbeddingError) {
        let f = try copyFrame(frame.pointee, role: r)
        return try s.session.push(f, to: r, mode: mode) == .accepted ? DIPTYCH_OK : DIPTYCH_WOULD_BLOCK
    } catch {
        return fail(error)
    }
}

@_cdecl("diptych_session_push_dmabuf")
public func cSessionPushDmaBuf(_ h: OpaquePointer?, _ role: Int32, _ buffer: UnsafePointer<diptych_dmabuf>?, _ flags: Int32) -> Int32 {
    let fn = "diptych_session_push_dmabuf"
    guard let s = session(h, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let r = pushRole(role, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let mode = pushMode(flags, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let buffer else { return fail(DIPTYCH_ERR_INVALID_ARGUMENT, "\(fn): buffer is NULL") }
    let b = buffer.pointee
    guard (1...4).contains(b.plane_count) else {
        return fail(DIPTYCH_ERR_BAD_FRAME, "\(fn): plane_count \(b.plane_count) (must be 1 to 4)")
    }
    guard b.timescale > 0 else { return fail(DIPTYCH_ERR_TIMESTAMP, "\(fn): timescale \(b.timescale) must be positive") }
    let fds = tuple4(b.fd), offsets = tuple4(b.offset), strides = tuple4(b.stride)
    let planes = (0..<Int(b.plane_count)).map { DmaBufFrame.Plane(fd: fds[$0], offset: Int(offsets[$0]), stride: Int(strides[$0])) }
    let frame = DmaBufFrame(width: Int(b.width), height: Int(b.height), fourcc: b.fourcc,
                            modifier: b.modifier == 0x00ff_ffff_ffff_ffff ? nil : b.modifier, planes: planes)
    do throws(EmbeddingError) {
        return try s.session.push(frame, pts: MediaTime(value: b.pts, timescale: b.timescale), to: r, mode: mode) == .accepted
            ? DIPTYCH_OK : DIPTYCH_WOULD_BLOCK
    } catch {
        return fail(error)
    }
}

private func pushRole(_ v: Int32, _ fn: String) -> StreamRole? {
    if let r = role(v) { return r }
    setError("\(fn): role \(v) is not DIPTYCH_PRIMARY (0) or DIPTYCH_SECONDARY (1)")
    return nil
}

private func pushMode(_ flags: Int32, _ fn: String) -> EmbeddedSession.PushMode? {
    switch flags {
    case DIPTYCH_PUSH_BLOCK: return .blocking
    case DIPTYCH_PUSH_NONBLOCK: return .nonBlocking
    default: setError("\(fn): flags \(flags) is not DIPTYCH_PUSH_BLOCK (0) or DIPTYCH_PUSH_NONBLOCK (1)"); return nil
    }
}

@_cdecl("diptych_session_set_layout")
public func cSessionSetLayout(_ h: OpaquePointer?, _ argv: UnsafePointer<UnsafePointer<CChar>?>?, _ argc: Int32) -> Int32 {
    let fn = "diptych_session_set_layout"
    guard let s = session(h, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    do throws(EmbeddingError) {
        let args = try strings(argv, argc, fn)
        guard !args.isEmpty else { throw EmbeddingError(.invalidArgument, "\(fn): no options (give at least --layout KIND)") }
        let change = try EmbeddedConfiguration.parseLayoutChange(arguments: args)
        try s.session.setLayout(change.layout, transition: change.transition)
        return DIPTYCH_OK
    } catch {
        return fail(error)
    }
}

@_cdecl("diptych_session_end_stream")
public func cSessionEndStream(_ h: OpaquePointer?, _ role: Int32) -> Int32 {
    let fn = "diptych_session_end_stream"
    guard let s = session(h, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    guard let r = pushRole(role, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    s.session.endStream(r)
    return DIPTYCH_OK
}

@_cdecl("diptych_session_finish")
public func cSessionFinish(_ h: OpaquePointer?, _ frames: UnsafeMutablePointer<Int64>?) -> Int32 {
    let fn = "diptych_session_finish"
    guard let s = session(h, fn) else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    do throws(EmbeddingError) {
        let summary = try s.session.finish()
        frames?.pointee = Int64(summary.frames)
        return DIPTYCH_OK
    } catch {
        if error.code == .runtime { frames?.pointee = Int64(s.session.summary?.frames ?? 0) }
        return fail(error)
    }
}

@_cdecl("diptych_session_summary_json")
public func cSessionSummaryJSON(_ h: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    let fn = "diptych_session_summary_json"
    guard let s = session(h, fn) else { return nil }
    guard let summary = s.session.summary else {
        setError("\(fn): no summary yet (call diptych_session_finish first)")
        return nil
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    guard let data = try? encoder.encode(summary), let text = String(data: data, encoding: .utf8) else {
        setError("\(fn): cannot encode the summary")
        return nil
    }
    return strdup(text)
}

@_cdecl("diptych_session_can_import_dmabuf")
public func cSessionCanImportDmaBuf(_ h: OpaquePointer?) -> Int32 {
    guard let s = session(h, "diptych_session_can_import_dmabuf") else { return DIPTYCH_ERR_INVALID_ARGUMENT }
    return s.session.gpu.capabilities.dmaBufImport ? 1 : 0
}

@_cdecl("diptych_session_destroy")
public func cSessionDestroy(_ h: OpaquePointer?) {
    // From the session's own callback, destroying would wait for that callback: refused, the session stays.
    if let s = registry.lookup(h), s.session.isInOwnCallback {
        setError("diptych_session_destroy: called from one of the session's callbacks; call it from the host's own thread")
        return
    }
    guard let s = registry.remove(h) else { return }
    _ = try? s.session.finish()
}
