import Foundation
import Glibc

/// One timed operation of one tool (e.g. "borg" "create") over all runs.
struct OperationResult {
    enum Kind: String { case read, create, list, verify, extract, resume }
    var tool: String
    var operation: String
    var kind: Kind
    var command: String
    var runs: [ProcessResult] = []
    /// Bytes of the archive, index + chunk store, or repository after the create step.
    var archiveBytes: UInt64?
    /// Bytes that deduplication saved (Cairn's `create --json` `deduplicatedBytes`).
    var deduplicatedBytes: UInt64?
    /// Bytes of regular files in the extracted tree (a sanity check against the corpus).
    var extractedBytes: UInt64?
    var failure: String?

    /// The successful run with the lowest wall time.
    var best: ProcessResult? { runs.filter(\.succeeded).min { $0.wallSeconds < $1.wallSeconds } }
}

/// A tool to compare: its timed steps, each with untimed preparation.
struct Tool {
    struct Step {
        var operation: String
        var kind: OperationResult.Kind
        /// Untimed work before the timed command (cleaning outputs, creating a repository).
        var prepare: () throws -> Void = {}
        var arguments: [String]
        /// Untimed inspection after a successful run (archive size, dedup, extracted bytes).
        var inspect: (ProcessResult, inout OperationResult) -> Void = { _, _ in }
    }

    var name: String
    /// The executables it needs; the tool is skipped with a note when one is missing.
    var executables: [String]
    var versionCommand: [String]
    var steps: [Step]
    var note: String?
}

/// Runs the tools side by side on the corpus.
struct EndToEnd {
    var corpus: Corpus
    var cairn: String
    var work: String
    var runs: Int
    var keep: Bool

    var base: String { "\(work)/e2e" }

