import Foundation
import Glibc

/// One round's run of one timed step.
struct Measurement {
    var round: Int
    var result: ProcessResult
    /// Bytes of the archive, index + chunk store, or repository after this round's create step.
    var archiveBytes: UInt64?
}

/// One timed operation of one tool (e.g. "borg" "create") over all rounds of one case.
struct OperationResult {
    enum Kind: String {
        case read, create, list, verify, extract, resume

        /// Whether the operation reads every content byte, so that MB/s (case bytes / wall
        /// seconds) means something: reading, create, verify and extract; not list (the
        /// manifest only) nor the resume steps (a tail of the content).
        var readsContent: Bool { self == .read || self == .create || self == .verify || self == .extract }

        /// Whether the harness calls sync(2) and pauses before timing it: every step that
        /// writes a tree or an archive whose predecessor was just removed.
        var settles: Bool { self == .create || self == .extract || self == .resume }
    }

    var tool: String
    var operation: String
    var kind: Kind
    var command: String
    var measurements: [Measurement] = []
    /// Bytes that deduplication saved (Cairn's `create --json` `deduplicatedBytes`), last round.
    var deduplicatedBytes: UInt64?
    /// Bytes of regular files in the extracted tree, last round (a check against the case).
    var extractedBytes: UInt64?
    var failure: String?

    var successful: [Measurement] { measurements.filter(\.result.succeeded) }
    var wall: Spread? { Spread(successful.map(\.result.wallSeconds)) }
    var cpu: Spread? { Spread(successful.map(\.result.cpuSeconds)) }
    var peakRSS: Spread? { Spread(successful.map { Double($0.result.peakRSSBytes) }) }
    var archiveBytes: Spread? { Spread(successful.compactMap { $0.archiveBytes.map { Double($0) } }) }

    /// The wall seconds of round `round`, when it succeeded.
    func wall(round: Int) -> Double? { successful.first { $0.round == round }?.result.wallSeconds }
    func cpu(round: Int) -> Double? { successful.first { $0.round == round }?.result.cpuSeconds }
    /// The archive bytes after round `round`, when it succeeded.
    func archiveBytes(round: Int) -> Double? { successful.first { $0.round == round }?.archiveBytes.map { Double($0) } }
}

/// What an untimed inspection after a successful run found.
struct Inspection {
    var archiveBytes: UInt64?
    var deduplicatedBytes: UInt64?
    var extractedBytes: UInt64?
    var failure: String?
}

/// A tool to compare: its timed steps, each with untimed preparation and inspection.
struct Tool {
    struct Step {
        var operation: String
        var kind: OperationResult.Kind
        /// Untimed work before the timed command (cleaning outputs, creating a repository).
        var prepare: () throws -> Void = {}
        var arguments: [String]
        /// Untimed inspection after a successful run (archive size, dedup, extracted bytes).
        var inspect: (ProcessResult) -> Inspection = { _ in Inspection() }
        /// Untimed clean-up after the inspection (removing the extracted tree).
        var cleanUp: () -> Void = {}
    }

    var name: String
    /// The executables it needs; the tool is skipped with a note when one is missing.
    var executables: [String]
    var versionCommand: [String]
    var steps: [Step]
    var note: String?
}

/// Every operation of one case, over all rounds.
struct CaseResult {
    var benchCase: BenchCase
    var warmRead: (bytes: UInt64, seconds: Double)
    var operations: [OperationResult]
    /// The peers this case compared with (installed ones only).
    var peers: [Peer]
    /// CPU profiles of Cairn's commands on this case (`--profile`, small-files case only).
    var profiles: [Profile] = []
    /// Whether every extracted tree was kept until the case ended (``ExtractedTrees``).
    var extractedTreesKept = false

    func operation(_ tool: String, _ name: String) -> OperationResult? {
        operations.first { $0.tool == tool && $0.operation == name }
    }
}

