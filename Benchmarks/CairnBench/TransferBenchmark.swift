import CairnTestSupport
import Foundation
import Glibc

/// What issue 10's transfer benchmark measures, each against its peer.
enum TransferMeasure: String, CaseIterable {
    case full = "full fetch"
    case resume50 = "resume after a cut at 50%"
    case resume90 = "resume after a cut at 90%"
    case seeded = "seeded delta"
    case remoteExtract = "remote extract of one file"
    /// Issue 23: a 5 MiB file and 3 copies extracted from a URL (with a PATH, so by ranges): each
    /// stored record crosses the wire once.
    case remoteExtractDeduplicated = "remote extract of a file and 3 copies"
    /// Issue 23: `extract URL` killed early, then `extract URL --resume`: only what is missing.
    case remoteExtractResume = "remote extract --resume after a cut at 10%"

    /// The share of the archive at which a resume measurement cuts the first run.
    var cutFraction: Double? {
        switch self {
        case .resume50: 0.5
        case .resume90: 0.9
        case .remoteExtractResume: 0.1
        default: nil
        }
    }
}

/// Tool names of the transfer case, as the report shows them.
enum TransferTool {
    static let cairn = "cairn fetch"
    static let cairnSeeded = "cairn fetch --seed old.cairn"
    static let cairnExtract = "cairn extract URL"
    static let curl = "curl -o"
    /// `curl -o F URL && sync F`: `cairn fetch` fsyncs FILE before renaming it into place.
    static let curlSync = "curl -o + sync"
    static let curlResume = "curl -C -"
    static let zsync = "zsync -i old.cairn"
    /// Issue 25: the seeded fetch of an encrypted export with the previous encrypted export of
    /// the same maker as the seed, opened with `--identity`.
    static let cairnSeededEncrypted = "cairn fetch --seed old-encrypted.cairn --identity"
}

/// One round of one transfer step.
struct TransferRun {
    var round: Int
    /// The timed command: the whole step, or for a resume the rerun after the cut.
    var result: ProcessResult
    /// HTTP body bytes nginx sent for the step (its access log; for a resume both runs).
    var bodyBytes: UInt64
    /// Requests nginx logged for the step.
    var requests: Int
    /// For a resume: the size of the file being written when the first run was killed, and the
    /// body bytes nginx sent to that first run.
    var cutAtBytes: UInt64?
    var firstRunBodyBytes: UInt64?
    /// Cairn's own count (`--json` `fetchedBytes` of the timed run), a check against nginx's.
    var reportedBytes: UInt64?
}

/// One transfer step of one tool over all rounds.
struct TransferOperation {
    var tool: String
    var measure: TransferMeasure
    var command: String
    var runs: [TransferRun] = []
    var failure: String?
    /// Why the step was not measured at all (the tool is missing, the feature is absent).
    var notMeasured: String?
    /// Bytes the step must transfer at least: the archive for fetches and resumes.
    var archiveBytes: UInt64

    var successful: [TransferRun] { runs.filter(\.result.succeeded) }
    var wall: Spread? { Spread(successful.map(\.result.wallSeconds)) }
    var cpu: Spread? { Spread(successful.map(\.result.cpuSeconds)) }
    var peakRSS: Spread? { Spread(successful.map { Double($0.result.peakRSSBytes) }) }
    var bodyBytes: Spread? { Spread(successful.map { Double($0.bodyBytes) }) }
    /// For a resume: body bytes of both runs less the archive, per round.
    var resentBytes: Spread? {
        Spread(successful.map { Double($0.bodyBytes) - Double(archiveBytes) })
    }

    func run(round: Int) -> TransferRun? { successful.first { $0.round == round } }
}

/// Everything the transfer case measured.
struct TransferResult {
    var corpus: BenchCase
    var trees: TransferTrees
    var layout: TransferLayout
    var runs: Int
    /// nginx's `limit_rate` on `/slow/`, where the resume steps run, bytes per second.
    var slowRate: UInt64
    var createSeconds: [String: Double] = [:]
    var operations: [TransferOperation] = []
    var versions: [String: String] = [:]
    var notes: [String] = []

