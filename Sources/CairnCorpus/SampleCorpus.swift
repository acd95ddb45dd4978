import Cairn
import Foundation
import Glibc

/// A deterministic directory tree that looks like an app's data export, for the demo, the
/// benchmarks and large tests.
///
/// ```swift
/// let summary = try SampleCorpus(totalBytes: 256 << 20, seed: 1).generate(at: "/tmp/corpus")
/// print(summary.fileCount, summary.totalBytes)
/// ```
///
/// The same `totalBytes` and `seed` always give the same tree, byte for byte: names, contents,
/// modes and nanosecond mtimes. The mix, by bytes (shares shrink gracefully for small totals):
///
/// | share | content | where |
/// |---|---|---|
/// | 12% | Markdown-ish documents, word salad from a fixed vocabulary (1–64 KiB) | `Documents/` |
/// | 10% | JSON arrays of records (1–64 KiB) | `Records/` |
/// | ~12% | timestamped log files (64 KiB–4 MiB), filling what the rest leaves | `Logs/` |
/// | ~1% | small files, a third of the file count (32 B–4 KiB, nested folders) | `Library/Caches/Thumbnails/`, `Settings/`, `Attachments/` |
/// | 20% | SQLite-like databases (4 KiB pages), one with a `-wal` sidecar | `Databases/`, `Library/Caches/` |
/// | 25% | media-like files of random bytes (2–6 MiB) | `Media/` |
/// | 15% | a few large files (up to 4, tens of MiB for totals of 256 MiB and more): random, mixed text and random, log text | `Media/Videos/`, `Backups/`, `Logs/Archive/` |
/// | 5% | exact duplicates (`… copy.ext`) and copies with 1–16 bytes inserted near the front (`… (edited).ext`, of files of 256 KiB or more when there are some) | beside their originals |
///
/// Plus an empty file (`Settings/.lock`), an empty directory (`Trash/`) and a relative symlink
/// (`Logs/latest.log` → the newest log). Files are 0644 (databases 0600), directories 0755; mtimes
/// are fixed instants in 2019–2023 with nanosecond parts.
public struct SampleCorpus: Sendable {
    /// What ``generate(at:)`` wrote.
    public struct Summary: Sendable, Equatable {
        /// Regular files (the symlink is not counted).
        public var fileCount: Int
        /// Directories below the root (the root itself is not counted).
        public var directoryCount: Int
        /// Sum of the regular files' sizes; equals the `totalBytes` asked for.
        public var totalBytes: UInt64
    }

    private let totalBytes: Int
    private let seed: UInt64

    /// - Parameters:
    ///   - totalBytes: the sum of the files' sizes to generate (negative counts as 0).
    ///   - seed: selects one of the possible trees; the same seed gives the same tree.
    public init(totalBytes: Int, seed: UInt64 = 1) {
        self.totalBytes = max(0, totalBytes)
        self.seed = seed
    }

    /// Writes the tree into the directory `path`, which is created if missing and must be empty
    /// otherwise.
    ///
    /// - Returns: counts of what was written.
    /// - Throws: ``CairnError`` (`.alreadyExists` when `path` is not an empty directory, `.io`
    ///   when a file cannot be written).
    public func generate(at path: String) throws -> Summary {
        try Self.prepareRoot(path)
        let writer = CorpusWriter(root: path)
        let builder = Builder(writer: writer, totalBytes: totalBytes, seed: seed)
        try builder.build()
        return Summary(fileCount: writer.fileCount, directoryCount: writer.directoryCount, totalBytes: writer.totalBytes)
    }

    private static func prepareRoot(_ path: String) throws(CairnError) {
        var status = stat()
        if lstat(path, &status) != 0 {
            guard errno == ENOENT else { throw Errno.current.error("cannot inspect", path: path) }
            guard mkdir(path, 0o755) == 0 else { throw Errno.current.error("cannot create directory", path: path) }
            return
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw CairnError(.alreadyExists, "exists and is not a directory", path: path)
        }
        guard let directory = opendir(path) else { throw Errno.current.error("cannot open directory", path: path) }
        defer { closedir(directory) }
        guard try DirectoryReader.names(in: FileDescriptor(rawValue: dirfd(directory), path: path)).isEmpty else {
            throw CairnError(.alreadyExists, "the sample corpus needs an empty directory", path: path)
        }
    }
}