/// Tool names as the report shows them.
enum ToolName {
    static let read = "read (tar -c | cat)"
    static let cairnLZ4 = "cairn (lz4)"
    static let cairnZstd = "cairn (zstd:3)"
    static let cairnNone = "cairn (none)"
    static let tarLZ4 = "tar | lz4 -1"
    static let tarZstd = "tar | zstd -T0 -3"
    static let casync = "casync"
    static let borg = "borg"
    static let restic = "restic"
    static let cairnSigned = "cairn (lz4, signed)"
    static let cairnEncrypted = "cairn (lz4, signed+encrypted)"
    static let tarLZ4Age = "tar | lz4 -1 | age"

    static func of(_ peer: Peer) -> String {
        switch peer {
        case .tarLZ4: tarLZ4
        case .tarZstd: tarZstd
        case .casync: casync
        case .borg: borg
        case .restic: restic
        case .cairnSigned: cairnSigned
        case .cairnEncrypted: cairnEncrypted
        case .tarLZ4Age: tarLZ4Age
        }
    }
}

/// Runs the tools side by side on every case: rounds of every tool in turn (A B C A B C ...).
struct EndToEnd {
    var cairn: String
    var work: String
    var runs: Int
    var keep: Bool
    /// Seconds to sleep after sync(2) before a timed create or extract.
    var pauseSeconds: Double
    /// `--peers`, or nil for each case's defaults.
    var peerChoice: [Peer]?
    /// Whether the peers default to `--targets`' choice (see ``Peer/forCase(_:chosen:targets:)``).
    var targets = false
    /// Whether the corpus also gets `cairn list`, `verify` and the resume steps.
    var corpusExtras = true
    /// Whether Cairn's create and extract of the small-files case are profiled (`--profile`).
    var profile = false

    var base: String { "\(work)/e2e" }

    /// The tools of one case in round `round`. Every extraction goes into a directory of its
    /// own (`out-<round>`) that no earlier run used. With `keepExtractedTrees` (or `--keep`) it
    /// stays until the case ends (see ``ExtractedTrees``); otherwise it is removed right after
    /// it is measured. The random-data case gets Cairn's lz4 and `none` creates only, the
    /// large-file case Cairn's lz4 create and extract only, neither the read baseline.
    func tools(
        for benchCase: BenchCase, in caseDirectory: String, peers: [Peer], round: Int, runner: ProcessRunner,
        keepExtractedTrees: Bool = false
    ) -> [Tool] {
        let make = CaseTools(
            cairn: cairn, base: base, benchCase: benchCase, caseDirectory: caseDirectory, round: round, runner: runner,
            keep: keep || keepExtractedTrees)
        var list: [Tool] = []
        let baseline = benchCase.kind != .randomData && benchCase.kind != .largeFile
        if baseline { list.append(make.readBaseline()) }
        switch benchCase.kind {
        case .randomData:
            // Issue 9: incompressible chunks cost little; lz4 against storing, create only.
            list.append(make.cairnTool(name: ToolName.cairnLZ4, directory: "cairn-lz4", compression: "lz4", withResume: false, withExtract: false))
            list.append(make.cairnTool(name: ToolName.cairnNone, directory: "cairn-none", compression: "none", withResume: false, withExtract: false))
        case .largeFile:
            // Issue 9: peak RSS of the default compression's create and extract.
            list.append(make.cairnTool(name: ToolName.cairnLZ4, directory: "cairn-lz4", compression: "lz4", withResume: false))
            if peers.contains(.cairnEncrypted) { list.append(make.cairnEncrypted()) }
            return list
        case .corpus, .smallFiles, .tree:
            list.append(
                make.cairnTool(
                    name: ToolName.cairnLZ4, directory: "cairn-lz4", compression: "lz4", withResume: benchCase.kind == .corpus && corpusExtras))
            list.append(make.cairnTool(name: ToolName.cairnZstd, directory: "cairn-zstd", compression: "zstd:3", withResume: false))
        }
        if peers.contains(.tarLZ4) { list.append(make.tarLZ4()) }
        if peers.contains(.tarZstd) { list.append(make.tarZstd()) }
        if peers.contains(.casync) { list.append(make.casync()) }
        if peers.contains(.borg) { list.append(make.borg()) }
        if peers.contains(.restic) { list.append(make.restic()) }
        if peers.contains(.cairnSigned) { list.append(make.cairnSigned()) }
        if peers.contains(.cairnEncrypted) { list.append(make.cairnEncrypted()) }
        if peers.contains(.tarLZ4Age) { list.append(make.tarLZ4Age()) }
        return list
    }

