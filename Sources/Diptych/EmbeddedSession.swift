import Foundation
import DiptychCore
import DiptychGPU
import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

/// How an embedded session composites and encodes. The same settings as
/// `diptych record` (`TakeConfiguration`), minus the inputs: frames come
/// from the host. `canvas` and `frameRate` are required because no source
/// can tell them.
public struct EmbeddedConfiguration: Hashable, Sendable {
    /// Output size (even width and height).
    public var canvas: PixelSize
    /// Nominal output rate, for the encoder's rate control and GOP length.
    /// Output timestamps are the primary's own (variable rate is kept).
    public var frameRate: FrameRate
    /// Whether a secondary stream will be pushed. Without one every output
    /// frame shows the primary alone and nothing waits for a secondary.
    public var hasSecondary = true
    public var layout = Layout()
    public var primaryOrientation = Orientation.identity
    public var secondaryOrientation = Orientation.identity
    public var codec = VideoCodec.h264
    public var encoder = EncoderChoice.auto
    public var bitrate = TakeConfiguration.defaultBitrate
    public var preset = "veryfast"
    /// Seconds between keyframes.
    public var keyframeInterval = 1.0
    /// How long the session waits for a secondary frame (see `EmbeddedSession`).
    public var secondaryTimeout = 2.0
    /// `auto`, `software`, an index, a render node (as `--gpu`).
    public var gpu = "auto"
    /// Frames each push queue holds before `push` blocks (or says `.wouldBlock`).
    public var queueCapacity = 4

    public init(canvas: PixelSize, frameRate: FrameRate) {
        self.canvas = canvas; self.frameRate = frameRate
    }

    /// Builds a configuration from `diptych record` flags (`--size`,
    /// `--layout`, `--pip-corner`, `--pip-size`, `--rotate-*`, `--mirror-*`,
    /// `--codec`, `--encoder`, `--bitrate`, `--preset`, `--keyframe-interval`,
    /// `--secondary-timeout`, `--gpu`, `--config FILE`, `--secondary none`)
    /// plus `--fps RATE` (required) and `--queue N`. `--out`/`--format`
    /// name an optional file output (returned separately). Flags about inputs
    /// or takes (`--primary`, `--duration`, `--preview`, `--audio`, ...) are errors.
    public static func parse(arguments: [String]) throws(EmbeddingError) -> (EmbeddedConfiguration, file: String?, format: ContainerFormat?) {
        var rest: [String] = []
        var fps: FrameRate?
        var queue = 4
        var i = 0
        let refused: Set<String> = ["--primary", "--duration", "--preview", "--audio", "--switch-secondary", "--json", "--thermal-state"]
        while i < arguments.count {
            // `--flag=value` is the same as `--flag value`.
            let parts = arguments[i].split(separator: "=", maxSplits: 1).map(String.init)
            let a = arguments[i].hasPrefix("--") && parts.count == 2 ? parts[0] : arguments[i]
            let inline = arguments[i].hasPrefix("--") && parts.count == 2 ? parts[1] : nil
            if a == "--fps" || a == "--queue" {
                guard inline != nil || i + 1 < arguments.count else { throw EmbeddingError(.invalidArgument, "\(a): needs a value") }
                let v = inline ?? arguments[i + 1]
                if a == "--fps" {
                    guard let r = FrameRate(parsing: v) else { throw EmbeddingError(.invalidArgument, "--fps '\(v)': expected a positive rate such as 30, 29.97 or 30000/1001") }
                    fps = r
                } else {
                    guard let n = Int(v), (1...256).contains(n) else { throw EmbeddingError(.invalidArgument, "--queue '\(v)': expected 1 to 256 frames") }
                    queue = n
                }
                i += inline == nil ? 2 : 1
                continue
            }
            if refused.contains(a) { throw EmbeddingError(.invalidArgument, "\(a): not an embedding option (frames come from the host)") }
            rest.append(arguments[i])
            i += 1
        }
        let t: TakeConfiguration
        do { t = try TakeConfiguration.parse(arguments: rest) } catch { throw EmbeddingError(.invalidArgument, "\(error)") }
        guard let size = t.canvasSize else { throw EmbeddingError(.invalidArgument, "--size: required (the output size, e.g. 1280x720)") }
        guard let fps else { throw EmbeddingError(.invalidArgument, "--fps: required (the nominal output rate, e.g. 30)") }
        var c = EmbeddedConfiguration(canvas: size, frameRate: fps)
        c.hasSecondary = t.secondary != .none || !rest.contains("--secondary")
        c.layout = t.layout
        c.primaryOrientation = t.primaryOrientation
        c.secondaryOrientation = t.secondaryOrientation
        c.codec = t.codec; c.encoder = t.encoder; c.bitrate = t.bitrate; c.preset = t.preset
        c.keyframeInterval = t.keyframeInterval; c.secondaryTimeout = t.secondaryTimeout; c.gpu = t.gpu
        c.queueCapacity = queue
        return (c, t.output, t.format)
    }

