import Foundation

/// The command line of `cairn-bench` (see Benchmarks/README.md).
struct BenchOptions {
    enum Selection: String {
        case all, stages, endToEnd = "end-to-end"
        /// Issue 10's transfer case alone (``TransferBenchmark``); never part of `all`.
        case transfer
        /// Issue 12's object-storage case alone (``UploadBenchmark``); never part of `all`.
        case upload
        /// Issue 23's checkpoint case alone (``CheckpointStallBenchmark``); never part of `all`.
        case checkpoint
        /// Issue 25's trusted archives: the corpus and the small files with the plain, signed and
        /// signed+encrypted archives and `tar | lz4 -1 | age` (``Peer/trusted``), then the transfer
        /// case's seeded delta only, plain against encrypted; never part of `all`.
        case trusted
        /// Issue 26's shaped link alone (``LinkBenchmark``); never part of `all`.
        case links
    }

    static let usage = """
        usage: cairn-bench [--targets] [--size-mib N] [--seed S] [--corpus DIR] [--small-files N]
                           [--tree PATH]... [--random-mib N] [--large-file] [--large-file-mib N]
                           [--profile] [--peers LIST] [--runs R] [--pause S] [--work DIR] [--out DIR]
                           [--only stages|end-to-end|transfer|upload|checkpoint|trusted|links]
                           [--transfer-mib N] [--link-mib N]
                           [--upload-mib N] [--checkpoint-mib N]
                           [--cairn PATH] [--keep] [--realtime]

          --targets        issue 9's target set: the corpus, the small files, /usr/share/man and
                           /usr/lib/python3 (the Swift toolchain's usr/lib/swift for a missing
                           one), a random-data tree, tar-lz4 and tar-zstd as peers, 5 rounds, and
                           no list/verify/resume steps; ends with the verdict table
          --size-mib N     size of the generated app-data corpus in MiB (default 1024)
          --seed S         seed of the generated corpora (default 1)
          --corpus DIR     benchmark an existing directory instead of the generated corpus
          --small-files N  files in the generated small-files case, 0.2-3 KB of text each
                           (default 100000, about 160 MB; 0 skips the case)
          --tree PATH      also benchmark an existing tree (repeatable), e.g. /usr/share/man
          --random-mib N   size of the random-data tree, cairn lz4 against --compression none
                           (default 512 with --targets, else 0: no such case)
          --large-file     add the large-file case: one 4 GiB file of mixed content, generated
                           once under --work (refused when the disk lacks room), peak RSS of
                           cairn create and extract
          --large-file-mib N  size of that file in MiB (default 4096; implies --large-file)
          --profile        perf record / perf report of cairn create and extract of every
                           case but the large file: the top five costs, the share of each
                           thread and the top symbols, saved in the results
          --peers LIST     comma-separated peers: tar-lz4, tar-zstd, casync, borg, restic, cairn-signed,
                           cairn-encrypted, tar-lz4-age, all
                           or none (default: every installed peer on the corpus, tar-lz4 and
                           tar-zstd on the other trees; --targets: tar-lz4 and tar-zstd
                           everywhere; never on the random-data and large-file cases)
          --runs R         interleaved rounds of every measurement; medians and min-max are
                           reported (default 3, 5 with --targets); an issue 9 target counts
                           from 5 successful rounds, with fewer its verdict is indicative
          --pause S        seconds to sleep after sync(2) before every timed create and extract
                           (default 3)
          --work DIR       scratch space for corpora, archives, repositories (default /tmp/cairn-bench)
          --out DIR        where results-<UTC time>.md/.json/.svg are written (default
                           $XDG_STATE_HOME/cairn-bench/results, else /tmp/cairn-bench/results)
          --only WHAT      stages (in-process micro-benchmarks) or end-to-end (tools), default both;
                           or transfer: issue 10's case alone (cairn fetch against curl and
                           zsync over nginx on 127.0.0.1), which no other selection includes;
                           or upload: issue 12's case alone (cairn create -o s3:// against
                           create + rclone copyto, resume, remote extract; rclone serve s3 on
                           127.0.0.1), which no other selection includes either;
                           or checkpoint: issue 23's case alone (an app's checkpoint
                           during cairn create, see --checkpoint-mib);
                           or trusted: issue 25's case (the corpus and the small files, plain,
                           signed, signed+encrypted and tar | lz4 -1 | age, 5 rounds, then the
                           seeded delta of two encrypted exports against two plain ones on the
                           --transfer-mib corpus); --small-files N makes a quick run smaller;
                           or links: issue 26's shaped link alone (needs root and tc: cairn
                           fetch against aria2c -x4 -s4 and curl, create -o s3:// against
                           rclone copyto, remote extracts with 1 and 4 connections)
          --transfer-mib N size of the transfer case's generated corpus in MiB (default 512)
          --upload-mib N   size of the upload case's generated corpus in MiB (default 512)
          --link-mib N     size of the link case's generated corpus in MiB (default 256)
          --checkpoint-mib N  size of the checkpoint case's -wal in MiB (default 270): how long
                           the app's wal_checkpoint(TRUNCATE) and (PASSIVE) take while
                           cairn create reads the database, against the same checkpoint alone
          --cairn PATH     the cairn executable (default: `cairn` next to cairn-bench)
          --keep           keep archives and extracted trees in the work directory
          --realtime       run the harness and every tool it starts under SCHED_RR (priority 10,
                           root or CAP_SYS_NICE), so other work on a shared machine waits while
                           the tools are timed; Cairn and its peers alike
        """

