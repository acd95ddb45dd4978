import Foundation
import Glibc

/// Issue 10's "small change" to a tree, the edit a re-export after a day of use makes: 64 KiB
/// appended to one text file, 3 × 16 bytes overwritten inside the largest file, one 1 MiB file
/// added. The only implementation of it in the harness.
enum SmallChange {
    static let appendedBytes = 64 << 10
    static let overwriteCount = 3
    static let overwriteBytes = 16
    static let addedBytes = 1 << 20
    /// The added file, relative to the root.
    static let addedPath = "Transfer/added-1MiB.txt"

    /// What ``apply(to:seed:)`` changed, relative to the root.
    struct Applied: Equatable {
        var appendedTo: String
        var overwrittenIn: String
        /// Offsets of the three overwritten 16-byte runs in ``overwrittenIn``.
        var overwrittenAt: [UInt64]
        var added: String
    }

    /// The text files the append may go to: the first of them in path order is chosen.
    static let textExtensions = [".md", ".txt", ".log", ".json"]

    /// Applies the change to the tree at `root` (regular files of the tree are replaced in place,
    /// not through links): appends 64 KiB of seeded text to the first text file in path order,
    /// inverts 3 runs of 16 bytes at 1/4, 1/2 and 3/4 of the largest file (so every byte
    /// changes), adds ``addedPath`` (1 MiB of seeded text).
    ///
    /// - Throws: ``BenchError`` when the tree has no text file, no file of at least 64 bytes, or
    ///   a file cannot be written.
    static func apply(to root: String, seed: UInt64) throws -> Applied {
        let files = regularFiles(under: root)
        guard let text = files.first(where: { f in textExtensions.contains { f.path.hasSuffix($0) } }) else {
            throw BenchError("\(root) has no text file (\(textExtensions.joined(separator: ", "))) for the small change")
        }
        guard let largest = files.max(by: { $0.bytes < $1.bytes || ($0.bytes == $1.bytes && $0.path > $1.path) }),
            largest.bytes >= UInt64(overwriteCount * overwriteBytes * 4)
        else { throw BenchError("\(root) has no file large enough for the small change") }

        var generator = TextGenerator(seed: seed ^ 0x5A17_C4A9_6E00_0001)
        var appended: [UInt8] = []
        generator.append(to: &appended, atLeast: appendedBytes)
        try append(Array(appended.prefix(appendedBytes)), to: "\(root)/\(text.path)")

        let offsets = (1...overwriteCount).map { largest.bytes * UInt64($0) / UInt64(overwriteCount + 1) }
        try invert(runsOf: overwriteBytes, at: offsets, in: "\(root)/\(largest.path)")

        try writeText(to: "\(root)/\(addedPath)", bytes: addedBytes, seed: seed ^ 0x5A17_C4A9_6E00_0002)
        return Applied(appendedTo: text.path, overwrittenIn: largest.path, overwrittenAt: offsets, added: addedPath)
    }

    /// Every regular file below `root` (relative path and size), sorted by path.
    static func regularFiles(under root: String) -> [(path: String, bytes: UInt64)] {
        var found: [(path: String, bytes: UInt64)] = []
        TreeTally.visitFiles(root) { path in
            found.append((String(path.dropFirst(root.count + 1)), TreeTally.size(of: path)))
        }
        return found.sorted { $0.path < $1.path }
    }

    private static func append(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }

    private static func invert(runsOf length: Int, at offsets: [UInt64], in path: String) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        for offset in offsets {
            var run = [UInt8](repeating: 0, count: length)
            guard pread(fd, &run, length, off_t(offset)) == length else { throw BenchError("cannot read \(path) at \(offset)") }
            run = run.map { ~$0 }
            guard pwrite(fd, run, length, off_t(offset)) == length else { throw BenchError("cannot write \(path) at \(offset)") }
        }
    }

    /// Writes `bytes` of seeded text lines (``TextGenerator``) to a new file at `path`,
    /// creating its directory.
    static func writeText(to path: String, bytes: Int, seed: UInt64) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var generator = TextGenerator(seed: seed)
        var text: [UInt8] = []
        text.reserveCapacity(bytes + 4096)
        generator.append(to: &text, atLeast: bytes)
        guard FileManager.default.createFile(atPath: path, contents: Data(text.prefix(bytes))) else {
            throw BenchError("cannot write \(path)")
        }
    }
}

