import Cairn
import CairnCorpus
import Foundation
import Glibc

/// `cairn demo [--size-mib N] [--keep DIR] [--json]`: the whole round trip on generated sample
/// data, with figures.
enum DemoCommand {
    static let usage = """
        usage: cairn demo [--size-mib N] [--keep DIR] [--json]

        Generates a deterministic sample app-data export of N MiB (documents, JSON records, logs,
        SQLite-like databases, media, large files, duplicates, many small files), then runs
        create (LZ4), list, verify and extract through the Cairn library, compares the extracted
        tree with the original (contents, modes, nanosecond mtimes, symlinks) and prints sizes,
        ratios and, per step, wall time, throughput, CPU time and peak memory.

        Works in a temporary directory that is removed at the end, or in DIR, which is kept
        (DIR/corpus, DIR/demo.cairn, DIR/extracted). Needs about 3.2 × N MiB of free space.
        Exit status 0 when the round trip is identical, 1 otherwise.

        options:
          --size-mib N     corpus size in MiB (default 256)
          --keep DIR       work in DIR (created if missing; must be empty) and keep the results
          --json           print the figures as one JSON object
        """

    static func run(_ raw: [[UInt8]]) async throws -> ExitStatus {
        let args = try Arguments(raw, valued: ["--size-mib", "--keep"], flags: ["--json"])
        guard args.operands.isEmpty else { throw UsageError("unexpected operand") }
        var sizeMiB = 256
        if let text = args.value("--size-mib") {
            guard let value = Int(text), (1...1 << 20).contains(value) else {
                throw UsageError("--size-mib takes a whole number of MiB from 1 to 1048576")
            }
            sizeMiB = value
        }
        let json = args.flag("--json")
        let keep = args.value("--keep")
        let base = try keep.map(prepareKept) ?? makeTemporaryDirectory()
        defer {
            if keep == nil {
                if !json { Output.err("demo: removing \(base)") }
                try? FileManager.default.removeItem(atPath: base)
            }
        }
        let demo = Demo(base: base, totalBytes: sizeMiB << 20, quiet: json)
        try demo.checkFreeSpace()
        let result = try await demo.run()
        if json {
            Output.out(Output.json(result.json))
        } else {
            Output.out(result.table)
            if let keep { Output.out("kept in \(keep): corpus/, demo.cairn, extracted/") }
        }
        for line in result.differences { Output.err("cairn demo: \(line)") }
        return result.isIdentical ? .success : .failure
    }

    /// `--keep DIR`: created if missing, must be empty.
    private static func prepareKept(_ path: String) throws -> String {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard (try FileManager.default.contentsOfDirectory(atPath: path)).isEmpty else {
            throw CairnError(.alreadyExists, "--keep needs a new or empty directory", path: path)
        }
        return path
    }