/// Builds the tree category by category (see ``SampleCorpus``).
private final class Builder {
    let writer: CorpusWriter
    let generator: ContentGenerator
    let total: Int
    var rng: SplitMix64
    /// Files worth duplicating: (relative path, size).
    var candidates: [(path: String, size: Int)] = []
    /// Counter for mtimes: every file and directory gets the next instant.
    var clock = 0
    /// The newest log, relative to `Logs/`, for the `latest.log` symlink.
    var latestLog: String?

    /// 2023-11-14T22:13:20Z in nanoseconds; mtimes go back from here.
    static let epoch: Int64 = 1_700_000_000 * 1_000_000_000

    init(writer: CorpusWriter, totalBytes: Int, seed: UInt64) {
        self.writer = writer
        total = totalBytes
        rng = SplitMix64(seed: seed)
        generator = ContentGenerator(writer: writer, startSeconds: 1_690_000_000)
    }

    var totalRemaining: Int { total - Int(writer.totalBytes) }

    /// The next fixed mtime: an hour and seven seconds earlier each time, with a nanosecond part.
    func nextTime() -> Int64 {
        clock += 1
        let nanoseconds = Int64((UInt64(clock) &* 2_654_435_761) % 1_000_000_000)
        return Self.epoch - Int64(clock) * 3_607_000_000_000 + nanoseconds
    }

    func share(_ percent: Int) -> Int { total / 100 * percent + total % 100 * percent / 100 }

    func build() throws(CairnError) {
        try documents(budget: share(12))
        try records(budget: share(10))
        try databases(budget: share(20))
        try media(budget: share(25))
        try largeFiles(budget: share(15))
        try duplicates(budget: share(5))
        try smallFiles(budget: share(3))
        try logs()
        try extras()
        try writer.finishDirectories(rootModificationTime: Self.epoch)
    }

    /// Writes one file of `size` bytes whose content `fill` generates.
    func file(
        _ path: String, size: Int, mode: mode_t = 0o644, _ fill: (inout SplitMix64) throws(CairnError) -> Void
    ) throws(CairnError) {
        var local = rng.split()
        try writer.beginFile(path, size: size, mode: mode, modificationTime: nextTime())
        try fill(&local)
        try writer.endFile()
    }

