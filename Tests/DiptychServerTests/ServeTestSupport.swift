import DiptychCore
import DiptychMedia
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A temporary folder removed by `remove()`.
struct Scratch {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-serve-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    var path: String { url.path }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// The built `diptych` executable next to the test bundle.
func diptychExecutable() throws -> URL {
    let dirs = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")]
    let found = dirs.map { $0.appendingPathComponent("diptych") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    return try #require(found, "the diptych executable is not built")
}

/// Bytes read from a pipe on a thread of their own.
final class Drain: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)
    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.withLock { data.append(chunk) }
            }
            done.signal()
        }
    }
    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    func wait() { done.wait(); done.signal() }
}

/// One HTTP answer.
struct Answer {
    var status: Int
    var body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
    /// The one-line reason of an error answer.
    var error: String { json["error"] as? String ?? "" }
}

/// A `diptych serve` process on a free loopback port (or one that failed to start).
final class ServeProcess: @unchecked Sendable {
    let process = Process()
    let stdout: Drain
    let stderr: Drain
    private(set) var port: UInt16 = 0
    var token: String?

    /// Starts `diptych serve ARGS` in `directory` and waits for its "listening" line.
    init(_ args: [String], in directory: String, listen: String = "127.0.0.1:0", waitForListening: Bool = true,
         environment: [String: String] = [:]) throws {
        process.executableURL = try diptychExecutable()
        process.arguments = ["serve", "--listen", listen, "--gpu", "software"] + args
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        stdout = Drain(out.fileHandleForReading)
        stderr = Drain(err.fileHandleForReading)
        guard waitForListening else { return }
        let deadline = Date(timeIntervalSinceNow: 60)
        while Date() < deadline && process.isRunning {
            if let line = stdout.text.split(separator: "\n").first(where: { $0.contains("listening on http://") }),
               let p = line.split(separator: ":").last.flatMap({ UInt16($0) }) {
                port = p
                return
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        Issue.record("diptych serve did not start: \(stderr.text)")
        throw CancellationError()
    }

    /// Waits for the process to exit; returns its status (SIGKILL after `timeout`).
    @discardableResult
    func waitForExit(timeout: Double = 60) -> Int32 {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            Issue.record("diptych serve did not exit: \(stderr.text)")
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        stdout.wait(); stderr.wait()
        return process.terminationStatus
    }

    /// Signals the server while it runs. An exited process's pid is never
    /// signalled: it may be another process's by now.
    func signal(_ sig: Int32) { if process.isRunning { kill(process.processIdentifier, sig) } }

    /// Stops the server (SIGTERM) unless it has already exited.
    func stop() { if process.isRunning { signal(SIGTERM); waitForExit() } }

    /// One request over loopback with URLSession.
    func request(_ method: String, _ path: String, _ body: String? = nil, token: String? = nil,
                 headers: [String: String] = [:]) throws -> Answer {
        var r = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        r.httpMethod = method
        for (name, value) in headers { r.setValue(value, forHTTPHeaderField: name) }
        r.timeoutInterval = 60
        if let body { r.httpBody = Data(body.utf8); r.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        if let t = token ?? self.token { r.setValue("Bearer \(t)", forHTTPHeaderField: "Authorization") }
        final class Box: @unchecked Sendable { var answer: Answer?; var error: (any Error)? }
        var box = Box()
        // A connection refused while the server runs never reached it (a
        // loaded machine's loopback, or no local port free for a moment): it is
        // tried again, twice. Once the server has exited, the failure is said.
        for attempt in 0..<3 {
            if attempt > 0 { Thread.sleep(forTimeInterval: 0.25) }
            box = Box()
            let done = DispatchSemaphore(value: 0)
            URLSession.shared.dataTask(with: r) { [box] data, response, error in
                if let http = response as? HTTPURLResponse { box.answer = Answer(status: http.statusCode, body: data ?? Data()) }
                box.error = error
                done.signal()
            }.resume()
            done.wait()
            if let a = box.answer { return a }
            let refused = (box.error as NSError?).map { $0.domain == NSURLErrorDomain && $0.code == NSURLErrorCannotConnectToHost } ?? false
            guard refused, process.isRunning else { break }
        }
        throw RequestFailed(request: "\(method) \(path)", error: box.error ?? URLError(.badServerResponse),
                            server: process.isRunning ? "running" : "exited (\(process.terminationReason == .uncaughtSignal ? "signal" : "status") \(process.terminationStatus))",
                            stderr: stderr.text)
    }

    /// A request that got no answer: what the server was doing then, and the end of what it said.
    struct RequestFailed: Error, CustomStringConvertible {
        let request: String, error: any Error, server: String, stderr: String
        var description: String {
            "\(request): \(error.localizedDescription); the server \(server); its stderr ends: \(stderr.suffix(2000))"
        }
    }

    /// The take's JSON.
    func take(_ id: String) throws -> [String: Any] { try request("GET", "/v1/takes/\(id)").json }

    /// Polls the take until `condition` holds (or `timeout`); returns its last JSON.
    @discardableResult
    func waitForTake(_ id: String, timeout: Double = 60, _ condition: ([String: Any]) -> Bool) throws -> [String: Any] {
        let deadline = Date(timeIntervalSinceNow: timeout)
        var t = try take(id)
        while !condition(t) && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            t = try take(id)
        }
        #expect(condition(t), "take \(id) never got there: \(t["state"] ?? "?") \(t["frames"] ?? "?") \(t["error"] ?? "")")
        return t
    }
}

func frames(_ t: [String: Any]) -> Int { t["frames"] as? Int ?? -1 }
func state(_ t: [String: Any]) -> String { t["state"] as? String ?? "" }

/// A JSON body from a dictionary.
func json(_ object: [String: Any]) -> String {
    String(decoding: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
}

/// Every frame of a file, decoded with libavcodec.
func decodeAll(_ path: String) throws -> [VideoFrame] {
    let source = try MediaSources.open(.url(path))
    defer { source.close() }
    var out: [VideoFrame] = []
    while let f = try source.nextFrame() { out.append(f); if out.count > 20_000 { break } }
    return out
}

/// Y, U, V at (x, y) of an NV12 or I420 frame.
func yuv(_ f: VideoFrame, _ x: Int, _ y: Int) -> (y: Int, u: Int, v: Int) {
    func at(_ plane: Int, _ offset: Int) -> Int {
        Int(f.planes[plane].baseAddress.load(fromByteOffset: offset, as: UInt8.self))
    }
    let luma = at(0, y * f.planes[0].stride + x)
    if f.format == .nv12 {
        let o = (y / 2) * f.planes[1].stride + (x / 2) * 2
        return (luma, at(1, o), at(1, o + 1))
    }
    return (luma, at(1, (y / 2) * f.planes[1].stride + x / 2), at(2, (y / 2) * f.planes[2].stride + x / 2))
}

enum Hue { case red, green, blue, other }
/// The solid colour at (x, y): BT.709 limited red has V ≈ 240, blue U ≈ 240, green both low.
func hue(_ f: VideoFrame, _ x: Int, _ y: Int) -> Hue {
    let c = yuv(f, x, y)
    if c.v > 200 && c.u < 128 { return .red }
    if c.u > 200 && c.v < 140 { return .blue }
    if c.u < 80 && c.v < 80 && c.y > 120 { return .green }
    return .other
}