    /// A new directory under `$TMPDIR` (default `/tmp`), from `mkdtemp(3)`.
    private static func makeTemporaryDirectory() throws -> String {
        let parent = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((parent + "/cairn-demo-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else {
            throw Errno.current.error(.io, "cannot create a temporary directory", path: parent)
        }
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// One run of the demo in `base`.
private struct Demo {
    let base: String
    let totalBytes: Int
    let quiet: Bool

    var corpus: String { base + "/corpus" }
    var archive: String { base + "/demo.cairn" }
    var extracted: String { base + "/extracted" }

    func say(_ text: String) {
        if !quiet { Output.err("demo: \(text)") }
    }

    /// Corpus + archive (at most about the corpus) + extracted copy, with some slack.
    func checkFreeSpace() throws {
        var info = statvfs()
        guard statvfs(base, &info) == 0 else { return }
        let free = UInt64(info.f_bavail) &* UInt64(info.f_frsize)
        let needed = UInt64(totalBytes) * 32 / 10
        if free < needed {
            throw CairnError(
                .limitExceeded, "the demo needs about \(Output.bytes(needed)) of free space, \(Output.bytes(free)) is free",
                path: base)
        }
    }

    func run() async throws -> DemoResult {
        var result = DemoResult(totalBytes: totalBytes)
        say("generating a \(Output.bytes(UInt64(totalBytes))) sample corpus in \(corpus)")
        result.corpus = try await measure("generate", bytes: UInt64(totalBytes), into: &result) {
            try SampleCorpus(totalBytes: totalBytes, seed: 1).generate(at: corpus)
        }

        say("create \(archive) (LZ4, FastCDC 16/64/256 KiB)")
        let corpusURL = URL(fileURLWithPath: corpus)
        let properties = try await measure("create", bytes: UInt64(totalBytes), into: &result) {
            try await Archiver.withArchiver(writingTo: .file(path: archive)) { archiver in
                try await archiver.appendItem(at: corpusURL)
            }
        }
        result.properties = properties
        for warning in properties.warnings { result.differences.append("create warned: \(warning.description)") }

        say("list")
        let listing = try await measure("list", bytes: nil, into: &result) {
            try await Extractor.withExtractor(at: .file(path: archive)) { extractor in
                var counts: [String: Int] = [:]
                var bytes: UInt64 = 0
                for entry in extractor.entries {
                    counts[entry.kind.description, default: 0] += 1
                    if entry.kind == .file { bytes += entry.size }
                }
                return (entries: extractor.entries.count, counts: counts, fileBytes: bytes)
            }
        }
        result.kinds = listing.counts

        say("verify")
        let report = try await measure("verify", bytes: UInt64(totalBytes), into: &result) {
            try await Extractor.verifyArchive(at: .file(path: archive))
        }

        say("extract into \(extracted)")
        let destination = URL(fileURLWithPath: extracted)
        try await measure("extract", bytes: UInt64(totalBytes), into: &result) {
            try await Extractor.withExtractor(at: .file(path: archive)) { extractor in
                try await extractor.extractAll(to: destination)
            }
        }

        say("compare the extracted tree with the corpus")
        let comparer = TreeComparer()
        try await measure("compare", bytes: UInt64(totalBytes), into: &result) {
            comparer.compareTopLevel(of: extracted, expecting: "corpus")
            comparer.compare(corpus, extracted + "/corpus")
        }
        result.differences += comparer.differences
        if comparer.differenceCount > comparer.differences.count {
            result.differences.append("… and \(comparer.differenceCount - comparer.differences.count) more differences")
        }
        result.compared = (comparer.files, comparer.directories, comparer.symlinks, comparer.bytes)

        // The library's own figures must agree with each other and with the corpus.
        let summary = result.corpus!
        let expectedEntries = summary.fileCount + summary.directoryCount + 1 + 1  // + root + symlink
        func check(_ ok: Bool, _ what: String) { if !ok { result.differences.append(what) } }
        check(properties.uncompressedBytes == summary.totalBytes, "create archived \(properties.uncompressedBytes) content bytes, the corpus has \(summary.totalBytes)")
        check(properties.entryCount == expectedEntries, "create wrote \(properties.entryCount) entries, expected \(expectedEntries)")
        check(listing.entries == properties.entryCount, "list shows \(listing.entries) entries, create wrote \(properties.entryCount)")
        check(listing.fileBytes == summary.totalBytes, "list shows \(listing.fileBytes) file bytes, the corpus has \(summary.totalBytes)")
        check(report.entryCount == properties.entryCount, "verify counted \(report.entryCount) entries, create wrote \(properties.entryCount)")
        check(report.contentBytes == summary.totalBytes, "verify counted \(report.contentBytes) content bytes, the corpus has \(summary.totalBytes)")
        check(report.archiveBytes == properties.archiveBytes, "verify read \(report.archiveBytes) bytes, create wrote \(properties.archiveBytes)")
        check(comparer.files == summary.fileCount, "compared \(comparer.files) files, the corpus has \(summary.fileCount)")
        return result
    }

    /// Runs `body` as the step `name`, recording wall time, CPU time and peak RSS.
    @discardableResult
    func measure<T>(_ name: String, bytes: UInt64?, into result: inout DemoResult, _ body: () async throws -> T) async throws -> T {
        let peakReset = PeakMemory.reset()
        let wallStart = monotonicSeconds()
        let cpuStart = ProcessTimes.cpuSeconds()
        let value: T
        do {
            value = try await body()
        } catch {
            Output.err("cairn demo: the \(name) step failed")
            throw error
        }
        let wall = monotonicSeconds() - wallStart
        let cpu = ProcessTimes.cpuSeconds() - cpuStart
        let peak = peakReset ? PeakMemory.sinceReset() : nil
        result.steps.append(
            DemoResult.Step(
                name: name, wallSeconds: wall, cpuSeconds: cpu, bytes: bytes,
                peakResidentBytes: peak ?? ProcessTimes.peakResidentBytes(), peakIsPerStep: peak != nil))
        return value
    }
}

/// Peak resident memory per step: writing `5` to `/proc/self/clear_refs` resets the kernel's
/// high-water mark (`VmHWM` in `/proc/self/status`); `getrusage`'s `ru_maxrss` cannot be reset.
private enum PeakMemory {
    static func reset() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }

    static func sinceReset() -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let digits = line.dropFirst(6).filter(\.isNumber)
            return UInt64(digits).map { $0 * 1024 }
        }
        return nil
    }
}

