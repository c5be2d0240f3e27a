import Foundation
import Synchronization
import DiptychCore
import DiptychGPU
import DiptychMedia
#if canImport(Glibc)
import Glibc
#endif

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
    /// A session's error: bad input is `.invalidArgument`, anything else `.runtime`.
    public init(_ error: SessionError) { self.init(error.isBadInput ? .invalidArgument : .runtime, error.description) }
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
public final class EmbeddedSession: Sendable {
    public let configuration: EmbeddedConfiguration
    private let bridge: EmbeddingBridge
    private let session: RecordingSession
    /// Runs the take; its end is the take's (joined by `finish`).
    private let thread: JoinableThread
    private let state = Mutex<(finishing: Bool, finished: Bool)>((false, false))
    /// Whether the take writes an MP4 file (a gap beyond `maximumMP4GapSeconds` would corrupt it).
    private let writesMP4: Bool

    /// Whether a non-blocking push of `role` would find its queue full now
    /// (a hint, so a host can skip copying a frame that would not be taken).
    public func queueIsFull(_ role: StreamRole) -> Bool {
        (role == .primary ? bridge.primary : bridge.secondary)?.isFull ?? false
    }

    /// Whether this thread is running one of a session's callbacks now.
    public var isInOwnCallback: Bool { HostCallback.isRunning(callbackToken) }
    /// This session's identity for `HostCallback`.
    private let callbackToken: HostCallback.Token

    /// The GPU in use.
    public var gpu: GPUInfo { bridge.gpu! }

    /// Creates the session and starts it: opens the GPU context and the
    /// outputs, and returns when frames can be pushed. Blocks for that
    /// (typically well under a second; up to `startTimeout`).
    public convenience init(configuration: EmbeddedConfiguration, outputs: EmbeddedOutputs = EmbeddedOutputs(),
                            log: @escaping @Sendable (String) -> Void = { _ in }, startTimeout: Double = 60) throws(EmbeddingError) {
        let token = HostCallback.Token()
        try self.init(configuration: configuration, outputs: outputs.markingCallbacks(token),
                      log: { line in HostCallback.run(token) { log(line) } }, startTimeout: startTimeout, adjustHooks: { _ in },
                      callbackToken: token)
    }

    /// FFmpeg's own log (libx264's banner, a protocol's messages) stays off the
    /// host's stderr (`DIPTYCH_FFMPEG_LOG` turns it on); errors come back through the API.
    static let quietFFmpeg: Void = MediaLibraries.setLogLevel(MediaLibraries.levelFromEnvironment ?? .quiet)