    /// Parses a layout from `--layout`, `--pip-corner`, `--pip-size`,
    /// `--pip-margin`, `--swap-roles`, `--content-mode`, `--background`
    /// (fields not named take their defaults).
    public static func parseLayout(arguments: [String]) throws(EmbeddingError) -> Layout {
        let allowed: Set<String> = ["--layout", "--pip-corner", "--pip-size", "--pip-margin", "--swap-roles", "--content-mode", "--background"]
        for a in arguments where a.hasPrefix("--") && !allowed.contains(String(a.split(separator: "=", maxSplits: 1)[0])) {
            throw EmbeddingError(.invalidArgument, "\(a): not a layout option (use --layout, --pip-corner, --pip-size, --pip-margin, --swap-roles, --content-mode, --background)")
        }
        do { return try TakeConfiguration.parse(arguments: arguments).layout } catch { throw EmbeddingError(.invalidArgument, "\(error)") }
    }

    /// The take configuration the session runs (push sources stand in for the inputs).
    func takeConfiguration(file: String?, format: ContainerFormat?) -> TakeConfiguration {
        var t = TakeConfiguration()
        t.primary = .url("push:primary")
        t.secondary = hasSecondary ? .url("push:secondary") : .none
        t.layout = layout
        t.canvasSize = canvas
        t.primaryOrientation = primaryOrientation
        t.secondaryOrientation = secondaryOrientation
        t.encoder = encoder; t.codec = codec; t.bitrate = bitrate; t.preset = preset
        t.keyframeInterval = keyframeInterval
        t.audio = .none
        t.secondaryTimeout = secondaryTimeout
        // The host ends its streams explicitly; a pause in its pushes is not an interruption.
        t.primaryTimeout = 3600
        t.gpu = gpu
        if let file { t.output = file; t.format = format } else { t.output = "(embedded)"; t.format = .mpegts }
        return t
    }
}

/// The render target of one output frame, exported as dma-buf.
public struct CompositedDmaBuf: Sendable {
    /// Size, DRM fourcc, modifier and planes. The fds are valid during the
    /// callback only and are closed after it returns: `dup` them to keep them.
    /// The buffer is the session's one render target: the next frame draws
    /// into it again, so read or copy it before the callback returns.
    public var buffer: ExportedDmaBuf
    /// The primary frame's timestamp.
    public var pts: MediaTime
    /// A sync_file fd that signals when drawing is complete, or -1 when the
    /// drawing has already completed (the export waits for the GPU: no fence
    /// needs waiting on).
    public var syncFenceFD: Int32
}