    func operation(_ tool: String, _ measure: TransferMeasure) -> TransferOperation? {
        operations.first { $0.tool == tool && $0.measure == measure }
    }
}

/// Issue 10's benchmark: the corpus and its small change as two archives served by nginx on
/// 127.0.0.1, `cairn fetch` against `curl` (full and resumed) and `zsync` (seeded), and
/// `cairn extract URL` of one file, in interleaved rounds. Bytes transferred are nginx's body
/// bytes from its access log, for every tool alike.
struct TransferBenchmark {
    var cairn: String
    var work: String
    var runs: Int
    var pauseSeconds: Double
    var seed: UInt64
    var keep: Bool
    /// Only the seeded-delta steps (`--only trusted`): plain, encrypted and zsync.
    var seededOnly = false
    /// `/slow/`'s rate (the resume steps), bytes per second: 64 MiB/s, or less for an archive
    /// smaller than 64 MiB, which then takes 1 s. The cut is made by polling the file being
    /// written every millisecond, so the rate bounds how far past the mark the kill lands.
    static func slowRate(archiveBytes: UInt64) -> UInt64 { min(64 << 20, max(64 << 10, archiveBytes)) }

    var base: String { "\(work)/transfer" }

    /// Prepares the trees and archives, starts nginx, runs every round, stops nginx.
    ///
    /// - Throws: ``BenchError`` or `TestServerError` when the preparation fails (a copy, a
    ///   create, nginx); a failing measured step is recorded in its operation instead.
    func run(corpus: BenchCase) throws -> TransferResult {
        try? removeTree(base)
        try FileManager.default.createDirectory(atPath: "\(base)/logs", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(base)/serve", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(base)/out", withIntermediateDirectories: true)
        var runner = ProcessRunner(logDirectory: "\(base)/logs")
        runner.environment = ["LC_ALL": "C"]
        let serve = "\(base)/serve"
        let newArchive = "\(serve)/new.cairn"
        let (trees, createSeconds) = try createArchives(corpus: corpus, runner: runner)
        let layout = try TransferLayout.analyse(old: "\(serve)/old.cairn", new: newArchive, extractPath: trees.archivedExtractPath)
        let archiveBytes = layout.newArchiveBytes
        let rate = Self.slowRate(archiveBytes: archiveBytes)
        let nginx = try NginxServer(root: serve, slowRate: String(rate))
        defer { nginx.stop() }

        var result = TransferResult(corpus: corpus, trees: trees, layout: layout, runs: runs, slowRate: rate)
        result.createSeconds = createSeconds
        recordVersions(in: &result, runner: runner)
        let zsyncMissing = try zsyncProblem(nginx: nginx, serve: serve, newArchive: newArchive, runner: runner)

        let steps = self.steps(nginx: nginx, trees: trees, serve: serve, runner: runner).filter { !seededOnly || $0.measure == .seeded }
        var operations: [TransferOperation] = steps.map {
            TransferOperation(tool: $0.tool, measure: $0.measure, command: $0.command, archiveBytes: $0.archiveBytes ?? archiveBytes)
        }
        for index in operations.indices where operations[index].tool == TransferTool.zsync {
            operations[index].notMeasured = zsyncMissing
        }
        for index in operations.indices where operations[index].tool == TransferTool.cairnSeededEncrypted {
            if !FileManager.default.fileExists(atPath: "\(serve)/\(Self.newEncryptedName)") {
                operations[index].notMeasured = "age-keygen is not installed (Debian age)"
            }
        }
        if findExecutable("curl") == nil {
            for index in operations.indices where operations[index].tool.hasPrefix("curl") {
                operations[index].notMeasured = "curl is not installed"
            }
        }
        let meter = AccessMeter(nginx: nginx)
        for round in 1...runs {
            for (index, step) in steps.enumerated() where operations[index].notMeasured == nil {
                let measured = record(
                    step, index: index, round: round, in: &operations[index], meter: meter, runner: runner, archiveBytes: archiveBytes)
                // A step found not measurable keeps its output (nothing more runs in it).
                guard measured else { continue }
                if !keep { try? step.clean() }
            }
        }
        result.operations = operations
        result.notes.append(
            "The resume steps run against nginx's `/slow/` location (`limit_rate` \(formatMiB(rate))/s, the whole archive in about "
                + String(format: "%.1f s", Double(archiveBytes) / Double(rate))
                + "), for both tools and both runs (the rerun must use the same URL): the first run is killed with SIGKILL when the "
                + "file it writes reaches the cut, so its wall time is bounded by that rate.")
        if !keep { try? removeTree(base) }
        return result
    }