    var sizeMiB = 1024
    var seed: UInt64 = 1
    var corpus: String?
    var smallFiles = 100_000
    var trees: [String] = []
    /// Peers chosen with `--peers`; nil means the defaults of each case.
    var peers: [Peer]?
    /// `--targets`: issue 9's target set (see ``usage``).
    var targets = false
    /// `--runs`; nil means ``runs``' default.
    var runsGiven: Int?
    /// `--random-mib`; nil means ``randomMiB``'s default.
    var randomMiBGiven: Int?
    /// `--large-file-mib` (or 4096 with `--large-file`); nil means no large-file case.
    var largeFileMiB: Int?
    var profile = false
    var pauseSeconds = 3.0
    var work = "/tmp/cairn-bench"
    /// `--out`; nil means ``defaultOutputDirectory(environment:)``.
    var out: String?
    var selection = Selection.all
    /// `--transfer-mib`: the transfer case's corpus, MiB.
    var transferMiB = 512
    /// `--upload-mib`: the upload case's corpus, MiB.
    var uploadMiB = 512
    /// `--link-mib`: the link case's corpus, MiB.
    var linkMiB = 256
    /// `--checkpoint-mib`: the checkpoint case's `-wal`, MiB.
    var checkpointMiB = 270
    var cairn: String?
    var keep = false
    /// `--realtime`: ``Scheduling/enterRealtime()`` before anything runs.
    var realtime = false

