import DiptychCore
import DiptychGPU
import DiptychOptions
import Foundation
import Testing
@testable import DiptychServer

/// docs/openapi.yaml: the same routes as the server's router, the same
/// request keys as the option table, and a live server fuzzed from it with
/// schemathesis (PyPI): no 5xx, every response as the document says.
@Suite(.serialized) struct ServeOpenAPITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let spec = root.appendingPathComponent("docs/openapi.yaml")

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// Runs `command` with bash; its status and its output and errors together.
    static func sh(_ command: String, timeout: Double = 900) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", command]
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let out = Drain(pipe.fileHandleForReading)
        let deadline = Date(timeIntervalSinceNow: timeout)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        out.wait()
        return (p.terminationStatus, out.text)
    }

    /// The document as JSON, read by PyYAML (scripts/setup installs python3-yaml).
    static func document() throws -> [String: Any] {
        let r = try sh("python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)' '\(spec.path)'")
        guard r.status == 0, let doc = (try? JSONSerialization.jsonObject(with: Data(r.output.utf8))) as? [String: Any] else {
            throw Failed(description: "docs/openapi.yaml cannot be read: \(r.output)")
        }
        return doc
    }

    /// `$ref`s followed, so a schema's properties can be walked.
    static func resolve(_ schema: Any?, in doc: [String: Any]) -> [String: Any] {
        guard var s = schema as? [String: Any] else { return [:] }
        while let ref = s["$ref"] as? String, ref.hasPrefix("#/") {
            var node: Any = doc
            for part in ref.dropFirst(2).split(separator: "/") { node = (node as? [String: Any])?[String(part)] ?? [:] }
            s = node as? [String: Any] ?? [:]
        }
        return s
    }

    /// Every key path the schema's properties spell (`layout.pip.corner`),
    /// objects and leaves; a path in `leaves` is not walked into (an option
    /// whose value is an object, such as `alsoOut`'s outputs or a rectangle).
    static func keyPaths(_ schema: Any?, in doc: [String: Any], prefix: String = "", leaves: Set<String> = []) -> Set<String> {
        let props = resolve(schema, in: doc)["properties"] as? [String: Any] ?? [:]
        var out: Set<String> = []
        for (name, sub) in props {
            let path = prefix.isEmpty ? name : prefix + "." + name
            out.insert(path)
            if !leaves.contains(path) { out.formUnion(keyPaths(sub, in: doc, prefix: path, leaves: leaves)) }
        }
        return out
    }

    @Test func documentMatchesTheRoutesAndTheOptionTable() throws {
        let doc = try Self.document()
        #expect((doc["openapi"] as? String)?.hasPrefix("3.1") == true)

        // The routes: the router's, built as the server builds it.
        let pool = try CompositorPool(selection: GPUSelection(parsing: "software")!, contexts: 1, log: { _ in })
        defer { pool.shutdown() }
        let settings = TakeRegistry.Settings(maxTakes: 1, capacity: Capacity(cpuCores: 1, gpuMsPerSecond: .infinity), serverGPU: "software",
                                             outputRoot: nil, encoderCores: 1, encoderThreads: nil)
        let registry = TakeRegistry(settings: settings, pool: pool, meter: CostMeter(), store: nil, log: { _ in })
        let routes = Set(TakesAPI(registry: registry, gpuDescription: "", gpuPlan: pool.plan, responses: { [:] }).router().table)
        let paths = doc["paths"] as? [String: [String: Any]] ?? [:]
        let documented = Set(paths.flatMap { path, item in
            item.keys.filter { ["get", "post", "put", "patch", "delete"].contains($0) }.map { "\($0.uppercased()) \(path)" }
        })
        #expect(routes == documented, "routes not documented: \(routes.subtracting(documented).sorted()); documented, not routed: \(documented.subtracting(routes).sorted())")
        // Every operation has an id (the Python client is checked by them) and a documented success.
        for (path, item) in paths {
            for (method, op) in item where method != "parameters" {
                let o = op as? [String: Any] ?? [:]
                #expect(o["operationId"] is String, "\(method) \(path)")
                #expect((o["responses"] as? [String: Any])?.keys.contains { $0.hasPrefix("2") } == true, "\(method) \(path)")
            }
        }

        // The take's configuration: the option table's JSON keys, no more, no fewer.
        let schemas = (doc["components"] as? [String: Any])?["schemas"] as? [String: Any] ?? [:]
        let options = Set(Option.table.filter { $0.scopes.contains(.json) }.compactMap(\.keyPath))
        let spelled = Self.keyPaths(schemas["TakeConfiguration"], in: doc, leaves: options)
        let prefixes = Set(options.flatMap { p in
            let parts = p.split(separator: ".")
            return (1...parts.count).map { parts.prefix($0).joined(separator: ".") }
        })
        #expect(options.isSubset(of: spelled), "options not in TakeConfiguration: \(options.subtracting(spelled).sorted())")
        let extra = spelled.subtracting(prefixes)
        #expect(extra.isEmpty, "TakeConfiguration keys no option has: \(extra.sorted())")
        // An output's object (alsoOut's entries, POST .../outputs): the keys the decoder takes, its own encoding's included.
        let outputSpec = Self.resolve(schemas["OutputSpec"], in: doc)["properties"] as? [String: Any] ?? [:]
        #expect(Set(outputSpec.keys) == OptionParser.outputKeys, "OutputSpec: \(outputSpec.keys.sorted()), the decoder: \(OptionParser.outputKeys.sorted())")
        // The layout a PATCH takes is the configuration's, and so are its transition, texts and overlays.
        let patch = Self.resolve(((((paths["/v1/takes/{id}"]?["patch"] as? [String: Any])?["requestBody"] as? [String: Any])?["content"]
            as? [String: Any])?["application/json"] as? [String: Any])?["schema"], in: doc)
        #expect(Self.keyPaths(patch, in: doc, leaves: options)
                == Set(spelled.filter { $0 == "layout" || $0.hasPrefix("layout.") || $0 == "transition" || $0 == "texts" || $0 == "overlays" }))
    }

    /// The test's own virtual environment with schemathesis from PyPI, made
    /// once per build folder (a folder of its own: the Python package's
    /// tests rebuild theirs when their requirements change, possibly while
    /// this suite runs).
    static func schemathesis() throws -> URL {
        let venv = root.appendingPathComponent(".build/python-venv-schemathesis")
        let st = venv.appendingPathComponent("bin/st")
        if FileManager.default.isExecutableFile(atPath: st.path), try sh("'\(st.path)' --version").status == 0 { return st }
        let made = try sh("python3 -m venv --clear '\(venv.path)' && '\(venv.path)/bin/python' -m pip install -q --disable-pip-version-check 'schemathesis>=4,<5'")
        guard made.status == 0 else { throw Failed(description: "installing schemathesis failed (\(made.status)): \(made.output)") }
        return st
    }

    @Test(.timeLimit(.minutes(15))) func liveServerFuzzedFromTheDocument() throws {
        let st = try Self.schemathesis()
        let dir = Scratch(); defer { dir.remove() }
        let server = try ServeProcess([], in: dir.path)
        defer { server.stop() }
        // /v1/events is a stream that stays open: it is read by ServeEventsTests instead.
        let r = try Self.sh("cd '\(dir.path)' && '\(st.path)' run '\(Self.spec.path)' --url http://127.0.0.1:\(server.port) "
                            + "--checks not_a_server_error,response_schema_conformance --exclude-path /v1/events "
                            + "--max-examples 20 --generation-deterministic --request-timeout 60 --no-color 2>&1")
        let tail = String(r.output.suffix(8000))
        #expect(r.status == 0, "schemathesis: \(tail)")
        #expect(r.output.contains(" passed") && !r.output.contains("failures"), "\(tail)")
        // Every operation but the stream was tested, and the document's example take was made.
        let operations = try #require(r.output.firstMatch(of: /Operations:\s+(\d+) selected \/ (\d+) total/))
        #expect(Int(operations.2) == Int(operations.1)! + 1, "\(tail)")
        #expect(r.output.contains("Tested: \(operations.1)"), "\(tail)")
        #expect(FileManager.default.fileExists(atPath: dir.path("take.mp4")), "\(tail)")
    }
}
