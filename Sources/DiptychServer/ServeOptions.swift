import DiptychCore
import Foundation

/// The options of `diptych serve`.
public struct ServeOptions: Sendable {
    public var listen = ListenAddress.defaultText
    public var tokenFile: String?
    public var maxTakes = 32
    public var gpu = "auto"
    public var stateDir: String?
    public var outputRoot: String?
    /// `--input-root`: the folder file sources must lie in.
    public var inputRoot: String?
    /// `--allow-source-net`: the networks network sources may reach.
    public var allowedSourceNetworks: [IPNetwork] = []
    /// `--allow-source-listen`: the ports listening sources may bind (none without it).
    public var sourceListenPorts: [ClosedRange<Int>] = []
    /// `--allow-cameras`: takes may read this host's V4L2 cameras (none without it).
    public var allowCameras = false
    /// CPU cores admission may fill (default: every core of this machine).
    public var cores: Double?
    /// `--decode-cores`: cores the takes the server decodes on the CPU instead
    /// of NVDEC may fill (default: half of `cores`, at most half of this
    /// machine's; 0: none), `DecodePlacement`.
    public var decodeCores: Double?
    /// `--decode-nice`: the nice value of the threads of every CPU decoder
    /// of the server's takes (0 to 19; 0: the process's own), so the render
    /// threads and the takes' own threads go first (`CodecThreads.yield`).
    public var decodeNice = ServeOptions.defaultDecodeNice
    public static let defaultDecodeNice = 10
    /// GPU milliseconds per second admission may fill (default 1000: all of
    /// one GPU; no limit on a software rasterizer, whose work is CPU time).
    public var gpuMsPerSecond: Double?
    /// `--refuse-below`: admission refuses while a running take's speed
    /// over its last seconds is under this (× real time; 0: never).
    public var refuseBelow = 0.9
    /// GL contexts the takes are shared out to (default: `CompositorPool.defaultContexts`).
    public var contexts: Int?
    /// Encoder threads of every take (default: a fair share of the cores when it starts).
    public var encoderThreads: Int?
    /// Largest request body accepted (bytes).
    public var maxBodyBytes = 1 << 20
    /// Seconds a request may take to arrive whole.
    public var requestTimeout = 30.0
    /// Ended takes kept in memory (`GET /v1/takes`); the state folder keeps all.
    public var keepFinished = 1000
    /// `--log-format`: text lines or JSON objects.
    public var logFormat = ServerLog.Format.text
    /// `--log-level`: the least level logged.
    public var logLevel = ServerLog.Level.info
    /// `--webhook`: URLs every event is POSTed to.
    public var webhooks: [String] = []
    /// `--webhook-secret-file`: the HMAC-SHA256 key the webhooks' bodies are signed with.
    public var webhookSecretFile: String?

    public init() {}