    /// The options that take no value.
    static let switches: Set<String> = ["--keep", "--realtime", "--targets", "--profile", "--large-file"]

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// Parses `arguments` (without the program name).
    ///
    /// - Throws: ``UsageError`` naming the argument that is unknown, lacks a value or has a
    ///   value out of range.
    init(_ arguments: [String]) throws(UsageError) {
        var index = 0
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
                guard index < arguments.count else { throw UsageError(description: "\(name) needs a value") }
                defer { index += 1 }
                return arguments[index]
            }
            // A switch takes no value: `--realtime=0` is refused, not read as `--realtime`.
            if Self.switches.contains(name), inline != nil {
                throw UsageError(description: "\(name) takes no value")
            }
            switch name {
            case "--size-mib":
                guard let n = Int(try take()), n > 0 else { throw UsageError(description: "--size-mib takes a positive number") }
                sizeMiB = n
            case "--seed":
                guard let n = UInt64(try take()) else { throw UsageError(description: "--seed takes a number") }
                seed = n
            case "--corpus": corpus = try take()
            case "--small-files":
                guard let n = Int(try take()), n >= 0, n <= 10_000_000 else {
                    throw UsageError(description: "--small-files takes a number from 0 to 10000000")
                }
                smallFiles = n
            case "--tree": trees.append(try take())
            case "--peers": peers = try Peer.parseList(try take())
            case "--runs":
                guard let n = Int(try take()), n > 0 else { throw UsageError(description: "--runs takes a positive number") }
                runsGiven = n
            case "--pause":
                guard let s = Double(try take()), s >= 0, s <= 60 else {
                    throw UsageError(description: "--pause takes seconds from 0 to 60")
                }
                pauseSeconds = s
            case "--work": work = try take()
            case "--out": out = try take()
            case "--only":
                let text = try take()
                guard let s = Selection(rawValue: text), s != .all else {
                    throw UsageError(description: "--only takes stages, end-to-end, transfer, upload, checkpoint, trusted or links")
                }
                selection = s
            case "--transfer-mib":
                guard let n = Int(try take()), n > 0, n <= 1 << 20 else {
                    throw UsageError(description: "--transfer-mib takes a positive number of MiB up to 1048576")
                }
                transferMiB = n
            case "--upload-mib":
                guard let n = Int(try take()), n > 0, n <= 1 << 20 else {
                    throw UsageError(description: "--upload-mib takes a positive number of MiB up to 1048576")
                }
                uploadMiB = n
            case "--link-mib":
                guard let n = Int(try take()), n > 0, n <= 1 << 20 else {
                    throw UsageError(description: "--link-mib takes a positive number of MiB up to 1048576")
                }
                linkMiB = n
            case "--checkpoint-mib":
                guard let n = Int(try take()), n > 0, n <= 1 << 16 else {
                    throw UsageError(description: "--checkpoint-mib takes a positive number of MiB up to 65536")
                }
                checkpointMiB = n
            case "--cairn": cairn = try take()
            case "--keep": keep = true
            case "--realtime": realtime = true
            case "--targets": targets = true
            case "--profile": profile = true
            case "--random-mib":
                guard let n = Int(try take()), n >= 0, n <= 1 << 20 else {
                    throw UsageError(description: "--random-mib takes a number of MiB from 0 to 1048576")
                }
                randomMiBGiven = n
            case "--large-file": largeFileMiB = largeFileMiB ?? Self.defaultLargeFileMiB
            case "--large-file-mib":
                guard let n = Int(try take()), n > 0, n <= 1 << 20 else {
                    throw UsageError(description: "--large-file-mib takes a positive number of MiB up to 1048576")
                }
                largeFileMiB = n
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default:
                throw UsageError(description: "unknown argument \(name)")
            }
        }
    }

    /// Issue 9's file: 4 GiB.
    static let defaultLargeFileMiB = 4096
    /// The random-data tree of `--targets`.
    static let defaultTargetsRandomMiB = 512

    /// Interleaved rounds: `--runs`, else 5 with `--targets` (issue 9 asks for the median of at
    /// least 5), else 3.
    var runs: Int { runsGiven ?? (targets || selection == .trusted ? TargetSpec.issue9Rounds : 3) }

    /// MiB of the random-data tree, 0 for none: `--random-mib`, else 512 with `--targets`.
    var randomMiB: Int { randomMiBGiven ?? (targets ? Self.defaultTargetsRandomMiB : 0) }

    /// Whether the corpus also gets `cairn list`, `verify` and the resume steps (not with
    /// `--targets`, which measures only what issue 9's targets need).
    var corpusExtras: Bool { !targets && selection != .trusted }

    /// The peers of every case: `--peers`, else issue 25's with `--only trusted`, else nil (each
    /// case's defaults).
    var peerChoice: [Peer]? { peers ?? (selection == .trusted ? Peer.trusted : nil) }

    var runsStages: Bool { selection == .all || selection == .stages }
    var runsEndToEnd: Bool { selection == .all || selection == .endToEnd || selection == .trusted }
    /// Only `--only transfer` runs the transfer case (and `--only trusted` its seeded delta), so
    /// every other run stays as it was.
    var runsTransfer: Bool { selection == .transfer || selection == .trusted }
    /// Only `--only upload` runs the upload case.
    var runsUpload: Bool { selection == .upload }
    /// Only `--only links` runs the link case.
    var runsLinks: Bool { selection == .links }
    /// Only `--only checkpoint` runs the checkpoint case.
    var runsCheckpoint: Bool { selection == .checkpoint }

    /// The results directory: `--out`, else ``defaultOutputDirectory(environment:)``.
    func outputDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        out ?? Self.defaultOutputDirectory(environment: environment)
    }

    /// Outside any checkout: `$XDG_STATE_HOME/cairn-bench/results` when that variable is an
    /// absolute path (the XDG base directory rule), else `/tmp/cairn-bench/results`.
    static func defaultOutputDirectory(environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return "\(state)/cairn-bench/results" }
        return "/tmp/cairn-bench/results"
    }
}