    /// Copies the corpus to the old and new trees (the new one with the small change), archives
    /// both as `serve/old.cairn` and `serve/new.cairn`, and writes the deduplicated archive.
    ///
    /// - Returns: the trees, and each `cairn create`'s wall seconds by archive name.
    /// - Throws: ``BenchError`` when a copy or a create fails.
    private func createArchives(corpus: BenchCase, runner: ProcessRunner) throws -> (TransferTrees, [String: Double]) {
        log("transfer: copying \(corpus.path) to old and new trees and applying the small change")
        let trees = try TransferTrees.prepare(corpus: corpus.path, in: "\(base)/trees", seed: seed, runner: runner)
        let serve = "\(base)/serve"
        let oldArchive = "\(serve)/old.cairn"
        let newArchive = "\(serve)/new.cairn"
        var createSeconds: [String: Double] = [:]
        for (tree, archive) in [(trees.old, oldArchive), (trees.new, newArchive)] {
            let r = try runner.run([cairn, "create", "-o", archive, "--no-progress", tree], label: "transfer-create")
            guard r.succeeded else { throw BenchError("cairn create \(archive) failed: \(r.standardError.suffix(300))") }
            createSeconds[(archive as NSString).lastPathComponent] = r.wallSeconds
            log(String(format: "transfer: created %@ (%@) in %.1f s", archive, formatMiB(TreeTally.size(of: archive)), r.wallSeconds))
        }
        createSeconds.merge(try createEncryptedArchives(trees: trees, runner: runner)) { a, _ in a }
        if !keep {
            try? removeTree(trees.old)
            try? removeTree(trees.new)
        }
        try Self.makeDeduplicatedArchive(at: "\(serve)/\(Self.deduplicatedArchiveName)", tree: "\(base)/trees/copies", seed: seed, cairn: cairn, runner: runner)
        return (trees, createSeconds)
    }

    /// The keys of the encrypted exports: one maker key file (which the id and chunker keys
    /// derive from) and one age recipient.
    var trustKeys: CaseTools.TrustKeys { CaseTools.TrustKeys(directory: "\(base)/keys") }
    static let oldEncryptedName = "old-encrypted.cairn"
    static let newEncryptedName = "new-encrypted.cairn"

