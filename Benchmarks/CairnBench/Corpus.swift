import Cairn
import CairnCorpus
import Foundation
import Glibc

/// One tree every tool reads, with what the report says about it: the generated app-data
/// corpus (or `--corpus DIR`), the generated small-files case, or a `--tree PATH`.
struct BenchCase {
    enum Kind: String, CaseIterable {
        case corpus, smallFiles = "small-files", tree
        /// Seeded random bytes: incompressible chunks (issue 9's `--compression none` target).
        case randomData = "random-data"
        /// One large generated file of mixed content (issue 9's 4 GiB peak-RSS target).
        case largeFile = "large-file"
    }
    var kind: Kind
    /// A short title for the report ("app-data corpus", "100,000 small files", the tree's path).
    var title: String
    var path: String
    var generated: Bool
    var seed: UInt64?
    var fileCount: Int
    var directoryCount: Int
    var totalBytes: UInt64
    var generationSeconds: Double?

    /// A file-system-friendly name, unique among the cases of one run (given its index).
    func slug(index: Int) -> String {
        let base: String
        switch kind {
        case .corpus: base = "corpus"
        case .smallFiles: base = "small-files"
        case .randomData: base = "random-data"
        case .largeFile: base = "large-file"
        case .tree:
            base = "tree-" + String(path.map { $0.isLetter || $0.isNumber ? $0 : "-" }).trimmingCharacters(in: CharacterSet(charactersIn: "-"))
        }
        return "\(index)-\(base)"
    }

    /// The cases `options` asks for, in order: the main corpus, the small files (unless
    /// `--small-files 0`), the trees nobody here wrote (with `--targets`, see
    /// ``SystemTrees``), every `--tree`, the random-data tree (`--random-mib`, or with
    /// `--targets`), the large file (`--large-file`). Generated trees are written under
    /// `--work` once and reused by later runs. The large file's free space is checked before
    /// anything is generated. `notes` receives a line for each tree that was looked for and
    /// skipped.
    ///
    /// - Throws: ``BenchError`` naming a `--corpus` or `--tree` that is not a directory, a
    ///   work directory without room for the large file, or a generator's error.
    static func prepareAll(options: BenchOptions, notes: inout [String]) throws -> [BenchCase] {
        if let mebibytes = options.largeFileMiB {
            let name = largeFileName(mebibytes: mebibytes, seed: options.seed)
            try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
            try LargeFile.checkFreeSpace(
                in: options.work, fileBytes: UInt64(mebibytes) << 20,
                alreadyGenerated: FileManager.default.fileExists(atPath: "\(options.work)/\(name).complete"))
        }
        var cases = [try prepareCorpus(options: options)]
        if options.smallFiles > 0 { cases.append(try prepareSmallFiles(options: options)) }
        var trees: [String] = []
        if options.targets {
            let chosen = SystemTrees.choose { path in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
            }
            for note in chosen.notes { log(note) }
            notes += chosen.notes
            trees += chosen.paths
        }
        trees += options.trees
        for tree in trees { cases.append(try existing(tree, kind: .tree, option: "--tree")) }
        if options.randomMiB > 0 {
            let generator = RandomTree(totalBytes: options.randomMiB << 20, seed: options.seed)
            cases.append(
                try generated(
                    name: "random-\(options.randomMiB)MiB-seed\(options.seed)", kind: .randomData,
                    title: "\(options.randomMiB) MiB of random data", seed: options.seed, work: options.work,
                    describe: "\(options.randomMiB) MiB of random data (seed \(options.seed))"
                ) { path in try generator.generate(at: path) })
        }
        if let mebibytes = options.largeFileMiB {
            let generator = LargeFile(mebibytes: mebibytes, seed: options.seed)
            cases.append(
                try generated(
                    name: largeFileName(mebibytes: mebibytes, seed: options.seed), kind: .largeFile,
                    title: "one \(mebibytes.isMultiple(of: 1024) ? "\(mebibytes / 1024) GiB" : "\(mebibytes) MiB") file of mixed content",
                    seed: options.seed, work: options.work, describe: "a \(mebibytes) MiB file of mixed content (seed \(options.seed))"
                ) { path in try generator.generate(at: path) })
        }
        return cases
    }

