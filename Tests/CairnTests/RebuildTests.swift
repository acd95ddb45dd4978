import CairnTestSupport
import Foundation
import Synchronization
import Testing

@testable import Cairn

/// A seeded fetch written again by the reference writer (`ArchiveRebuilder`,
/// `Spec/0001 §13.6`), against nginx: what it downloads, a file whose entry record declares
/// another size, and the fallback to copies and downloads when a rebuild diverges or does not
/// verify.
@Suite("Fetch: rebuilding from seeds")
struct RebuildTests {
    /// Small text files (packed) and large random ones (chunk records), lz4 as `cairn create` does by
    /// default.
    static func tree(seed: UInt64) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("notes")
        for index in 0..<60 {
            let words = (0..<(200 + Int(generator.next() % 800))).map { _ in ["alpha", "beta", "gamma", "delta"][Int(generator.next() % 4)] }
            tree.file("notes/n\(index).txt", Array(words.joined(separator: " ").utf8))
        }
        tree.directory("media")
        for index in 0..<4 { tree.file("media/m\(index).bin", generator.bytes(300 << 10)) }
        return tree
    }

    static func create(_ tree: TreeBuilder, at path: String, work: TemporaryDirectory, name: String) throws {
        let source = work.appending("src-" + name)
        try tree.materialize(at: source)
        let created = try FetchCLI.run(["create", "-q", "-o", path, "."], in: source)
        try #require(created.status == 0, "\(created.stderr)")
    }

    /// Fetches `url` into `out` with the library, collecting the events.
    static func fetch(_ url: String, to out: String, seeds: [String]) async throws -> (FetchReport, [FetchEvent]) {
        let events = Mutex<[FetchEvent]>([])
        var options = FetchOptions(seeds: try seeds.map { try ArchiveLocation(parsing: $0) })
        options.onEvent = { event in events.withLock { $0.append(event) } }
        let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: url), options: options).fetch(to: .file(path: out))
        return (report, events.withLock { $0 })
    }

    static func restartReasons(_ events: [FetchEvent]) -> [String] {
        events.compactMap { if case .restarting(let reason) = $0 { return reason } else { return nil } }
    }

    /// `tree` with each file passed through `edit(path, &contents, &mtime)`, in the same order.
    static func editing(_ tree: TreeBuilder, _ edit: (String, inout [UInt8], inout Int64) -> Void) -> TreeBuilder {
        var edited = TreeBuilder()
        for item in tree.items {
            guard case .file(contents: var contents, mode: let mode, mtime: var mtime) = item.node else {
                edited.add(item.path, item.node)
                continue
            }
            edit(String(decoding: item.path, as: UTF8.self), &contents, &mtime)
            edited.add(item.path, .file(contents: contents, mode: mode, mtime: mtime))
        }
        return edited
    }

    /// A `www` directory in `work` for nginx to serve.
    static func servedDirectory(in work: TemporaryDirectory) throws -> String {
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        return served
    }

    @Test("a seeded fetch downloads the first block, the manifest, the footer and only the records no seed has; a pack whose files moved is rebuilt from the seed's packs; byte-identical")
    func rebuildDownloadsOnlyWhatNoSeedHas() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        var tree = Self.tree(seed: 31)
        let old = work.appending("old.cairn")
        try Self.create(tree, at: old, work: work, name: "old")
        // One note grows past the packable size (it leaves its pack, whose other files stay), one
        // large file changes in the middle, one file is added.
        var generator = SeededGenerator(seed: 32)
        tree = Self.editing(tree) { path, contents, _ in
            if path == "notes/n7.txt" { contents += generator.bytes(70 << 10) }
            if path == "media/m2.bin" { contents.replaceSubrange((150 << 10)..<((150 << 10) + 16), with: generator.bytes(16)) }
        }
        tree.file("media/added.bin", generator.bytes(200 << 10))
        try Self.create(tree, at: served + "/a.cairn", work: work, name: "new")
        let expected = try FetchTests.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [old])
        try FetchTests.expectSame(out, expected)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 0)
        let fetched = server.accessLog().reduce(UInt64(0)) { $0 + $1.bodyBytesSent }
        // The manifest, the footer and the chunk records no seed has, the first block (prelude
        // and header) and the opening suffix request's slack before the manifest: no commit,
        // entry, chunk-references, file-end or pack record.
        let needed = try FetchFixture.changedBytes(archive: served + "/a.cairn", seed: old)
        let remote = try await Extractor(at: .file(path: served + "/a.cairn"))
        let manifestLength = remote.reader.footer.manifestLength
        remote.close()
        let suffix = min(UInt64(expected.count), UInt64(Footer.framedLength) + HTTPArchiveSource.tailSlack)
        let slack = suffix - min(suffix, UInt64(Footer.framedLength) + manifestLength)
        let allowed = needed + HTTPArchiveSource.blockSize + slack
        #expect(fetched <= allowed, "fetched \(fetched) bytes, needed \(needed) + \(allowed - needed), of \(expected.count)")
        // The footer, the first block, the manifest index's count and then the index (§11.8), the
        // manifest records no seed has, and the chunk records no seed has (one range each for
        // n7.txt, m2.bin's changed chunk and added.bin, merged where they are close).
        #expect(report.requestCount <= 8, "\(report.requestCount) requests")
        #expect(report.seedBytes > UInt64(expected.count / 2), "\(report.seedBytes)")
    }

    @Test("a small file appended to and one added (packs no seed has, downloaded) and a large file changed: the rebuild downloads those packs and goes on, with no fallback; byte-identical")
    func rebuildDownloadsPacksNoSeedHas() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-packs")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        var tree = Self.tree(seed: 81)
        let old = work.appending("old.cairn")
        try Self.create(tree, at: old, work: work, name: "old")
        var generator = SeededGenerator(seed: 82)
        tree = Self.editing(tree) { path, contents, _ in
            if path == "notes/n3.txt" { contents += Array(" appended".utf8) }
            if path == "media/m1.bin" { contents.replaceSubrange((100 << 10)..<((100 << 10) + 16), with: generator.bytes(16)) }
        }
        tree.file("notes/new.txt", Array("a new note, in no seed".utf8))
        try Self.create(tree, at: served + "/a.cairn", work: work, name: "new")
        let expected = try FetchTests.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [old])
        try FetchTests.expectSame(out, expected)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 0)
        #expect(report.fetchedBytes < UInt64(expected.count / 4), "\(report.fetchedBytes) of \(expected.count)")
    }

    @Test("format 2.1: the manifest index says which manifest records the seed holds; only the others are downloaded, and the result is byte-identical")
    func manifestRecordsComeFromTheSeed() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-manifest")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        // Many small files (a manifest of many segments), and one large file whose middle changes
        // with its length kept, so that no later row moves.
        var generator = SeededGenerator(seed: 51)
        var old = TreeBuilder()
        var new = TreeBuilder()
        for tree in [0, 1] {
            var content = SeededGenerator(seed: 52)
            var builder = TreeBuilder()
            builder.directory("docs")
            for index in 0..<5000 { builder.file("docs/d\(index).txt", Array("document \(index) ".utf8) + content.bytes(64)) }
            var big = content.bytes(600 << 10)
            if tree == 1 { big.replaceSubrange((300 << 10)..<((300 << 10) + 16), with: generator.bytes(16)) }
            builder.file("big.bin", big)
            if tree == 0 { old = builder } else { new = builder }
        }
        let seed = work.appending("old.cairn")
        try Self.create(old, at: seed, work: work, name: "old")
        try Self.create(new, at: served + "/a.cairn", work: work, name: "new")
        let expected = try FetchTests.bytes(served + "/a.cairn")

        // The manifest records of the new archive that the old one does not have, byte for byte.
        func manifestRecords(_ path: String) throws -> (records: [[UInt8]], offset: UInt64, length: UInt64) {
            let bytes = try FetchTests.bytes(path)
            let reader = try Extractor(reader: ArchiveReader(path: path))
            defer { reader.close() }
            let start = Int(reader.reader.footer.manifestOffset)
            let end = start + Int(reader.reader.footer.manifestLength)
            var records: [[UInt8]] = []
            var position = start
            while position < end {
                let length = (0..<4).reduce(0) { $0 | Int(bytes[position + 4 + $1]) << (8 * $1) }
                records.append(Array(bytes[position..<(position + 12 + length)]))
                position += 12 + length
            }
            return (records, UInt64(start), UInt64(end - start))
        }
        let remote = try manifestRecords(served + "/a.cairn")
        let held = Set(try manifestRecords(seed).records)
        let newBytes = remote.records.filter { !held.contains($0) }.reduce(0) { $0 + $1.count }
        try #require(remote.records.count >= 10, "\(remote.records.count) manifest records")
        #expect(newBytes * 4 < Int(remote.length), "\(newBytes) of \(remote.length) manifest bytes changed")

        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [seed])
        try FetchTests.expectSame(out, expected)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        // Bytes of the manifest region the server sent, from the Range of each request.
        var manifestDownloaded: UInt64 = 0
        for fields in server.requestFields() where fields.range.hasPrefix("bytes=") {
            let bounds = fields.range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let first = UInt64(bounds[0]), let last = UInt64(bounds[1]) else { continue }
            let low = max(first, remote.offset)
            let high = min(last + 1, remote.offset + remote.length)
            if high > low { manifestDownloaded += high - low }
        }
        // The changed records, and a few gaps under 1 KiB joined with them.
        #expect(manifestDownloaded >= UInt64(newBytes), "\(manifestDownloaded) manifest bytes downloaded, \(newBytes) changed")
        #expect(
            manifestDownloaded <= UInt64(newBytes) + 4096,
            "\(manifestDownloaded) manifest bytes downloaded, \(newBytes) changed, of \(remote.length)")
        #expect(report.seedBytes >= remote.length - manifestDownloaded, "\(report.seedBytes)")
    }

    @Test("files appended from a stream (their entry records declare size 0) are rebuilt too, without a fallback")
    func streamedFilesRebuilt() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-stream")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        var generator = SeededGenerator(seed: 41)
        let first = generator.bytes(400 << 10)
        let second = generator.bytes(300 << 10)
        let time = Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000)
        for (name, files) in [("old", [first]), ("a", [first, second])] {
            let archiver = try await Archiver(writingTo: .file(path: (name == "old" ? work.appending("old.cairn") : served + "/a.cairn")))
            for (index, bytes) in files.enumerated() {
                try await archiver.append(
                    contentsOf: ArchiverTests.stream(bytes), pathInArchive: "stream\(index).bin", modificationTime: time)
            }
            _ = try await archiver.finish()
        }
        let expected = try FetchTests.bytes(served + "/a.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [work.appending("old.cairn")])
        try FetchTests.expectSame(out, expected)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 0)
    }

    @Test("an archive another writer laid out (an entry record declaring a size the rebuild cannot know): the rebuild stops where it diverges, and copies and downloads give the archive byte-identical")
    func divergedRebuildFallsBack() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-diverge")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        var generator = SeededGenerator(seed: 51)
        let content = generator.bytes(200 << 10)
        // Written with the writer's calls, the entry declaring 12,345 bytes and holding 200 KiB
        // (a file that grew while it was read).
        let writer = try ArchiveWriter(header: ArchiveHeader(compression: .none))
        var entry = ArchiveEntry(
            pathBytes: Array("grew.bin".utf8), kind: .file, permissions: 0o644,
            modificationTime: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000))
        entry.size = 12_345
        try writer.beginEntry(entry)
        for start in stride(from: 0, to: content.count, by: 64 << 10) {
            let piece = Array(content[start..<min(content.count, start + (64 << 10))])
            let id = try SHA256.hash(piece)
            try piece.withUnsafeBytes { try writer.appendChunk(id: id, rawLength: piece.count, codec: .none, stored: $0) }
        }
        try writer.endFile()
        try writer.finish()
        let archive = writer.takeOutput()
        try RawFileSystem.writeFile(Array((served + "/a.cairn").utf8), archive)
        let seed = work.appending("seed.cairn")
        try RawFileSystem.writeFile(Array(seed.utf8), archive)
        let server = try NginxServer(root: served)
        defer { server.stop() }

        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [seed])
        try FetchTests.expectSame(out, archive)
        let reasons = Self.restartReasons(events)
        #expect(reasons.count == 1 && reasons[0].contains(ArchiveRebuilder.divergedMessage), "\(reasons)")
        #expect(report.rejectedCopies == 1)
        #expect(report.seedBytes >= UInt64(content.count), "the chunks still came from the seed: \(report.seedBytes)")
    }

    /// `a.cairn` of `tree(seed: 61)` served, and a seed that is that archive with one byte of its
    /// last chunk record's stored data flipped; with `recomputingCRC`, the record's CRC-32 made
    /// to hold again (only its chunk id then tells).
    static func damagedSeedFetch(recomputingCRC: Bool) async throws -> (report: FetchReport, events: [FetchEvent]) {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-unverified")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        try Self.create(Self.tree(seed: 61), at: served + "/a.cairn", work: work, name: "a")
        let expected = try FetchTests.bytes(served + "/a.cairn")
        let reader = try await Extractor(at: .file(path: served + "/a.cairn"))
        let last = try #require(reader.reader.manifest.chunks.last { $0.pack == nil })
        reader.close()
        var seed = expected
        seed[Int(last.offset) + 12 + 40 + 100] ^= 0x40
        if recomputingCRC { HostileArchiveTests.recomputeCRC(&seed, at: Int(last.offset)) }
        let seedPath = work.appending("seed.cairn")
        try RawFileSystem.writeFile(Array(seedPath.utf8), seed)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [seedPath])
        try FetchTests.expectSame(out, expected)
        return (report, events)
    }

    @Test("a seed chunk record that fails its CRC-32 is downloaded instead when it is read: no second attempt, result identical")
    func damagedSeedRecordDownloaded() async throws {
        let (report, events) = try await Self.damagedSeedFetch(recomputingCRC: false)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 1)
    }

    @Test("a rebuild from a seed whose chunk record has the right id, length and CRC-32 but other bytes does not verify: copies and downloads give the archive byte-identical")
    func unverifiedRebuildFallsBack() async throws {
        let (report, events) = try await Self.damagedSeedFetch(recomputingCRC: true)
        let reasons = Self.restartReasons(events)
        #expect(reasons.first?.contains("copying and downloading records instead") == true, "\(reasons)")
        #expect(report.rejectedCopies >= 1)
    }

    @Test("a remote seed with five damaged chunk records (copies, not a rebuild): each is downloaded when its CRC-32 fails, in one attempt; result identical")
    func damagedRemoteSeedRecordsDownloaded() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-delta-damaged")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        try Self.create(Self.tree(seed: 71), at: served + "/a.cairn", work: work, name: "a")
        let expected = try FetchTests.bytes(served + "/a.cairn")
        let reader = try await Extractor(at: .file(path: served + "/a.cairn"))
        let records = reader.reader.manifest.chunks.filter { $0.pack == nil && $0.storedLength > 200 }
        reader.close()
        try #require(records.count >= 5, "\(records.count) chunk records")
        var seed = expected
        for chunk in records.prefix(5) { seed[Int(chunk.offset) + 12 + 40 + 100] ^= 0x40 }
        try RawFileSystem.writeFile(Array((served + "/seed.cairn").utf8), seed)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [server.url("seed.cairn")])
        try FetchTests.expectSame(out, expected)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 5)
        #expect(report.seedBytes > UInt64(expected.count / 2), "\(report.seedBytes)")
        // The report counts the remote seed's requests too: what nginx sent, every request.
        let log = server.accessLog(waitingFor: report.requestCount)
        #expect(log.count == report.requestCount)
        #expect(report.fetchedBytes == log.reduce(UInt64(0)) { $0 + $1.bodyBytesSent }, "\(report)")
    }

    @Test("copies, not a rebuild: a local seed whose pack has another item table and a content section changed under a valid CRC-32: the section copy fails the remote pack's CRC-32, is distrusted with it, and downloaded; one retry, result identical")
    func damagedPackSectionCopyDistrusted() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-delta-pack-section")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        var tree = Self.tree(seed: 91)
        let seedPath = work.appending("seed.cairn")
        try Self.create(tree, at: seedPath, work: work, name: "old")
        // Every note's time changes: the packs' item tables differ, their contents do not.
        tree = Self.editing(tree) { path, _, mtime in
            if path.hasPrefix("notes/") { mtime += 1_000_000_000 }
        }
        try Self.create(tree, at: served + "/a.cairn", work: work, name: "new")
        let expected = try FetchTests.bytes(served + "/a.cairn")
        // One byte of the content section of the seed's pack of notes flipped (the content is
        // last, just before the CRC-32).
        var seed = try FetchTests.bytes(seedPath)
        let reader = try await Extractor(at: .file(path: seedPath))
        let pack = try #require(reader.reader.manifest.packs.first { $0.contentLength > 0 })
        reader.close()
        let length = (0..<4).reduce(0) { $0 | Int(seed[Int(pack.offset) + 4 + $1]) << (8 * $1) }
        seed[Int(pack.offset) + 8 + length - 10] ^= 0x40
        // Its CRC-32 made to hold again: the seed's own framing does not tell, only the remote's
        // pack CRC (a rebuild's partial file set aside as a seed can hold such a pack).
        HostileArchiveTests.recomputeCRC(&seed, at: Int(pack.offset))
        try RawFileSystem.writeFile(Array(seedPath.utf8), seed)
        // A remote seed too, so that the fetch copies instead of rebuilding (§13.6.1 needs local seeds).
        try RawFileSystem.writeFile(Array((served + "/other.cairn").utf8), try FetchTests.bytes(seedPath))
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("a.cairn"), to: out, seeds: [seedPath, server.url("other.cairn")])
        try FetchTests.expectSame(out, expected)
        let reasons = Self.restartReasons(events)
        #expect(reasons.count == 1 && reasons.first?.contains("bytes copied from seeds did not verify") == true, "\(reasons)")
        #expect(report.rejectedCopies >= 1, "\(events) \(report)")
    }

    @Test("a remote whose manifest index is damaged: the seeded fetch downloads the manifest whole, and fails naming the index and its offset, as verify does, not the pack before it")
    func damagedRemoteIndexNamed() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-bad-index")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        let seed = work.appending("old.cairn")
        try Self.create(Self.tree(seed: 101), at: seed, work: work, name: "old")
        var bytes = try FetchTests.bytes(seed)
        let index = try #require(HostileArchiveTests.records(bytes).last { $0.type == RecordType.manifestIndex.rawValue })
        bytes[index.offset + 8 + 6] ^= 0x01  // a digest byte; the CRC-32 is left as it was
        try RawFileSystem.writeFile(Array((served + "/a.cairn").utf8), bytes)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let verify = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyArchive(at: .file(path: served + "/a.cairn")) }
        let fetch = await #expect(throws: CairnError.self) {
            _ = try await Self.fetch(server.url("a.cairn"), to: work.appending("copy.cairn"), seeds: [seed])
        }
        #expect(verify?.offset == UInt64(index.offset), "\(String(describing: verify))")
        #expect(fetch?.offset == UInt64(index.offset), "\(String(describing: fetch))")
        #expect(fetch?.message.contains("manifest index") == true, "\(String(describing: fetch))")
        #expect(!RawFileSystem.exists(Array(work.appending("copy.cairn").utf8)))
    }

    @Test("the 2.1 vector (a streamed 6-byte file: declared size 0 and 6 encode alike) rebuilt from itself: its entry record is downloaded to tell, and there is no fallback")
    func smallStreamedFileRebuilt() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-rebuild-vector")
        defer { work.remove() }
        let served = try Self.servedDirectory(in: work)
        let vector = try SpecVectorTests.vector("v2.1.hex")
        try RawFileSystem.writeFile(Array((served + "/v.cairn").utf8), vector)
        let seed = work.appending("seed.cairn")
        try RawFileSystem.writeFile(Array(seed.utf8), vector)
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let out = work.appending("copy.cairn")
        let (report, events) = try await Self.fetch(server.url("v.cairn"), to: out, seeds: [seed])
        try FetchTests.expectSame(out, vector)
        #expect(Self.restartReasons(events).isEmpty, "\(events)")
        #expect(report.rejectedCopies == 0)
    }
}
