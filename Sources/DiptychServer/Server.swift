import DiptychCore
import DiptychGPU
import Foundation
import Synchronization

/// `diptych serve`: the HTTP front (authentication, routing, errors) over
/// the take registry, and the process's life: start-up checks, calibration,
/// the cost sampler, and SIGTERM/SIGINT (stop accepting, finalize every
/// take, exit 0).
public final class Server: Sendable {
    private let options: ServeOptions
    private let address: ListenAddress
    private let token: BearerToken?
    private let log: @Sendable (String) -> Void
    private let serverLog: ServerLog
    private struct State {
        var http: HTTPServer?
        var registry: TakeRegistry?
        var router = Router()
        var ready = false
        var responses: [Int: Int] = [:]
        /// `--webhook`: the receivers every event is POSTed to.
        var webhooks: Webhooks?
    }
    private let state = Mutex(State())
    /// True while the calibration take runs (shutdown waits for it to end).
    private let calibrating = Condition(false)
    /// The cost sampler sleeps on it between samples; shutdown ends it.
    private let sampling = StopSignal()
    /// systemd's notification socket, where systemd started the server.
    private let systemd: SystemdNotifier?
    /// `--webhook-secret-file`'s key, read before anything starts.
    private let webhookSigner: WebhookSigner?

    /// Checks the options that need no GPU: the listen address, the token,
    /// the folders. Throws `.badUsage` (exit 2) for any of them.
    public init(options: ServeOptions, log: ServerLog) throws(ServerError) {
        self.options = options
        serverLog = log
        self.log = { log($0) }
        address = try ListenAddress(parsing: options.listen)
        token = try options.tokenFile.map { (f) throws(ServerError) in try BearerToken(file: f) }
        if !address.isLoopback && token == nil {
            throw .badUsage("--listen \(address): not a loopback address; listening there needs --token-file (a bearer token)")
        }
        systemd = try SystemdNotifier(environment: ProcessInfo.processInfo.environment)
        webhookSigner = try options.webhookSecretFile.map { (f) throws(ServerError) in try WebhookSigner(secretFile: f) }
    }

