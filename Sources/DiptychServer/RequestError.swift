import Foundation

/// Why a request is refused; each case is one HTTP status, and the message
/// is one line naming the input and what is wrong.
public enum RequestError: Error, Hashable, Sendable, CustomStringConvertible {
    case badRequest(String)          // 400
    case unauthorized(String)        // 401
    case notFound(String)            // 404
    case methodNotAllowed(String, allow: [String])  // 405
    case conflict(String)            // 409
    case tooLarge(String)            // 413
    case unavailable(String)         // 503
    case failed(String)              // 500
    case badGateway(String)          // 502: an output's receiver could not be reached
    case gatewayTimeout(String)      // 504: a source did not answer before its timeout

    public var status: Int {
        switch self {
        case .badRequest: 400
        case .unauthorized: 401
        case .notFound: 404
        case .methodNotAllowed: 405
        case .conflict: 409
        case .tooLarge: 413
        case .unavailable: 503
        case .failed: 500
        case .badGateway: 502
        case .gatewayTimeout: 504
        }
    }

    public var description: String {
        switch self {
        case .badRequest(let m), .unauthorized(let m), .notFound(let m), .methodNotAllowed(let m, _),
             .conflict(let m), .tooLarge(let m), .unavailable(let m), .failed(let m), .badGateway(let m), .gatewayTimeout(let m): m
        }
    }

    var response: HTTPResponse {
        var r = HTTPErrors.response(status, description)
        if case .methodNotAllowed(_, let allow) = self { r.headers["Allow"] = allow.joined(separator: ", ") }
        if case .unauthorized = self { r.headers["WWW-Authenticate"] = "Bearer" }
        return r
    }
}

/// JSON bodies: `{"error": "…"}` for errors, any `Encodable` otherwise.
enum HTTPErrors {
    static func response(_ status: Int, _ message: String) -> HTTPResponse {
        let line = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        return HTTPResponse(status: status, body: JSONOut.encode(["error": line]))
    }
}

enum JSONOut {
    /// Sorted keys, one line per document plus a newline (easy to read with curl).
    static func encode<T: Encodable>(_ value: T) -> Data {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        var d = (try? e.encode(value)) ?? Data("{}".utf8)
        d.append(0x0A)
        return d
    }

    static func response<T: Encodable>(_ status: Int, _ value: T) -> HTTPResponse {
        HTTPResponse(status: status, body: encode(value))
    }
}