    /// Archives the old and new trees again, encrypted for one recipient with one maker key
    /// (issue 25): `serve/old-encrypted.cairn` and `serve/new-encrypted.cairn`. Unsigned, as the
    /// plain pair is: the delta compared is what encryption adds, not signing (a signed
    /// archive's delta is measured against a signed plain one in `SeededEncryptedFetchTests`).
    /// Nothing is made when age-keygen is missing; the encrypted step then says so.
    ///
    /// - Returns: each `cairn create`'s wall seconds by archive name.
    /// - Throws: ``BenchError`` when a key tool or a create fails.
    private func createEncryptedArchives(trees: TransferTrees, runner: ProcessRunner) throws -> [String: Double] {
        guard findExecutable("age-keygen") != nil else { return [:] }
        let keys = trustKeys
        try keys.make(cairn: cairn, runner: runner)
        var createSeconds: [String: Double] = [:]
        for (tree, name) in [(trees.old, Self.oldEncryptedName), (trees.new, Self.newEncryptedName)] {
            let archive = "\(base)/serve/\(name)"
            let r = try runner.run(
                [cairn, "create", "-o", archive, "--no-progress", "--maker-key", keys.makerKey, "--recipients-file", keys.recipients, tree],
                label: "transfer-create-encrypted")
            guard r.succeeded else { throw BenchError("cairn create \(archive) failed: \(r.standardError.suffix(300))") }
            createSeconds[name] = r.wallSeconds
            log(String(format: "transfer: created %@ (%@) in %.1f s", archive, formatMiB(TreeTally.size(of: archive)), r.wallSeconds))
        }
        return createSeconds
    }

    /// Why `cairn fetch` of an encrypted archive cannot be measured, from its first failed run:
    /// a cairn whose fetch refuses `--identity` (a usage error, exit 2) or names it in its
    /// refusal (an encrypted archive it cannot fetch yet).
    static func encryptedFetchUnavailable(_ result: ProcessResult) -> String? {
        let text = result.standardError
        guard result.exitStatus == 2 || text.contains("--identity") else { return nil }
        let tail = text.split(separator: "\n").suffix(2).joined(separator: " / ")
        return "not available: this cairn's fetch refuses --identity or an encrypted archive (exit \(result.exitStatus): \(tail))"
    }

    /// The first line of each installed tool's version output, in `result.versions`.
    private func recordVersions(in result: inout TransferResult, runner: ProcessRunner) {
        for (name, command) in [
            ("cairn", [cairn, "--version"]), ("curl", ["curl", "--version"]), ("zsync", ["zsync", "-V"]),
            ("nginx", [NginxServer.executable, "-v"]),
        ] {
            if findExecutable(command[0]) == nil { continue }
            if let r = try? runner.run(command, label: "version") {
                let line = (r.standardOutput + "\n" + r.standardError).split(separator: "\n").first { !$0.isEmpty }
                result.versions[name] = line.map(String.init) ?? "?"
            }
        }
    }

    /// Makes `new.cairn.zsync` beside `newArchive`.
    ///
    /// - Returns: why zsync is not measured (not installed, `zsyncmake` failed), or nil.
    private func zsyncProblem(nginx: NginxServer, serve: String, newArchive: String, runner: ProcessRunner) throws -> String? {
        if findExecutable("zsync") == nil || findExecutable("zsyncmake") == nil {
            return "zsync is not installed (Debian zsync; `make bench-deps`)"
        }
        let r = try runner.run(
            ["zsyncmake", "-u", nginx.url("new.cairn"), "-o", "\(serve)/new.cairn.zsync", newArchive], label: "transfer-zsyncmake")
        if !r.succeeded { return "zsyncmake failed: \(r.standardError.suffix(200))" }
        return nil
    }

