import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// Sources that change or misbehave while they are archived (issue 5, "Sources that change or
/// misbehave"; `Spec/0003-command-line.md §3`): the result is always a valid archive whose
/// recorded sizes match its chunks, and each problem is reported once, naming the path.
///
/// To change a source at a chosen moment, the archiver writes into a ``StallableSink`` (from
/// `PipelineTests`) that holds every write: with a small backpressure window the producer stops
/// reading a large file after a few MiB and waits; the test changes the tree, then releases the
/// sink. The FIFO and unreadable-file warnings are in `ArchiverTests`.
@Suite("Source faults")
struct SourceFaultTests {
    static let mebibyte = 1 << 20
    static let bigLength = 24 * mebibyte

    /// A configuration whose producer stops within a few MiB when the sink stalls.
    static var stallingConfiguration: Archiver.Configuration {
        var configuration = Archiver.Configuration()
        configuration.backpressure = .watermark(low: .mebibytes(1), high: .mebibytes(2))
        configuration.batchBytes = 1 << 20
        configuration.compression = .none
        return configuration
    }

    /// Archives the tree at `source` into memory; once the producer has stopped reading (the
    /// sink holds every write), runs `change`, then lets the archive finish.
    ///
    /// - Returns: the archive's bytes, what ``Archiver/finish()`` reported, and how many content
    ///   bytes had been read when `change` ran.
    static func archiveChangingMidway(
        _ source: String, change: () throws -> Void
    ) async throws -> (bytes: [UInt8], properties: ExportProperties, readBeforeChange: Int64) {
        let sink = StallableSink(stalled: true)
        let archiver = try Archiver(sink: sink, configuration: stallingConfiguration)
        let url = URL(fileURLWithPath: source)
        nonisolated(unsafe) let unsafeArchiver = archiver
        let task = Task { () -> ExportProperties in
            try await unsafeArchiver.appendItem(at: url)
            return try await unsafeArchiver.finish()
        }
        // Wait until the producer has stopped for good: once the sink holds a write, the writer
        // returns nothing more to the budget, so a producer suspended on it stays suspended
        // until the sink is released.
        do {
            try await Await.suspendingUntil("the producer suspends on the backpressure budget (read \(archiver.progress.completedUnitCount) bytes)") {
                sink.writes > 0 && archiver.isWaitingForBudget
            }
        } catch {
            sink.release()
            _ = try? await task.value
            throw error
        }
        let last = archiver.progress.completedUnitCount
        do {
            try change()
        } catch {
            sink.release()
            _ = try? await task.value
            throw error
        }
        sink.release()
        let properties = try await task.value
        return (sink.bytes, properties, last)
    }

    static func random(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return generator.bytes(count)
    }

    /// Writes `bytes` to `<directory>/<name>`, verifies it front to back and opens it.
    static func verifiedExtractor(_ bytes: [UInt8], in directory: TemporaryDirectory, name: String = "a.cairn") async throws
        -> Extractor
    {
        let path = directory.appending(name)
        try RawFileSystem.writeFile(Array(path.utf8), bytes)
        _ = try await Extractor.verifyArchive(at: .file(path: path))
        return try await Extractor(at: .file(path: path))
    }

    // MARK: - Files that change while they are read

