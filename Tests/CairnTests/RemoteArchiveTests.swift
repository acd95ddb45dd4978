import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Cairn

/// Reading an archive at random from a source that is not a local file (`Spec/0001 §13.6`,
/// `Spec/0003 §1.3`): the range planning, the per-entry checks that replace the walk (one meaning
/// without reading the whole archive), resuming an extraction of everything from the journal.
/// The HTTP source itself is tested against a real nginx in ``RemoteHTTPTests``.
@Suite("Remote archives")
struct RemoteArchiveTests {
    typealias Hostile = HostileArchiveTests

    /// A local archive served as a remote source would be (``ArchiveSource/isRemote``), counting
    /// the bytes read, so the remote reading rules are tested without a network.
    final class CountingRemoteSource: ArchiveSource {
        let base: LocalArchiveSource
        let name: String
        private let counted = Atomic<UInt64>(0)
        var size: UInt64 { base.size }
        var isRemote: Bool { true }
        var bytesRead: UInt64 { counted.load(ordering: .relaxed) }

        init(path: String, name: String = "http://example.invalid/archive.cairn") throws {
            base = try LocalArchiveSource(path: path)
            self.name = name
        }

        func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
            let n = try base.read(fromAbsoluteOffset: offset, into: buffer)
            counted.add(UInt64(n), ordering: .relaxed)
            return n
        }