    static func largeFileName(mebibytes: Int, seed: UInt64) -> String { "large-file-\(mebibytes)MiB-seed\(seed)" }

    /// An existing directory, tallied.
    static func existing(_ given: String, kind: Kind, option: String) throws -> BenchCase {
        let absolute = URL(fileURLWithPath: given).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw BenchError("\(option) \(given) is not a directory")
        }
        let tally = TreeTally.walk(absolute)
        return BenchCase(
            kind: kind, title: kind == .corpus ? "corpus `\(absolute)`" : "`\(absolute)`", path: absolute, generated: false,
            seed: nil, fileCount: tally.files, directoryCount: tally.directories, totalBytes: tally.bytes, generationSeconds: nil)
    }

    /// Generates the app-data corpus under `work` unless a completed one of the same size and
    /// seed is there (a marker file is written only after `generate(at:)` returns); `--corpus`
    /// replaces it.
    static func prepareCorpus(options: BenchOptions) throws -> BenchCase {
        if let given = options.corpus { return try existing(given, kind: .corpus, option: "--corpus") }
        return try generated(
            name: "corpus-\(options.sizeMiB)MiB-seed\(options.seed)", kind: .corpus, title: "generated app-data corpus",
            seed: options.seed, work: options.work,
            describe: "a \(options.sizeMiB) MiB app-data corpus (seed \(options.seed))"
        ) { path in
            _ = try SampleCorpus(totalBytes: options.sizeMiB << 20, seed: options.seed).generate(at: path)
        }
    }

    /// Generates the small-files case (``SmallFiles``) under `work`, reused like the corpus.
    static func prepareSmallFiles(options: BenchOptions) throws -> BenchCase {
        let generator = SmallFiles(count: options.smallFiles, seed: options.seed)
        return try generated(
            name: "small-files-\(options.smallFiles)-seed\(options.seed)", kind: .smallFiles,
            title: "\(groupedThousands(options.smallFiles)) small text files (0.2–3 KB)", seed: options.seed, work: options.work,
            describe: "\(options.smallFiles) small files (seed \(options.seed))"
        ) { path in try generator.generate(at: path) }
    }

    private static func generated(
        name: String, kind: Kind, title: String, seed: UInt64, work: String, describe: String, generate: (String) throws -> Void
    ) throws -> BenchCase {
        let path = "\(work)/\(name)"
        let marker = "\(work)/\(name).complete"
        if FileManager.default.fileExists(atPath: marker), FileManager.default.fileExists(atPath: path) {
            let tally = TreeTally.walk(path)
            log("reusing \(path) (\(tally.files) files, \(formatMiB(tally.bytes)))")
            return BenchCase(
                kind: kind, title: title, path: path, generated: true, seed: seed, fileCount: tally.files,
                directoryCount: tally.directories, totalBytes: tally.bytes, generationSeconds: nil)
        }
        try? FileManager.default.removeItem(atPath: marker)
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        log("generating \(describe) at \(path)")
        let started = monotonicSeconds()
        try generate(path)
        let seconds = monotonicSeconds() - started
        let tally = TreeTally.walk(path)
        _ = FileManager.default.createFile(atPath: marker, contents: Data("\(tally.files) files, \(tally.bytes) bytes\n".utf8))
        log(
            "generated \(tally.files) files in \(tally.directories) directories, \(formatMiB(tally.bytes)) in "
                + String(format: "%.1f s", seconds))
        return BenchCase(
            kind: kind, title: title, path: path, generated: true, seed: seed, fileCount: tally.files,
            directoryCount: tally.directories, totalBytes: tally.bytes, generationSeconds: seconds)
    }

    /// Reads every file once so that every tool starts from the page cache ("warm cache"); the
    /// page cache is deliberately not dropped on this shared machine.
    func warm() -> (bytes: UInt64, seconds: Double) {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var total: UInt64 = 0
        let started = monotonicSeconds()
        TreeTally.visitFiles(path) { file in
            let fd = open(file, O_RDONLY)
            guard fd >= 0 else { return }
            defer { close(fd) }
            while true {
                let n = read(fd, buffer, 1 << 20)
                if n <= 0 { break }
                total += UInt64(n)
            }
        }
        return (total, monotonicSeconds() - started)
    }
}