    static func padded(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    // MARK: - Categories

    func documents(budget: Int) throws(CairnError) {
        let folders = ["Notes", "Drafts", "Projects", "Journal", "Shared", "Templates"]
        let stems = ["meeting-notes", "plan", "ideas", "summary", "todo", "letter", "report", "draft", "outline", "recipe"]
        var left = min(budget, totalRemaining)
        var n = 0
        while left > 0 {
            n += 1
            let size = min(left, rng.logUniform(1024, 64 * 1024))
            let folder = folders[rng.below(folders.count)]
            let year = 2019 + rng.below(5)
            let ext = rng.below(3) == 0 ? "txt" : "md"
            let path = "Documents/\(folder)/\(year)/\(stems[rng.below(stems.count)])-\(Self.padded(n, 4)).\(ext)"
            try file(path, size: size) { generator.document(&$0) }
            if size >= 8 * 1024 { candidates.append((path, size)) }
            left -= size
        }
    }

    func records(budget: Int) throws(CairnError) {
        let kinds: [(String, StaticString)] = [
            ("contacts", "contact"), ("events", "event"), ("messages", "message"), ("tasks", "task"), ("changes", "change"),
        ]
        var left = min(budget, totalRemaining)
        var n = 0
        while left > 0 {
            n += 1
            let size = min(left, rng.logUniform(1024, 64 * 1024))
            let (folder, kind) = kinds[rng.below(kinds.count)]
            let path = "Records/\(folder)/\(folder)-\(Self.padded(n, 5)).json"
            // Records from 2019 to 2023.
            generator.setClock(1_546_300_800 + Int64(rng.below(5 * 365 * 86_400)))
            try file(path, size: size) { generator.jsonRecords(&$0, kind: kind) }
            if size >= 8 * 1024 { candidates.append((path, size)) }
            left -= size
        }
    }

    func databases(budget: Int) throws(CairnError) {
        let page = ContentGenerator.pageSize
        let budget = min(budget, totalRemaining)
        guard budget >= 4 * page else { return }
        // (path, table, share of the budget in percent, write-ahead log share in percent)
        let stores: [(String, StaticString, Int, Int)] = [
            ("Databases/Main.sqlite", "notes", 50, 10),
            ("Databases/Photos.sqlite", "assets", 25, 0),
            ("Library/Caches/Cache.db", "responses", 15, 0),
        ]
        for (path, table, percent, walPercent) in stores {
            let pages = max(1, budget / 100 * percent / page)
            try file(path, size: pages * page, mode: 0o600) { generator.database(&$0, table: table) }
            let frameSize = page + ContentGenerator.walFrameHeaderSize
            let frames = (budget / 100 * walPercent - ContentGenerator.walHeaderSize) / frameSize
            if walPercent > 0, frames > 0 {
                let walSize = ContentGenerator.walHeaderSize + frames * frameSize
                let databasePath = writer.root + "/" + path
                try file(path + "-wal", size: walSize, mode: 0o600) { (rng) throws(CairnError) in
                    try generator.writeAheadLog(&rng, databasePath: databasePath, databasePages: pages)
                }
            }
            if pages * page <= 8 << 20 { candidates.append((path, pages * page)) }
        }
    }

    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF\0".utf8)
    static let heic: [UInt8] = [0, 0, 0, 0x18] + Array("ftypheic".utf8)
    static let mp4: [UInt8] = [0, 0, 0, 0x20] + Array("ftypisom".utf8)
    static let quickTime: [UInt8] = [0, 0, 0, 0x14] + Array("ftypqt  ".utf8)
    static let png: [UInt8] = [0x89] + Array("PNG\r\n\u{1A}\n".utf8)

    func media(budget: Int) throws(CairnError) {
        var left = min(budget, totalRemaining)
        var n = 0
        while left > 0 {
            n += 1
            var size = min(left, rng.int(in: (2 << 20)...(6 << 20)))
            if left - size < 512 * 1024 { size = left }
            let year = 2019 + rng.below(5)
            let kind = rng.below(10)
            let path: String
            let magic: [UInt8]
            switch kind {
            case 0..<6: (path, magic) = ("Media/Photos/\(year)/IMG_\(Self.padded(n, 4)).JPG", Self.jpeg)
            case 6..<8: (path, magic) = ("Media/Photos/\(year)/IMG_\(Self.padded(n, 4)).HEIC", Self.heic)
            default: (path, magic) = ("Media/Videos/VID_\(Self.padded(n, 4)).MP4", Self.mp4)
            }
            try file(path, size: size) { generator.media(&$0, magic: magic) }
            if size <= 8 << 20 { candidates.append((path, size)) }
            left -= size
        }
    }

    func largeFiles(budget: Int) throws(CairnError) {
        let budget = min(budget, totalRemaining)
        guard budget > 0 else { return }
        let count = max(1, min(4, budget / (16 << 20)))
        for i in 0..<count {
            let size = i == count - 1 ? budget - (count - 1) * (budget / count) : budget / count
            generator.setClock(1_672_531_200 - Int64(i) * 86_400 * 30)  // 2023-01-01, a month apart
            switch i % 3 {
            case 0:
                try file("Media/Videos/Screen Recording \(i + 1).mov", size: size) {
                    generator.media(&$0, magic: Self.quickTime)
                }
            case 1:
                try file("Backups/backup-\(2023 - i).bak", size: size) { generator.mixed(&$0) }
            default:
                try file("Logs/Archive/server-\(2023 - i).log", size: size) { generator.logLines(&$0) }
            }
        }
    }

    /// Exact copies (`name copy.ext`) and copies with a few bytes inserted near the front
    /// (`name (edited).ext`) of earlier files, beside them.
    func duplicates(budget: Int) throws(CairnError) {
        var exactLeft = min(budget, totalRemaining) * 2 / 5
        var editedLeft = min(budget, totalRemaining) - exactLeft
        let big = candidates.filter { $0.size >= 256 * 1024 }
        var attempts = 0
        while !candidates.isEmpty, attempts < 4 * candidates.count + 16 {
            attempts += 1
            let exact = exactLeft >= editedLeft
            let left = exact ? exactLeft : editedLeft
            // Edited copies of big files show that an edit changes only the chunks around it.
            let pool = exact ? [] : big.filter { $0.size < left }
            let candidate = pool.isEmpty ? candidates[rng.below(candidates.count)] : pool[rng.below(pool.count)]
            let inserted = exact ? 0 : 1 + rng.below(16)
            guard candidate.size + inserted <= left else {
                if left < 8 * 1024 { if exact { exactLeft = 0 } else { editedLeft = 0 } }
                if exactLeft == 0 && editedLeft == 0 { break }
                continue
            }
            let dot = candidate.path.lastIndex(of: ".") ?? candidate.path.endIndex
            let path = String(candidate.path[..<dot]) + (exact ? " copy" : " (edited)") + String(candidate.path[dot...])
            guard !writer.isUsed(path) else { continue }
            var bytes = try Self.read(writer.root + "/" + candidate.path)
            if !exact {
                let at = 16 + rng.below(max(1, min(4096, bytes.count / 4)))
                let insertion = (0..<inserted).map { _ in UInt8(ascii: "a") + UInt8(rng.below(26)) }
                bytes.insert(contentsOf: insertion, at: min(at, bytes.count))
            }
            let size = bytes.count
            try file(path, size: size) { _ in bytes.withUnsafeBytes { writer.append($0) } }
            if exact { exactLeft -= size } else { editedLeft -= size }
        }
    }

    /// About a third of the file count, a small share of the bytes: thumbnails, settings and
    /// attachment notes in nested folders.
    func smallFiles(budget: Int) throws(CairnError) {
        var left = min(budget, totalRemaining)
        let count = max(16, writer.fileCount / 2)
        let sections = ["sync", "display", "privacy", "accounts", "notifications", "editor"]
        for n in 1...count {
            guard left > 0 else { break }
            let size = min(left, rng.logUniform(32, 4096))
            switch rng.below(10) {
            case 0..<3:
                let hex = String(rng.next(), radix: 16)
                let name = String(repeating: "0", count: 16 - hex.count) + hex
                let path = "Library/Caches/Thumbnails/\(name.prefix(1))/\(name.dropFirst().prefix(1))/\(name).thumb"
                guard !writer.isUsed(path) else { continue }
                try file(path, size: size) { generator.media(&$0, magic: Self.png) }
            case 3..<7:
                let path = "Settings/Profiles/profile-\(rng.below(8))/\(sections[rng.below(sections.count)])/pref-\(Self.padded(n, 5)).json"
                try file(path, size: size) { generator.preferences(&$0) }
            default:
                let path = "Attachments/\(2019 + rng.below(5))/\(Self.padded(1 + rng.below(12), 2))/\(Self.padded(n, 5))/note.txt"
                try file(path, size: size) { generator.document(&$0) }
            }
            left -= size
        }
    }

    /// Log files fill whatever the other categories left, so the total is exact.
    func logs() throws(CairnError) {
        let components = ["sync", "network", "store", "ui", "export", "auth"]
        var left = totalRemaining
        var day: Int64 = 19_675  // 2023-11-14
        while left > 0 {
            var size = min(left, rng.logUniform(64 * 1024, 4 << 20))
            if left - size < 16 * 1024 { size = left }
            let component = components[rng.below(components.count)]
            let (y, m, d) = ContentGenerator.civil(fromDays: day)
            let name = "\(component)-\(y)-\(Self.padded(Int(m), 2))-\(Self.padded(Int(d), 2)).log"
            if latestLog == nil { latestLog = "\(component)/\(name)" }
            generator.setClock(day * 86_400 + Int64(rng.below(3600)))
            try file("Logs/\(component)/\(name)", size: size) { generator.logLines(&$0) }
            left -= size
            day -= 1
        }
    }

    /// An empty file, an empty directory and a symlink.
    func extras() throws(CairnError) {
        try file("Settings/.lock", size: 0) { _ in }
        try writer.makeDirectory("Trash", modificationTime: nextTime())
        let target = latestLog ?? "../Settings/.lock"
        try writer.makeSymlink("Logs/latest.log", target: target, modificationTime: nextTime())
    }

    /// The whole file at `path`.
    static func read(_ path: String) throws(CairnError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno.current.error("cannot open", path: path) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw Errno.current.error("cannot inspect", path: path) }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, $0.count - offset, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Errno.current.error("cannot read", path: path) }
            offset += n
        }
        return bytes
    }
}