/// The transfer case's two trees: `old`, a copy of the corpus (plus a file of about 10 MiB for
/// the remote extract when the corpus has none), and `new`, a copy of `old` with the
/// ``SmallChange``. Both are written afresh under the work directory by every run (copies
/// with `cp -a`, which keeps modes and mtimes); the corpus itself is the cached one. Both
/// roots have the corpus's name (`old/NAME`, `new/NAME`), so entries have the same paths in
/// both archives, as two exports of one directory do.
struct TransferTrees {
    var old: String
    var new: String
    /// The file of about 10 MiB that the remote extract asks for, relative to either root.
    var extractPath: String
    /// The roots' name, which `cairn create` puts before every entry's path.
    var rootName: String
    /// ``extractPath`` as the archives name it.
    var archivedExtractPath: String { "\(rootName)/\(extractPath)" }
    var extractBytes: UInt64
    /// Whether ``extractPath`` was added because the corpus had no file of 9–11 MiB.
    var extractFileAdded: Bool
    var change: SmallChange.Applied

    static let extractFileBytes = 10 << 20
    /// Where an added extract file goes, relative to the root.
    static let addedExtractPath = "Transfer/extract-10MiB.txt"

    /// Copies `corpus` to `directory/old` and `directory/new` (replacing earlier copies) and
    /// applies the small change to `new`.
    ///
    /// - Throws: ``BenchError`` when a copy or the change fails.
    static func prepare(corpus: String, in directory: String, seed: UInt64, runner: ProcessRunner) throws -> TransferTrees {
        let rootName = (corpus as NSString).lastPathComponent
        let old = "\(directory)/old/\(rootName)"
        let new = "\(directory)/new/\(rootName)"
        try removeTree("\(directory)/old")
        try removeTree("\(directory)/new")
        try FileManager.default.createDirectory(atPath: "\(directory)/old", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(directory)/new", withIntermediateDirectories: true)
        try copyTree(corpus, to: old, runner: runner)
        let files = SmallChange.regularFiles(under: old)
        let window = UInt64(extractFileBytes) * 9 / 10...UInt64(extractFileBytes) * 11 / 10
        let candidate = files.filter { window.contains($0.bytes) }
            .min { abs(Int64($0.bytes) - Int64(extractFileBytes)) < abs(Int64($1.bytes) - Int64(extractFileBytes)) }
        var extract = candidate.map { ($0.path, $0.bytes) }
        if extract == nil {
            try SmallChange.writeText(to: "\(old)/\(addedExtractPath)", bytes: extractFileBytes, seed: seed ^ 0x5A17_C4A9_6E00_0003)
            extract = (addedExtractPath, UInt64(extractFileBytes))
        }
        try copyTree(old, to: new, runner: runner)
        let change = try SmallChange.apply(to: new, seed: seed)
        return TransferTrees(
            old: old, new: new, extractPath: extract?.0 ?? addedExtractPath, rootName: rootName, extractBytes: extract?.1 ?? 0,
            extractFileAdded: candidate == nil, change: change)
    }

    private static func copyTree(_ source: String, to destination: String, runner: ProcessRunner) throws {
        let r = try runner.run(["cp", "-a", "--reflink=auto", source, destination], label: "transfer-copy")
        guard r.succeeded else { throw BenchError("cp -a \(source) \(destination) failed: \(r.standardError.suffix(300))") }
    }
}