/// The trees nobody here wrote that `--targets` benchmarks in place (never modified): issue
/// 9 names `/usr/share/man` and `/usr/lib/python3`, with the Swift toolchain's
/// `/opt/swift/usr/lib/swift` in place of a missing one.
enum SystemTrees {
    static let preferred = ["/usr/share/man", "/usr/lib/python3"]
    static let fallback = "/opt/swift/usr/lib/swift"

    /// The trees to benchmark, given which directories exist, and a line for each one skipped
    /// or replaced (the report and the log say them).
    static func choose(isDirectory: (String) -> Bool) -> (paths: [String], notes: [String]) {
        var paths: [String] = []
        var notes: [String] = []
        for tree in preferred {
            if isDirectory(tree) {
                paths.append(tree)
            } else if !paths.contains(fallback), isDirectory(fallback) {
                paths.append(fallback)
                notes.append("\(tree) is missing: benchmarking \(fallback) in its place")
            } else {
                notes.append("\(tree) is missing" + (paths.contains(fallback) ? " (\(fallback) already stands in for another)" : "") + ": skipped")
            }
        }
        if paths.isEmpty {
            notes.append(
                "no tree nobody here wrote exists (\((preferred + [fallback]).joined(separator: ", "))): the tree targets are not measured")
        }
        return (paths, notes)
    }
}

/// Counts files, directories and bytes of a tree with `opendir`/`lstat` (symlinks not followed).
struct TreeTally {
    var files = 0
    var directories = 0
    var bytes: UInt64 = 0
    /// Bytes in regular files, counting each inode once (for archive stores and repositories
    /// this is the space the store takes, less block rounding).
    static func walk(_ root: String) -> TreeTally {
        var tally = TreeTally()
        visit(root, tally: &tally, onFile: nil)
        return tally
    }

    static func visitFiles(_ root: String, _ body: (String) -> Void) {
        var tally = TreeTally()
        withoutActuallyEscaping(body) { body in visit(root, tally: &tally, onFile: body) }
    }

    private static func visit(_ path: String, tally: inout TreeTally, onFile: ((String) -> Void)?) {
        guard let dir = opendir(path) else { return }
        defer { closedir(dir) }
        let names = (try? DirectoryReader.names(in: FileDescriptor(rawValue: dirfd(dir), path: path))) ?? []
        for name in names.map({ String(decoding: $0, as: UTF8.self) }) {
            let child = path + "/" + name
            var info = stat()
            guard lstat(child, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                tally.directories += 1
                visit(child, tally: &tally, onFile: onFile)
            case S_IFREG:
                tally.files += 1
                tally.bytes += UInt64(info.st_size)
                onFile?(child)
            default:
                break
            }
        }
    }

    /// Total bytes of a file or of the regular files in a directory tree; 0 when missing.
    static func size(of path: String) -> UInt64 {
        var info = stat()
        guard lstat(path, &info) == 0 else { return 0 }
        if info.st_mode & S_IFMT == S_IFDIR { return walk(path).bytes }
        return UInt64(info.st_size)
    }
}

func log(_ text: String) {
    FileHandle.standardError.write(Data("cairn-bench: \(text)\n".utf8))
}

func formatMiB(_ bytes: UInt64) -> String {
    String(format: "%.1f MiB", Double(bytes) / 1_048_576)
}

/// 100000 → "100,000".
func groupedThousands(_ n: Int) -> String {
    let digits = Array(String(n))
    var out = ""
    for (i, d) in digits.enumerated() {
        if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(d)
    }
    return out
}
