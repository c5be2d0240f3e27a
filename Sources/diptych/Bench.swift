import DiptychBench
import Foundation

/// `diptych bench` (see bench/README.md): the benchmark lives in the
/// `DiptychBench` target under bench/.
enum Bench {
    static func run(arguments: [String]) -> Never {
        exit(DiptychBench.run(arguments: arguments))
    }
}
