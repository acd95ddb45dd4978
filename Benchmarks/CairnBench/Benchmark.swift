import Foundation
import Glibc

/// Runs what `options` asks for, prints the Markdown report and writes the result files.
///
/// - Returns: the exit status (0, or 1 when no `cairn` executable is found).
/// - Throws: ``BenchError`` or a file-system error naming what failed.
func runBenchmark(options: BenchOptions, arguments: [String]) throws -> Int32 {
    if options.realtime { try Scheduling.enterRealtime() }
    var report = Report(
        date: Date(), machine: .current(), command: (["cairn-bench"] + arguments).joined(separator: " "), runs: options.runs)
    report.pauseSeconds = options.pauseSeconds
    if options.runsEndToEnd {
        guard let cairn = locateCairn(given: options.cairn) else {
            log(
                "no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH, "
                    + "or --only stages)")
            return 1
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        let cases = try BenchCase.prepareAll(options: options, notes: &report.caseNotes)
        var e2e = EndToEnd(
            cairn: cairn, work: options.work, runs: options.runs, keep: options.keep, pauseSeconds: options.pauseSeconds,
            peerChoice: options.peerChoice)
        e2e.targets = options.targets
        e2e.corpusExtras = options.corpusExtras
        e2e.profile = options.profile
        let outcome = try e2e.run(cases: cases)
        report.cases = outcome.cases
        report.versions = outcome.versions
        report.skipped = outcome.skipped
        report.notes = outcome.notes
    }
    if options.runsTransfer {
        guard let cairn = locateCairn(given: options.cairn) else {
            log("no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH)")
            return 1
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        var corpusOptions = options
        corpusOptions.sizeMiB = options.transferMiB
        let corpus = try BenchCase.prepareCorpus(options: corpusOptions)
        var benchmark = TransferBenchmark(
            cairn: cairn, work: options.work, runs: options.runs, pauseSeconds: options.pauseSeconds, seed: options.seed, keep: options.keep)
        benchmark.seededOnly = options.selection == .trusted
        report.transfer = try benchmark.run(corpus: corpus)
    }
    if options.runsUpload {
        guard let cairn = locateCairn(given: options.cairn) else {
            log("no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH)")
            return 1
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        var corpusOptions = options
        corpusOptions.sizeMiB = options.uploadMiB
        let corpus = try BenchCase.prepareCorpus(options: corpusOptions)
        let benchmark = UploadBenchmark(cairn: cairn, work: options.work, runs: options.runs, pauseSeconds: options.pauseSeconds, keep: options.keep)
        report.upload = try benchmark.run(corpus: corpus)
    }
    if options.runsLinks {
        guard let cairn = locateCairn(given: options.cairn) else {
            log("no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH)")
            return 1
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        var corpusOptions = options
        corpusOptions.sizeMiB = options.linkMiB
        let corpus = try BenchCase.prepareCorpus(options: corpusOptions)
        let benchmark = LinkBenchmark(cairn: cairn, work: options.work, runs: options.runs, pauseSeconds: options.pauseSeconds, keep: options.keep)
        report.link = try benchmark.run(corpus: corpus)
    }
    if options.runsCheckpoint {
        guard let cairn = locateCairn(given: options.cairn) else {
            log("no cairn executable beside cairn-bench; build both with `swift build -c release` (or pass --cairn PATH)")
            return 1
        }
        log("using \(cairn)")
        try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
        report.checkpoint = try CheckpointStallBenchmark(cairn: cairn, work: options.work, mib: options.checkpointMiB, runs: options.runs).run()
    }
    if options.runsStages {
        log("stage micro-benchmarks (one core)")
        report.stages = StageBenchmarks(repetitions: max(5, options.runs + 3)).run()
    }
    report.loadAtEnd = Machine.loadAverage()
    print(report.markdown())
    let written = try report.write(to: options.outputDirectory())
    log("wrote \(written.joined(separator: ", "))")
    return 0
}

/// The `cairn` executable: `given` (a path or a name on PATH), else the one beside this
/// executable.
func locateCairn(given: String?) -> String? {
    if let given { return findExecutable(given).map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    let me = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let candidate = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("cairn").path
    return access(candidate, X_OK) == 0 ? candidate : nil
}