    /// Starts everything; returns the port listened on. Throws `.badUsage`
    /// for bad folders or GPU selection, `.runtime` when the GPU or the
    /// socket fails. The calibration take then runs in the background.
    public func start() throws(ServerError) -> UInt16 {
        let outputRoot = try options.outputRoot.map { (p) throws(ServerError) in try OutputRoot(p) }
        let inputRoot = try options.inputRoot.map { (p) throws(ServerError) in try OutputRoot(p, option: "--input-root") }
        let sources = SourcePolicy.server(inputRoot: inputRoot?.path, allowedNetworks: options.allowedSourceNetworks,
                                          listensBeyondLoopback: !address.isLoopback, listenPorts: options.sourceListenPorts,
                                          cameras: options.allowCameras)
        log("sources: \(sources)")
        let store = try options.stateDir.map { (p) throws(ServerError) in try StateStore(path: p, log: log) }
        guard let selection = GPUSelection(parsing: options.gpu) else { throw .badUsage("--gpu '\(options.gpu)': not a GPU selection") }
        let serverLog = self.serverLog
        let webhooks: Webhooks?
        if let signer = webhookSigner, !options.webhooks.isEmpty {
            do {
                webhooks = try Webhooks(urls: options.webhooks, signer: signer) { serverLog($0, level: $1) }
            } catch { throw .runtime(error.description) }
            log("webhooks: \(options.webhooks.map(Webhooks.describe).joined(separator: ", "))")
        } else {
            webhooks = nil
        }
        state.withLock { $0.webhooks = webhooks }

        let http = HTTPServer(address: address, maxBodyBytes: options.maxBodyBytes, requestDeadline: options.requestTimeout, log: log, admit: { [weak self] head in
            self?.admit(head)
        }) { [weak self] request in
            self?.handle(request) ?? HTTPErrors.response(503, "the server is stopping")
        }
        let port = try http.start()
        state.withLock { $0.http = http }

        let cores = ProcessInfo.processInfo.activeProcessorCount
        let pool: CompositorPool
        do { pool = try CompositorPool(selection: selection, contexts: options.contexts, log: log) } catch {
            http.stop()
            if case .noSuchDevice(let named, let reason) = error {
                throw .badUsage(ConfigurationError(field: "--gpu", value: named, reason: reason).description)
            }
            if case .badSetting(let e) = error { throw .badUsage(e.description) }
            throw .runtime("GPU: \(error)")
        }
        // A software rasterizer's "GPU" is the CPU: its work is in the process CPU time
        // admission already counts (and its timings swell with CPU contention).
        let gpuMs = options.gpuMsPerSecond ?? (pool.info.isSoftware ? .infinity : 1000)
        let capacity = Capacity(cpuCores: options.cores ?? Double(cores), gpuMsPerSecond: gpuMs)
        let encoderCores = max(1, min(cores, Int(capacity.cpuCores.rounded(.up))))
        let placement = pool.placementFacts(decodeCores: options.decodeCores ?? min(capacity.cpuCores, Double(cores)) / 2)
        log(placement.nvdecUnavailable.map { "decoding: no NVDEC (\($0)); every take decodes where it asks" }
            ?? String(format: "decoding: takes encoding on the GPU decode on the CPU while they need at most %.1f cores (--decode-cores), "
                      + "with NVDEC beyond%@", placement.decodeCores,
                      placement.autoEncodesOnGPU ? "" : "; --encoder auto does not encode on the GPU here, so only takes asking for --encoder gpu"))
        let settings = TakeRegistry.Settings(maxTakes: options.maxTakes, capacity: capacity, serverGPU: options.gpu,
                                             outputRoot: outputRoot, sourcePolicy: sources, encoderCores: encoderCores,
                                             encoderThreads: options.encoderThreads, decodeNice: options.decodeNice > 0 ? options.decodeNice : nil,
                                             keepFinished: options.keepFinished,
                                             placement: placement, refuseBelow: options.refuseBelow)
        let meter = CostMeter()
        var forward: (@Sendable (EventLog.Event) -> Void)?
        if let webhooks { forward = { webhooks.post($0) } }
        let registry = TakeRegistry(settings: settings, pool: pool, meter: meter, store: store, log: log,
                                    takeLog: { serverLog($1, take: $0) }, events: EventLog(forward: forward))
        let r = TakesAPI(registry: registry, gpuDescription: pool.info.description, gpuPlan: pool.plan,
                         responses: { [weak self] in self?.responseCounts ?? [:] },
                         webhooks: { webhooks?.counts }).router()
        state.withLock { $0.registry = registry; $0.router = r; $0.ready = true }

        // The calibration take runs beside the requests (a POST waits for
        // it); the cost sampler starts after it, so its CPU is not counted.
        // systemd hears READY=1 when calibration has ended (either way: a
        // failed calibration is the status, and /readyz says it), and a
        // watchdog ping with each cost sample.
        let gpu = options.gpu, say = log, systemd = self.systemd, sampling = self.sampling
        calibrating.withLock { $0 = true }
        JoinableThread.detached(name: "diptych.cost-meter", stackSize: nil) { [weak registry, calibrating] in
            let calibrated: Bool
            do throws(ServerError) {
                let model = try Calibration.run(pool: pool, gpu: gpu, cores: encoderCores,
                                                measureDecode: placement.budget > 0, log: say)
                meter.calibrated(model)
                systemd?.ready(status: "listening on port \(port), calibrated")
                calibrated = true
            } catch {
                serverLog("\(error); takes are refused", level: .error, event: "calibration-failed")
                meter.calibrationFailed(error.description)
                systemd?.ready(status: "listening on port \(port); calibration failed, takes are refused: \(error)")
                calibrated = false
            }
            calibrating.update { $0 = false }
            // A ping every second, sooner for a watchdog under two seconds (never under 10 ms).
            let interval = min(1, max(0.01, systemd?.watchdogInterval ?? 1))
            // Until shutdown has finalized every take (the watchdog is pinged through it).
            while let registry, calibrated || systemd != nil {
                if calibrated { registry.sampleCosts() }
                systemd?.watchdog()
                guard sampling.sleep(interval) else { break }
            }
        }
        return port
    }