/// A tool Cairn is compared with, as named by `--peers`.
enum Peer: String, CaseIterable {
    case tarLZ4 = "tar-lz4"
    case tarZstd = "tar-zstd"
    case casync, borg, restic
    /// Cairn itself with a signing key (issue 25): `create --sign` and `extract --trusted-key`,
    /// against the plain archive of the same run.
    case cairnSigned = "cairn-signed"
    /// Cairn signed and encrypted (issue 25): `create --sign --recipient` for an identity made by
    /// `age-keygen`, `extract --trusted-key --identity`, against the plain archive of the same run.
    case cairnEncrypted = "cairn-encrypted"
    /// `tar | lz4 -1 | age -r R` and `age -d -i ID | lz4 -d | tar -x`: the pipeline an encrypted
    /// archive replaces (issue 25's create target).
    case tarLZ4Age = "tar-lz4-age"

    /// Issue 25's side-by-side set (`--only trusted`): the plain archive is always there; `tar |
    /// lz4 -1` beside `tar | lz4 -1 | age` shows what age adds to the pipeline.
    static let trusted: [Peer] = [.tarLZ4, .cairnSigned, .cairnEncrypted, .tarLZ4Age]

    /// The peers of a case: none on the random-data case and only Cairn encrypted (when chosen)
    /// on the large-file one (their targets compare Cairn with itself or with a limit); else
    /// `chosen` (`--peers`) when given; else all of them on the main corpus and the two tar
    /// pipelines elsewhere, or the two tar pipelines everywhere with `--targets` (to keep the
    /// run short).
    static func forCase(_ kind: BenchCase.Kind, chosen: [Peer]?, targets: Bool) -> [Peer] {
        if kind == .largeFile { return (chosen ?? []).filter { $0 == .cairnEncrypted } }
        if kind == .randomData { return [] }
        if let chosen { return chosen }
        return kind == .corpus && !targets ? allCases : [.tarLZ4, .tarZstd]
    }

    /// Parses "tar-lz4,borg", "all" or "none".
    static func parseList(_ text: String) throws(BenchOptions.UsageError) -> [Peer] {
        var list: [Peer] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: true).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            switch item {
            case "all": list += allCases
            case "none": continue
            default:
                guard let peer = Peer(rawValue: item) else {
                    throw BenchOptions.UsageError(
                        description: "--peers: unknown peer \(item) (known: \(allCases.map(\.rawValue).joined(separator: ", ")), all, none)")
                }
                list.append(peer)
            }
        }
        return allCases.filter(list.contains)
    }
}