    @Test("a file truncated while it is read: valid archive, size = bytes archived, one sourceChanged warning naming it")
    func fileShrinksWhileRead() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let content = Self.random(Self.bigLength, seed: 601)
        var tree = TreeBuilder()
        tree.file("shrinking.bin", content)
        tree.file("zz-after.txt", Array("still archived".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let shrinking = directory.appending("tree/shrinking.bin")
        let newLength = Self.bigLength / 2

        let (bytes, properties, read) = try await Self.archiveChangingMidway(directory.appending("tree")) {
            guard truncate(shrinking, off_t(newLength)) == 0 else { throw FileSystemTestError("truncate", path: Array(shrinking.utf8)) }
        }
        try #require(read > 0 && read < Int64(newLength), "the producer had read \(read) bytes when the file shrank")

        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        let warning = try #require(properties.warnings.first)
        #expect(warning.code == .sourceChanged, "\(warning)")
        #expect(warning.path == shrinking, "\(warning)")

        let extractor = try await Self.verifiedExtractor(bytes, in: directory)
        defer { extractor.close() }
        let entry = try #require(extractor.entry(atPathInArchive: "tree/shrinking.bin"))
        #expect(entry.size == UInt64(newLength), "the recorded size is what was archived")
        #expect(properties.uncompressedBytes == UInt64(newLength + 14))
        try await extractor.extractAll(to: directory.url(appending: "output"))
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("output/tree/shrinking.bin").utf8))
        #expect(extracted.count == newLength)
        #expect(extracted == Array(content.prefix(newLength)), "no zero fill, no mix")
        #expect(try RawFileSystem.contents(ofFile: Array(directory.appending("output/tree/zz-after.txt").utf8)) == Array("still archived".utf8))
    }

    @Test("a file that grows while read (a writer thread appending) is archived at its size at open, with a warning")
    func fileGrowsWhileRead() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let content = Self.random(Self.bigLength, seed: 602)
        var tree = TreeBuilder()
        tree.file("growing.log", content)
        tree.file("zz-after.txt", Array("still archived".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let growing = directory.appending("tree/growing.log")
        // Appends 64 KiB every half millisecond until told to stop (at most 256 MiB), like a busy log.
        let stop = Atomic<Bool>(false)
        let appended = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let writer = Thread {
            defer { done.signal() }
            let fd = open(growing, O_WRONLY | O_APPEND)
            guard fd >= 0 else { return }
            defer { close(fd) }
            let piece = [UInt8](repeating: 0x41, count: 64 << 10)
            while !stop.load(ordering: .relaxed), appended.load(ordering: .relaxed) < 256 << 20 {
                let n = piece.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n <= 0 { return }
                appended.add(n, ordering: .relaxed)
                usleep(500)
            }
        }
        let (bytes, properties, _) = try await Self.archiveChangingMidway(directory.appending("tree")) {
            writer.start()
            // Let it append a few MiB before the producer reads on.
            try Await.until("the writer thread appends 4 MiB") { appended.load(ordering: .relaxed) >= 4 << 20 }
        }
        stop.store(true, ordering: .relaxed)
        done.wait()
        // (The cap only bounds the disk used on a slow, loaded machine; the sizes below are what
        // shows that reading stopped at the size at open.)

        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        let warning = try #require(properties.warnings.first)
        #expect(warning.code == .sourceChanged, "\(warning)")
        #expect(warning.path == growing, "\(warning)")
        #expect(warning.message == "grew while read; archived the first \(Self.bigLength) bytes", "\(warning)")
        let extractor = try await Self.verifiedExtractor(bytes, in: directory)
        defer { extractor.close() }
        let entry = try #require(extractor.entry(atPathInArchive: "tree/growing.log"))
        #expect(entry.size == UInt64(Self.bigLength), "read up to the size at open")
        try await extractor.extractAll(to: directory.url(appending: "output"))
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("output/tree/growing.log").utf8))
        #expect(extracted == content)
    }

    @Test("a file deleted after its directory was listed: one warning naming it, the rest archived")
    func siblingDeletedAfterListing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("a-big.bin", Self.random(Self.bigLength, seed: 602))
        tree.file("b-deleted.txt", Array("gone before it is reached".utf8))
        tree.file("c-kept.txt", Array("kept".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let deleted = directory.appending("tree/b-deleted.txt")

        let (bytes, properties, _) = try await Self.archiveChangingMidway(directory.appending("tree")) {
            guard unlink(deleted) == 0 else { throw FileSystemTestError("unlink", path: Array(deleted.utf8)) }
        }
        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        let warning = try #require(properties.warnings.first)
        #expect(warning.code == .notFound, "\(warning)")
        #expect(warning.path == deleted, "\(warning)")

        let extractor = try await Self.verifiedExtractor(bytes, in: directory)
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["tree", "tree/a-big.bin", "tree/c-kept.txt"])
        #expect(extractor.entry(atPathInArchive: "tree/a-big.bin")?.size == UInt64(Self.bigLength))
    }

    @Test("a file replaced by a directory after the listing is archived as the directory it is when reached")
    func fileReplacedByDirectory() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("a-big.bin", Self.random(Self.bigLength, seed: 603))
        tree.file("b-changes", Array("a file at first".utf8))
        tree.file("c-kept.txt", Array("kept".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let changing = directory.appending("tree/b-changes")

        let (bytes, properties, _) = try await Self.archiveChangingMidway(directory.appending("tree")) {
            guard unlink(changing) == 0, mkdir(changing, 0o750) == 0 else {
                throw FileSystemTestError("unlink/mkdir", path: Array(changing.utf8))
            }
            try RawFileSystem.writeFile(Array((changing + "/inner.txt").utf8), Array("inside".utf8))
        }
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        let extractor = try await Self.verifiedExtractor(bytes, in: directory)
        defer { extractor.close() }
        #expect(
            extractor.entries.map(\.path) == ["tree", "tree/a-big.bin", "tree/b-changes", "tree/b-changes/inner.txt", "tree/c-kept.txt"])
        #expect(extractor.entry(atPathInArchive: "tree/b-changes")?.kind == .directory)
        #expect(extractor.entry(atPathInArchive: "tree/b-changes")?.permissions == 0o750)
        try await extractor.extractAll(to: directory.url(appending: "output"))
        // The root's mtime is the one listed, before the change moved it; everything else,
        // the new directory included, is as it is now.
        var source = try TreeSnapshot(at: directory.appending("tree"))
        var extracted = try TreeSnapshot(at: directory.appending("output/tree"))
        source.nodes[[]]?.modificationTime = nil
        extracted.nodes[[]]?.modificationTime = nil
        #expect(source == extracted, "\(source.diff(extracted))")
    }

    // MARK: - Special files

    /// Binds a UNIX socket at `path` (the socket file stays after the descriptor is closed).
    static func makeSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FileSystemTestError("socket", path: Array(path.utf8)) }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw FileSystemTestError("bind", path: bytes) }
    }

    @Test("a UNIX socket in the tree is skipped with an unsupportedFileType warning naming it")
    func socketWarns() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("a.txt", Array("a".utf8))
        tree.file("z.txt", Array("z".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let socketPath = directory.appending("tree/m.sock")
        try Self.makeSocket(at: socketPath)
        let (_, properties) = try await RoundTrip.archive(path: directory.appending("tree"), to: directory.appending("a.cairn"))
        #expect(properties.warnings.count == 1, "\(properties.warnings)")
        #expect(properties.warnings.first?.code == .unsupportedFileType)
        #expect(properties.warnings.first?.path == socketPath)
        let extractor = try await Extractor(at: .file(path: directory.appending("a.cairn")))
        defer { extractor.close() }
        #expect(extractor.entries.map(\.path) == ["tree", "tree/a.txt", "tree/z.txt"])
    }

    @Test(
        "character and block devices are archived as entries with their device numbers (format 2.0), without warnings",
        .enabled(if: getuid() == 0, "mknod(2) of a device needs root"))
    func devicesWarn() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var tree = TreeBuilder()
        tree.file("a.txt", Array("a".utf8))
        try tree.materialize(at: directory.appending("tree"))
        let character = directory.appending("tree/null-like")
        let block = directory.appending("tree/loop-like")
        // makedev(1, 3) (the numbers of /dev/null) and makedev(7, 0); the devices are never opened.
        guard mknod(character, S_IFCHR | 0o600, dev_t(1 << 8 | 3)) == 0, mknod(block, S_IFBLK | 0o600, dev_t(7 << 8)) == 0 else {
            // A container without CAP_MKNOD: nothing to test here.
            try #require(errno == EPERM, "mknod: \(String(cString: strerror(errno)))")
            return
        }
        let (_, properties) = try await RoundTrip.archive(path: directory.appending("tree"), to: directory.appending("a.cairn"))
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        let extractor = try await Extractor(at: .file(path: directory.appending("a.cairn")))
        defer { extractor.close() }
        // Names in byte order: loop-like, then null-like.
        #expect(extractor.entries.map(\.path) == ["tree", "tree/a.txt", "tree/loop-like", "tree/null-like"])
        #expect(extractor.entries.map(\.kind) == [.directory, .file, .blockDevice, .characterDevice])
        #expect(extractor.entries[2].device == ArchiveEntry.Device(major: 7, minor: 0))
        #expect(extractor.entries[3].device == ArchiveEntry.Device(major: 1, minor: 3))
    }

    // MARK: - Content and metadata edge cases

    @Test("a 64 MiB sparse file round-trips its content and archives to a small size")
    func sparseFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let length = 64 * Self.mebibyte
        let middle = 32 * Self.mebibyte + 12_345
        let data = Array("a few bytes in the middle of nothing".utf8)
        try FileManager.default.createDirectory(atPath: directory.appending("tree"), withIntermediateDirectories: false)
        let path = directory.appending("tree/sparse.img")
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0)
        #expect(ftruncate(fd, off_t(length)) == 0)
        #expect(data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(middle)) } == data.count)
        close(fd)

        let (bytes, properties) = try await RoundTrip.archive(path: path, to: directory.appending("a.cairn"))
        #expect(properties.warnings.isEmpty)
        #expect(properties.uncompressedBytes == UInt64(length))
        #expect(bytes.count < 1 << 20, "archive is \(bytes.count) bytes")
        let extractor = try await Self.verifiedExtractor(bytes, in: directory, name: "b.cairn")
        defer { extractor.close() }
        try await extractor.extractAll(to: directory.url(appending: "output"))
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("output/sparse.img").utf8))
        var expected = [UInt8](repeating: 0, count: length)
        expected.replaceSubrange(middle..<(middle + data.count), with: data)
        #expect(extracted.count == length)
        #expect(extracted == expected)
    }

    @Test("empty files and empty directories, nested, round-trip with their modes and times")
    func emptyFilesAndDirectories() async throws {
        var tree = TreeBuilder()
        tree.file("empty.txt", [], mode: 0o600, mtime: 1_600_000_000_000_000_001)
        tree.directory("empty-dir", mode: 0o700, mtime: 1_600_000_000_000_000_002)
        tree.directory("a/b/c/d", mode: 0o755, mtime: 1_600_000_000_000_000_003)
        tree.file("only-empty/file", [], mode: 0o444, mtime: 1_600_000_000_000_000_004)
        let result = try await RoundTrip.archiveAndExtract(tree)
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        #expect(result.properties.uncompressedBytes == 0)
        #expect(result.properties.chunkCount == 0)
        #expect(result.extracted.nodes[Array("a/b/c/d".utf8)]?.kind == .directory)
        #expect(result.extracted.nodes[Array("only-empty/file".utf8)]?.size == 0)
    }

    /// Times at the edges of what `Int64` nanoseconds and ext4 hold.
    static let extremeTimes: [Int64] = [
        -1,  // 1969-12-31T23:59:59.999999999Z
        1,  // one nanosecond after the epoch
        -999_999_999,  // 1969-12-31T23:59:59.000000001Z
        -2_147_397_247_876_543_211,  // 1901-12-14T20:45:52.123456789Z (ext4 holds from 1901-12-13)
        1_000_000_000_999_999_999,  // 2001-09-09, the last nanosecond of a second
        Int64.max - 1_000_000_000,  // 2262-04-11T23:47:15.854775807Z
        Int64.max,  // 2262-04-11T23:47:16.854775807Z, the last representable nanosecond
    ]

    @Test("extreme timestamps (before 1970, 1901, 2262, odd nanoseconds) round-trip exactly on files, directories and symlinks")
    func extremeTimestamps() async throws {
        var tree = TreeBuilder()
        for (index, time) in Self.extremeTimes.enumerated() {
            tree.file("file-\(index)", Array("\(time)".utf8), mtime: time)
            tree.directory("dir-\(index)", mtime: time)
            tree.symlink("link-\(index)", target: "file-\(index)", mtime: time)
        }
        tree.rootModificationTime = Self.extremeTimes[3]
        let result = try await RoundTrip.archiveAndExtract(tree)
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        for (index, time) in Self.extremeTimes.enumerated() {
            // The fixture really has these times on disk.
            #expect(result.source.nodes[Array("file-\(index)".utf8)]?.modificationTime == time)
            #expect(result.extracted.nodes[Array("file-\(index)".utf8)]?.modificationTime == time)
            #expect(result.extracted.nodes[Array("dir-\(index)".utf8)]?.modificationTime == time)
            #expect(result.extracted.nodes[Array("link-\(index)".utf8)]?.modificationTime == time)
        }
    }

    @Test("hard links inside the tree are stored once (one file entry, hard-link entries) and restored as links")
    func hardLinksStoredOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let content = Self.random(300_000, seed: 604)
        var tree = TreeBuilder()
        tree.file("a", content)
        tree.hardLink("b", to: "a")
        tree.hardLink("sub/c", to: "a")
        tree.file("d-copy", content)  // same bytes, not a link
        try tree.materialize(at: directory.appending("tree"))
        let (_, properties) = try await RoundTrip.archive(path: directory.appending("tree"), to: directory.appending("a.cairn"))
        #expect(properties.warnings.isEmpty)

        let extractor = try await Extractor(at: .file(path: directory.appending("a.cairn")))
        defer { extractor.close() }
        let kinds = Dictionary(uniqueKeysWithValues: extractor.entries.map { ($0.path, $0.kind) })
        #expect(kinds["tree/a"] == .file)
        #expect(kinds["tree/b"] == .hardLink)
        #expect(kinds["tree/sub/c"] == .hardLink)
        #expect(kinds["tree/d-copy"] == .file)
        #expect(extractor.entry(atPathInArchive: "tree/b")?.linkTargetDisplay == "tree/a")
        #expect(extractor.entry(atPathInArchive: "tree/sub/c")?.linkTargetDisplay == "tree/a")
        // Content is counted once per file entry: a and d-copy, not the links.
        #expect(properties.uncompressedBytes == UInt64(2 * content.count))

        try await extractor.extractAll(to: directory.url(appending: "output"))
        let a = try RawFileSystem.status(Array(directory.appending("output/tree/a").utf8))
        let b = try RawFileSystem.status(Array(directory.appending("output/tree/b").utf8))
        let c = try RawFileSystem.status(Array(directory.appending("output/tree/sub/c").utf8))
        let d = try RawFileSystem.status(Array(directory.appending("output/tree/d-copy").utf8))
        #expect(a.st_ino == b.st_ino && a.st_ino == c.st_ino)
        #expect(a.st_nlink == 3)
        #expect(d.st_ino != a.st_ino)
        let source = try TreeSnapshot(at: directory.appending("tree"))
        let extracted = try TreeSnapshot(at: directory.appending("output/tree"))
        #expect(source == extracted, "\(source.diff(extracted))")
    }
}
