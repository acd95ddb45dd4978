import Foundation

/// Makes the tools of one case in one round (``EndToEnd/tools(for:in:peers:round:runner:keepExtractedTrees:)``):
/// each tool's steps with their untimed preparation, inspection and clean-up. Every extraction
/// goes into a directory of its own (`out-<round>`), removed right after it is measured unless
/// ``keep``.
struct CaseTools {
    var cairn: String
    /// The end-to-end work directory (`<work>/e2e`): the borg and restic homes and caches.
    var base: String
    var benchCase: BenchCase
    var caseDirectory: String
    var round: Int
    var runner: ProcessRunner
    /// Whether extracted trees stay until the case ends (`--keep`, or ``ExtractedTrees``).
    var keep: Bool

    /// The case's path, quoted for the shell.
    private var c: String { shellQuoted(benchCase.path) }
    /// This round's extraction directory, under a tool's directory.
    private var out: String { "out-\(round)" }

    private func dir(_ tool: String) -> String { "\(caseDirectory)/\(tool)" }
    private func clean(_ paths: String...) -> () throws -> Void {
        { for p in paths { try removeTree(p) } }
    }
    private func sizeOf(_ paths: String...) -> (ProcessResult) -> Inspection {
        { _ in Inspection(archiveBytes: paths.map(TreeTally.size(of:)).reduce(0, +)) }
    }
    private func extracted(_ path: String) -> (ProcessResult) -> Inspection {
        { _ in Inspection(extractedBytes: TreeTally.walk(path).bytes) }
    }
    private func removeAfterwards(_ path: String) -> () -> Void {
        let keep = keep
        return { if !keep { try? removeTree(path) } }
    }

    /// The baseline: reading the tree through tar.
    func readBaseline() -> Tool {
        Tool(
            name: ToolName.read, executables: ["tar"], versionCommand: ["tar", "--version"],
            steps: [
                .init(
                    operation: "read tree", kind: .read,
                    arguments: ["/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | cat > /dev/null"])
            ], note: "baseline: reading the tree through tar")
    }

    /// Cairn with `compression`: create, and (`withResume`) list, verify and the two resume
    /// steps, and (`withExtract`) extract.
    func cairnTool(name: String, directory: String, compression: String, withResume: Bool, withExtract: Bool = true) -> Tool {
        let cd = dir(directory)
        let archive = "\(cd)/bench.cairn"
        let cout = "\(cd)/\(out)"
        var steps: [Tool.Step] = [
            .init(
                operation: "create", kind: .create, prepare: clean(archive),
                arguments: [
                    cairn, "create", "-o", archive, "--compression", compression, "--json", "--no-progress", benchCase.path,
                ],
                inspect: { result in
                    var found = Inspection(archiveBytes: TreeTally.size(of: archive))
                    if let object = lastJSONObject(result.standardOutput),
                        let dedup = (object["deduplicatedBytes"] as? NSNumber)?.uint64Value
                    {
                        found.deduplicatedBytes = dedup
                    }
                    return found
                })
        ]
        if withResume {
            steps.append(.init(operation: "list", kind: .list, arguments: [cairn, "list", archive]))
            steps.append(.init(operation: "verify", kind: .verify, arguments: [cairn, "verify", archive, "--json"]))
        }
        if withExtract {
            steps.append(
                .init(
                    operation: "extract", kind: .extract, prepare: clean(cout),
                    arguments: [cairn, "extract", archive, "-C", cout, "--json", "--no-progress"],
                    inspect: extracted(cout), cleanUp: removeAfterwards(cout)))
        }
        if withResume { steps += resumeSteps(archive: archive, in: cd) }
        return Tool(name: name, executables: [cairn], versionCommand: [cairn, "--version"], steps: steps)
    }