    public static let usage = """
        usage: diptych serve [--listen HOST:PORT] [--token-file FILE] [--max-takes N] [--gpu SEL]
                             [--state-dir DIR] [--output-root DIR] [--input-root DIR] [--allow-source-net CIDR,...]
                             [--allow-source-listen PORTS] [--allow-cameras] [--cores N] [--decode-cores N] [--decode-nice N] [--gpu-ms N] [--refuse-below SPEED] [--contexts N] [--encoder-threads N] [--max-body BYTES]
                             [--request-timeout SECONDS] [--keep-finished N] [--log-format text|json]
                             [--log-level debug|info|warning|error] [--webhook URL --webhook-secret-file FILE]
        Many takes in one process on one GPU, controlled over HTTP (JSON under /v1).
          --listen HOST:PORT   address to listen on (default \(ListenAddress.defaultText); port 0 picks a free one).
                               Any address other than loopback needs --token-file.
          --token-file FILE    every request must carry "Authorization: Bearer <the file's contents>"
          --max-takes N        takes running at once (default 32)
          --gpu SEL            the GPU all takes share: auto, software, N, /dev/dri/renderDN, PLATFORM[:DEVICE]
          --state-dir DIR      keep each take's configuration, state and summary here (survives restarts)
          --output-root DIR    take outputs and previews must lie under DIR (relative paths are taken from it)
          --input-root DIR     file sources must lie under DIR (relative paths are taken from it). Without it,
                               a server listening beyond loopback takes no file sources
          --allow-source-net CIDR,...
                               the only networks network sources may reach (repeatable). Without it any host but,
                               when listening beyond loopback, loopback and link-local addresses
          --allow-source-listen PORT[-PORT],...
                               the only ports a take's listening sources (an SRT listener, an RTMP or TCP
                               listen URL, a publisher pushing to the take) may bind (repeatable). Without it
                               a take may not listen
          --allow-cameras      takes may name this host's V4L2 cameras (v4l2:/dev/videoN, camera:N);
                               without it a camera source is refused (400)
          --cores N            CPU cores admission may fill (default: all of this machine's)
          --decode-cores N     a take encoding on the GPU whose inputs NVDEC would decode is decoded on the CPU
                               instead (NVDEC slows the GPU encoder) while such takes need at most N cores
                               together, at the decode cost the placed takes measure (the calibration's until
                               they have; default: half of --cores, at most half of this machine's cores; 0: never)
          --decode-nice N      the nice value (0 to 19) of the threads of every take's CPU decoders, so the GPU's
                               render threads and the takes' own threads go before bulk decoding when the cores
                               are busy (default \(ServeOptions.defaultDecodeNice); 0: the server's own)
          --gpu-ms N           GPU milliseconds per second admission may fill (default 1000; none in software)
          --refuse-below SPEED refuse new takes while a running take has been slower than SPEED× real time over
                               its last seconds (default 0.9; 0: never, admission by cost alone)
          --contexts N         GL contexts the takes share (default 1; a software renderer takes one)
          --encoder-threads N  encoder threads of each take (default: the cores shared out between the takes
                               running when it starts, at least 1)
          --max-body BYTES     largest request body (default 1048576)
          --request-timeout SECONDS
                               a request must arrive whole (head and body) within this long, however slowly
                               it trickles in (default 30); one client address holds at most 64 connections
          --keep-finished N    ended takes kept in memory and listed (default 1000); older ones leave it (the state
                               folder keeps them) and what they recorded stays protected from being written over
          --log-format text|json
                               the log on standard error: text lines (default) or one JSON object a line
                               (time, level, message, take, event)
          --log-level debug|info|warning|error
                               the least level logged (default info; debug adds every request and webhook attempt)
          --webhook URL        POST every event of /v1/events as JSON to this http:// or https:// URL (repeatable),
                               signed (X-Diptych-Signature: sha256=HMAC-SHA256 of the body), retried with backoff
          --webhook-secret-file FILE
                               the key the webhooks are signed with (at least 16 bytes); needed with --webhook
        Routes: POST/GET /v1/takes, GET/PATCH/DELETE /v1/takes/{id}, POST /v1/takes/{id}/switch,
                POST /v1/takes/{id}/outputs, DELETE /v1/takes/{id}/outputs/{n}, GET /v1/takes/{id}/snapshot,
                GET /v1/events, GET /metrics, GET /healthz, GET /livez, GET /readyz.
        """

