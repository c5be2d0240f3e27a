import CFFmpeg
import DiptychCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How a source is opened: what it may read (`SourcePolicy`), how long
/// opening it may block (a network source, a FIFO with no writer yet, a
/// camera), a switch another thread flips to stop an open in progress, and
/// what a camera is asked for (its mode: `CameraModeChoice`).
public struct SourceOpening: Sendable {
    public var policy: SourcePolicy
    /// Seconds opening may block before the source fails as timed out; for
    /// a camera also how long one read may wait for a frame.
    public var timeout: Double
    /// Flipped by whoever may stop the open (`RecordingSession.stop`).
    public var cancel: OpenCancel?
    /// The canvas and rate a camera source's mode is chosen for.
    public var camera: CameraRequest

    public init(policy: SourcePolicy = .commandLine, timeout: Double = 10, cancel: OpenCancel? = nil,
                camera: CameraRequest = CameraRequest()) {
        self.policy = policy; self.timeout = timeout; self.cancel = cancel; self.camera = camera
    }

    public static let commandLine = SourceOpening()

    /// The same opening, a camera asked for `camera`.
    public func asking(_ camera: CameraRequest) -> SourceOpening {
        var o = self
        o.camera = camera
        return o
    }
}

/// A one-way switch: once `cancel()` is called, every open and read that
/// watches it returns (interrupted). Thread-safe.
public final class OpenCancel: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func cancel() { flag.store(true, ordering: .relaxed) }
    public var isCancelled: Bool { flag.load(ordering: .relaxed) }
}

/// Applies a `SourcePolicy` to one input: checks the URL before anything
/// opens, and then every URL FFmpeg opens for it (HLS playlists and
/// segments, RTSP's streams, redirects) through the format context's
/// `io_open`, with FFmpeg's own protocol and demuxer whitelists set.
final class SourceGuard {
    let policy: SourcePolicy
    let name: String
    /// FFmpeg's own `io_open`, which a checked URL is passed on to.
    fileprivate var defaultOpen: (@convention(c) (UnsafeMutablePointer<AVFormatContext>?,
                                                  UnsafeMutablePointer<UnsafeMutablePointer<AVIOContext>?>?,
                                                  UnsafePointer<CChar>?, Int32,
                                                  UnsafeMutablePointer<OpaquePointer?>?) -> Int32)?
    /// The last refusal of a nested URL (reported instead of FFmpeg's code).
    private(set) var refusal: SourcePolicy.Refusal?
    /// The device input a capture is opened with (`video4linux2`): the one
    /// demuxer its context may use; nil for files and URLs (the policy's list).
    var captureFormat: String?

    init(policy: SourcePolicy, name: String) { self.policy = policy; self.name = name }

    /// What the checked `url` is: the URL FFmpeg should open (a file by its
    /// resolved path, as `file:PATH`, so no colon in it is read as a
    /// protocol) and whether it is a network source. Throws `refused`
    /// naming the source.
    func check(_ url: String) throws(MediaError) -> (url: String, network: Bool, path: String?) {
        if try Self.checkCamera(url, policy: policy) != nil { return (url, false, nil) }
        switch checked(url) {
        case .success(let r): return r
        case .failure(.missing): throw .fileNotFound(path: name)
        case .failure(.refused(let r)): throw .refused(path: name, reason: r.reason)
        }
    }

    enum Failure: Error { case missing, refused(SourcePolicy.Refusal) }

    /// A camera source (`v4l2:/dev/videoN`, `camera:N`): refused where the
    /// policy allows no cameras, an error naming it where it is malformed,
    /// names no capturing device of `CameraListing`'s, or capture cannot run
    /// here (libavdevice cannot be loaded: `CaptureDevices`); otherwise the
    /// capture to open, in the mode `CameraModeChoice` chooses for
    /// `request`. Nil for any other source.
    static func checkCamera(_ url: String, policy: SourcePolicy, request: CameraRequest = CameraRequest(),
                            devices: () -> [CameraDevice] = { CameraListing.devices() }) throws(MediaError) -> DeviceCapture? {
        let selection: CameraSelection
        do {
            guard let s = try CameraSelection.parse(url) else { return nil }
            selection = s
        } catch { throw .invalidSource(spec: url, reason: error.reason) }
        guard policy.cameras else { throw .refused(path: url, reason: "cameras are not allowed here (diptych serve --allow-cameras)") }
        let device: CameraDevice
        do { device = try selection.resolve(in: devices()).device } catch { throw .invalidSource(spec: url, reason: error.reason) }
        guard let chosen = CameraModeChoice.choose(device, for: request) else {
            throw .invalidSource(spec: url, reason: "not a video capture device")
        }
        guard chosen.mode.ffmpegInputFormat != nil else {
            throw .unsupportedFormat(path: url, detail: "\(device.path) offers no format FFmpeg's V4L2 input can be asked for "
                                     + "(\(Set(device.formats.map(\.fourcc)).sorted().joined(separator: ", ")))")
        }
        do { _ = try CaptureDevices.inputFormat("video4linux2") } catch { throw .openFailed(path: url, detail: error.reason) }
        return .camera(device, mode: chosen.mode, reason: chosen.reason)
    }