    func tools(runner: ProcessRunner) -> [Tool] {
        let c = shellQuoted(corpus.path)
        func dir(_ tool: String) -> String { "\(base)/\(tool)" }
        func clean(_ paths: String...) -> () throws -> Void {
            { for p in paths { try removeTree(p) } }
        }
        func sizeInto(_ path: String) -> (ProcessResult, inout OperationResult) -> Void {
            { _, r in r.archiveBytes = TreeTally.size(of: path) }
        }
        func extracted(_ path: String) -> (ProcessResult, inout OperationResult) -> Void {
            { _, r in r.extractedBytes = TreeTally.walk(path).bytes }
        }

        var list: [Tool] = []
        list.append(
            Tool(
                name: "read (tar -c | cat)", executables: ["tar"], versionCommand: ["tar", "--version"],
                steps: [
                    .init(
                        operation: "read corpus", kind: .read,
                        arguments: ["/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | cat > /dev/null"])
                ], note: "baseline: reading the corpus through tar"))

        let cd = dir("cairn")
        let archive = "\(cd)/bench.cairn"
        let cout = "\(cd)/out"
        let resumed = "\(cd)/resumed.cairn"
        let transferred = "\(cd)/transferred.cairn"
        list.append(
            Tool(
                name: "cairn", executables: [cairn], versionCommand: [cairn, "--version"],
                steps: [
                    .init(
                        operation: "create", kind: .create, prepare: clean(archive),
                        arguments: [cairn, "create", "-o", archive, "--compression", "lz4", "--json", "--no-progress", corpus.path],
                        inspect: { result, r in
                            r.archiveBytes = TreeTally.size(of: archive)
                            if let object = lastJSONObject(result.standardOutput),
                                let dedup = (object["deduplicatedBytes"] as? NSNumber)?.uint64Value
                            {
                                r.deduplicatedBytes = dedup
                            }
                        }),
                    .init(operation: "list", kind: .list, arguments: [cairn, "list", archive]),
                    .init(operation: "verify", kind: .verify, arguments: [cairn, "verify", archive, "--json"]),
                    .init(
                        operation: "extract", kind: .extract, prepare: clean(cout),
                        arguments: [cairn, "extract", archive, "-C", cout, "--json", "--no-progress"],
                        inspect: extracted(cout)),
                    // Issue 4: an export killed at 90% of its archive, resumed; and a transfer cut
                    // at 90%, completed with verify --partial + truncate + cat.
                    .init(
                        operation: "create --resume (cut at 90%)", kind: .resume,
                        prepare: {
                            try removeTree(resumed)
                            try cutCopy(of: archive, to: resumed + ".partial", fraction: 0.9)
                        },
                        arguments: [cairn, "create", "--resume", "-q", "-o", resumed, "--no-progress", corpus.path],
                        inspect: { _, r in
                            r.archiveBytes = TreeTally.size(of: resumed)
                            if !sameFile(resumed, archive) { r.failure = "resumed archive differs from the uninterrupted one" }
                        }),
                    .init(
                        operation: "transfer resume (cut at 90%)", kind: .resume,
                        prepare: { try cutCopy(of: archive, to: transferred, fraction: 0.9) },
                        arguments: [
                            "/bin/bash", "-c",
                            """
                            set -euo pipefail
                            j=$(\(shellQuoted(cairn)) verify --partial --json \(shellQuoted(transferred)))
                            n=$(printf '%s' "$j" | sed -E 's/.*"verifiedLength":([0-9]+).*/\\1/')
                            t=$(printf '%s' "$j" | sed -E 's/.*"resumeToken":"([^"]+)".*/\\1/')
                            truncate -s "$n" \(shellQuoted(transferred))
                            \(shellQuoted(cairn)) cat \(shellQuoted(archive)) --from-offset "$n" --expect-token "$t" >> \(shellQuoted(transferred))
                            """,
                        ],
                        inspect: { _, r in
                            if !sameFile(transferred, archive) { r.failure = "completed copy differs from the archive" }
                        }),
                ]))

        let ld = dir("tar-lz4")
        list.append(
            Tool(
                name: "tar | lz4", executables: ["tar", "lz4"], versionCommand: ["lz4", "--version"],
                steps: [
                    .init(
                        operation: "create", kind: .create, prepare: clean("\(ld)/x.tar.lz4"),
                        arguments: [
                            "/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c > \(shellQuoted("\(ld)/x.tar.lz4"))",
                        ], inspect: sizeInto("\(ld)/x.tar.lz4")),
                    // Cairn syncs its archive before renaming it into place; this row costs that in.
                    .init(
                        operation: "create + fsync", kind: .create, prepare: clean("\(ld)/x.tar.lz4"),
                        arguments: [
                            "/bin/bash", "-c",
                            "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c > \(shellQuoted("\(ld)/x.tar.lz4")) && sync \(shellQuoted("\(ld)/x.tar.lz4"))",
                        ], inspect: sizeInto("\(ld)/x.tar.lz4")),
                    .init(
                        operation: "extract", kind: .extract, prepare: clean("\(ld)/out"),
                        arguments: [
                            "/bin/bash", "-c",
                            "set -o pipefail; mkdir -p \(shellQuoted("\(ld)/out")) && lz4 -dc -q \(shellQuoted("\(ld)/x.tar.lz4")) | tar -xf - -C \(shellQuoted("\(ld)/out"))",
                        ], inspect: extracted("\(ld)/out")),
                ]))

        let zd = dir("tar-zstd")
        list.append(
            Tool(
                name: "tar | zstd -T0 -3", executables: ["tar", "zstd"], versionCommand: ["zstd", "--version"],
                steps: [
                    .init(
                        operation: "create", kind: .create, prepare: clean("\(zd)/x.tar.zst"),
                        arguments: [
                            "/bin/bash", "-c",
                            "set -o pipefail; tar -cf - -C \(c) . | zstd -T0 -3 -q -c > \(shellQuoted("\(zd)/x.tar.zst"))",
                        ], inspect: sizeInto("\(zd)/x.tar.zst")),
                    .init(
                        operation: "extract", kind: .extract, prepare: clean("\(zd)/out"),
                        arguments: [
                            "/bin/bash", "-c",
                            "set -o pipefail; mkdir -p \(shellQuoted("\(zd)/out")) && zstd -dc -q \(shellQuoted("\(zd)/x.tar.zst")) | tar -xf - -C \(shellQuoted("\(zd)/out"))",
                        ], inspect: extracted("\(zd)/out")),
                ]))

        // A directory is made into an archive index (.caidx); .caibx is for a single blob.
        let sd = dir("casync")
        list.append(
            Tool(
                name: "casync", executables: ["casync"], versionCommand: ["casync", "--version"],
                steps: [
                    .init(
                        operation: "make", kind: .create, prepare: clean("\(sd)/x.caidx", "\(sd)/store"),
                        arguments: ["casync", "make", "--store=\(sd)/store", "\(sd)/x.caidx", corpus.path],
                        inspect: { _, r in
                            r.archiveBytes = TreeTally.size(of: "\(sd)/x.caidx") + TreeTally.size(of: "\(sd)/store")
                        }),
                    .init(
                        operation: "extract", kind: .extract, prepare: clean("\(sd)/out"),
                        arguments: ["casync", "extract", "--store=\(sd)/store", "\(sd)/x.caidx", "\(sd)/out"],
                        inspect: extracted("\(sd)/out")),
                ], note: "default chunk store compression (zstd), SHA-512/256"))

        let bd = dir("borg")
        let borgRepo = "\(bd)/repo"
        list.append(
            Tool(
                name: "borg", executables: ["borg"], versionCommand: ["borg", "--version"],
                steps: [
                    .init(
                        operation: "create", kind: .create,
                        prepare: {
                            try removeTree(borgRepo)
                            try removeTree("\(bd)/home")
                            try FileManager.default.createDirectory(atPath: bd, withIntermediateDirectories: true)
                            let r = try runner.run(["borg", "init", "--encryption=none", borgRepo], label: "borg-init")
                            guard r.succeeded else { throw BenchError("borg init failed: \(r.standardError.suffix(300))") }
                        },
                        arguments: [
                            "/bin/bash", "-c", "cd \(c) && exec borg create --compression lz4 \(shellQuoted(borgRepo))::bench .",
                        ], inspect: sizeInto(borgRepo)),
                    .init(
                        operation: "extract", kind: .extract, prepare: clean("\(bd)/out"),
                        arguments: [
                            "/bin/bash", "-c",
                            "mkdir -p \(shellQuoted("\(bd)/out")) && cd \(shellQuoted("\(bd)/out")) && exec borg extract \(shellQuoted(borgRepo))::bench",
                        ], inspect: extracted("\(bd)/out")),
                ], note: "--encryption=none, --compression lz4, fresh repository and cache each run"))

        let rd = dir("restic")
        let resticRepo = "\(rd)/repo"
        list.append(
            Tool(
                name: "restic", executables: ["restic"], versionCommand: ["restic", "version"],
                steps: [
                    .init(
                        operation: "backup", kind: .create,
                        prepare: {
                            try removeTree(resticRepo)
                            try removeTree("\(rd)/cache")
                            try FileManager.default.createDirectory(atPath: rd, withIntermediateDirectories: true)
                            let r = try runner.run(["restic", "-r", resticRepo, "init"], label: "restic-init")
                            guard r.succeeded else { throw BenchError("restic init failed: \(r.standardError.suffix(300))") }
                        },
                        arguments: [
                            "/bin/bash", "-c", "cd \(c) && exec restic -r \(shellQuoted(resticRepo)) backup --quiet .",
                        ], inspect: sizeInto(resticRepo)),
                    .init(
                        operation: "restore", kind: .extract, prepare: clean("\(rd)/out"),
                        arguments: ["restic", "-r", resticRepo, "restore", "latest", "--target", "\(rd)/out", "--quiet"],
                        inspect: extracted("\(rd)/out")),
                ], note: "encrypted (always), default compression (auto), fresh repository and cache each run"))
        return list
    }