/// The figures of one run and their presentations.
private struct DemoResult {
    struct Step {
        var name: String
        var wallSeconds: Double
        var cpuSeconds: Double
        /// Bytes the throughput is computed from (the corpus size), nil when not meaningful.
        var bytes: UInt64?
        var peakResidentBytes: UInt64
        var peakIsPerStep: Bool
    }

    var totalBytes: Int
    var corpus: SampleCorpus.Summary?
    var properties: ExportProperties?
    var kinds: [String: Int] = [:]
    var steps: [Step] = []
    var compared: (files: Int, directories: Int, symlinks: Int, bytes: UInt64) = (0, 0, 0, 0)
    var differences: [String] = []

    var isIdentical: Bool { differences.isEmpty }

    init(totalBytes: Int) { self.totalBytes = totalBytes }

    static func number(_ value: Int) -> String {
        let digits = String(value)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }

    static func fixed(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

    static func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return left ? text + padding : padding + text
    }

    var table: String {
        guard let c = corpus, let p = properties else { return "" }
        let content = Double(p.uncompressedBytes)
        var lines: [String] = []
        lines.append("Cairn demo: \(Output.bytes(c.totalBytes)) sample corpus (seed 1), LZ4, FastCDC 16/64/256 KiB")
        lines.append("")
        lines.append(
            "  corpus              \(Output.bytes(c.totalBytes)) in \(Self.number(c.fileCount)) files, "
                + "\(Self.number(c.directoryCount)) directories, \(Self.number(kinds["symlink"] ?? 0)) symlink")
        lines.append(
            "  archive             \(Output.bytes(p.archiveBytes)): \(Self.number(p.entryCount)) \(Output.noun(p.entryCount, "entry", plural: "entries")), "
                + "\(Self.number(p.chunkCount)) chunks stored, \(Self.number(p.referenceCount)) referenced")
        let overall = p.archiveBytes == 0 ? 0 : content / Double(p.archiveBytes)
        lines.append("  compression ratio   \(Self.fixed(overall, 2))× overall (content ÷ archive size)")
        if let compressed = p.compressedBytes, compressed > 0 {
            let codec = Double(p.uniqueBytes) / Double(compressed)
            lines.append(
                "                      \(Self.fixed(codec, 2))× by LZ4 alone (\(Output.bytes(p.uniqueBytes)) unique → \(Output.bytes(compressed)) stored)")
        }
        let dedupShare = content == 0 ? 0 : Double(p.deduplicatedBytes) / content * 100
        lines.append(
            "  dedup savings       \(Output.bytes(p.deduplicatedBytes)) (\(Self.fixed(dedupShare, 1))% of content not stored again)")
        lines.append("")
        lines.append("  step        wall s      MB/s     CPU s   CPU/wall   peak RSS")
        for s in steps {
            let rate = s.bytes.map { s.wallSeconds > 0 ? Self.fixed(Double($0) / s.wallSeconds / 1e6, 0) : "-" } ?? "-"
            let parallel = s.wallSeconds > 0 ? Self.fixed(s.cpuSeconds / s.wallSeconds, 2) + "×" : "-"
            lines.append(
                "  " + Self.pad(s.name, 8, left: true) + Self.pad(Self.fixed(s.wallSeconds, 3), 10)
                    + Self.pad(rate, 10) + Self.pad(Self.fixed(s.cpuSeconds, 2), 10) + Self.pad(parallel, 11)
                    + Self.pad(Output.bytes(s.peakResidentBytes) + (s.peakIsPerStep ? "" : "*"), 11))
        }
        let perStep = steps.allSatisfy(\.peakIsPerStep)
        lines.append(
            "  MB/s = corpus bytes ÷ wall time (10^6 B/s); CPU s = user + system of all threads; "
                + (perStep ? "peak RSS per step (VmHWM)" : "* peak RSS of the process so far (ru_maxrss)"))
        lines.append("")
        lines.append(
            "  compared            \(Self.number(compared.files)) files (\(Output.bytes(compared.bytes))), "
                + "\(Self.number(compared.directories)) directories, \(Self.number(compared.symlinks)) symlink: "
                + "content, mode, mtime (ns), link target")
        lines.append("  round trip identical: \(isIdentical ? "yes" : "NO (\(differences.count) differences, listed on stderr)")")
        return lines.joined(separator: "\n")
    }

