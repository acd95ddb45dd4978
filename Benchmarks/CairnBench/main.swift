import Foundation
import Glibc

// cairn-bench: Cairn against its peers, end to end, and each stage alone. See Benchmarks/README.md.

let arguments = Array(CommandLine.arguments.dropFirst())
let options: BenchOptions
do {
    options = try BenchOptions(arguments)
} catch {
    FileHandle.standardError.write(Data("cairn-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}

/// The `cairn` executable: --cairn, else the one beside this executable.
func locateCairn() -> String? {
    if let given = options.cairn { return findExecutable(given).map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    let me = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let candidate = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("cairn").path
    return access(candidate, X_OK) == 0 ? candidate : nil
}

var report = Report(
    date: Date(), machine: .current(), command: (["cairn-bench"] + arguments).joined(separator: " "), runs: options.runs)

do {
    if options.runsEndToEnd {
        guard let cairn = locateCairn() else {
            log(
                "no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH, "
                    + "or --only stages)")
            exit(1)
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        let corpus = try Corpus.prepare(options: options)
        report.corpus = corpus
        let warm = corpus.warm()
        report.warmRead = warm
        log(String(format: "warmed the page cache: %@ in %.2f s", formatMiB(warm.bytes), warm.seconds))
        let e2e = EndToEnd(corpus: corpus, cairn: cairn, work: options.work, runs: options.runs, keep: options.keep)
        let outcome = try e2e.run()
        report.endToEnd = outcome.results
        report.versions = outcome.versions
        report.skipped = outcome.skipped
        report.notes = outcome.notes
    }
    if options.runsStages {
        log("stage micro-benchmarks (one core)")
        report.stages = StageBenchmarks(repetitions: max(5, options.runs + 3)).run()
    }
    report.loadAtEnd = Machine.loadAverage()
    print(report.markdown())
    let written = try report.write(to: options.out)
    log("wrote \(written.joined(separator: " and "))")
} catch {
    log("error: \(error)")
    exit(1)
}