    /// `adjustHooks` changes the take's hooks (tests: thermal and storage monitors).
    init(configuration: EmbeddedConfiguration, outputs: EmbeddedOutputs, log: @escaping @Sendable (String) -> Void,
         startTimeout: Double, adjustHooks: (inout SessionHooks) -> Void,
         callbackToken: HostCallback.Token = HostCallback.Token()) throws(EmbeddingError) {
        self.callbackToken = callbackToken
        _ = EmbeddedSession.quietFFmpeg
        let c = configuration
        guard (1...256).contains(c.queueCapacity) else {
            throw EmbeddingError(.invalidArgument, "queueCapacity \(c.queueCapacity): expected 1 to 256")
        }
        guard outputs.rgbaInterval >= 1 else { throw EmbeddingError(.invalidArgument, "rgbaInterval \(outputs.rgbaInterval): must be at least 1") }
        // Bounds that keep every later timestamp and GOP computation far from Int64 overflow.
        guard c.frameRate.fps <= 1000 else { throw EmbeddingError(.invalidArgument, "frame rate \(c.frameRate): at most 1000 fps") }
        let take = c.takeConfiguration(file: outputs.file, format: outputs.fileFormat)
        writesMP4 = outputs.file != nil && take.container == .mp4
        do { try take.validate() } catch { throw EmbeddingError(.invalidArgument, "\(error)") }
        self.configuration = c
        let primary = PushSource(name: "push:primary", size: c.canvas, frameRate: c.frameRate, capacity: c.queueCapacity)
        let secondary = c.hasSecondary ? PushSource(name: "push:secondary", size: c.canvas, frameRate: c.frameRate, capacity: c.queueCapacity,
                                                    leader: primary, patience: max(c.secondaryTimeout, 0.5)) : nil
        bridge = EmbeddingBridge(primary: primary, secondary: secondary, outputs: outputs, log: log)
        var hooks = SessionHooks(storage: outputs.file == nil ? NoStorageMonitor() : FileSystemStorageMonitor(), log: log)
        adjustHooks(&hooks)
        session = RecordingSession(configuration: take, hooks: hooks, io: bridge.io)
        let s = session, b = bridge
        let box = ResultBox()
        resultBox = box
        thread = JoinableThread(stackSize: 4 << 20) {
            do throws(SessionError) { box.set(.success(try s.run())) } catch { box.set(.failure(error)) }
            // A take that failed to start never signalled: wake the creator.
            b.wakeStartWaiters()
        }
        guard bridge.waitStarted(timeout: startTimeout) else {
            session.stop(.requested("start timed out"))
            state.withLock { $0.finished = true }
            throw EmbeddingError(.runtime, "the session did not start within \(startTimeout) s")
        }
        if bridge.gpu == nil {
            thread.join()
            state.withLock { $0.finished = true }
            switch box.value {
            case .failure(let e)?: throw EmbeddingError(e)
            default: throw EmbeddingError(.runtime, "the session ended before it started")
            }
        }
        if outputs.onDmaBuf != nil, let info = bridge.gpu, !info.capabilities.dmaBufExport {
            state.withLock { $0.finishing = true }
            bridge.primary.endStream(); bridge.secondary?.endStream()
            thread.join()
            state.withLock { $0.finished = true }
            throw EmbeddingError(.unsupported, "dma-buf output needs EGL_MESA_image_dma_buf_export, which this GPU (\(info.renderer)) does not offer; take RGBA or NV12 frames instead")
        }
    }

    private let resultBox: ResultBox
    final class ResultBox: Sendable {
        private let result = Mutex<Result<TakeSummary, SessionError>?>(nil)
        var value: Result<TakeSummary, SessionError>? { result.withLock { $0 } }
        func set(_ v: Result<TakeSummary, SessionError>) { result.withLock { $0 = v } }
    }

    deinit {
        if !isFinished { _ = try? finish() }
    }

