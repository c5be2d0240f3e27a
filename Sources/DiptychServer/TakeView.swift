import DiptychGPU
import Diptych
import DiptychCore
import Foundation

/// The JSON form of a take (`GET /v1/takes/{id}`; the list holds these too).
struct TakeView: Encodable {
    struct Secondary: Encodable {
        /// Secondary frames shown again because no newer one was due (held).
        var repeated: Int
        /// Secondary frames replaced before they were shown.
        var dropped: Int
        /// Distinct secondary frames shown (once finished).
        var shown: Int?
    }
    struct Latency: Encodable {
        var p50Ms: Double?
        var p99Ms: Double?
        var samples: Int
    }
    struct Output: Encodable {
        var index: Int
        var url: String
        var layout: AnyJSON
        var preview: String?
        /// Its own encoding, where it sets one (`alsoOut`'s or the added
        /// output's `size`, `codec`, `bitrate`, `maxrate`, `bufsize`,
        /// `preset`, `rateDivisor`); absent fields are the take's.
        var size: String?
        var codec: String?
        var bitrate: Int?
        var maxrate: Int?
        var bufsize: Int?
        var preset: String?
        var rateDivisor: Int?
        /// Its frame rate where it has a divisor: the take's (as admitted) over it.
        var frameRate: Double?
        /// Its segment length (a split file, or HLS) and live playlist's size, where set.
        var segmentTime: Double?
        var hlsListSize: Int?

        init(index: Int, url: String, layout: AnyJSON, preview: String?, encoding e: OutputEncoding = OutputEncoding(), takeRate: Double? = nil,
             segmentTime: Double? = nil, hlsListSize: Int? = nil) {
            self.index = index; self.url = url; self.layout = layout; self.preview = preview
            self.segmentTime = segmentTime; self.hlsListSize = hlsListSize
            size = e.size?.description; codec = e.codec?.rawValue; bitrate = e.bitrate; maxrate = e.maxrate; bufsize = e.bufsize
            preset = e.preset; rateDivisor = e.rateDivisor
            if let d = e.rateDivisor, let r = takeRate { frameRate = r / Double(d) }
        }
    }
    /// The take's sources: what each role shows, and every switch so far
    /// (reconnects, failovers and failbacks of its priority lists).
    struct Sources: Encodable {
        var roles: [SourceStatus]
        var switches: [SourceSwitchRecord]
    }
    struct Cost: Encodable {
        /// CPU cores the take needs at real time (the server's measured cost
        /// per megapixel × its load); nil while the server calibrates.
        var cpuCores: Double?
        /// GPU milliseconds per frame, from the take's compositor.
        var gpuMsPerFrame: Double?
        var encoderThreads: Int
        var load: TakeLoad
        /// Where the server placed the take's decoding and why (`diptych serve
        /// --decode-cores`); absent where it left the take's own choice alone.
        var decodePlacement: String?
    }

    var id: String
    var state: TakeState
    var created: String
    /// The configuration as run, in the JSON form `POST` takes.
    var configuration: AnyJSON
    /// The layout now (after any PATCH).
    var layout: AnyJSON
    /// Frames written to the output.
    var frames: Int
    var framesRendered: Int
    var framesInFlight: Int
    var fps: Double
    var realtimeFactor: Double
    var mediaSeconds: Double
    var secondary: Secondary
    var latency: Latency
    var encoder: String?
    var sources: Sources
    var outputs: [Output]
    var cost: Cost
    var error: String?
    var summary: TakeSummary?
    var recovered: RecoveredOutput?
    /// A split main output's files (`segmentTime`): while it records, those
    /// so far (the last still being written); once it has ended, the summary's.
    var segments: [WrittenSegment]?

    init(_ s: TakeSnapshot, gpu: GPUTotals, model: CostModel?) {
        id = s.id
        state = s.state
        created = ISO8601DateFormatter().string(from: s.created)
        configuration = AnyJSON(data: s.configuration.jsonData())
        layout = LayoutJSON.value(s.layout)
        frames = s.written
        framesRendered = max(s.figures.frames, s.written)
        framesInFlight = s.latency.inFlight
        if let sum = s.summary {
            fps = sum.fps; realtimeFactor = sum.realtimeFactor; mediaSeconds = sum.durationSeconds
            secondary = Secondary(repeated: sum.secondaryRepeated, dropped: sum.secondaryDropped, shown: sum.secondaryFramesShown)
        } else {
            fps = s.figures.fps; realtimeFactor = s.figures.realtimeFactor; mediaSeconds = s.figures.mediaSeconds
            secondary = Secondary(repeated: s.figures.secondaryRepeated, dropped: s.figures.secondaryDropped, shown: nil)
        }
        latency = Latency(p50Ms: s.latency.percentile(0.5).map { $0 * 1000 }, p99Ms: s.latency.percentile(0.99).map { $0 * 1000 },
                          samples: s.latency.count)
        encoder = s.encoder
        sources = Sources(roles: s.figures.sources, switches: s.summary?.sourceSwitches ?? s.figures.sourceSwitches)
        // The main output, the ones given at the start (`alsoOut`), then the ones added and still open.
        let main = layout
        outputs = [Output(index: 0, url: s.configuration.output ?? "", layout: main, preview: s.configuration.preview)]
            + s.configuration.extraOutputs.enumerated().map { i, o in
                Output(index: i + 1, url: o.out, layout: o.layout.map(LayoutJSON.value) ?? main, preview: nil, encoding: o.encoding, takeRate: s.load.fps,
                       segmentTime: o.segmentTime, hlsListSize: o.hlsListSize)
            }
            + s.added.map {
                Output(index: $0.key, url: $0.value.out, layout: $0.value.layout.map(LayoutJSON.value) ?? main, preview: nil,
                       encoding: $0.value.encoding, takeRate: s.load.fps, segmentTime: $0.value.segmentTime, hlsListSize: $0.value.hlsListSize)
            }
        cost = Cost(cpuCores: model?.cpuCores(s.load), gpuMsPerFrame: gpu.msPerFrame, encoderThreads: s.encoderThreads, load: s.load,
                    decodePlacement: s.decodePlacement?.description)
        error = s.error
        summary = s.summary
        recovered = s.recovered
        if let sum = s.summary { segments = sum.segments } else { segments = s.figures.segments.isEmpty ? nil : s.figures.segments }
    }
}

/// `GET /v1/takes`.
struct TakeList: Encodable {
    var takes: [TakeView]
    /// With `limit`: the id to ask `after` for the next page, when more follow.
    var next: String?
}

/// `GET /healthz`.
struct Health: Encodable {
    var status: String
    var gpu: String
    /// What every frame of the server's compositors does (`GPUPlan`), and its one-line form.
    var plan: GPUPlan
    var planLine: String
    var takes: [String: Int]
    var capacity: Capacity
    /// Nil while the start-up calibration runs.
    var cost: CostModel?
    var decoding: Decoding

    /// Decode placement (`diptych serve --decode-cores`): the budget, what
    /// the running takes placed on the CPU are charged, and why no take is
    /// placed where NVDEC is missing.
    struct Decoding: Encodable {
        var decodeCores: Double
        var placedCores: Double
        var nvdecUnavailable: String?
        var autoEncodesOnGPU: Bool
    }
}