/// Where an embedded session's composited frames go. Any combination; all
/// of them read the one render target. Callbacks run on the session's own
/// threads: `onRGBA` and `onDmaBuf` on the render loop thread, `onNV12` and
/// `onPacket` on the encoder thread; each in output order. A slow callback
/// slows the session (and, through the queues, the host's pushes). A
/// callback must not call the same session's `finish()` or blocking `push`.
public struct EmbeddedOutputs: Sendable {
    /// Encode into this file or URL (fragmented MP4, MPEG-TS, ...).
    public var file: String?
    /// nil: inferred from `file`'s name.
    public var fileFormat: ContainerFormat?
    /// Each output frame as RGBA (top row first), read back synchronously.
    public var onRGBA: (@Sendable (VideoFrame) -> Void)?
    /// Deliver every n-th frame to `onRGBA` (1 = every frame).
    public var rgbaInterval = 1
    /// Each output frame as NV12 (BT.709 limited), as the encoder gets it.
    public var onNV12: (@Sendable (VideoFrame) -> Void)?
    /// The render target as dma-buf, for each output frame.
    public var onDmaBuf: (@Sendable (CompositedDmaBuf) -> Void)?
    /// Encoded access units (H.264/HEVC Annex B), in decode order.
    public var onPacket: (@Sendable (EncodedVideoPacket) -> Void)?

    public init(file: String? = nil, fileFormat: ContainerFormat? = nil,
                onRGBA: (@Sendable (VideoFrame) -> Void)? = nil, rgbaInterval: Int = 1,
                onNV12: (@Sendable (VideoFrame) -> Void)? = nil,
                onDmaBuf: (@Sendable (CompositedDmaBuf) -> Void)? = nil,
                onPacket: (@Sendable (EncodedVideoPacket) -> Void)? = nil) {
        self.file = file; self.fileFormat = fileFormat; self.onRGBA = onRGBA; self.rgbaInterval = rgbaInterval
        self.onNV12 = onNV12; self.onDmaBuf = onDmaBuf; self.onPacket = onPacket
    }
}

/// What went wrong in an embedding call. `code` is what the C API returns.
public struct EmbeddingError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: Int32, Sendable {
        /// A null or malformed argument, or a bad configuration.
        case invalidArgument = -1
        /// A frame that does not match its description (size, strides, planes, format).
        case badFrame = -2
        /// A timestamp not after the previous frame's of the same stream.
        case timestamp = -3
        /// The call does not fit the session's state (after finish, after the
        /// take ended, a stream the configuration does not have).
        case state = -4
        /// The platform lacks what the call needs (dma-buf import or export).
        case unsupported = -5
        /// The session failed at run time (GPU, encoder, output); what was
        /// written has been finalized.
        case runtime = -6
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    public var description: String { message }
}

/// Diptych embedded in a host program: the host pushes primary and secondary
/// frames, and takes composited frames, encoded packets and/or a file out.
///
/// It runs the same take as `diptych record` (`RecordingSession`: one clock,
/// one render target, one finalize path); the host's pushes stand in for the
/// file readers. Rules:
///
/// - **The primary drives.** Every primary frame pushed gives exactly one
///   output frame with the same timestamp (in the same timescale).
/// - **The secondary is held.** An output frame at time t shows the latest
///   secondary frame with timestamp ≤ t. Both streams' timestamps must be on
///   one clock, and each must increase strictly. To know that no secondary
///   frame ≤ t is still to come, the frame at t is composited once the
///   secondary has delivered a frame after t, or its stream was ended
///   (`endStream(.secondary)`), or `secondaryTimeout` passed without any
///   secondary frame (the last one is then held and the secondary counts
///   as stalled; later frames are composited without waiting until it
///   delivers again; after `secondaryTimeout` of stall the primary is shown
///   alone). Push both streams in timestamp order, interleaved.
/// - **Back-pressure.** Each stream has a queue of `queueCapacity` frames
///   (plus a few in the pipeline behind it). A `.blocking` push waits while
///   it is full; a `.nonBlocking` push returns `.wouldBlock` instead.
/// - **Layout changes** (`setLayout`) apply to every draw of the first primary
///   frame pushed after the call, and to the frames after it.
/// - **Ending.** `finish()` ends both streams, waits until every frame has
///   reached the outputs and the file is complete, and returns the summary.
///   A take that ends by itself (GPU failure, full disk, critical thermal
///   state) goes through the same finalize path; pushes then fail with
///   `.state` and `finish()` throws `.runtime` with the reason.
///
/// Thread-safe: every method may be called from any thread.
public final class EmbeddedSession: @unchecked Sendable {
    public let configuration: EmbeddedConfiguration
    private let bridge: EmbeddingBridge
    private let session: RecordingSession
    private let thread: Thread
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var finishing = false
    private var finished = false
    private var result: Result<TakeSummary, SessionError>?