    var json: [String: Any] {
        var object: [String: Any] = ["identical": isIdentical, "differences": differences]
        if let c = corpus {
            object["corpus"] = [
                "bytes": c.totalBytes, "files": c.fileCount, "directories": c.directoryCount, "seed": 1,
            ] as [String: Any]
        }
        if let p = properties {
            var archive: [String: Any] = [
                "archiveBytes": p.archiveBytes, "uncompressedBytes": p.uncompressedBytes, "uniqueBytes": p.uniqueBytes,
                "deduplicatedBytes": p.deduplicatedBytes, "entryCount": p.entryCount, "chunkCount": p.chunkCount,
                "referenceCount": p.referenceCount, "compression": "lz4",
            ]
            archive["compressedBytes"] = p.compressedBytes.map { $0 as Any } ?? NSNull()
            object["archive"] = archive
        }
        object["steps"] = steps.map { s -> [String: Any] in
            var step: [String: Any] = [
                "name": s.name, "wallSeconds": s.wallSeconds, "cpuSeconds": s.cpuSeconds,
                "peakResidentBytes": s.peakResidentBytes, "peakIsPerStep": s.peakIsPerStep,
            ]
            step["megabytesPerSecond"] = s.bytes.map { s.wallSeconds > 0 ? Double($0) / s.wallSeconds / 1e6 : 0 as Any } ?? NSNull()
            return step
        }
        object["compared"] = [
            "files": compared.files, "directories": compared.directories, "symlinks": compared.symlinks,
            "bytes": compared.bytes,
        ] as [String: Any]
        return object
    }
}

/// Compares two trees through raw names (`openat(2)`, `fstatat(2)`, `readdir(3)`, never following
/// symlinks): the same names, kinds, permission bits and nanosecond mtimes, the same file
/// contents and link targets.
private final class TreeComparer {
    private(set) var differences: [String] = []
    private(set) var differenceCount = 0
    private(set) var files = 0
    private(set) var directories = 0
    private(set) var symlinks = 0
    private(set) var bytes: UInt64 = 0
    private static let bufferSize = 1 << 20
    private let left = UnsafeMutableRawPointer.allocate(byteCount: TreeComparer.bufferSize, alignment: 16)
    private let right = UnsafeMutableRawPointer.allocate(byteCount: TreeComparer.bufferSize, alignment: 16)

    deinit {
        left.deallocate()
        right.deallocate()
    }

    private func differ(_ text: String) {
        differenceCount += 1
        if differences.count < 20 { differences.append(text) }
    }

