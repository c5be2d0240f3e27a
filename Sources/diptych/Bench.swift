import Foundation

/// `diptych bench` (see bench/README.md).
enum Bench {
    static func run(arguments: [String]) -> Never {
        fail("bench: not available in this build", code: 1)
    }
}