    private func checked(_ url: String) -> Result<(url: String, network: Bool, path: String?), Failure> {
        switch policy.classify(url) {
        case .failure(let r): return .failure(.refused(r))
        case .success(.file(let path)):
            guard let resolved = FileIdentity.realPath(path) else {
                return errno == ENOENT || errno == ENOTDIR ? .failure(.missing)
                    : .failure(.refused(.init(source: url, reason: String(cString: strerror(errno)))))
            }
            if case .failure(let r) = policy.checkFile(resolved: resolved, as: url) { return .failure(.refused(r)) }
            return .success(("file:" + resolved, false, resolved))
        case .success(.network(let scheme, let host)):
            if let host, !SourcePolicy.receivingProtocols.contains(scheme),
               !policy.allowedNetworks.isEmpty || policy.refusesLocal {
                if case .failure(let r) = policy.checkAddresses(Self.resolve(host), host: host, scheme: scheme, as: url) {
                    return .failure(.refused(r))
                }
            }
            return .success((url, true, nil))
        }
    }

    /// The options every input of this source is opened with.
    func apply(to options: FFDictionary) {
        options.set("protocol_whitelist", policy.protocols.joined(separator: ","))
        options.set("format_whitelist", captureFormat ?? policy.formats.joined(separator: ","))
    }

    /// Installs the URL check as `ctx`'s `io_open` (before `avformat_open_input`).
    /// `ctx.opaque` points at this guard, which must outlive the context.
    func install(on ctx: UnsafeMutablePointer<AVFormatContext>) {
        defaultOpen = ctx.pointee.io_open
        ctx.pointee.opaque = Unmanaged.passUnretained(self).toOpaque()
        ctx.pointee.io_open = { s, pb, url, flags, options in
            guard let s, let opaque = s.pointee.opaque, let url else { return diptych_averror(EINVAL) }
            let guardian = Unmanaged<SourceGuard>.fromOpaque(opaque).takeUnretainedValue()
            return guardian.open(s, pb, String(cString: url), flags, options)
        }
    }

    private func open(_ s: UnsafeMutablePointer<AVFormatContext>, _ pb: UnsafeMutablePointer<UnsafeMutablePointer<AVIOContext>?>?,
                      _ url: String, _ flags: Int32, _ options: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
        guard let defaultOpen else { return diptych_averror(ENOSYS) }
        let target: String
        switch checked(url) {
        case .success(let r): target = r.url
        case .failure(.missing): return diptych_averror(ENOENT)
        case .failure(.refused(let r)): refusal = r; return diptych_averror(EACCES)
        }
        let ret = target.withCString { defaultOpen(s, pb, $0, flags, options) }
        guard ret >= 0, let pb, let io = pb.pointee else { return ret }
        // An HTTP redirect is followed inside FFmpeg: check where it led
        // before anything is read from it.
        var location: UnsafeMutablePointer<UInt8>?
        if av_opt_get(io, "location", Int32(AV_OPT_SEARCH_CHILDREN), &location) >= 0, let location {
            let led = String(cString: location)
            av_free(location)
            if led != url, case .failure(let f) = checked(led) {
                if case .refused(let r) = f { refusal = SourcePolicy.Refusal(source: url, reason: "redirected to \(led): \(r.reason)") }
                avio_closep(pb)
                return diptych_averror(EACCES)
            }
        }
        return ret
    }

    /// The addresses `host` resolves to (a numeric host is its own address).
    static func resolve(_ host: String) -> [IPAddress] {
        if let a = IPAddress(host) { return [a] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var out: [IPAddress] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            if let sa = ai.pointee.ai_addr {
                if ai.pointee.ai_family == AF_INET {
                    let a = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    if let ip = withUnsafeBytes(of: a, { IPAddress(bytes: Array($0)) }) { out.append(ip) }
                } else if ai.pointee.ai_family == AF_INET6 {
                    let a = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    if let ip = withUnsafeBytes(of: a, { IPAddress(bytes: Array($0)) }) { out.append(ip) }
                }
            }
            p = ai.pointee.ai_next
        }
        return out
    }
}