    /// Runs `step` once in round `round` and records the run, or its failure, in `operation`.
    ///
    /// - Returns: false when the step turned out not measurable (`cairn extract URL` of a cairn
    ///   without remote archives); it is then marked so and not run again.
    private func record(
        _ step: Step, index: Int, round: Int, in operation: inout TransferOperation, meter: AccessMeter, runner: ProcessRunner,
        archiveBytes: UInt64
    ) -> Bool {
        do {
            try step.clean()
            let run = try timedRun(step, index: index, round: round, meter: meter, runner: runner, archiveBytes: archiveBytes)
            if run.result.succeeded {
                if let problem = step.check() { operation.failure = "round \(round): \(problem)" }
                log(
                    String(
                        format: "transfer round %d: %@ %@: %.2f s wall, %.2f s CPU, %@ sent by nginx in %d requests", round,
                        step.tool, step.measure.rawValue, run.result.wallSeconds, run.result.cpuSeconds,
                        formatMiB(run.bodyBytes), run.requests))
            } else {
                let tail = run.result.standardError.split(separator: "\n").suffix(2).joined(separator: " / ")
                if step.tool == TransferTool.cairnExtract, round == 1, Self.lacksURLSupport(run.result) {
                    operation.notMeasured = "extract URL not supported by this cairn (exit \(run.result.exitStatus): \(tail))"
                    log("transfer: \(operation.notMeasured ?? "")")
                    return false
                }
                if step.tool == TransferTool.cairnSeededEncrypted, round == 1, let why = Self.encryptedFetchUnavailable(run.result) {
                    operation.notMeasured = why
                    log("transfer: \(step.tool): \(why)")
                    return false
                }
                operation.failure = "round \(round), exit \(run.result.exitStatus): \(tail)"
                log("transfer round \(round): \(step.tool) \(step.measure.rawValue) FAILED: \(tail)")
            }
            operation.runs.append(run)
        } catch {
            operation.failure = "round \(round): \(error)"
            log("transfer round \(round): \(step.tool) \(step.measure.rawValue) FAILED: \(error)")
        }
        return true
    }

    /// The timed run of `step` and nginx's body bytes for it: for a resume, the first run killed
    /// at the cut and then the rerun, timed; otherwise the one run, after ``settle()``.
    ///
    /// - Throws: ``BenchError`` when the first run of a resume ended before the cut; what
    ///   starting a process throws.
    private func timedRun(
        _ step: Step, index: Int, round: Int, meter: AccessMeter, runner: ProcessRunner, archiveBytes: UInt64
    ) throws -> TransferRun {
        var run: TransferRun
        if let fraction = step.measure.cutFraction, let watched = step.watched {
            let mark = meter.mark()
            let cut = try Cutter.run(
                step.arguments, watching: watched, threshold: UInt64(Double(archiveBytes) * fraction),
                logPrefix: "\(base)/logs/transfer-cut-\(index)-\(round)")
            guard cut.killed else {
                throw BenchError("the first run ended (exit \(cut.exitStatus)) before the cut at \(Int(fraction * 100))%")
            }
            let first = meter.bytes(since: mark)
            settle()
            let mark2 = meter.mark()
            let r = try runner.run(step.rerun ?? step.arguments, label: "transfer-\(index)-\(round)")
            let second = meter.bytes(since: mark2)
            run = TransferRun(
                round: round, result: r, bodyBytes: first.bytes + second.bytes, requests: first.requests + second.requests,
                cutAtBytes: cut.fileBytes, firstRunBodyBytes: first.bytes)
        } else {
            settle()
            let mark = meter.mark()
            let r = try runner.run(step.arguments, label: "transfer-\(index)-\(round)")
            let sent = meter.bytes(since: mark)
            run = TransferRun(round: round, result: r, bodyBytes: sent.bytes, requests: sent.requests)
        }
        if step.tool.hasPrefix("cairn fetch"), let object = lastJSONObject(run.result.standardOutput),
            let n = (object["fetchedBytes"] as? NSNumber)?.uint64Value
        {
            run.reportedBytes = n
        }
        return run
    }

    /// Whether a failed `cairn extract URL …` says the URL was taken for a local path or not
    /// understood (a cairn without remote archives).
    static func lacksURLSupport(_ result: ProcessResult) -> Bool {
        let text = result.standardError
        return result.exitStatus == 2 || text.contains("No such file or directory") || text.contains("cannot open")
    }

    /// `sync(2)` and `--pause` seconds before a timed step, as ``EndToEnd/settle()`` does.
    private func settle() {
        sync()
        if pauseSeconds > 0 { usleep(useconds_t(pauseSeconds * 1_000_000)) }
    }

