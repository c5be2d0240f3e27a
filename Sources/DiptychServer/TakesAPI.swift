import Diptych
import DiptychCore
import DiptychMedia
import DiptychGPU
import Foundation

/// The routes of `diptych serve`. Each is one `add`; a take's sub-resources
/// (`/v1/takes/{id}/…`) go through `withTake`.
struct TakesAPI {
    let registry: TakeRegistry
    let gpuDescription: String
    let gpuPlan: GPUPlan
    /// Responses sent so far, by status.
    let responses: @Sendable () -> [Int: Int]
    /// The webhooks' counts (nil without `--webhook`).
    var webhooks: @Sendable () -> Webhooks.Counts? = { nil }

    func router() -> Router {
        var r = Router()
        let api = self
        r.add("GET", "/healthz") { _, _ in api.health() }
        // Probes: the process serves; it takes work now (else 503 with why).
        r.add("GET", "/livez") { _, _ in JSONOut.response(200, ["status": "live"]) }
        r.add("GET", "/readyz") { _, _ in
            if let why = api.registry.unreadiness { return RequestError.unavailable(why).response }
            return JSONOut.response(200, ["status": "ready"])
        }
        r.add("GET", "/metrics") { _, _ in api.metrics() }
        r.add("POST", "/v1/takes") { req, _ throws(RequestError) in
            let (t, existing) = try api.registry.create(req.body, idempotencyKey: req.idempotencyKey)
            return JSONOut.response(existing ? 200 : 201, api.view(t))
        }
        r.add("GET", "/v1/takes") { req, _ throws(RequestError) in
            let q = try TakeRequests.listQuery(req.arguments)
            let (list, next) = try api.registry.page(state: q.state, limit: q.limit, after: q.after)
            return JSONOut.response(200, TakeList(takes: list.map(api.view), next: next))
        }
        r.add("GET", "/v1/takes/{id}") { _, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in JSONOut.response(200, api.view(t)) }
        }
        // This host's cameras, ranked (listed even where --allow-cameras is off, so an operator sees them).
        r.add("GET", "/v1/sources") { _, _ in
            JSONOut.response(200, SourceList(cameras: SourceCamera.list(CameraListing.devices()),
                                             camerasAllowed: api.registry.settings.sourcePolicy.cameras))
        }
        r.add("GET", "/v1/events") { req, _ throws(RequestError) in
            try api.eventStream(req)
        }
        r.add("GET", "/v1/takes/{id}/snapshot") { req, p throws(RequestError) in
            let output = try TakeRequests.snapshotOutput(req.arguments)
            return try api.withTake(p) { t throws(RequestError) in
                HTTPResponse(status: 200, contentType: "image/png", body: try t.snapshotPNG(output: output, timeout: 5),
                             headers: ["Cache-Control": "no-store"])
            }
        }
        r.add("PATCH", "/v1/takes/{id}") { req, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in
                let change = try TakeRequests.patch(req.body, current: t.layout)
                try api.requireRecording(t)
                // Overlays and texts first: a bad image or font is a 400 that leaves the layout as it was.
                if let overlays = change.overlays { try t.setOverlays(api.registry.resolvingImages(overlays)) }
                if let texts = change.texts { try t.setTexts(api.registry.resolvingFonts(texts)) }
                if change.changesLayout { t.setLayout(change.layout, transition: change.transition) }
                return JSONOut.response(200, api.view(t))
            }
        }
        r.add("POST", "/v1/takes/{id}/switch") { req, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in
                let (role, request) = try TakeRequests.switchRequest(req.body)
                let spec = api.registry.sourceSpec(request)
                if let info = try MediaProbe.checked(spec, field: "source", policy: api.registry.settings.sourcePolicy) {
                    try MediaProbe.checkSize(info, field: "source")
                }
                try api.requireRecording(t)
                t.switchSource(role, to: spec)
                return JSONOut.response(202, ["id": t.id, "role": role.rawValue, "source": spec.description])
            }
        }
        r.add("POST", "/v1/takes/{id}/outputs") { req, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in
                let spec = try api.registry.outputSpec(req.body)
                try api.requireRecording(t)
                let index = try api.registry.addOutput(spec, to: t)
                return JSONOut.response(201, AddedOutput(id: t.id, index: index, out: spec.out))
            }
        }
        r.add("DELETE", "/v1/takes/{id}/outputs/{n}") { _, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in
                guard let n = Int(p["n"] ?? ""), n > 0, let summary = t.removeOutput(n) else {
                    throw .notFound("take '\(t.id)': no added output '\(p["n"] ?? "")' (the main output is 0 and ends with the take)")
                }
                return JSONOut.response(200, RemovedOutput(id: t.id, index: n, summary: summary))
            }
        }
        r.add("DELETE", "/v1/takes/{id}") { _, p throws(RequestError) in
            try api.withTake(p) { t throws(RequestError) in
                t.stop("stopped over HTTP")
                t.waitUntilEnded()
                return JSONOut.response(200, api.view(t))
            }
        }
        return r
    }

    private func withTake(_ params: [String: String], _ body: (Take) throws(RequestError) -> HTTPResponse) throws(RequestError) -> HTTPResponse {
        try body(try registry.take(params["id"] ?? ""))
    }

    /// Changes need a take that is still running.
    /// `GET /v1/events`: server-sent events from the one after `Last-Event-ID`
    /// (or `?after=N`; without either, from now on).
    func eventStream(_ req: HTTPRequest) throws(RequestError) -> HTTPResponse {
        var after = registry.events.lastID
        for (name, value) in req.arguments {
            guard name == "after" else { throw .badRequest("query '\(name)': unknown (after)") }
            guard let n = Int(value), n >= 0 else { throw .badRequest("after '\(value)': expected an event's number") }
            after = n
        }
        if let v = req.lastEventID {
            guard let n = Int(v), n >= 0 else { throw .badRequest("Last-Event-ID '\(v)': expected an event's number") }
            after = n
        }
        var r = HTTPResponse(status: 200, contentType: "text/event-stream", body: Data(), headers: ["Cache-Control": "no-store"])
        r.stream = EventStream(log: registry.events, after: after)
        return r
    }

    private func requireRecording(_ t: Take) throws(RequestError) {
        let s = t.state
        guard s == .recording || s == .starting else {
            throw .conflict("take '\(t.id)': is \(s.rawValue); only a running take can change")
        }
    }

    func view(_ t: Take) -> TakeView {
        TakeView(t.snapshot(), gpu: t.gpuTotals, model: registry.meter.model)
    }

    private func health() -> HTTPResponse {
        var counts: [String: Int] = [:]
        for t in registry.all { counts[t.state.rawValue, default: 0] += 1 }
        let model = registry.meter.model, placement = registry.settings.placement
        let status = model != nil ? "ok" : registry.meter.failure.map { "calibration failed: \($0)" } ?? "calibrating"
        return JSONOut.response(200, Health(status: status, gpu: gpuDescription, plan: gpuPlan,
                                            planLine: gpuPlan.description, takes: counts,
                                            capacity: registry.settings.capacity, cost: model,
                                            decoding: Health.Decoding(decodeCores: placement.budget,
                                                                      placedCores: model.map(registry.placedDecodeCores) ?? 0,
                                                                      nvdecUnavailable: placement.nvdecUnavailable,
                                                                      autoEncodesOnGPU: placement.autoEncodesOnGPU)))
    }

    private func metrics() -> HTTPResponse {
        let c = registry.snapshot
        let takes = c.takes.map { ($0.snapshot(), $0.gpuTotals) }
        let text = Metrics.render(takes: takes, admitted: c.admitted, refusals: c.refusals, model: registry.meter.model,
                                  capacity: registry.settings.capacity, megapixels: registry.meter.megapixels,
                                  responses: responses(), version: DiptychVersion.string, draining: registry.isDraining,
                                  process: .current(cpuSeconds: ProcessCPU.seconds()), retiredFrames: c.retiredFrames,
                                  webhooks: webhooks(), renderThreads: registry.renderThreadLoads,
                                  decodeBudget: registry.settings.placement.budget)
        return HTTPResponse(status: 200, contentType: Metrics.contentType, body: Data(text.utf8))
    }
}

