import DiptychBench
import Foundation

/// `diptych bench` (see bench/README.md): the benchmark lives in the
/// `DiptychBench` target under bench/.
enum Bench {
    static func run(arguments: [String]) -> Never {
        // The table went to stdout: a failed write to it is reported (`Console.finish`).
        exit(Console.finish(DiptychBench.run(arguments: arguments)))
    }
}