    /// The environment every child gets: repository passwords and caches under the work dir.
    var environment: [String: String] {
        [
            "RESTIC_PASSWORD": "cairn-bench", "RESTIC_CACHE_DIR": "\(base)/restic-cache",
            "BORG_BASE_DIR": "\(base)/borg-home", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
            "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes", "LC_ALL": "C",
        ]
    }

    struct Outcome {
        var cases: [CaseResult] = []
        var versions: [String: String] = [:]
        var skipped: [String: String] = [:]
        var notes: [String: String] = [:]
    }

    /// Flushes the file systems and sleeps, so the removal of earlier trees and archives is
    /// committed before the next timed step starts (ext4 is slow to create files right after
    /// many inodes were freed, and that must not decide an extraction's time).
    func settle() {
        sync()
        if pauseSeconds > 0 { usleep(useconds_t(pauseSeconds * 1_000_000)) }
    }

    /// Runs every available tool on every case, `runs` rounds per case. Extracted trees of a
    /// case with many files are kept until the case ends when there is room, then removed, and
    /// the next case waits until ext4 no longer counts their inodes as recently deleted
    /// (``ExtractedTrees``).
    func run(cases: [BenchCase]) throws -> Outcome {
        try FileManager.default.createDirectory(atPath: "\(base)/logs", withIntermediateDirectories: true)
        var runner = ProcessRunner(logDirectory: "\(base)/logs")
        runner.environment = environment
        var outcome = Outcome()
        for (caseIndex, benchCase) in cases.enumerated() {
            let slug = benchCase.slug(index: caseIndex + 1)
            let caseDirectory = "\(base)/\(slug)"
            let warm = benchCase.warm()
            log(String(format: "%@: warmed the page cache, %@ in %.2f s", slug, formatMiB(warm.bytes), warm.seconds))
            let wanted = Peer.forCase(benchCase.kind, chosen: peerChoice, targets: targets)
            var available: [String] = []
            var usedPeers: [Peer] = []
            for tool in tools(for: benchCase, in: caseDirectory, peers: wanted, round: 1, runner: runner) {
                if let missing = tool.executables.first(where: { findExecutable($0) == nil }) {
                    outcome.skipped[tool.name] = "\(missing) is not installed"
                    log("skipping \(tool.name): \(missing) is not installed")
                    continue
                }
                available.append(tool.name)
                if let peer = Peer.allCases.first(where: { ToolName.of($0) == tool.name }) { usedPeers.append(peer) }
                if let note = tool.note { outcome.notes[tool.name] = note }
                if outcome.versions[tool.name] == nil, let r = try? runner.run(tool.versionCommand, label: "version") {
                    let text = (r.standardOutput + "\n" + r.standardError).split(separator: "\n").first { !$0.isEmpty }
                    outcome.versions[tool.name] = text.map(String.init) ?? "?"
                }
            }
            let extractors = tools(for: benchCase, in: caseDirectory, peers: wanted, round: 1, runner: runner)
                .filter { available.contains($0.name) && $0.steps.contains { $0.kind == .extract } }.count
            let keepTrees = ExtractedTrees.keepUntilCaseEnd(
                benchCase, trees: extractors * runs, freeBytes: ExtractedTrees.freeBytes(in: work))
            if ExtractedTrees.matters(for: benchCase), !keepTrees {
                log("\(slug): not enough room to keep \(extractors * runs) extracted trees until the case ends; removing each after it is measured")
            }
            var results: [String: OperationResult] = [:]
            var order: [String] = []
            for round in 1...runs {
                let tools = tools(
                    for: benchCase, in: caseDirectory, peers: wanted, round: round, runner: runner, keepExtractedTrees: keepTrees)
                for tool in tools where available.contains(tool.name) {
                    let toolDirectory = "\(caseDirectory)/\(dirName(tool.name))"
                    try FileManager.default.createDirectory(atPath: toolDirectory, withIntermediateDirectories: true)
                    var failedCreate = false
                    for step in tool.steps {
                        let key = "\(tool.name)\u{0}\(step.operation)"
                        if results[key] == nil { order.append(key) }
                        var record =
                            results[key]
                            ?? OperationResult(
                                tool: tool.name, operation: step.operation, kind: step.kind,
                                command: step.arguments.map { $0.contains(" ") ? shellQuoted($0) : $0 }.joined(separator: " "))
                        defer { results[key] = record }
                        if failedCreate {
                            record.failure = "skipped in round \(round): the create step failed"
                            continue
                        }
                        do {
                            try step.prepare()
                            if step.kind.settles { settle() }
                            let label = "\(slug)-\(dirName(tool.name))-\(step.operation)-\(round)"
                                .replacingOccurrences(of: " ", with: "_").replacingOccurrences(of: "/", with: "_")
                            let r = try runner.run(step.arguments, label: label)
                            var measurement = Measurement(round: round, result: r)
                            if r.succeeded {
                                let found = step.inspect(r)
                                measurement.archiveBytes = found.archiveBytes
                                if let d = found.deduplicatedBytes { record.deduplicatedBytes = d }
                                if let e = found.extractedBytes { record.extractedBytes = e }
                                if let f = found.failure { record.failure = "round \(round): \(f)" }
                                log(
                                    String(
                                        format: "%@ round %d: %@ %@: %.2f s wall, %.2f s CPU, %.0f MiB peak RSS", slug, round, tool.name,
                                        step.operation, r.wallSeconds, r.cpuSeconds, Double(r.peakRSSBytes) / 1_048_576))
                            } else {
                                let tail = r.standardError.split(separator: "\n").suffix(3).joined(separator: " / ")
                                record.failure = "round \(round), exit \(r.exitStatus): \(tail)"
                                log("\(slug) round \(round): \(tool.name) \(step.operation) FAILED (exit \(r.exitStatus)): \(tail)")
                                if step.kind == .create { failedCreate = true }
                            }
                            record.measurements.append(measurement)
                            step.cleanUp()
                        } catch {
                            record.failure = "round \(round): \(error)"
                            log("\(slug) round \(round): \(tool.name) \(step.operation) FAILED: \(error)")
                            if step.kind == .create { failedCreate = true }
                        }
                    }
                }
            }
            var caseResult = CaseResult(benchCase: benchCase, warmRead: warm, operations: order.compactMap { results[$0] }, peers: usedPeers)
            caseResult.extractedTreesKept = keepTrees
            // Every case but the 4 GiB file, whose profile would take as long as its rounds.
            if profile, benchCase.kind != .largeFile {
                caseResult.profiles = Profiler(runner: runner).profileCairn(on: benchCase, in: "\(caseDirectory)/profile", cairn: cairn)
            }
            outcome.cases.append(caseResult)
            if !keep {
                try? removeTree(caseDirectory)
                if ExtractedTrees.matters(for: benchCase), caseIndex + 1 < cases.count {
                    let seconds = ExtractedTrees.recentlyDeletedSeconds()
                    log("\(slug): removed its trees; waiting \(seconds) s until ext4 no longer counts their inodes as recently deleted")
                    sync()
                    sleep(UInt32(seconds))
                }
            }
        }
        if !keep { try? removeTree(base) }
        return outcome
    }
}