    /// The environment every child gets: repository passwords and caches under the work dir.
    var environment: [String: String] {
        [
            "RESTIC_PASSWORD": "cairn-bench", "RESTIC_CACHE_DIR": "\(base)/restic/cache",
            "BORG_BASE_DIR": "\(base)/borg/home", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
            "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes", "LC_ALL": "C",
        ]
    }

    /// Runs every available tool `runs` times, tools interleaved within a run so that a noisy
    /// minute hits all of them alike.
    func run() throws -> (results: [OperationResult], versions: [String: String], skipped: [String: String], notes: [String: String]) {
        try FileManager.default.createDirectory(atPath: "\(base)/logs", withIntermediateDirectories: true)
        var runner = ProcessRunner(logDirectory: "\(base)/logs")
        runner.environment = environment
        let tools = tools(runner: runner)
        var versions: [String: String] = [:]
        var skipped: [String: String] = [:]
        var notes: [String: String] = [:]
        var available: [Tool] = []
        for tool in tools {
            if let missing = tool.executables.first(where: { findExecutable($0) == nil }) {
                skipped[tool.name] = "\(missing) is not installed"
                log("skipping \(tool.name): \(missing) is not installed")
                continue
            }
            available.append(tool)
            if let note = tool.note { notes[tool.name] = note }
            if let r = try? runner.run(tool.versionCommand, label: "version") {
                let text = (r.standardOutput + "\n" + r.standardError).split(separator: "\n").first { !$0.isEmpty }
                versions[tool.name] = text.map(String.init) ?? "?"
            }
        }
        var results: [String: OperationResult] = [:]
        var order: [String] = []
        for run in 1...runs {
            for tool in available {
                try FileManager.default.createDirectory(atPath: "\(base)/\(dirName(tool.name))", withIntermediateDirectories: true)
                var failedCreate = false
                for step in tool.steps {
                    let key = "\(tool.name)\u{0}\(step.operation)"
                    if results[key] == nil {
                        order.append(key)
                        results[key] = OperationResult(
                            tool: tool.name, operation: step.operation, kind: step.kind,
                            command: step.arguments.map { $0.contains(" ") ? shellQuoted($0) : $0 }.joined(separator: " "))
                    }
                    if failedCreate {
                        results[key]!.failure = "skipped: the create step failed"
                        continue
                    }
                    do {
                        try step.prepare()
                        let label = "\(dirName(tool.name))-\(step.operation)-\(run)"
                        let r = try runner.run(step.arguments, label: label)
                        results[key]!.runs.append(r)
                        if r.succeeded {
                            step.inspect(r, &results[key]!)
                            log(
                                String(
                                    format: "run %d: %@ %@: %.2f s wall, %.2f s CPU, %.0f MiB peak RSS", run, tool.name, step.operation,
                                    r.wallSeconds, r.cpuSeconds, Double(r.peakRSSBytes) / 1_048_576))
                        } else {
                            let tail = r.standardError.split(separator: "\n").suffix(3).joined(separator: " / ")
                            results[key]!.failure = "exit \(r.exitStatus): \(tail)"
                            log("run \(run): \(tool.name) \(step.operation) FAILED (exit \(r.exitStatus)): \(tail)")
                            if step.kind == .create { failedCreate = true }
                        }
                    } catch {
                        results[key]!.failure = "\(error)"
                        log("run \(run): \(tool.name) \(step.operation) FAILED: \(error)")
                        if step.kind == .create { failedCreate = true }
                    }
                    if step.kind == .extract, !keep { try? removeTree("\(base)/\(dirName(tool.name))/out") }
                }
            }
        }
        if !keep { try? removeTree(base) }
        return (order.map { results[$0]! }, versions, skipped, notes)
    }
}

/// A file-system-friendly name for a tool.
func dirName(_ tool: String) -> String {
    switch tool {
    case "tar | lz4": "tar-lz4"
    case "tar | zstd -T0 -3": "tar-zstd"
    case "read (tar -c | cat)": "read"
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
