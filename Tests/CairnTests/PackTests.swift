import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Packs (issue 9, item 1; `Spec/0001 §7.5`): runs of small items stored as one pack record,
/// their entries in one item table and their content in one compressed section, with one
/// commit per pack.
@Suite("Packs")
struct PackTests {
    typealias Hostile = HostileArchiveTests

    /// The records of a complete archive: (offset, type, payload length).
    static func records(_ bytes: [UInt8]) -> [(offset: Int, type: UInt8, length: Int)] {
        Hostile.records(bytes).map { ($0.offset, $0.type, $0.length) }
    }

    @Test("3,000 small files and their directories go into a few packs with one commit each, and dedup stays per chunk")
    func smallFilesArePacked() async throws {
        var tree = TreeBuilder()
        var generator = SeededGenerator(seed: 90)
        for index in 0..<3000 {
            let words = Int.random(in: 20...300, using: &generator)
            let text = Array("record \(index):".utf8) + (0..<words).flatMap { Array(" w\(($0 * 7 + index) % 97)".utf8) }
            tree.file("data/\(index / 100)/\(index).txt", text)
        }
        tree.file("data/copy-a.txt", Array("the same small file\n".utf8))
        tree.file("data/copy-b.txt", Array("the same small file\n".utf8))
        let result = try await RoundTrip.archiveAndExtract(tree)
        #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
        let types = Self.records(result.archive).map(\.type)
        let packs = types.filter { $0 == RecordType.pack.rawValue }.count
        let commits = types.filter { $0 == RecordType.commit.rawValue }.count
        // 3,033 items, at most 1,024 to a pack and 1 MiB of content: a handful of packs, and no
        // entry records of their own.
        #expect((3...10).contains(packs), "\(packs) packs")
        #expect(commits == packs + 1, "commit 0 and one after each pack: \(commits)")
        #expect(!types.contains(RecordType.entry.rawValue))
        // The two copies share one chunk.
        #expect(result.properties.chunkCount == 3001, "\(result.properties.chunkCount)")
        // Per file, the archive costs little over its compressed content: the entries cost a
        // few bytes each, not a record set each (1.0 spent about 520 bytes per file).
        let overhead = result.archive.count - Int(result.properties.compressedBytes ?? 0)
        #expect(overhead < 3033 * 40, "\(overhead) bytes of records and manifest for 3,033 entries")
    }

    @Test("a packed file equal to a large file's chunk names that chunk record; a large file's chunk equal to a packed one is stored again as a record")
    func packedAndRecordChunksMeet() async throws {
        var generator = SeededGenerator(seed: 91)
        let big = generator.bytes(20 << 10)  // fixed 8 KiB chunks: 8 KiB, 8 KiB and a 4 KiB tail
        let tail = Array(big[(16 << 10)...])
        var configuration = Archiver.Configuration()
        configuration.chunking = .fixed(size: 8 << 10)
        // Byte order: the large file first, then the small copy of its tail (a reference to the
        // tail's chunk record); then a small copy first, then the large file (stored again).
        var before = TreeBuilder()
        before.file("a.big", big)
        before.file("b.small", tail)
        var after = TreeBuilder()
        after.file("a.small", tail)
        after.file("b.big", big)
        for (tree, chunks) in [(before, 3), (after, 4)] {
            let result = try await RoundTrip.archiveAndExtract(tree, configuration: configuration)
            #expect(result.source == result.extracted, "\(result.source.diff(result.extracted))")
            #expect(result.properties.chunkCount == chunks, "\(result.properties.chunkCount) chunks")
            let types = Self.records(result.archive).map(\.type)
            #expect(types.filter { $0 == RecordType.chunk.rawValue }.count == 3)
            let directory = try TemporaryDirectory(prefix: "cairn-pack-meet")
            defer { directory.remove() }
            let path = try Hostile.write(result.archive, "a.cairn", in: directory)
            let verify = try await Extractor.verifyArchive(at: .file(path: path))
            #expect(verify.entryCount == 3)
            let extractor = try await Extractor(at: .file(path: path))
            defer { extractor.close() }
            try await extractor.extractItem(atPathInArchive: chunks == 3 ? "tree/b.small" : "tree/a.small", to: directory.url(appending: "one"))
            let name = chunks == 3 ? "b.small" : "a.small"
            #expect(try RawFileSystem.contents(ofFile: Array(directory.appending("one/tree/\(name)").utf8)) == tail)
        }
    }