    /// Parses the arguments after `serve` (`--flag value` or `--flag=value`).
    public static func parse(_ arguments: [String]) throws(ServerError) -> ServeOptions {
        var o = ServeOptions()
        var i = 0
        while i < arguments.count {
            var flag = arguments[i]
            var value: String?
            if let eq = flag.firstIndex(of: "="), flag.hasPrefix("--") {
                value = String(flag[flag.index(after: eq)...]); flag = String(flag[..<eq])
            }
            i += 1
            if flag == "--allow-cameras" {
                guard value == nil else { throw .badUsage("--allow-cameras: takes no value") }
                o.allowCameras = true
                continue
            }
            let known = ["--listen", "--token-file", "--max-takes", "--gpu", "--state-dir", "--output-root", "--input-root", "--allow-source-net", "--allow-source-listen", "--cores", "--decode-cores", "--decode-nice", "--gpu-ms", "--refuse-below", "--contexts", "--encoder-threads", "--max-body", "--request-timeout", "--keep-finished", "--log-format", "--log-level", "--webhook", "--webhook-secret-file"]
            guard known.contains(flag) else {
                throw .badUsage("\(flag.hasPrefix("--") ? "option" : "argument") '\(flag)': unknown (see diptych serve --help)")
            }
            if value == nil {
                guard i < arguments.count, !arguments[i].hasPrefix("--") else { throw .badUsage("\(flag): needs a value") }
                value = arguments[i]; i += 1
            }
            let v = value!
            func bad(_ why: String) -> ServerError { .badUsage("\(flag) '\(v)': \(why)") }
            switch flag {
            case "--listen": o.listen = v
            case "--token-file": o.tokenFile = v
            case "--max-takes":
                guard let n = Int(v), n >= 1, n <= 4096 else { throw bad("must be a whole number from 1 to 4096") }
                o.maxTakes = n
            case "--gpu":
                do { try TakeConfiguration.checkGPU(v) } catch { throw .badUsage(error.description) }
                o.gpu = v
            case "--state-dir": o.stateDir = v
            case "--output-root": o.outputRoot = v
            case "--input-root": o.inputRoot = v
            case "--allow-source-net":
                for part in v.split(separator: ",", omittingEmptySubsequences: false) {
                    let text = part.trimmingCharacters(in: .whitespaces)
                    guard let n = IPNetwork(text) else {
                        throw bad("'\(text)' is not an address or network (10.0.0.0/8, 2001:db8::/32, 192.0.2.7)")
                    }
                    o.allowedSourceNetworks.append(n)
                }
            case "--allow-source-listen":
                guard let ports = SourcePolicy.parsePorts(v) else {
                    throw bad("expected ports or ranges from 1 to 65535 (1935, 9000-9010)")
                }
                o.sourceListenPorts += ports
            case "--cores":
                guard let n = Double(v), n > 0, n <= 4096 else { throw bad("must be a positive number of cores, at most 4096") }
                o.cores = n
            case "--decode-cores":
                guard let n = Double(v), n >= 0, n <= 4096 else { throw bad("must be a number of cores from 0 to 4096") }
                o.decodeCores = n
            case "--decode-nice":
                guard let n = Int(v), CodecThreads.niceRange.contains(n) else { throw bad("must be a whole number from 0 to 19") }
                o.decodeNice = n
            case "--refuse-below":
                guard let n = Double(v), n >= 0, n <= 1 else { throw bad("must be a speed from 0 to 1 (× real time)") }
                o.refuseBelow = n
            case "--gpu-ms":
                guard let n = Double(v), n > 0, n <= 1e6 else { throw bad("must be a positive number of milliseconds per second") }
                o.gpuMsPerSecond = n
            case "--contexts":
                guard let n = Int(v), n >= 1, n <= 64 else { throw bad("must be a whole number from 1 to 64") }
                o.contexts = n
            case "--encoder-threads":
                guard let n = Int(v), n >= 1, n <= 256 else { throw bad("must be a whole number from 1 to 256") }
                o.encoderThreads = n
            case "--max-body":
                guard let n = Int(v), n >= 1024, n <= 64 << 20 else { throw bad("must be a number of bytes from 1024 to 67108864") }
                o.maxBodyBytes = n
            case "--keep-finished":
                guard let n = Int(v), n >= 0, n <= 1_000_000 else { throw bad("must be a whole number from 0 to 1000000") }
                o.keepFinished = n
            case "--log-format":
                guard let f = ServerLog.Format(rawValue: v) else { throw bad("expected text or json") }
                o.logFormat = f
            case "--log-level":
                guard let l = ServerLog.Level(rawValue: v) else { throw bad("expected debug, info, warning or error") }
                o.logLevel = l
            case "--webhook":
                try Webhooks.check(v)
                o.webhooks.append(v)
            case "--webhook-secret-file": o.webhookSecretFile = v
            case "--request-timeout":
                guard let n = Double(v), n >= 0.5, n <= 3600 else { throw bad("must be a number of seconds from 0.5 to 3600") }
                o.requestTimeout = n
            default: break
            }
        }
        if !o.webhooks.isEmpty && o.webhookSecretFile == nil {
            throw .badUsage("--webhook: needs --webhook-secret-file (the key every delivery is signed with)")
        }
        if o.webhooks.isEmpty && o.webhookSecretFile != nil {
            throw .badUsage("--webhook-secret-file: given without --webhook (no webhook to sign)")
        }
        return o
    }
}
