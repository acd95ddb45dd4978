import Foundation
import Glibc

// cairn-bench: Cairn against its peers, end to end, and each stage alone. See Benchmarks/README.md.

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    let options = try BenchOptions(arguments)
    exit(try runBenchmark(options: options, arguments: arguments))
} catch let error as BenchOptions.UsageError {
    FileHandle.standardError.write(Data("cairn-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
} catch {
    log("error: \(error)")
    exit(1)
}