    /// The resume steps of `archive` (in `cd`): issue 4's export killed at 90% of its archive,
    /// resumed; and a transfer cut at 90%, completed with verify --partial + truncate + cat.
    private func resumeSteps(archive: String, in cd: String) -> [Tool.Step] {
        let resumed = "\(cd)/resumed.cairn"
        let transferred = "\(cd)/transferred.cairn"
        var steps: [Tool.Step] = []
        steps.append(
            .init(
                operation: "create --resume (cut at 90%)", kind: .resume,
                prepare: {
                    try removeTree(resumed)
                    try cutCopy(of: archive, to: resumed + ".partial", fraction: 0.9)
                },
                arguments: [cairn, "create", "--resume", "-q", "-o", resumed, "--no-progress", benchCase.path],
                inspect: { _ in
                    var found = Inspection(archiveBytes: TreeTally.size(of: resumed))
                    if !sameFile(resumed, archive) { found.failure = "resumed archive differs from the uninterrupted one" }
                    return found
                }))
        steps.append(
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
                inspect: { _ in
                    sameFile(transferred, archive) ? Inspection() : Inspection(failure: "completed copy differs from the archive")
                }))
        return steps
    }

    /// Cairn lz4 signed with a key made once per case (`cairn key generate -W`): create with
    /// `--sign`, extract with `--trusted-key` (every signature checked), for issue 25's signed
    /// against plain ratios.
    func cairnSigned() -> Tool {
        let cd = dir("cairn-signed")
        let archive = "\(cd)/bench.cairn"
        let cout = "\(cd)/\(out)"
        let secretKey = "\(cd)/bench.key"
        let publicKey = "\(cd)/bench.pub"
        let cairn = cairn
        let runner = runner
        let makeKey: () throws -> Void = {
            guard !FileManager.default.fileExists(atPath: secretKey) else { return }
            try FileManager.default.createDirectory(atPath: cd, withIntermediateDirectories: true)
            let made = try runner.run([cairn, "key", "generate", "-W", "-p", publicKey, "-s", secretKey], label: "key generate")
            guard made.exitStatus == 0 else { throw BenchError("cairn key generate failed: \(made.standardError)") }
        }
        let steps: [Tool.Step] = [
            .init(
                operation: "create", kind: .create,
                prepare: {
                    try makeKey()
                    try removeTree(archive)
                },
                arguments: [
                    cairn, "create", "-o", archive, "--compression", "lz4", "--sign", secretKey, "--json", "--no-progress",
                    benchCase.path,
                ],
                inspect: sizeOf(archive)),
            .init(
                operation: "extract", kind: .extract, prepare: clean(cout),
                arguments: [cairn, "extract", archive, "-C", cout, "--trusted-key", publicKey, "--json", "--no-progress"],
                inspect: extracted(cout), cleanUp: removeAfterwards(cout)),
        ]
        return Tool(name: ToolName.cairnSigned, executables: [cairn], versionCommand: [cairn, "--version"], steps: steps)
    }

    /// The keys of the trusted-archive tools, made once per case under `<case>/keys` (untimed):
    /// a signing key pair by `cairn key generate -W`, an identity by `age-keygen`, and its
    /// recipient alone in a recipients file (what `--recipients-file` and `age -R` read).
    struct TrustKeys {
        var directory: String
        var secretKey: String { "\(directory)/bench.key" }
        var publicKey: String { "\(directory)/bench.pub" }
        var identity: String { "\(directory)/identity.txt" }
        var recipients: String { "\(directory)/recipients.txt" }
        /// A maker key file (`cairn key generate --maker`): stable chunk keys without signing.
        var makerKey: String { "\(directory)/maker.key" }

        /// Makes the keys that are missing.
        ///
        /// - Throws: ``BenchError`` when a key tool fails.
        func make(cairn: String, runner: ProcessRunner) throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: secretKey) {
                let made = try runner.run([cairn, "key", "generate", "-W", "-p", publicKey, "-s", secretKey], label: "key-generate")
                guard made.succeeded else { throw BenchError("cairn key generate failed: \(made.standardError.suffix(300))") }
            }
            if !FileManager.default.fileExists(atPath: makerKey) {
                let made = try runner.run([cairn, "key", "generate", "--maker", makerKey], label: "key-generate-maker")
                guard made.succeeded else { throw BenchError("cairn key generate --maker failed: \(made.standardError.suffix(300))") }
            }
            if !FileManager.default.fileExists(atPath: recipients) {
                try? removeTree(identity)
                let made = try runner.run(["age-keygen", "-o", identity], label: "age-keygen")
                guard made.succeeded else { throw BenchError("age-keygen failed: \(made.standardError.suffix(300))") }
                let shown = try runner.run(["age-keygen", "-y", identity], label: "age-keygen-y")
                let recipient = shown.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
                guard shown.succeeded, recipient.hasPrefix("age1") else { throw BenchError("age-keygen -y gave no recipient") }
                guard FileManager.default.createFile(atPath: recipients, contents: Data((recipient + "\n").utf8)) else {
                    throw BenchError("cannot write \(recipients)")
                }
            }
        }
    }

    private var trustKeys: TrustKeys { TrustKeys(directory: "\(caseDirectory)/keys") }

    /// Cairn lz4 signed and encrypted for one age recipient (issue 25): create with `--sign`
    /// and `--recipients-file`, extract with `--trusted-key` and `--identity` (every signature
    /// checked, every block opened).
    func cairnEncrypted() -> Tool {
        let cd = dir("cairn-encrypted")
        let archive = "\(cd)/bench.cairn"
        let cout = "\(cd)/\(out)"
        let keys = trustKeys
        let (cairn, runner) = (cairn, runner)
        let steps: [Tool.Step] = [
            .init(
                operation: "create", kind: .create,
                prepare: {
                    try keys.make(cairn: cairn, runner: runner)
                    try removeTree(archive)
                },
                arguments: [
                    cairn, "create", "-o", archive, "--compression", "lz4", "--sign", keys.secretKey, "--recipients-file", keys.recipients,
                    "--json", "--no-progress", benchCase.path,
                ],
                inspect: sizeOf(archive)),
            .init(
                operation: "extract", kind: .extract, prepare: clean(cout),
                arguments: [
                    cairn, "extract", archive, "-C", cout, "--trusted-key", keys.publicKey, "--identity", keys.identity, "--json", "--no-progress",
                ],
                inspect: extracted(cout), cleanUp: removeAfterwards(cout)),
        ]
        return Tool(
            name: ToolName.cairnEncrypted, executables: [cairn, "age-keygen"], versionCommand: [cairn, "--version"], steps: steps,
            note: "create --sign --recipients-file (one age-keygen recipient), extract --trusted-key --identity")
    }

    /// `tar | lz4 -1 | age -R` (the recipients file of ``TrustKeys``: the same one recipient as
    /// `age -r`), the same followed by `sync` of its archive, and `age -d -i ID | lz4 -d | tar -x`.
    func tarLZ4Age() -> Tool {
        let ad = dir("tar-lz4-age")
        let archive = "\(ad)/x.tar.lz4.age"
        let a = shellQuoted(archive)
        let o = "\(ad)/\(out)"
        let keys = trustKeys
        let (cairn, runner) = (cairn, runner)
        return Tool(
            name: ToolName.tarLZ4Age, executables: ["tar", "lz4", "age", "age-keygen"], versionCommand: ["age", "--version"],
            steps: [
                .init(
                    operation: "create", kind: .create,
                    prepare: {
                        try keys.make(cairn: cairn, runner: runner)
                        try removeTree(archive)
                    },
                    arguments: [
                        "/bin/bash", "-c",
                        "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c | age -R \(shellQuoted(keys.recipients)) > \(a)",
                    ],
                    inspect: sizeOf(archive)),
                // Cairn syncs its archive before renaming it into place; this row costs that in.
                .init(
                    operation: "create + fsync", kind: .create, prepare: clean(archive),
                    arguments: [
                        "/bin/bash", "-c",
                        "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c | age -R \(shellQuoted(keys.recipients)) > \(a) && sync \(a)",
                    ],
                    inspect: sizeOf(archive)),
                .init(
                    operation: "extract", kind: .extract, prepare: clean(o),
                    arguments: [
                        "/bin/bash", "-c",
                        "set -o pipefail; mkdir -p \(shellQuoted(o)) && age -d -i \(shellQuoted(keys.identity)) \(a) | lz4 -dc -q "
                            + "| tar -xf - -C \(shellQuoted(o))",
                    ], inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ], note: "age -R: the recipients file holds the one recipient of age-keygen -y, as age -r would take it")
    }

    /// `tar | lz4 -1`: create, create + fsync, extract.
    func tarLZ4() -> Tool {
        let ld = dir("tar-lz4")
        let a = shellQuoted("\(ld)/x.tar.lz4")
        let o = "\(ld)/\(out)"
        return Tool(
            name: ToolName.tarLZ4, executables: ["tar", "lz4"], versionCommand: ["lz4", "--version"],
            steps: [
                .init(
                    operation: "create", kind: .create, prepare: clean("\(ld)/x.tar.lz4"),
                    arguments: ["/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c > \(a)"],
                    inspect: sizeOf("\(ld)/x.tar.lz4")),
                // Cairn syncs its archive before renaming it into place; this row costs that in.
                .init(
                    operation: "create + fsync", kind: .create, prepare: clean("\(ld)/x.tar.lz4"),
                    arguments: ["/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | lz4 -1 -q -c > \(a) && sync \(a)"],
                    inspect: sizeOf("\(ld)/x.tar.lz4")),
                .init(
                    operation: "extract", kind: .extract, prepare: clean(o),
                    arguments: [
                        "/bin/bash", "-c",
                        "set -o pipefail; mkdir -p \(shellQuoted(o)) && lz4 -dc -q \(a) | tar -xf - -C \(shellQuoted(o))",
                    ], inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ])
    }

    /// `tar | zstd -T0 -3`: create and extract.
    func tarZstd() -> Tool {
        let zd = dir("tar-zstd")
        let a = shellQuoted("\(zd)/x.tar.zst")
        let o = "\(zd)/\(out)"
        return Tool(
            name: ToolName.tarZstd, executables: ["tar", "zstd"], versionCommand: ["zstd", "--version"],
            steps: [
                .init(
                    operation: "create", kind: .create, prepare: clean("\(zd)/x.tar.zst"),
                    arguments: ["/bin/bash", "-c", "set -o pipefail; tar -cf - -C \(c) . | zstd -T0 -3 -q -c > \(a)"],
                    inspect: sizeOf("\(zd)/x.tar.zst")),
                .init(
                    operation: "extract", kind: .extract, prepare: clean(o),
                    arguments: [
                        "/bin/bash", "-c",
                        "set -o pipefail; mkdir -p \(shellQuoted(o)) && zstd -dc -q \(a) | tar -xf - -C \(shellQuoted(o))",
                    ], inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ], note: "-T0: all cores")
    }

    /// casync: make and extract.
    func casync() -> Tool {
        // A directory is made into an archive index (.caidx); .caibx is for a single blob.
        let sd = dir("casync")
        let o = "\(sd)/\(out)"
        return Tool(
            name: ToolName.casync, executables: ["casync"], versionCommand: ["casync", "--version"],
            steps: [
                .init(
                    operation: "make", kind: .create, prepare: clean("\(sd)/x.caidx", "\(sd)/store"),
                    arguments: ["casync", "make", "--store=\(sd)/store", "\(sd)/x.caidx", benchCase.path],
                    inspect: sizeOf("\(sd)/x.caidx", "\(sd)/store")),
                .init(
                    operation: "extract", kind: .extract, prepare: clean(o),
                    arguments: ["casync", "extract", "--store=\(sd)/store", "\(sd)/x.caidx", o],
                    inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ], note: "default chunk store compression (zstd), SHA-512/256")
    }

    /// borg: create (a fresh repository each run) and extract.
    func borg() -> Tool {
        let bd = dir("borg")
        let borgRepo = "\(bd)/repo"
        let o = "\(bd)/\(out)"
        return Tool(
            name: ToolName.borg, executables: ["borg"], versionCommand: ["borg", "--version"],
            steps: [
                .init(
                    operation: "create", kind: .create,
                    prepare: {
                        try removeTree(borgRepo)
                        try removeTree("\(base)/borg-home")
                        try FileManager.default.createDirectory(atPath: bd, withIntermediateDirectories: true)
                        let r = try runner.run(["borg", "init", "--encryption=none", borgRepo], label: "borg-init")
                        guard r.succeeded else { throw BenchError("borg init failed: \(r.standardError.suffix(300))") }
                    },
                    arguments: [
                        "/bin/bash", "-c", "cd \(c) && exec borg create --compression lz4 \(shellQuoted(borgRepo))::bench .",
                    ], inspect: sizeOf(borgRepo)),
                .init(
                    operation: "extract", kind: .extract, prepare: clean(o),
                    arguments: [
                        "/bin/bash", "-c",
                        "mkdir -p \(shellQuoted(o)) && cd \(shellQuoted(o)) && exec borg extract \(shellQuoted(borgRepo))::bench",
                    ], inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ], note: "--encryption=none, --compression lz4, fresh repository and cache each run")
    }

    /// restic: backup (a fresh repository each run) and restore.
    func restic() -> Tool {
        let rd = dir("restic")
        let resticRepo = "\(rd)/repo"
        let o = "\(rd)/\(out)"
        return Tool(
            name: ToolName.restic, executables: ["restic"], versionCommand: ["restic", "version"],
            steps: [
                .init(
                    operation: "backup", kind: .create,
                    prepare: {
                        try removeTree(resticRepo)
                        try removeTree("\(base)/restic-cache")
                        try FileManager.default.createDirectory(atPath: rd, withIntermediateDirectories: true)
                        let r = try runner.run(["restic", "-r", resticRepo, "init"], label: "restic-init")
                        guard r.succeeded else { throw BenchError("restic init failed: \(r.standardError.suffix(300))") }
                    },
                    arguments: [
                        "/bin/bash", "-c", "cd \(c) && exec restic -r \(shellQuoted(resticRepo)) backup --quiet .",
                    ], inspect: sizeOf(resticRepo)),
                .init(
                    operation: "restore", kind: .extract, prepare: clean(o),
                    arguments: ["restic", "-r", resticRepo, "restore", "latest", "--target", o, "--quiet"],
                    inspect: extracted(o), cleanUp: removeAfterwards(o)),
            ], note: "encrypted (always), default compression (auto), fresh repository and cache each run")
    }
}