    /// The GPU in use.
    public var gpu: GPUInfo { bridge.gpu! }

    /// Creates the session and starts it: opens the GPU context and the
    /// outputs, and returns when frames can be pushed. Blocks for that
    /// (typically well under a second; up to `startTimeout`).
    public convenience init(configuration: EmbeddedConfiguration, outputs: EmbeddedOutputs = EmbeddedOutputs(),
                            log: @escaping @Sendable (String) -> Void = { _ in }, startTimeout: Double = 60) throws(EmbeddingError) {
        try self.init(configuration: configuration, outputs: outputs, log: log, startTimeout: startTimeout, adjustHooks: { _ in })
    }

    /// FFmpeg's own log (libx264's banner and statistics) stays off the host's
    /// stderr; errors still come back through the API.
    static let quietFFmpeg: Void = MediaLibraries.setLogLevel(.error)

    /// `adjustHooks` changes the take's hooks (tests: thermal and storage monitors).
    init(configuration: EmbeddedConfiguration, outputs: EmbeddedOutputs, log: @escaping @Sendable (String) -> Void,
         startTimeout: Double, adjustHooks: (inout SessionHooks) -> Void) throws(EmbeddingError) {
        _ = EmbeddedSession.quietFFmpeg
        let c = configuration
        guard c.canvas.width > 0, c.canvas.height > 0, c.canvas.isEven else {
            throw EmbeddingError(.invalidArgument, "canvas \(c.canvas): width and height must be positive and even")
        }
        guard (1...256).contains(c.queueCapacity) else {
            throw EmbeddingError(.invalidArgument, "queueCapacity \(c.queueCapacity): expected 1 to 256")
        }
        guard outputs.rgbaInterval >= 1 else { throw EmbeddingError(.invalidArgument, "rgbaInterval \(outputs.rgbaInterval): must be at least 1") }
        // Bounds that keep every later timestamp and GOP computation far from Int64 overflow.
        guard c.frameRate.fps <= 1000 else { throw EmbeddingError(.invalidArgument, "frame rate \(c.frameRate): at most 1000 fps") }
        guard c.keyframeInterval > 0, c.keyframeInterval <= 3600 else {
            throw EmbeddingError(.invalidArgument, "keyframe interval \(c.keyframeInterval) s: must be above 0 and at most 3600")
        }
        guard c.secondaryTimeout > 0, c.secondaryTimeout <= 3600 else {
            throw EmbeddingError(.invalidArgument, "secondary timeout \(c.secondaryTimeout) s: must be above 0 and at most 3600")
        }
        let take = c.takeConfiguration(file: outputs.file, format: outputs.fileFormat)
        do { try take.validate() } catch { throw EmbeddingError(.invalidArgument, "\(error)") }
        self.configuration = c
        let primary = PushSource(name: "push:primary", size: c.canvas, frameRate: c.frameRate, capacity: c.queueCapacity)
        let secondary = c.hasSecondary ? PushSource(name: "push:secondary", size: c.canvas, frameRate: c.frameRate, capacity: c.queueCapacity) : nil
        bridge = EmbeddingBridge(primary: primary, secondary: secondary, outputs: outputs, log: log)
        var hooks = SessionHooks(storage: outputs.file == nil ? NoStorageMonitor() : FileSystemStorageMonitor(), log: log)
        adjustHooks(&hooks)
        session = RecordingSession(configuration: take, hooks: hooks)
        session.embedding = bridge
        let s = session, b = bridge, d = done
        let box = ResultBox()
        resultBox = box
        let t = Thread {
            do throws(SessionError) { box.set(.success(try s.run())) } catch { box.set(.failure(error)) }
            // A take that failed to start never signalled: wake the creator.
            b.wakeStartWaiters()
            d.signal()
        }
        t.name = "diptych.embedded"
        t.stackSize = 4 << 20
        thread = t
        t.start()
        guard bridge.waitStarted(timeout: startTimeout) else {
            session.stop(.requested("start timed out"))
            finished = true
            throw EmbeddingError(.runtime, "the session did not start within \(startTimeout) s")
        }
        if bridge.gpu == nil {
            done.wait()
            finished = true
            switch box.value {
            case .failure(.badInput(let m))?: throw EmbeddingError(.invalidArgument, m)
            case .failure(.runtime(let m))?: throw EmbeddingError(.runtime, m)
            default: throw EmbeddingError(.runtime, "the session ended before it started")
            }
        }
        if outputs.onDmaBuf != nil, let info = bridge.gpu, !info.capabilities.dmaBufExport {
            lock.lock(); finishing = true; lock.unlock()
            bridge.primary.endStream(); bridge.secondary?.endStream()
            done.wait()
            finished = true
            throw EmbeddingError(.unsupported, "dma-buf output needs EGL_MESA_image_dma_buf_export, which this GPU (\(info.renderer)) does not offer; take RGBA or NV12 frames instead")
        }
    }