    /// One step of a round: the command, what to remove before and after, the file whose size
    /// tells when to cut, and the untimed check of its output.
    struct Step {
        var tool: String
        var measure: TransferMeasure
        var arguments: [String]
        var command: String { (rerun ?? arguments).map { $0.contains(" ") ? shellQuoted($0) : $0 }.joined(separator: " ") }
        var clean: () throws -> Void
        /// For a resume: the file (or directory) the first run writes.
        var watched: String?
        /// A problem with the output, or nil.
        var check: () -> String?
        /// For a resume whose rerun differs from the first run (`extract --resume`).
        var rerun: [String]? = nil
        /// The size of the archive the step reads, when it is not new.cairn.
        var archiveBytes: UInt64? = nil
    }

    /// The archive of ``TransferMeasure/remoteExtractDeduplicated``, beside new.cairn.
    static let deduplicatedArchiveName = "copies.cairn"
    /// The bytes of the file that ``makeDeduplicatedArchive(at:tree:seed:cairn:runner:)`` copies.
    static let deduplicatedFileBytes = 5 << 20

    /// Writes `tree` (`copies/`: a file of ``deduplicatedFileBytes`` seeded random bytes and 3
    /// copies of it) and archives it at `path`.
    ///
    /// - Throws: ``BenchError`` when a file cannot be written or `cairn create` fails.
    static func makeDeduplicatedArchive(at path: String, tree: String, seed: UInt64, cairn: String, runner: ProcessRunner) throws {
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: seed &+ 23)
        let bytes = Data(generator.bytes(deduplicatedFileBytes))
        for name in ["a", "b", "c", "d"] {
            guard FileManager.default.createFile(atPath: "\(tree)/\(name).bin", contents: bytes) else {
                throw BenchError("cannot write \(tree)/\(name).bin")
            }
        }
        let r = try runner.run([cairn, "create", "-o", path, "--no-progress", tree], label: "transfer-create-copies")
        guard r.succeeded else { throw BenchError("cairn create \(path) failed: \(r.standardError.suffix(300))") }
    }

    /// The steps of every round, in order: each measurement, Cairn then its peer.
    func steps(nginx: NginxServer, trees: TransferTrees, serve: String, runner: ProcessRunner) -> [Step] {
        let out = "\(base)/out"
        let newArchive = "\(serve)/new.cairn"
        let oldArchive = "\(serve)/old.cairn"
        let url = nginx.url("new.cairn")
        let slow = nginx.url("slow/new.cairn")
        func cleaning(_ file: String) -> () throws -> Void {
            { for suffix in ["", ".partial", ".partial.fetch", ".partial.seed", ".part", ".zs-old"] { try removeTree(file + suffix) } }
        }
        func same(_ file: String) -> () -> String? {
            {
                let r = try? runner.run(["cmp", "-s", file, newArchive], label: "transfer-cmp")
                return r?.succeeded == true ? nil : "\(file) differs from new.cairn"
            }
        }
        var list: [Step] = []
        let fullC = "\(out)/full-cairn.cairn"
        let fullP = "\(out)/full-curl.cairn"
        list.append(
            Step(
                tool: TransferTool.cairn, measure: .full, arguments: [cairn, "fetch", url, "-o", fullC, "--json"], clean: cleaning(fullC),
                check: same(fullC)))
        list.append(
            Step(tool: TransferTool.curl, measure: .full, arguments: ["curl", "-s", "-S", "-f", "-o", fullP, url], clean: cleaning(fullP), check: same(fullP)))
        // Cairn syncs FILE before renaming it into place; this row costs that in for curl.
        list.append(
            Step(
                tool: TransferTool.curlSync, measure: .full,
                arguments: ["/bin/bash", "-c", "curl -s -S -f -o \(shellQuoted(fullP)) \(shellQuoted(url)) && sync \(shellQuoted(fullP))"],
                clean: cleaning(fullP), check: same(fullP)))
        for measure in [TransferMeasure.resume50, .resume90] {
            let percent = Int((measure.cutFraction ?? 0) * 100)
            let c = "\(out)/resume\(percent)-cairn.cairn"
            let p = "\(out)/resume\(percent)-curl.cairn"
            list.append(
                Step(
                    tool: TransferTool.cairn, measure: measure, arguments: [cairn, "fetch", slow, "-o", c, "--json"], clean: cleaning(c),
                    watched: c + ".partial", check: same(c)))
            list.append(
                Step(
                    tool: TransferTool.curlResume, measure: measure, arguments: ["curl", "-s", "-S", "-f", "-C", "-", "-o", p, slow],
                    clean: cleaning(p), watched: p, check: same(p)))
        }
        let seededC = "\(out)/seeded-cairn.cairn"
        let seededZ = "\(out)/seeded-zsync.cairn"
        list.append(
            Step(
                tool: TransferTool.cairnSeeded, measure: .seeded, arguments: [cairn, "fetch", url, "-o", seededC, "--seed", oldArchive, "--json"],
                clean: cleaning(seededC), check: same(seededC)))
        list.append(
            Step(
                tool: TransferTool.zsync, measure: .seeded,
                arguments: [
                    "/bin/bash", "-c",
                    "cd \(shellQuoted(out)) && exec zsync -q -i \(shellQuoted(oldArchive)) -o \(shellQuoted(seededZ)) \(shellQuoted(nginx.url("new.cairn.zsync")))",
                ], clean: cleaning(seededZ), check: same(seededZ)))
        let newEncrypted = "\(serve)/\(Self.newEncryptedName)"
        let seededE = "\(out)/seeded-encrypted.cairn"
        let keys = trustKeys
        list.append(
            Step(
                tool: TransferTool.cairnSeededEncrypted, measure: .seeded,
                arguments: [
                    cairn, "fetch", nginx.url(Self.newEncryptedName), "-o", seededE, "--seed", "\(serve)/\(Self.oldEncryptedName)",
                    "--identity", keys.identity, "--json",
                ],
                clean: cleaning(seededE),
                check: {
                    // A seeded encrypted fetch seals the rebuilt inner archive again under new
                    // nonces (Spec/0004 §6.10.3): the same size and inner archive, not the same
                    // bytes. It must verify with the identity.
                    guard TreeTally.size(of: seededE) == TreeTally.size(of: newEncrypted) else {
                        return "\(seededE) is not as long as \(Self.newEncryptedName)"
                    }
                    let r = try? runner.run([cairn, "verify", seededE, "--identity", keys.identity, "-q"], label: "transfer-verify")
                    return r?.succeeded == true ? nil : "\(seededE) does not verify with --identity"
                }, archiveBytes: TreeTally.size(of: newEncrypted)))
        let destination = "\(out)/extract"
        list.append(
            Step(
                tool: TransferTool.cairnExtract, measure: .remoteExtract,
                arguments: [cairn, "extract", url, "-C", destination, trees.archivedExtractPath, "--no-progress"],
                clean: { try removeTree(destination) },
                check: {
                    let file = "\(destination)/\(trees.archivedExtractPath)"
                    return TreeTally.size(of: file) == trees.extractBytes ? nil : "\(file) is not the \(trees.extractBytes)-byte file"
                }))
        let copies = "\(out)/copies"
        list.append(
            Step(
                tool: TransferTool.cairnExtract, measure: .remoteExtractDeduplicated,
                arguments: [cairn, "extract", nginx.url(Self.deduplicatedArchiveName), "-C", copies, "copies", "--no-progress"],
                clean: { try removeTree(copies) },
                check: {
                    let size = TreeTally.size(of: "\(copies)/copies")
                    return size == 4 * UInt64(Self.deduplicatedFileBytes) ? nil : "\(copies)/copies holds \(size) bytes, not the 4 copies"
                }, archiveBytes: TreeTally.size(of: "\(serve)/\(Self.deduplicatedArchiveName)")))
        let resumed = "\(out)/extract-resume"
        let resumedStaging = "\(out)/.extract-resume.cairn-staging"
        list.append(
            Step(
                tool: TransferTool.cairnExtract, measure: .remoteExtractResume,
                arguments: [cairn, "extract", slow, "-C", resumed, "--no-progress"],
                clean: {
                    try removeTree(resumed)
                    try removeTree(resumedStaging)
                },
                watched: resumedStaging,
                check: {
                    TreeTally.size(of: resumed) > 0 && TreeTally.size(of: resumedStaging) == 0
                        ? nil : "\(resumed) was not extracted, or its staging directory is left"
                },
                rerun: [cairn, "extract", slow, "-C", resumed, "--resume", "--no-progress"]))
        return list
    }
}