    @Test("a packed file whose size is over what a pack holds is corrupted at the pack record's own offset (§7.5.2), for every reader, never a crash")
    func hostilePackedSize() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-pack-hostile")
        defer { directory.remove() }
        let header = ArchiveHeader(compression: .none, isCompressible: false)
        let writer = try ArchiveWriter(header: header)
        let content = Array("hello\n".utf8)
        let id = try SHA256.hash(content)
        let entry = ArchiveEntry(pathBytes: Array("f".utf8), kind: .file, permissions: 0o644, modificationTime: 0, size: 6)
        let packed = try PackContentBuilder.build(raw: content, inlineIDs: [id], compression: .none)
        try writer.appendPack([ArchiveWriter.PackInput(entry: entry, chunk: (id, 6))], content: packed)
        try writer.finish()
        var bytes = writer.takeOutput()
        let pack = try #require(Self.records(bytes).first { $0.type == RecordType.pack.rawValue })
        // The item table is stored raw: rewrite it with the file's size at 2^63, keep the rest.
        var lying = entry
        lying.size = 1 << 63
        let table = PackItemTable.encode([PackItem(entry: lying, content: .inline)])
        var payload = Array(bytes[(pack.offset + 8)..<(pack.offset + 8 + PackRecordPrefix.length)])
        Hostile.put32(UInt32(table.count), into: &payload, at: 4)
        Hostile.put32(UInt32(table.count), into: &payload, at: 8)
        let oldTable = Int(Hostile.u32(bytes, pack.offset + 8 + 8))
        payload += table + Array(bytes[(pack.offset + 8 + PackRecordPrefix.length + oldTable)..<(pack.offset + 8 + pack.length)])
        let record = Hostile.framed(type: RecordType.pack.rawValue, payload: payload)
        // In front of the honest pack: readers meet the lie first.
        bytes = try Hostile.inserting(record, at: pack.offset, in: bytes)
        let path = try Hostile.write(bytes, "huge.cairn", in: directory)
        // The item table is decompressed: a position inside it is no place in the archive, so
        // every reader names the pack record itself.
        let at = UInt64(pack.offset)
        let verify = await Hostile.verifyError(path)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        #expect(verify?.message.contains("declares") == true, "\(String(describing: verify))")
        #expect(verify?.offset == at, "\(String(describing: verify))")
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .corrupted, "\(String(describing: open))")
        #expect(open?.offset == at, "\(String(describing: open))")
        let stream = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? stream.close() }
        let streamed = await #expect(throws: CairnError.self) {
            _ = try await Extractor.extractStream(from: stream, to: directory.url(appending: "streamed"))
        }
        #expect(streamed?.code == .corrupted && streamed?.offset == at, "\(String(describing: streamed))")
        let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
        #expect(!prefix.isComplete)
        #expect(prefix.stopReason?.offset == at, "\(String(describing: prefix.stopReason))")
    }

    @Test(
        "entries with large extended attributes close packs by their metadata too, so every pack stays readable",
        .enabled(if: PackTests.bigXattrsWork(), "/dev/shm does not take 64 KiB user.* attributes here"))
    func largeAttributesBoundPacks() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-pack-xattr", in: "/dev/shm")
        defer { directory.remove() }
        let root = directory.appending("tree")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let value = [UInt8](repeating: 0x61, count: 65_000)
        for index in 0..<200 {
            let path = root + "/f\(index)"
            try RawFileSystem.writeFile(Array(path.utf8), Array("\(index)\n".utf8))
            try Xattr.set(path, "user.big", value)
        }
        // One directory with 100 such attributes: 6.5 MB of metadata, too much for a pack.
        for index in 0..<100 { try Xattr.set(root, "user.big\(index)", value) }
        let archive = directory.appending("a.cairn")
        let (bytes, properties) = try await RoundTrip.archive(path: root, to: archive)
        #expect(properties.warnings.isEmpty, "\(properties.warnings)")
        let report = try await Extractor.verifyArchive(at: .file(path: archive))
        #expect(report.entryCount == 201)
        let types = Self.records(bytes).map(\.type)
        #expect(types.contains(RecordType.entry.rawValue), "the directory is an entry record of its own")
        #expect(types.filter { $0 == RecordType.pack.rawValue }.count >= 13, "at most 1 MiB of attributes per pack")
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        try await extractor.extractAll(to: URL(fileURLWithPath: directory.appending("out")))
        #expect(Xattr.get(directory.appending("out/tree/f199"), "user.big") == value)
    }

    @Test("a file removed from 3,000 sequentially named small files of 50 B to 2 KB changes at most the pack it was in and the next one (content-defined pack ends, Spec/0001 §10.2)")
    func packEndsResynchronise() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var generator = SeededGenerator(seed: 111)
        var tree = TreeBuilder()
        tree.directory("docs")
        var names: [String] = []
        for index in 0..<3000 {
            let name = "docs/d\(index / 100)/file" + String(String(index % 100 + 1000).dropFirst()) + ".txt"
            if index % 100 == 0 { tree.directory("docs/d\(index / 100)") }
            names.append(name)
            tree.file(name, generator.bytes(Int.random(in: 50...2000, using: &generator)))
        }
        try tree.materialize(at: directory.appending("old"))
        for (number, removed) in [names[150], names[1520]].enumerated() {
            let source = directory.appending("new-\(number)")
            try tree.materialize(at: source)
            #expect(unlink(source + "/" + removed) == 0)
            var digests: [Set<Digest>] = []
            for (name, root) in [("old", directory.appending("old")), ("new", source)] {
                let path = directory.appending(name + "-\(number).cairn")
                let archiver = try await Archiver(writingTo: .file(path: path))
                try await archiver.appendItem(at: URL(fileURLWithPath: root + "/docs"))
                _ = try await archiver.finish()
                let extractor = try await Extractor(at: .file(path: path))
                digests.append(Set(extractor.reader.manifest.packs.map(\.contentDigest)))
                extractor.close()
            }
            #expect(digests[0].count >= 6, "\(digests[0].count) packs")
            let changed = digests[1].subtracting(digests[0]).count
            #expect(changed <= 2, "removing \(removed): \(changed) of \(digests[1].count) packs differ")
        }
    }

    static func bigXattrsWork() -> Bool {
        let path = "/dev/shm/cairn-xattr-probe-\(getpid())"
        guard (try? RawFileSystem.writeFile(Array(path.utf8), [])) != nil else { return false }
        defer { unlink(path) }
        return (try? Xattr.set(path, "user.probe", [UInt8](repeating: 0, count: 65_000))) != nil
    }

    @Test("with fixed 4 KiB chunks, a 4 KiB file that is all hole is not packed and round-trips (no hole in a pack)")
    func fixedChunkingHoles() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-pack-fixed")
        defer { directory.remove() }
        let root = directory.appending("tree")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try RawFileSystem.writeFile(Array((root + "/small").utf8), Array("small\n".utf8))
        #expect(truncate(root + "/hole", 4096) == 0 || creat(root + "/hole", 0o644) >= 0)
        #expect(truncate(root + "/hole", 4096) == 0)
        var configuration = Archiver.Configuration()
        configuration.chunking = .fixed(size: 4096)
        let archive = directory.appending("a.cairn")
        _ = try await RoundTrip.archive(path: root, to: archive, configuration: configuration)
        let extractor = try await Extractor(at: .file(path: archive))
        defer { extractor.close() }
        try await extractor.extractAll(to: URL(fileURLWithPath: directory.appending("out")))
        #expect(try RawFileSystem.contents(ofFile: Array(directory.appending("out/tree/hole").utf8)) == [UInt8](repeating: 0, count: 4096))
    }
}