        func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
            let requests = RangeCoalescer.coalesce(ranges, gap: 64 << 10, maximum: 8 << 20)
            counted.add(requests.reduce(0) { $0 + UInt64($1.count) }, ordering: .relaxed)
            return try base.read(ranges: ranges)
        }

        func openSequential() throws(CairnError) -> SequentialArchiveBytes { try base.openSequential() }
        func close() { base.close() }
    }

    // MARK: - Range planning

    @Test("coalescing merges neighbours within the gap, never past the cap, and keeps far ranges apart")
    func coalescing() {
        let gap: UInt64 = 100
        #expect(RangeCoalescer.coalesce([0..<10, 50..<60, 300..<310], gap: gap, maximum: 1000) == [0..<60, 300..<310])
        // Unsorted and overlapping input.
        #expect(RangeCoalescer.coalesce([500..<600, 0..<10, 550..<700], gap: gap, maximum: 1000) == [0..<10, 500..<700])
        // Adjacent ranges merge up to the cap, then a new request starts.
        #expect(RangeCoalescer.coalesce([0..<400, 400..<800, 800..<1200], gap: gap, maximum: 1000) == [0..<800, 800..<1200])
        // One range longer than the cap is split.
        #expect(RangeCoalescer.coalesce([0..<2500], gap: gap, maximum: 1000) == [0..<1000, 1000..<2000, 2000..<2500])
        // A gap one byte too wide stays two requests.
        #expect(RangeCoalescer.coalesce([0..<10, 111..<120], gap: gap, maximum: 1000) == [0..<10, 111..<120])
        #expect(RangeCoalescer.coalesce([], gap: gap, maximum: 1000).isEmpty)
    }

    // MARK: - Fixtures

    /// A tree with one large file among others and many small (packed) ones.
    static func tree(largeMiB: Int = 3, seed: UInt64 = 10) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("t")
        tree.file("t/before.bin", generator.bytes(3 << 20))
        tree.file("t/large.bin", generator.bytes(largeMiB << 20), mode: 0o640)
        tree.file("t/after.bin", generator.bytes(2 << 20))
        tree.directory("t/small")
        for i in 0..<40 { tree.file("t/small/\(i).txt", Array("small file \(i)\n".utf8) + generator.bytes(200 + i * 37)) }
        tree.symlink("t/link", target: "large.bin")
        return tree
    }

    /// Archives `tree` into `directory/name`; returns its path.
    static func archive(_ tree: TreeBuilder, in directory: TemporaryDirectory, name: String = "a.cairn") async throws -> String {
        let source = directory.appending("src-\(name)")
        try tree.materialize(at: source)
        let path = directory.appending(name)
        _ = try await RoundTrip.archive(path: source + "/t", to: path)
        return path
    }

    /// The stored bytes of entry `path`'s chunk records.
    static func storedBytes(of path: String, in reader: ArchiveReader) -> UInt64 {
        guard let index = reader.manifest.entries.firstIndex(where: { $0.entry.path == path }) else { return 0 }
        return reader.references(ofEntry: index).reduce(0) {
            $0 + UInt64(RecordFraming.overhead + ChunkRecordPrefix.length) + UInt64(reader.manifest.chunks[Int($1)].storedLength)
        }
    }

    // MARK: - One meaning without the walk

    @Test("a remote source is not walked, and extracting one file reads little more than its stored records")
    func remoteSingleFileReadsLittle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source)
        defer { extractor.close() }
        #expect(!extractor.reader.walkedRecords)
        let local = try ArchiveReader(path: path)
        defer { local.close() }
        #expect(local.walkedRecords)
        let opened = source.bytesRead
        try await extractor.extractItem(atPathInArchive: "t/large.bin", to: directory.url(appending: "out"))
        let stored = Self.storedBytes(of: "t/large.bin", in: local)
        #expect(stored > 3 << 20)
        let read = source.bytesRead - opened
        #expect(read >= stored && Double(read) <= 1.1 * Double(stored), "read \(read) for \(stored) stored bytes")
        let extracted = try RawFileSystem.contents(ofFile: Array(directory.appending("out/t/large.bin").utf8))
        #expect(extracted.count == 3 << 20)
        #expect(try FileStatus.of(Array(directory.appending("out/t/large.bin").utf8)).permissions == 0o640)
    }

    @Test("a manifest that gives an entry another mode than its record is refused remotely as locally", arguments: [false, true])
    func forgedModeRefusedRemotely(packed: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let honest: [UInt8]
        if packed {
            honest = try RawFileSystem.contents(ofFile: Array(try await Self.archive(Self.tree(largeMiB: 1), in: directory).utf8))
        } else {
            honest = try OneMeaningTests.twoFiles()
        }
        let target = packed ? "t/small/3.txt" : "d/second.txt"
        let manifest = try OneMeaningTests.manifest(of: honest)
        let index = try #require(manifest.entries.firstIndex { $0.entry.path == target })
        #expect((manifest.entries[index].pack != nil) == packed)
        let forged = try OneMeaningTests.editingManifest(honest) { $0.entries[index].entry.permissions = 0o4777 }
        let path = try Hostile.write(forged, "forged.cairn", in: directory)
        // Locally the walk refuses to open it.
        #expect(throws: CairnError.self) { _ = try Extractor(path: path) }
        // Remotely it opens (the rows obey the entry rules) but extracting the entry reads its
        // record (or pack) and refuses, naming the URL, and nothing appears.
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source)
        defer { extractor.close() }
        let out = directory.url(appending: "out")
        do {
            try await extractor.extractItem(atPathInArchive: target, to: out)
            Issue.record("a forged manifest extracted")
        } catch let error as CairnError {
            #expect(error.code == .corrupted)
            #expect(error.message.contains("disagree"), "\(error)")
            #expect(error.description.contains("mode 4777"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: out.path))
        // An entry in an entry record of its own that agrees still extracts (a pack's rows are
        // checked together: its other items are refused too).
        if !packed {
            try await extractor.extractItem(atPathInArchive: "d/first.txt", to: directory.url(appending: "other"))
            #expect(FileManager.default.fileExists(atPath: directory.appending("other/d/first.txt")))
        }
    }

    // MARK: - Resuming everything from the journal

    /// Cuts a streaming extraction of `archive` into `destination` after `fraction` of its bytes.
    static func cutStreamExtraction(_ archive: String, into destination: URL, fraction: Double, in directory: TemporaryDirectory)
        async throws
    {
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let cutPath = try Hostile.write(Array(bytes[0..<Int(Double(bytes.count) * fraction)]), "cut.cairn", in: directory)
        let handle = try #require(FileHandle(forReadingAtPath: cutPath))
        defer { try? handle.close() }
        await #expect(throws: CairnError.self) { _ = try await Extractor.extractStream(from: handle, to: destination) }
    }

    @Test("resuming an extraction of everything reads only the missing entries' records and ends with the same tree")
    func resumeEverythingRemotely() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        let out = directory.url(appending: "out")
        try await Self.cutStreamExtraction(path, into: out, fraction: 0.75, in: directory)
        let source = try CountingRemoteSource(path: path)
        let extractor = try Extractor(source: source)
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.resume = true
        try await extractor.extractAll(to: out, options: options)
        // The first two large files (5 of the 8 MiB) were complete: only the rest is read.
        let local = try ArchiveReader(path: path)
        defer { local.close() }
        let missing = Self.storedBytes(of: "t/large.bin", in: local)
        #expect(source.bytesRead > missing && source.bytesRead < source.size / 2, "read \(source.bytesRead) of \(source.size)")
        let expected = directory.url(appending: "expected")
        try await Extractor.withExtractor(at: path) { try await $0.extractAll(to: expected) }
        let a = try TreeSnapshot(at: expected.path + "/t")
        let b = try TreeSnapshot(at: out.path + "/t")
        #expect(a == b, "\(a.diff(b))")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(leftovers.isEmpty)
    }

    @Test("resuming from another archive is refused naming its URL, and the staging directory is kept")
    func resumeFromAnotherArchiveRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.archive(Self.tree(), in: directory)
        // The same names and sizes, other contents.
        let other = try await Self.archive(Self.tree(seed: 11), in: directory, name: "b.cairn")
        let out = directory.url(appending: "out")
        try await Self.cutStreamExtraction(path, into: out, fraction: 0.6, in: directory)
        let source = try CountingRemoteSource(path: other, name: "http://example.invalid/other.cairn")
        let extractor = try Extractor(source: source)
        defer { extractor.close() }
        var options = ExtractionOptions()
        options.resume = true
        do {
            try await extractor.extractAll(to: out, options: options)
            Issue.record("resumed from another archive")
        } catch let error as CairnError {
            #expect(error.code == .notResumable)
            #expect(error.description.contains("http://example.invalid/other.cairn"), "\(error)")
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("staging") }
        #expect(leftovers == [".out.cairn-staging"])
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }
}