/// Body bytes nginx sent, from its access log (`$body_bytes_sent` of every finished request).
struct AccessMeter {
    var nginx: NginxServer

    /// The number of log lines so far: the start of a step.
    func mark() -> Int { nginx.accessLog().count }

    /// Body bytes and requests logged since `mark`: waits (up to 10 s) for the first line, then
    /// until no line has been added for 0.2 s (nginx logs a request when it ends, and notices a
    /// killed client on its next write).
    func bytes(since mark: Int) -> (bytes: UInt64, requests: Int) {
        var entries = nginx.accessLog(waitingFor: mark + 1, timeout: 10)
        while true {
            usleep(200_000)
            let again = nginx.accessLog()
            if again.count == entries.count { break }
            entries = again
        }
        let new = entries.dropFirst(mark)
        return (new.reduce(0) { $0 + $1.bodyBytesSent }, new.count)
    }
}

/// Cuts a download or upload: runs a command in a process group of its own and kills the group
/// with SIGKILL once a measure of its progress (the size of the file it writes, the bytes an
/// upload journal records) reaches a threshold (polled every millisecond).
enum Cutter {
    struct Outcome {
        /// Whether the kill happened (false: the command ended first).
        var killed: Bool
        var exitStatus: Int32
        /// The progress measure when it was killed (or when the command ended): for
        /// ``run(_:watching:threshold:logPrefix:)`` the watched file's size.
        var fileBytes: UInt64
    }