    /// Stop accepting, finalize every take, close the socket.
    public func shutdown(reason: String) {
        systemd?.stopping(status: "finalizing every take: \(reason)")
        let (http, webhooks) = state.withLock { ($0.http, $0.webhooks) }
        http?.quiesce()
        calibrating.wait(until: { !$0 })
        let registry = state.withLock { s -> TakeRegistry? in s.ready = false; return s.registry }
        registry?.shutdown(reason: reason)
        // The takes' last events are posted: the receivers get a few seconds to take them.
        webhooks?.stop()
        sampling.stop()
        http?.stop()
    }

    private var responseCounts: [Int: Int] { state.withLock { $0.responses } }

    /// A request's head, before its body is read: refused (401) unless it
    /// carries the token. /healthz, /livez and /readyz answer without one (load balancers and orchestrators probe them).
    private func admit(_ head: HTTPRequest) -> HTTPResponse? {
        guard let token, !["/healthz", "/livez", "/readyz"].contains(head.path), !token.accepts(authorization: head.authorization) else { return nil }
        return counted(head, RequestError.unauthorized(head.authorization == nil
            ? "missing Authorization: Bearer token" : "the bearer token is wrong").response)
    }

    private func handle(_ request: HTTPRequest) -> HTTPResponse {
        counted(request, respond(request))
    }

    private func counted(_ request: HTTPRequest, _ response: HTTPResponse) -> HTTPResponse {
        state.withLock { $0.responses[response.status, default: 0] += 1 }
        // Every request at debug; refusals (but 404) at warning, failures at error.
        let level: ServerLog.Level = response.status >= 500 ? .error : response.status >= 400 && response.status != 404 ? .warning : .debug
        serverLog("\(request.method) \(request.path) → \(response.status)", level: level)
        return response
    }

    private func respond(_ request: HTTPRequest) -> HTTPResponse {
        let (isReady, router) = state.withLock { ($0.ready, $0.router) }
        guard isReady else { return HTTPErrors.response(503, "the server is starting or stopping") }
        do throws(RequestError) {
            return try router.handle(request)
        } catch {
            return error.response
        }
    }
}

/// The `diptych serve` command: options, start, the signal-driven stop.
public enum ServeCommand {
    public static func run(arguments: [String]) -> Never {
        if arguments.contains("-h") || arguments.contains("--help") { print(ServeOptions.usage); exit(0) }
        // Text until the options say otherwise (a bad option is told as text).
        nonisolated(unsafe) var log = ServerLog(format: .text)
        func fail(_ e: ServerError) -> Never {
            log(e.description, level: .error, event: "start-failed")
            exit(e.exitCode)
        }
        let server: Server
        let port: UInt16
        do throws(ServerError) {
            let options = try ServeOptions.parse(arguments)
            log = ServerLog(format: options.logFormat, minimum: options.logLevel)
            server = try Server(options: options, log: log)
            // Signals are taken over before the takes exist, so none is lost.
            for sig in [SIGINT, SIGTERM] { signal(sig, SIG_IGN) }
            port = try server.start()
            let a = try ListenAddress(parsing: options.listen)
            let shown = a.isIPv6 ? "[\(a.host)]:\(port)" : "\(a.host):\(port)"
            FileHandle.standardOutput.write(Data("diptych serve: listening on http://\(shown)\n".utf8))
            log("listening on http://\(shown)", event: "listening")
        } catch {
            fail(error)
        }
        let logged = log
        let stop = Condition((stopping: false, done: false))
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            let name = sig == SIGINT ? "SIGINT" : "SIGTERM"
            s.setEventHandler {
                let first = stop.withLock { s -> Bool in defer { s.stopping = true }; return !s.stopping }
                guard first else { return }
                logged("\(name): no new takes; finalizing every take", event: "draining")
                server.shutdown(reason: "server stopped by \(name)")
                stop.update { $0.done = true }
            }
            s.resume()
            sources.append(s)
        }
        stop.wait(until: { $0.done })
        logged("stopped", event: "stopped")
        exit(0)
    }
}