    private let resultBox: ResultBox
    final class ResultBox: @unchecked Sendable {
        private let lock = NSLock()
        private var _value: Result<TakeSummary, SessionError>?
        var value: Result<TakeSummary, SessionError>? { lock.lock(); defer { lock.unlock() }; return _value }
        func set(_ v: Result<TakeSummary, SessionError>) { lock.lock(); _value = v; lock.unlock() }
    }

    deinit {
        if !isFinished { _ = try? finish() }
    }

    private var isFinished: Bool { lock.lock(); defer { lock.unlock() }; return finished || finishing }

    public enum PushMode: Sendable { case blocking, nonBlocking }
    public enum PushResult: Sendable, Equatable { case accepted, wouldBlock }

    /// Queues a CPU frame of `role` (RGBA, BGRA, NV12 or I420, any strides ≥
    /// the minimum). The frame's storage is kept (not copied) until the GPU
    /// has uploaded it. Throws `.badFrame` for a frame that does not match
    /// its description, `.timestamp` when `frame.pts` is not after the
    /// stream's previous one, `.state` after `finish()` or once the take has
    /// ended, or for a secondary the configuration does not have.
    @discardableResult
    public func push(_ frame: VideoFrame, to role: StreamRole, mode: PushMode = .blocking) throws(EmbeddingError) -> PushResult {
        do { try validateUpload(frame, maxTextureSize: bridge.gpu?.maxTextureSize ?? 16384) }
        catch { throw EmbeddingError(.badFrame, "\(role) frame: \(error)") }
        return try enqueue(frame, role: role, mode: mode)
    }

