import Foundation
import Testing

/// The Python package (`python/`) under pytest, against what this build
/// made: `scripts/install` into a temporary prefix (libdiptych.so for
/// `diptych.Session`) and the `diptych` executable (for `diptych serve`,
/// which `diptych.Client` and the two-node Ray cluster of `diptych.ray`
/// drive). The virtual environment (NumPy, pytest, Ray from PyPI) lives in
/// the build folder and is kept between runs; only the package is
/// installed again each time.
@Suite(.serialized) struct PythonPackageTests {
    static let requirements = ["numpy", "pytest", "ray>=2.9", "mypy", "pyyaml", "setuptools>=64", "wheel"]
    static var venv: URL { EmbeddingCAPITests.root.appendingPathComponent(".build/python-venv") }

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// The environment with `requirements` installed, made once per build folder.
    static func environment() throws -> URL {
        let stamp = venv.appendingPathComponent("diptych-requirements.txt")
        let want = requirements.joined(separator: "\n") + "\n"
        let python = venv.appendingPathComponent("bin/python")
        if FileManager.default.isExecutableFile(atPath: python.path),
           (try? String(contentsOf: stamp, encoding: .utf8)) == want,
           (try? EmbeddingCAPITests.sh("'\(python.path)' -c 'import numpy, pytest, ray, mypy, yaml'"))?.status == 0 {
            return python
        }
        let words = requirements.map { "'\($0)'" }.joined(separator: " ")
        let made = try EmbeddingCAPITests.sh(
            "python3 -m venv --clear '\(venv.path)' && '\(python.path)' -m pip install -q --disable-pip-version-check \(words)")
        guard made.status == 0 else { throw Failed(description: "the virtual environment failed (\(made.status)): \(made.output)") }
        try want.write(to: stamp, atomically: true, encoding: .utf8)
        return python
    }

    @Test func pytestPasses() throws {
        let python = try Self.environment()
        let installed = try EmbeddingCAPITests.sh(
            "'\(python.path)' -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./python")
        #expect(installed.status == 0, "pip install ./python: \(installed.output)")
        guard installed.status == 0 else { return }
        guard let bin = EmbeddingCAPITests.binDirectory else { throw Failed(description: "the build's products are not found") }
        let binary = bin.appendingPathComponent("diptych")
        #expect(FileManager.default.isExecutableFile(atPath: binary.path), "\(binary.path) is not built")
        try EmbeddingCAPITests.withInstall { prefix in
            let env = ["DIPTYCH_LIBRARY": prefix.appendingPathComponent("lib/libdiptych.so.0").path,
                       "DIPTYCH_BINARY": binary.path, "PYTHONDONTWRITEBYTECODE": "1"]
            let run = try EmbeddingCAPITests.sh(
                "cd python && '\(python.path)' -m pytest -q -p no:cacheprovider tests 2>&1", environment: env)
            let tail = String(run.output.suffix(12_000))
            #expect(run.status == 0, "pytest exited \(run.status):\n\(tail)")
            #expect(run.output.contains(" passed"), "\(tail)")
            #expect(!run.output.contains(" failed") && !run.output.contains(" error"), "\(tail)")
        }
    }
}
