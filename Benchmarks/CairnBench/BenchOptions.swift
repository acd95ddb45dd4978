import Foundation

/// The command line of `cairn-bench`.
struct BenchOptions {
    enum Selection: String { case all, stages, endToEnd = "end-to-end" }

    static let usage = """
        usage: cairn-bench [--size-mib N] [--corpus DIR] [--work DIR] [--runs R]
                           [--only stages|end-to-end] [--cairn PATH] [--out DIR]

          --size-mib N   size of the generated corpus in MiB (default 1024)
          --seed S       seed of the generated corpus (default 1)
          --corpus DIR   benchmark an existing directory instead of generating one
          --work DIR     scratch space for corpora, archives, repositories (default /tmp/cairn-bench)
          --runs R       runs of every measurement; the best (lowest wall time) is reported (default 2)
          --only WHAT    stages (in-process micro-benchmarks) or end-to-end (tools), default both
          --cairn PATH   the cairn executable (default: `cairn` next to cairn-bench)
          --out DIR      where results-<date>.md/.json are written (default Benchmarks/results)
          --keep         keep archives and extracted trees in the work directory
        """

    var sizeMiB = 1024
    var seed: UInt64 = 1
    var corpus: String?
    var work = "/tmp/cairn-bench"
    var runs = 2
    var selection = Selection.all
    var cairn: String?
    var out = "Benchmarks/results"
    var keep = false

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    init(_ arguments: [String]) throws(UsageError) {
        var index = 0
        func value(_ name: String) throws(UsageError) -> String {
            guard index < arguments.count else { throw UsageError(description: "\(name) needs a value") }
            defer { index += 1 }
            return arguments[index]
        }
        while index < arguments.count {
            var name = arguments[index]
            index += 1
            var inline: String?
            if name.hasPrefix("--"), let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            func take() throws(UsageError) -> String {
                if let inline { return inline }
                return try value(name)
            }
            switch name {
            case "--size-mib":
                guard let n = Int(try take()), n > 0 else { throw UsageError(description: "--size-mib takes a positive number") }
                sizeMiB = n
            case "--seed":
                guard let n = UInt64(try take()) else { throw UsageError(description: "--seed takes a number") }
                seed = n
            case "--corpus": corpus = try take()
            case "--work": work = try take()
            case "--runs":
                guard let n = Int(try take()), n > 0 else { throw UsageError(description: "--runs takes a positive number") }
                runs = n
            case "--only":
                let text = try take()
                guard let s = Selection(rawValue: text), s != .all else {
                    throw UsageError(description: "--only takes stages or end-to-end")
                }
                selection = s
            case "--cairn": cairn = try take()
            case "--out": out = try take()
            case "--keep": keep = true
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default:
                throw UsageError(description: "unknown argument \(name)")
            }
        }
    }

    var runsStages: Bool { selection != .endToEnd }
    var runsEndToEnd: Bool { selection != .stages }
}
