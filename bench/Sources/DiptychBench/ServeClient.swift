import CFFmpeg
import Foundation

/// Requests to a `diptych serve` on loopback, through FFmpeg's HTTP client
/// (libavformat's `http` protocol, which the product links already): a GET,
/// or a POST of a JSON body. One connection a request.
struct ServeClient: Sendable {
    /// `http://127.0.0.1:PORT`.
    let base: String

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    func get(_ path: String) throws(Failure) -> Data { try request(path, post: nil) }

    func post(_ path: String, json: Data) throws(Failure) -> Data { try request(path, post: json) }

    /// The JSON object of a GET.
    func object(_ path: String) throws(Failure) -> [String: Any] {
        let data = try get(path)
        guard let o = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw Failure(description: "GET \(path): not a JSON object")
        }
        return o
    }

    private func request(_ path: String, post: Data?) throws(Failure) -> Data {
        let url = base + path
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        // Binary options read as hex from a dictionary.
        if let post {
            av_dict_set(&options, "post_data", post.map { String(format: "%02x", $0) }.joined(), 0)
            av_dict_set(&options, "content_type", "application/json", 0)
            av_dict_set(&options, "method", "POST", 0)
        }
        av_dict_set(&options, "rw_timeout", "30000000", 0)
        var io: UnsafeMutablePointer<AVIOContext>?
        let opened = avio_open2(&io, url, AVIO_FLAG_READ, nil, &options)
        guard opened >= 0, let io else { throw Failure(description: "\(post == nil ? "GET" : "POST") \(url): \(Self.message(opened))") }
        defer { var c: UnsafeMutablePointer<AVIOContext>? = io; avio_closep(&c) }
        var body = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBufferPointer { avio_read(io, $0.baseAddress, Int32($0.count)) }
            if n > 0 { body.append(contentsOf: buffer[0..<Int(n)]); continue }
            if n == 0 || n == diptych_averror_eof() { break }
            throw Failure(description: "GET \(url): reading the answer: \(Self.message(n))")
        }
        return body
    }

    static func message(_ code: Int32) -> String {
        var buf = [CChar](repeating: 0, count: 128)
        return buf.withUnsafeMutableBufferPointer { String(cString: diptych_av_err2str(code, $0.baseAddress, $0.count)) }
    }
}