/// A file-system-friendly name for a tool.
func dirName(_ tool: String) -> String {
    switch tool {
    case ToolName.cairnLZ4: "cairn-lz4"
    case ToolName.cairnZstd: "cairn-zstd"
    case ToolName.cairnNone: "cairn-none"
    case ToolName.tarLZ4: "tar-lz4"
    case ToolName.tarZstd: "tar-zstd"
    case ToolName.read: "read"
    case ToolName.cairnSigned: "cairn-signed"
    case ToolName.cairnEncrypted: "cairn-encrypted"
    case ToolName.tarLZ4Age: "tar-lz4-age"
    default: tool
    }
}

/// Removes a file or tree if present.
func removeTree(_ path: String) throws {
    guard FileManager.default.fileExists(atPath: path) else { return }
    try FileManager.default.removeItem(atPath: path)
}

/// The absolute path of an executable (a path with a slash is taken as is), or nil.
func findExecutable(_ name: String) -> String? {
    if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}

/// The last line of `text` that parses as a JSON object.
func lastJSONObject(_ text: String) -> [String: Any]? {
    for line in text.split(separator: "\n").reversed() {
        if let data = line.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            return object
        }
    }
    return nil
}

/// Writes the first `fraction` of `source`'s bytes to `destination` (a cut-off copy).
func cutCopy(of source: String, to destination: String, fraction: Double) throws {
    guard let data = FileManager.default.contents(atPath: source) else {
        throw BenchError("cannot read \(source)")
    }
    try? FileManager.default.removeItem(atPath: destination)
    let cut = Int(Double(data.count) * fraction)
    guard FileManager.default.createFile(atPath: destination, contents: data.prefix(cut)) else {
        throw BenchError("cannot write \(destination)")
    }
}

