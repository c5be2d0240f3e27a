import Foundation
import Testing
@testable import Diptych

/// The C API end to end, as a capture program sees it: `scripts/install`
/// into a temporary prefix (from the library `swift test` just built), the
/// C example compiled with nothing but `pkg-config --cflags --libs diptych`,
/// run without LD_LIBRARY_PATH; then the Python ctypes example.
@Suite(.serialized) struct EmbeddingCAPITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The folder holding the products of this build (libDiptychEmbedded.so).
    static var binDirectory: URL? {
        var candidates: [URL] = []
        if let exe = CommandLine.arguments.first { candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent()) }
        candidates.append(Bundle.main.bundleURL)
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        candidates.append(root.appendingPathComponent(".build/debug"))
        candidates.append(root.appendingPathComponent(".build/release"))
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("libDiptychEmbedded.so").path) }
    }

    struct Run { var status: Int32; var output: String }

    /// Runs `command` with bash in the package root; stdout and stderr together.
    static func sh(_ command: String, environment: [String: String] = [:]) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", command]
        p.currentDirectoryURL = root
        var env = ProcessInfo.processInfo.environment
        env["LD_LIBRARY_PATH"] = nil
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    /// Installs into a fresh temporary prefix; `body` runs with it, then it is removed.
    static func withInstall(_ body: (URL) throws -> Void) throws {
        struct Failed: Error, CustomStringConvertible { var description: String }
        guard let bin = binDirectory else { throw Failed(description: "libDiptychEmbedded.so not found next to the test binary") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diptych-install-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try sh("scripts/install --no-build --build-dir '\(bin.path)' '\(dir.path)'")
        guard r.status == 0 else { throw Failed(description: "scripts/install failed (\(r.status)): \(r.output)") }
        try body(dir)
    }

    @Test func installedLayoutAndPkgConfig() throws { try Self.withInstall { prefix in
        let fm = FileManager.default
        for path in ["include/diptych.h", "lib/libdiptych.so.0", "lib/libdiptych.so", "lib/pkgconfig/diptych.pc",
                     "lib/diptych/libswiftCore.so", "lib/diptych/libFoundation.so"] {
            #expect(fm.fileExists(atPath: prefix.appendingPathComponent(path).path), "missing \(path)")
        }
        let env = ["PKG_CONFIG_PATH": prefix.appendingPathComponent("lib/pkgconfig").path]
        let version = try Self.sh("pkg-config --modversion diptych", environment: env)
        #expect(version.status == 0)
        #expect(version.output.trimmingCharacters(in: .whitespacesAndNewlines) == DiptychVersion.string)
        let flags = try Self.sh("pkg-config --cflags --libs diptych", environment: env)
        #expect(flags.output.contains("-I\(prefix.path)/include"))
        #expect(flags.output.contains("-ldiptych"))
        // The library finds its Swift runtime in PREFIX/lib/diptych, not in the toolchain.
        let elf = try Self.sh("readelf -d '\(prefix.path)/lib/libdiptych.so.0'")
        #expect(elf.output.contains("[libdiptych.so.0]"), "SONAME: \(elf.output)")
        #expect(elf.output.contains("$ORIGIN/diptych"), "RUNPATH: \(elf.output)")
        #expect(!elf.output.contains("/opt/swift"), "RUNPATH must not point into the toolchain: \(elf.output)")
    } }

    @Test func cExamplePushesFramesAndChecksPixels() throws { try Self.withInstall { prefix in
        let exe = prefix.appendingPathComponent("push_frames").path
        let ts = prefix.appendingPathComponent("push_frames.ts").path
        let env = ["PKG_CONFIG_PATH": prefix.appendingPathComponent("lib/pkgconfig").path]
        let build = try Self.sh("cc -std=c11 -Wall -Wextra -Werror examples/c/push_frames.c $(pkg-config --cflags --libs diptych) -o '\(exe)'", environment: env)
        #expect(build.status == 0, "cc: \(build.output)")
        guard build.status == 0 else { return }
        let run = try Self.sh("'\(exe)' '\(ts)'")
        #expect(run.status == 0, "push_frames: \(run.output)")
        #expect(run.output.contains("push_frames: OK"))
        #expect(run.output.contains("rgba frames 30, packets 30"))
        #expect(run.output.contains("small stride -> primary frame: plane 0 stride 640 < minimum 1280"))
        #expect(run.output.contains("pts backwards -> "))
        #expect(run.output.contains("push after finish -> "))
        // Every Swift runtime library came from the prefix.
        let ldd = try Self.sh("ldd '\(exe)'")
        for line in ldd.output.split(separator: "\n") where line.contains("libswiftCore") || line.contains("libFoundation.so") {
            #expect(line.contains(prefix.path), "\(line)")
        }
        // The file output of the same session plays: 30 frames.
        let probe = try Self.sh("ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 '\(ts)'")
        let counts = probe.output.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        #expect(counts.first == "30", "ffprobe: \(probe.output)")
    } }

    @Test func pythonCtypesExample() throws { try Self.withInstall { prefix in
        let run = try Self.sh("python3 examples/python/push_frames.py '\(prefix.path)/lib/libdiptych.so.0'")
        #expect(run.status == 0, "push_frames.py: \(run.output)")
        #expect(run.output.contains("push_frames.py: OK"))
    } }
}