/// `POST /v1/takes/{id}/outputs`: the output's index (for `DELETE`) and where it writes.
struct AddedOutput: Encodable {
    var id: String
    var index: Int
    var out: String
}

/// `DELETE /v1/takes/{id}/outputs/{n}`: the output removed and what it received.
struct RemovedOutput: Encodable {
    var id: String
    var index: Int
    var summary: OutputSummary
    enum Keys: String, CodingKey { case id, index, output, frames, failure, dropped, outages, lost, canvas, frameRate, bitrate, segments }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(id, forKey: .id)
        try c.encode(index, forKey: .index)
        try c.encode(summary.output, forKey: .output)
        try c.encode(summary.frames, forKey: .frames)
        try c.encodeIfPresent(summary.failure, forKey: .failure)
        try c.encode(summary.dropped, forKey: .dropped)
        try c.encode(summary.outages, forKey: .outages)
        try c.encodeIfPresent(summary.lost, forKey: .lost)
        try c.encodeIfPresent(summary.canvas, forKey: .canvas)
        try c.encodeIfPresent(summary.frameRate, forKey: .frameRate)
        try c.encodeIfPresent(summary.bitrate, forKey: .bitrate)
        try c.encodeIfPresent(summary.segments, forKey: .segments)
    }
}

/// `GET /v1/sources`: this host's cameras (`SourceCamera.list`: ranked,
/// then the nodes that capture no video) and whether takes may name them.
struct SourceList: Encodable {
    var cameras: [SourceCamera]
    /// Whether takes may name cameras (`diptych serve --allow-cameras`).
    var camerasAllowed: Bool
}