/// Whether two files have identical bytes.
func sameFile(_ a: String, _ b: String) -> Bool {
    guard let x = FileManager.default.contents(atPath: a), let y = FileManager.default.contents(atPath: b) else {
        return false
    }
    return x == y
}

/// When extracted trees are removed. ext4 skips inodes freed in the last
/// `dirty_expire_centisecs / 100 + 5` seconds (30 + 5 by default) when it allocates new ones
/// (`recently_deleted()` in fs/ext4/ialloc.c), and on a tree of 100,000 files that scan made an
/// extraction right after another tree's removal take 60 s instead of a few. So in a case with
/// many files every extracted tree is kept until the case ends (when the disk has room), then
/// all are removed together and the next case waits that long before its first step.
enum ExtractedTrees {
    /// Cases with fewer regular files than this free too few inodes to matter.
    static let manyFiles = 1000

    /// Whether removing the case's extracted trees can slow the next extraction down.
    static func matters(for benchCase: BenchCase) -> Bool { benchCase.fileCount >= manyFiles }

    /// Bytes `trees` extracted copies of `benchCase` take: content plus one 4 KiB block per file
    /// for rounding and inodes.
    static func bytesNeeded(_ benchCase: BenchCase, trees: Int) -> UInt64 {
        UInt64(max(0, trees)) * (benchCase.totalBytes + UInt64(benchCase.fileCount) * 4096)
    }

    /// Whether to keep all `trees` extracted trees of `benchCase` until the case ends: the case
    /// has many files and they fit in `freeBytes` with 2 GiB to spare.
    static func keepUntilCaseEnd(_ benchCase: BenchCase, trees: Int, freeBytes: UInt64) -> Bool {
        matters(for: benchCase) && bytesNeeded(benchCase, trees: trees) + (2 << 30) <= freeBytes
    }

    /// Free bytes for unprivileged users on the file system of `path` (`statvfs(3)`); 0 when
    /// it cannot be read.
    static func freeBytes(in path: String) -> UInt64 {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return 0 }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// Seconds for which ext4 counts a freed inode as recently deleted, plus 1:
    /// `vm.dirty_expire_centisecs` / 100 + 5 + 1 (36 by default).
    static func recentlyDeletedSeconds(
        centisecs: String? = try? String(contentsOfFile: "/proc/sys/vm/dirty_expire_centisecs", encoding: .utf8)
    ) -> Int {
        let value = centisecs.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 3000
        return min(max(value, 0), 60_000) / 100 + 6
    }
}