    private var isFinished: Bool { state.withLock { $0.finished || $0.finishing } }

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
        do { try validateUpload(frame, maxTextureSize: bridge.gpu?.maxTextureSize ?? TakeConfiguration.maximumDimension) }
        catch { throw EmbeddingError(.badFrame, "\(role) frame: \(error)") }
        return try enqueue(InputFrame(frame), role: role, mode: mode)
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
        guard let format = FrameValidator.format(ofFourcc: frame.fourcc) else {
            throw EmbeddingError(.badFrame, "\(role) dma-buf: fourcc \(DmaBufFrame.fourccName(frame.fourcc)) is not one of NV12, AB24, AR24, YU12")
        }
        do { try FrameValidator.check(frame, format: format, maxDimension: bridge.gpu?.maxTextureSize ?? TakeConfiguration.maximumDimension) }
        catch { throw EmbeddingError(.badFrame, "\(role) dma-buf: \(error)") }
        for (i, p) in frame.planes.enumerated() where fcntl(p.fd, F_GETFD) == -1 {
            throw EmbeddingError(.badFrame, "\(role) dma-buf plane \(i): fd \(p.fd) is not open")
        }
        // Our own fds, closed when the last copy of the frame is gone.
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
        let owner = PayloadOwner(release: { [dups] in for d in dups { close(d) } })
        return try enqueue(InputFrame(owned, pts: pts, owner: owner), role: role, mode: mode)
    }

    /// Timestamps beyond ±2^31 s (68 years) are refused: within it, every
    /// timescale conversion (to at most 2^31 ticks a second) stays in Int64.
    public static let maximumTimestampSeconds = 2_147_483_648.0

    /// The longest gap between two primary frames an MP4 output can hold
    /// (2^31 ticks of its 90 kHz track: one frame's duration is a signed 32-bit field).
    public static let maximumMP4GapSeconds = Double(Int32.max) / 90_000


    private func enqueue(_ frame: InputFrame, role: StreamRole, mode: PushMode) throws(EmbeddingError) -> PushResult {
        guard abs(frame.pts.seconds) < EmbeddedSession.maximumTimestampSeconds else {
            throw EmbeddingError(.timestamp, "\(role) frame at \(frame.pts) (\(frame.pts.seconds) s): timestamps must lie within ±2^31 seconds")
        }
        if mode == .blocking && isInOwnCallback {
            throw EmbeddingError(.state, "\(role) frame: a blocking push from one of the session's callbacks would wait for that callback; push non-blocking")
        }
        let over = isFinished
        if over { throw EmbeddingError(.state, "\(role) frame pushed after finish") }
        guard let source = role == .primary ? bridge.primary : bridge.secondary else {
            throw EmbeddingError(.state, "secondary frame pushed, but the session was configured without a secondary stream")
        }
        if role == .primary, writesMP4, let last = source.lastAcceptedPTS,
           (frame.pts - last).seconds > EmbeddedSession.maximumMP4GapSeconds {
            throw EmbeddingError(.timestamp, "primary frame at \(frame.pts.seconds) s: \((frame.pts - last).seconds) s after the previous one "
                + "is more than an MP4 track holds in one frame (\(Int(EmbeddedSession.maximumMP4GapSeconds)) s at 90 kHz)")
        }
        var frame = frame
        if role == .primary, let c = bridge.takePendingLayout() { frame.layout = c.layout; frame.layoutTransition = c.transition }
        let outcome = source.push(frame, wait: mode == .blocking)
        if outcome != .accepted, let l = frame.layout { bridge.restoreLayout(LayoutChange(layout: l, transition: frame.layoutTransition)) }
        switch outcome {
        case .accepted: return .accepted
        case .wouldBlock: return .wouldBlock
        case .outOfOrder(let previous):
            throw EmbeddingError(.timestamp, "\(role) frame at \(frame.pts.seconds) s (\(frame.pts)) is not after the previous one at \(previous.seconds) s (\(previous)); timestamps must increase")
        case .aheadOfLeader(let last):
            throw EmbeddingError(.timestamp, "secondary frame at \(frame.pts.seconds) s: the secondary's queue is full of frames after the primary's "
                + (last.map { "last one (\($0.seconds) s)" } ?? "first one (none pushed yet)")
                + "; push primary frames first (a host on one thread must not let the secondary run far ahead of the primary)")
        case .closed:
            let over = isFinished
            if over { throw EmbeddingError(.state, "\(role) frame pushed after finish") }
            if let r = bridge.endReason { throw EmbeddingError(.state, "the session has ended (\(r)); call finish() for the summary") }
            throw EmbeddingError(.state, "the \(role) stream was ended with endStream")
        }
    }

    /// Changes the layout from the next primary frame pushed on, for every
    /// draw of that frame at once. Throws `.invalidArgument` for a layout
    /// that fails validation (a PiP size out of range, say). With a
    /// transition (nil: the session's `--transition`, if any), the frames
    /// from that one are interpolated over its duration of the pushed
    /// frames' timestamps (docs/ARCHITECTURE.md, "Layout transitions").
    public func setLayout(_ layout: Layout, transition: LayoutTransition? = nil) throws(EmbeddingError) {
        if let e = layout.validationError() { throw EmbeddingError(.invalidArgument, "\(e)") }
        if let t = transition, let e = t.validationError(field: "transition") { throw EmbeddingError(.invalidArgument, "\(e)") }
        let over = isFinished
        if over { throw EmbeddingError(.state, "setLayout after finish") }
        bridge.setLayout(LayoutChange(layout: layout, transition: transition))
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
        if isInOwnCallback {
            throw EmbeddingError(.state, "finish called from one of the session's callbacks (it would wait for that callback); call it from the host's own thread")
        }
        let twice = state.withLock { s in
            defer { s.finishing = true }
            return s.finished || s.finishing
        }
        if twice { throw EmbeddingError(.state, "finish called twice") }
        bridge.primary.endStream()
        bridge.secondary?.endStream()
        thread.join()
        state.withLock { $0.finished = true }
        switch resultBox.value {
        case .success(let s)?: return s
        case .failure(let e)?: throw EmbeddingError(.runtime, e.description)
        case nil: throw EmbeddingError(.runtime, "the session ended without a result")
        }
    }

    /// The summary of the take once it has finished (also after a failure).
    public var summary: TakeSummary? { session.summary }
}