    /// Queues a dma-buf frame of `role`, imported by the GPU without a copy
    /// (EGL_EXT_image_dma_buf_import). The fds are duplicated: the caller
    /// keeps its own and may close them when this returns. The buffer's
    /// contents must stay unchanged until the frame has been composited.
    /// Throws `.unsupported` where the GPU cannot import dma-bufs (Mesa's
    /// software rasterizer, for one), with the missing extension named.
    @discardableResult
    public func push(_ frame: DmaBufFrame, pts: MediaTime, to role: StreamRole, mode: PushMode = .blocking) throws(EmbeddingError) -> PushResult {
        guard let caps = bridge.gpu?.capabilities else { throw EmbeddingError(.state, "the session is not running") }
        guard caps.dmaBufImport else {
            throw EmbeddingError(.unsupported, "dma-buf import needs EGL_EXT_image_dma_buf_import, which this GPU (\(bridge.gpu!.renderer)) does not offer; push CPU frames instead")
        }
        if frame.modifier != nil && !caps.dmaBufImportModifiers {
            throw EmbeddingError(.unsupported, "dma-buf modifiers need EGL_EXT_image_dma_buf_import_modifiers, which this GPU does not offer")
        }
        guard caps.eglImageExternal else {
            throw EmbeddingError(.unsupported, "dma-buf import needs GL_OES_EGL_image_external_essl3, which this GPU does not offer")
        }
        let format: PixelFormat
        switch frame.fourcc {
        case DmaBufFrame.nv12: format = .nv12
        case DmaBufFrame.abgr8888: format = .rgba
        case DmaBufFrame.argb8888: format = .bgra
        case DmaBufFrame.yuv420: format = .i420
        default: throw EmbeddingError(.badFrame, "\(role) dma-buf: fourcc \(DmaBufFrame.fourccName(frame.fourcc)) is not one of NV12, AB24, AR24, YU12")
        }
        guard frame.width > 0, frame.height > 0, frame.width <= 16384, frame.height <= 16384 else {
            throw EmbeddingError(.badFrame, "\(role) dma-buf: size \(frame.width)x\(frame.height)")
        }
        if format.isYUV && (frame.width % 2 != 0 || frame.height % 2 != 0) {
            throw EmbeddingError(.badFrame, "\(role) dma-buf: odd dimensions \(frame.width)x\(frame.height) for \(DmaBufFrame.fourccName(frame.fourcc))")
        }
        guard frame.planes.count == format.planeCount else {
            throw EmbeddingError(.badFrame, "\(role) dma-buf: \(DmaBufFrame.fourccName(frame.fourcc)) needs \(format.planeCount) plane(s), got \(frame.planes.count)")
        }
        for (i, p) in frame.planes.enumerated() {
            guard p.fd >= 0, fcntl(p.fd, F_GETFD) != -1 else { throw EmbeddingError(.badFrame, "\(role) dma-buf plane \(i): fd \(p.fd) is not open") }
            let minimum = format.minimumStride(plane: i, width: frame.width)
            guard p.stride >= minimum, p.offset >= 0 else {
                throw EmbeddingError(.badFrame, "\(role) dma-buf plane \(i): stride \(p.stride) (minimum \(minimum)), offset \(p.offset)")
            }
        }
        // Our own fds, closed when the last reference to the frame is gone.
        var owned = frame
        var dups: [Int32] = []
        for i in owned.planes.indices {
            let d = fcntl(owned.planes[i].fd, F_DUPFD_CLOEXEC, 0)
            guard d >= 0 else {
                for x in dups { close(x) }
                throw EmbeddingError(.runtime, "dup of dma-buf fd \(frame.planes[i].fd) failed: errno \(errno)")
            }
            dups.append(d)
            owned.planes[i].fd = d
        }
        let b = bridge
        let holder = StorageIDHolder()
        let storage = FrameStorage(base: UnsafeRawPointer(bitPattern: 0x40)!, count: 0, release: { [dups] in
            if let id = holder.id { b.unregister(id) }
            for d in dups { close(d) }
        })
        holder.id = ObjectIdentifier(storage)
        b.register(owned, storage: storage)
        let planes = owned.planes.map { FramePlane(storage: storage, offset: 0, stride: $0.stride) }
        let placeholder = VideoFrame(width: frame.width, height: frame.height, format: format, planes: planes, pts: pts,
                                     matrix: frame.matrix, range: frame.range)
        return try enqueue(placeholder, role: role, mode: mode)
    }

    /// Timestamps beyond ±2^31 s (68 years) are refused: within it, every
    /// timescale conversion (to at most 2^31 ticks a second) stays in Int64.
    public static let maximumTimestampSeconds = 2_147_483_648.0

