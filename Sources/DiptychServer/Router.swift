/// Method + path pattern → handler. Patterns are `/`-separated segments;
/// `{name}` matches one segment and is passed to the handler by name, so a
/// new route (`POST /v1/takes/{id}/outputs`, say) is one `add` call.
struct Router: Sendable {
    typealias Handler = @Sendable (HTTPRequest, _ params: [String: String]) throws(RequestError) -> HTTPResponse

    private struct Route: Sendable {
        var method: String
        var segments: [String]
        var handler: Handler
    }
    private var routes: [Route] = []

    mutating func add(_ method: String, _ pattern: String, _ handler: @escaping Handler) {
        routes.append(Route(method: method, segments: Self.segments(pattern), handler: handler))
    }

    /// Every route as `METHOD /pattern`, in the order added (docs/openapi.yaml is checked against it).
    var table: [String] { routes.map { "\($0.method) /" + $0.segments.joined(separator: "/") } }

    static func segments(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// The parameters when `pattern` matches `path`, else nil.
    private static func match(_ pattern: [String], _ path: [String]) -> [String: String]? {
        guard pattern.count == path.count else { return nil }
        var params: [String: String] = [:]
        for (p, s) in zip(pattern, path) {
            if p.hasPrefix("{") && p.hasSuffix("}") { params[String(p.dropFirst().dropLast())] = s }
            else if p != s { return nil }
        }
        return params
    }

    /// Runs the matching route: 404 when no pattern matches the path, 405
    /// (with `Allow`) when one does under another method.
    func handle(_ request: HTTPRequest) throws(RequestError) -> HTTPResponse {
        let path = Self.segments(request.path)
        var allowed: [String] = []
        for r in routes {
            guard let params = Self.match(r.segments, path) else { continue }
            if r.method == request.method || (request.method == "HEAD" && r.method == "GET") {
                return try r.handler(request, params)
            }
            allowed.append(r.method)
        }
        if !allowed.isEmpty {
            throw .methodNotAllowed("\(request.method) \(request.path): not allowed (allowed: \(allowed.joined(separator: ", ")))",
                                    allow: allowed)
        }
        throw .notFound("\(request.path): no such resource")
    }
}