    /// Checks that `directory` holds exactly one item, `name`.
    func compareTopLevel(of directory: String, expecting name: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return differ("\(directory): cannot open: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let names = (try? Self.names(in: fd)) ?? []
        if names != [Array(name.utf8)] {
            differ("\(directory) holds \(names.map { String(decoding: $0, as: UTF8.self) }), expected only \(name)")
        }
    }

    /// Compares the tree at `original` with the tree at `copy`.
    func compare(_ original: String, _ copy: String) {
        compare(Array(original.utf8), in: AT_FDCWD, with: Array(copy.utf8), in: AT_FDCWD, display: "")
    }

    private func compare(_ a: [UInt8], in parentA: Int32, with b: [UInt8], in parentB: Int32, display: String) {
        let shown = display.isEmpty ? "." : display
        guard let sa = Self.status(a, in: parentA) else { return differ("\(shown): cannot inspect the original") }
        guard let sb = Self.status(b, in: parentB) else { return differ("\(shown): missing in the extracted tree") }
        let kind = sa.st_mode & S_IFMT
        guard kind == sb.st_mode & S_IFMT else { return differ("\(shown): different file type") }
        if sa.st_mode & 0o7777 != sb.st_mode & 0o7777 {
            differ("\(shown): mode \(String(sa.st_mode & 0o7777, radix: 8)) became \(String(sb.st_mode & 0o7777, radix: 8))")
        }
        if sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec {
            differ("\(shown): mtime \(sa.st_mtim.tv_sec).\(sa.st_mtim.tv_nsec) became \(sb.st_mtim.tv_sec).\(sb.st_mtim.tv_nsec)")
        }
        switch kind {
        case S_IFREG:
            files += 1
            guard sa.st_size == sb.st_size else { return differ("\(shown): size \(sa.st_size) became \(sb.st_size)") }
            compareContents(a, in: parentA, b, in: parentB, display: shown)
        case S_IFLNK:
            symlinks += 1
            if Self.linkTarget(a, in: parentA) != Self.linkTarget(b, in: parentB) { differ("\(shown): different link target") }
        case S_IFDIR:
            directories += 1
            let fa = Self.openAt(a, in: parentA, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            let fb = Self.openAt(b, in: parentB, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            defer {
                if fa >= 0 { close(fa) }
                if fb >= 0 { close(fb) }
            }
            guard fa >= 0, fb >= 0, let na = try? Self.names(in: fa), let nb = try? Self.names(in: fb) else {
                return differ("\(shown): cannot read the directory")
            }
            let setB = Set(nb)
            for name in na where !setB.contains(name) {
                differ("\(Self.join(display, name)): missing in the extracted tree")
            }
            let setA = Set(na)
            for name in nb where !setA.contains(name) {
                differ("\(Self.join(display, name)): not in the original")
            }
            for name in na where setB.contains(name) {
                compare(name, in: fa, with: name, in: fb, display: Self.join(display, name))
            }
        default:
            differ("\(shown): unexpected file type")
        }
    }

    private func compareContents(_ a: [UInt8], in parentA: Int32, _ b: [UInt8], in parentB: Int32, display: String) {
        let fa = Self.openAt(a, in: parentA, flags: O_RDONLY | O_NOFOLLOW)
        let fb = Self.openAt(b, in: parentB, flags: O_RDONLY | O_NOFOLLOW)
        defer {
            if fa >= 0 { close(fa) }
            if fb >= 0 { close(fb) }
        }
        guard fa >= 0, fb >= 0 else { return differ("\(display): cannot open") }
        var offset: UInt64 = 0
        while true {
            let na = Self.readFully(fa, into: left)
            let nb = Self.readFully(fb, into: right)
            guard na >= 0, nb >= 0 else { return differ("\(display): read failed") }
            guard na == nb, memcmp(left, right, na) == 0 else {
                return differ("\(display): content differs in the MiB at offset \(offset)")
            }
            offset += UInt64(na)
            bytes += UInt64(na)
            if na < TreeComparer.bufferSize { return }
        }
    }

    /// Reads until the buffer is full or the file ends; -1 on error.
    private static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawPointer) -> Int {
        var filled = 0
        while filled < bufferSize {
            let n = read(fd, buffer + filled, bufferSize - filled)
            if n < 0 {
                if errno == EINTR { continue }
                return -1
            }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    private static func join(_ display: String, _ name: [UInt8]) -> String {
        let text = String(decoding: name, as: UTF8.self)
        return display.isEmpty ? text : display + "/" + text
    }

    private static func withCName<R>(_ name: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
        (name + [0]).withUnsafeBufferPointer { bytes in
            bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) { body($0) }
        }
    }

    private static func status(_ name: [UInt8], in parent: Int32) -> stat? {
        var s = stat()
        return withCName(name) { fstatat(parent, $0, &s, AT_SYMLINK_NOFOLLOW) } == 0 ? s : nil
    }

    private static func openAt(_ name: [UInt8], in parent: Int32, flags: Int32) -> Int32 {
        withCName(name) { openat(parent, $0, flags | O_CLOEXEC) }
    }

    private static func linkTarget(_ name: [UInt8], in parent: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = withCName(name) { cname in
            buffer.withUnsafeMutableBytes { readlinkat(parent, cname, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        }
        return n < 0 ? nil : Array(buffer[0..<n])
    }

    /// The names in an open directory, sorted bytewise, without `.` and `..`.
    private static func names(in fd: Int32) throws -> [[UInt8]] {
        // Each name read in place (a copy of the 256-byte `d_name` can read past readdir's buffer).
        try DirectoryReader.names(in: FileDescriptor(rawValue: fd, path: "<directory>"))
    }
}