    /// Runs `arguments` (stdout/stderr to `logPrefix`.out/.err) until `watching` holds at least
    /// `threshold` bytes, then kills its process group.
    ///
    /// - Throws: ``BenchError`` when the command cannot start, or runs 600 s without reaching
    ///   the threshold (it is then killed).
    static func run(_ arguments: [String], watching: String, threshold: UInt64, logPrefix: String) throws -> Outcome {
        try run(arguments, threshold: threshold, logPrefix: logPrefix, progress: { TreeTally.size(of: watching) })
    }

    /// Runs `arguments` (stdout/stderr to `logPrefix`.out/.err, `environment` added to this
    /// process's) until `progress()` returns at least `threshold`, then kills its process group.
    ///
    /// - Throws: ``BenchError`` when the command cannot start, or runs 600 s without reaching
    ///   the threshold (it is then killed).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], threshold: UInt64, logPrefix: String, progress: () -> UInt64
    ) throws -> Outcome {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPrefix + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, logPrefix + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else { throw BenchError("cannot start \(arguments[0]): \(String(cString: strerror(spawned)))") }
        let deadline = monotonicSeconds() + 600
        var status: Int32 = 0
        while true {
            let reached = progress()
            if reached >= threshold || monotonicSeconds() > deadline {
                kill(-pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                guard reached >= threshold else { throw BenchError("\(arguments[0]) did not reach \(threshold) bytes in 600 s") }
                return Outcome(killed: true, exitStatus: 128 + SIGKILL, fileBytes: reached)
            }
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid {
                let exit: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                return Outcome(killed: false, exitStatus: exit, fileBytes: progress())
            }
            usleep(1000)
        }
    }
}