    private final class StorageIDHolder: @unchecked Sendable { var id: ObjectIdentifier? }

    private func enqueue(_ frame: VideoFrame, role: StreamRole, mode: PushMode) throws(EmbeddingError) -> PushResult {
        guard abs(frame.pts.seconds) < EmbeddedSession.maximumTimestampSeconds else {
            throw EmbeddingError(.timestamp, "\(role) frame at \(frame.pts) (\(frame.pts.seconds) s): timestamps must lie within ±2^31 seconds")
        }
        lock.lock(); let over = finished || finishing; lock.unlock()
        if over { throw EmbeddingError(.state, "\(role) frame pushed after finish") }
        guard let source = role == .primary ? bridge.primary : bridge.secondary else {
            throw EmbeddingError(.state, "secondary frame pushed, but the session was configured without a secondary stream")
        }
        let attached = role == .primary ? bridge.attachPendingLayout(to: frame.pts) : nil
        let outcome = source.push(frame, wait: mode == .blocking)
        if outcome != .accepted, let l = attached { bridge.detachLayout(l, from: frame.pts) }
        switch outcome {
        case .accepted: return .accepted
        case .wouldBlock: return .wouldBlock
        case .outOfOrder(let previous):
            throw EmbeddingError(.timestamp, "\(role) frame at \(frame.pts.seconds) s (\(frame.pts)) is not after the previous one at \(previous.seconds) s (\(previous)); timestamps must increase")
        case .closed:
            lock.lock(); let over = finished || finishing; lock.unlock()
            if over { throw EmbeddingError(.state, "\(role) frame pushed after finish") }
            if let r = bridge.endReason { throw EmbeddingError(.state, "the session has ended (\(r)); call finish() for the summary") }
            throw EmbeddingError(.state, "the \(role) stream was ended with endStream")
        }
    }

    /// Changes the layout from the next primary frame pushed on, for every
    /// draw of that frame at once. Throws `.invalidArgument` for a layout
    /// that fails validation (a PiP size out of range, say).
    public func setLayout(_ layout: Layout) throws(EmbeddingError) {
        if let e = layout.validationError() { throw EmbeddingError(.invalidArgument, "\(e)") }
        lock.lock(); let over = finished || finishing; lock.unlock()
        if over { throw EmbeddingError(.state, "setLayout after finish") }
        bridge.setLayout(layout)
    }

    /// Ends one stream early: frames already pushed are still used. Ending
    /// the secondary lets the primary's frames through without waiting for
    /// it (the last secondary frame is held for `secondaryTimeout`, then the
    /// primary is shown alone). Ending the primary ends the take (as `finish`
    /// does, without waiting). Idempotent.
    public func endStream(_ role: StreamRole) {
        (role == .primary ? bridge.primary : bridge.secondary)?.endStream()
    }

    /// Ends both streams, waits until every pushed primary frame has been
    /// composited and delivered and the file (if any) is complete, and
    /// returns the take's summary. Blocks. Throws `.runtime` when the take
    /// ended abnormally (with the reason; what was written is finalized),
    /// `.state` when called twice.
    @discardableResult
    public func finish() throws(EmbeddingError) -> TakeSummary {
        lock.lock()
        if finished || finishing { lock.unlock(); throw EmbeddingError(.state, "finish called twice") }
        finishing = true
        lock.unlock()
        bridge.primary.endStream()
        bridge.secondary?.endStream()
        done.wait()
        done.signal()
        lock.lock(); finished = true; lock.unlock()
        switch resultBox.value {
        case .success(let s)?: return s
        case .failure(let e)?: throw EmbeddingError(.runtime, e.description)
        case nil: throw EmbeddingError(.runtime, "the session ended without a result")
        }
    }

    /// The summary of the take once it has finished (also after a failure).
    public var summary: TakeSummary? { session.summary }
}

