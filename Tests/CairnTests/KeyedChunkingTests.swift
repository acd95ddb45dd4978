import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Keyed archives, the inner archive's side (`Spec/0004-trusted-archives.md §6.6–§6.7`): chunk
/// ids are HMAC-SHA-256 under the id key, FastCDC's gear table comes from the chunker key, and
/// every reader given the same keys reads the archive as a plain one; without them (or with
/// others) the first chunk id checked fails.
@Suite("Keyed chunk ids and keyed chunking")
struct KeyedChunkingTests {
    /// Keys from a seed: `idKey` bytes `seed, seed+1, …`, `chunkerKey` the next 32.
    static func keying(_ seed: UInt8) throws -> ChunkKeying {
        try ChunkKeying(idKey: (0..<32).map { seed &+ $0 }, chunkerKey: (32..<64).map { seed &+ $0 })
    }

    /// Small text files (packed), a large random file (chunk records), a copy of it (repeated
    /// chunks), a symlink.
    static func tree(seed: UInt64) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.directory("notes")
        for index in 0..<20 {
            let words = (0..<(100 + Int(generator.next() % 400))).map { _ in ["alpha", "beta", "gamma"][Int(generator.next() % 3)] }
            tree.file("notes/n\(index).txt", Array(words.joined(separator: " ").utf8))
        }
        let big = generator.bytes(900 << 10)
        tree.file("big.bin", big)
        tree.file("copy.bin", big)
        tree.symlink("link", target: "big.bin")
        return tree
    }

    /// Materialises `tree` at `work/name` and archives it to `path` with `keying`.
    static func create(
        _ tree: TreeBuilder, at path: String, in work: TemporaryDirectory, name: String, keying: ChunkKeying?,
        chunking: ChunkingPolicy = .default
    ) async throws -> String {
        let source = work.appending(name)
        try tree.materialize(at: source)
        var configuration = Archiver.Configuration()
        configuration.keying = keying
        configuration.chunking = chunking
        _ = try await RoundTrip.archive(path: source, to: path, configuration: configuration)
        return source
    }

    /// The ids of the archive's chunk records (packed chunks have no id in the manifest).
    static func chunkRecordIDs(_ path: String, keying: ChunkKeying?) throws -> Set<Digest> {
        let reader = try ArchiveReader(path: path, keying: keying)
        defer { reader.close() }
        return Set(reader.manifest.chunks.filter { $0.pack == nil }.map(\.id))
    }

    /// The error `body` throws, as a `CairnError`.
    static func error(_ body: () async throws -> Void) async -> CairnError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? CairnError
        }
    }

    // MARK: - Round trips

    @Test("§6.6/§6.7: a keyed archive made and read with the same keys: extract, verify, list, one file by random access and the stream extraction all give the files back byte for byte")
    func roundTrip() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-keyed")
        defer { work.remove() }
        let keying = try Self.keying(1)
        let archive = work.appending("keyed.cairn")
        let source = try await Self.create(Self.tree(seed: 1), at: archive, in: work, name: "tree", keying: keying)
        let expected = try TreeSnapshot(at: source)

        let report = try await Extractor.verifyArchive(at: .file(path: archive), keying: keying)
        #expect(report.fileCount == 22)
        try await Extractor.withExtractor(at: .file(path: archive), keying: keying) { extractor in
            #expect(extractor.entries.map(\.path).contains("tree/notes/n7.txt"))
            #expect(try await extractor.verify() == report)
            try await extractor.extractAll(to: work.url(appending: "seekable"))
            try await extractor.extractItem(atPathInArchive: "tree/big.bin", to: work.url(appending: "one"))
            // `diff` cuts and hashes the local files with the archive's keys: nothing differs.
            // Without them every file's content digest differs.
            let entries = try extractor.entriesWithContentDigests()
            let root = Array(work.appending("seekable").utf8)
            let same = try ArchiveDiff.compare(entries: entries, chunking: extractor.header.chunking, keying: keying, with: root)
            #expect(same.isEmpty, "\(same)")
            let unkeyed = try ArchiveDiff.compare(entries: entries, chunking: extractor.header.chunking, keying: nil, with: root)
            #expect(unkeyed.count == 22 && unkeyed.allSatisfy { $0.aspects == [.content] }, "\(unkeyed)")
        }
        #expect(try TreeSnapshot(at: work.appending("seekable/tree")) == expected)
        #expect(
            try RawFileSystem.contents(ofFile: Array(work.appending("one/tree/big.bin").utf8))
                == RawFileSystem.contents(ofFile: Array((source + "/big.bin").utf8)))

        let input = try FileDescriptor.open(archive, flags: O_RDONLY)
        defer { _ = try? input.close() }
        let streamed = try await Extractor.extractStream(
            from: input, to: Array(work.appending("stream").utf8), options: ExtractionOptions(), progress: nil, keying: keying)
        #expect(streamed == report)
        #expect(try TreeSnapshot(at: work.appending("stream/tree")) == expected)
    }

    @Test("§6.6: a keyed archive read without its keys, or with other ones, and a plain archive read with keys, fail at the first chunk id checked (checksumMismatch) and extract nothing")
    func wrongKeysFail() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-keyed-wrong")
        defer { work.remove() }
        let keyed = work.appending("keyed.cairn")
        let plain = work.appending("plain.cairn")
        _ = try await Self.create(Self.tree(seed: 2), at: keyed, in: work, name: "a", keying: try Self.keying(2))
        _ = try await Self.create(Self.tree(seed: 2), at: plain, in: work, name: "b", keying: nil)
        let cases: [(archive: String, keying: ChunkKeying?)] = [(keyed, nil), (keyed, try Self.keying(3)), (plain, try Self.keying(2))]
        for (number, (archive, keying)) in cases.enumerated() {
            let verify = await Self.error { _ = try await Extractor.verifyArchive(at: .file(path: archive), keying: keying) }
            #expect(verify?.code == .checksumMismatch, "case \(number): \(String(describing: verify))")
            let output = work.appending("out\(number)")
            let seekable = await Self.error {
                try await Extractor.withExtractor(at: .file(path: archive), keying: keying) { extractor in
                    try await extractor.extractAll(to: URL(fileURLWithPath: output))
                }
            }
            #expect(seekable?.code == .checksumMismatch, "case \(number): \(String(describing: seekable))")
            #expect(!RawFileSystem.exists(Array(output.utf8)))
            let input = try FileDescriptor.open(archive, flags: O_RDONLY)
            defer { _ = try? input.close() }
            let streamOutput = work.appending("stream\(number)")
            let stream = await Self.error {
                _ = try await Extractor.extractStream(
                    from: input, to: Array(streamOutput.utf8), options: ExtractionOptions(), progress: nil, keying: keying)
            }
            #expect(stream?.code == .checksumMismatch, "case \(number): \(String(describing: stream))")
            #expect(!RawFileSystem.exists(Array(streamOutput.utf8)))
        }
    }

    // MARK: - Ids

    @Test("§6.6: a chunk's id is HMAC-SHA-256(idKey, content): libcrypto's HMAC of the bytes, not their SHA-256; the test vector")
    func keyedIDs() throws {
        let keying = try Self.keying(0)
        #expect(keying.idKey == Array(0..<32))
        let content = Array("cairn".utf8)
        let id = try keying.idFunction.id(of: content)
        #expect(id.hexString == "89e3205848c139a70b66aefeaf5670280bd9494cb0c7b1acf77c1405c2bd743b")
        #expect(id == Digest(bytes: try HMAC.sha256(key: keying.idKey, message: content)))
        #expect(try ChunkIDFunction.sha256.id(of: content) == SHA256.hash(content))
        #expect(try ChunkIDFunction.sha256.id(of: content) != id)
        #expect(try ChunkIDFunction(keying: nil).id(of: content) == SHA256.hash(content))
        // The empty message and a zero chunk (a hole's, `Spec/0002 §8`) by the same rule.
        #expect(try keying.idFunction.id(of: []).hexString == "d38b42096d80f45f826b44a9d5607de72496a415d3f4a1a8c88e3bb9da8dc1cb")
        let zeros = [UInt8](repeating: 0, count: 300_000)
        #expect(try ZeroChunks.id(length: zeros.count, ids: keying.idFunction) == keying.idFunction.id(of: zeros))
        #expect(try ZeroChunks.id(length: zeros.count, ids: .sha256) == SHA256.hash(zeros))
        #expect(throws: CairnError.self) { try ChunkKeying(idKey: [1, 2, 3], chunkerKey: Array(0..<32)) }
    }

    @Test("§6.6: two archives made with the same keys share the ids of the same content; with other keys, or plain, they share none")
    func sharedIDs() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-keyed-ids")
        defer { work.remove() }
        let tree = Self.tree(seed: 4)
        var paths: [String] = []
        let keyings: [ChunkKeying?] = [try Self.keying(4), try Self.keying(4), try Self.keying(5), nil]
        for (number, keying) in keyings.enumerated() {
            let path = work.appending("a\(number).cairn")
            _ = try await Self.create(tree, at: path, in: work, name: "t\(number)", keying: keying)
            paths.append(path)
        }
        let ids = try zip(paths, keyings).map { try Self.chunkRecordIDs($0, keying: $1) }
        #expect(ids[0].count >= 3)
        #expect(ids[0] == ids[1])
        #expect(ids[0].isDisjoint(with: ids[2]))
        #expect(ids[0].isDisjoint(with: ids[3]))
        #expect(ids[2].isDisjoint(with: ids[3]))
    }

    @Test("§6.6: the id of a one-chunk file in a keyed archive is the HMAC of the file's bytes")
    func oneChunkFileID() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-keyed-one")
        defer { work.remove() }
        var generator = SeededGenerator(seed: 6)
        let bytes = generator.bytes(100 << 10)
        var tree = TreeBuilder()
        tree.file("f.bin", bytes)
        let keying = try Self.keying(6)
        let path = work.appending("one.cairn")
        // A 100 KiB file is no pack candidate (over 64 KiB) and below the minimum: one chunk record.
        _ = try await Self.create(
            tree, at: path, in: work, name: "t", keying: keying,
            chunking: .contentDefined(minimum: 128 << 10, average: 256 << 10, maximum: 1 << 20))
        #expect(try Self.chunkRecordIDs(path, keying: keying) == [Digest(bytes: try HMAC.sha256(key: keying.idKey, message: bytes))])
    }

    // MARK: - Gear table and boundaries

    @Test("§6.7: the keyed gear table is the ChaCha20 keystream read little-endian: a pure function of the chunker key, unlike the published table; the test vector (Python cryptography's ChaCha20)")
    func keyedGearTable() throws {
        let keying = try ChunkKeying(idKey: Array(repeating: 0xAA, count: 32), chunkerKey: Array(0..<32))
        #expect(keying.gearValues.count == 256)
        #expect(Array(keying.gearValues.prefix(4)) == [0x6a19_c5d9_7d2b_fd39, 0x494a_dcb8_7703_bd8d, 0xcc6a_debc_6fd8_358a, 0x9224_ead8_4c7d_ccb2])
        #expect(keying.gearValues[255] == 0x7343_d61f_b3c4_43b8)
        #expect(try GearTable.keyedValues(chunkerKey: Array(0..<32)) == keying.gearValues)
        // The id key plays no part; another chunker key gives another table.
        #expect(try ChunkKeying(idKey: Array(0..<32), chunkerKey: Array(0..<32)).gearValues == keying.gearValues)
        #expect(try GearTable.keyedValues(chunkerKey: Array(1...32)) != keying.gearValues)
        #expect(keying.gearValues != GearTable.values)
        #expect(Set(keying.gearValues).count == 256)
        #expect(throws: CairnError.self) { try GearTable.keyedValues(chunkerKey: Array(0..<31)) }
    }

    /// The chunk lengths of `bytes` cut whole by `chunker`.
    static func lengths(of bytes: [UInt8], by chunker: Chunker) -> [Int] {
        var lengths: [Int] = []
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let length = chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[offset...]), isFinal: true) ?? 0
                lengths.append(length)
                offset += max(length, 1)
            }
        }
        return lengths
    }

    @Test("§6.7: the same input is cut at other boundaries under two chunker keys and the published table, and a keyed cut does not depend on how the input is fed")
    func boundariesDependOnTheKey() throws {
        var generator = SeededGenerator(seed: 7)
        let input = generator.bytes(4 << 20)
        let policy = ChunkingPolicy.contentDefined(minimum: 2048, average: 8192, maximum: 65536)
        let a = try Self.keying(7)
        let b = try ChunkKeying(idKey: a.idKey, chunkerKey: (0..<32).map { 200 &+ $0 })
        let plain = Self.lengths(of: input, by: Chunker(policy: policy, keying: nil))
        let keyedA = Self.lengths(of: input, by: Chunker(policy: policy, keying: a))
        let keyedB = Self.lengths(of: input, by: Chunker(policy: policy, keying: b))
        for lengths in [plain, keyedA, keyedB] { #expect(lengths.reduce(0, +) == input.count) }
        #expect(keyedA == Self.lengths(of: input, by: Chunker(policy: policy, keying: try Self.keying(7))))
        // Cut points as sets of offsets: almost none in common (chance agreements only).
        func cuts(_ lengths: [Int]) -> Set<Int> { Set(lengths.reduce(into: [Int]()) { $0.append(($0.last ?? 0) + $1) }.dropLast()) }
        #expect(cuts(keyedA).intersection(cuts(keyedB)).count < keyedA.count / 4, "\(keyedA.count) chunks")
        #expect(cuts(keyedA).intersection(cuts(plain)).count < keyedA.count / 4)
        // Fed in random slices through the streaming chunker: the same lengths.
        var streaming = StreamingChunker(policy: policy, keying: a)
        var fed: [Int] = []
        var offset = 0
        input.withUnsafeBytes { raw in
            while offset < raw.count {
                let count = min(raw.count - offset, 1 + Int(generator.next() % 20_000))
                fed += streaming.append(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + count)]))
                offset += count
            }
        }
        fed += streaming.finish()
        #expect(fed == keyedA)
    }

    // MARK: - Seeded fetch

    @Test("§6.6: a seeded fetch between two keyed exports of the same keys copies their common chunks from the seed; a seed made with other keys gives nothing; byte-identical either way (nginx)")
    func seededFetch() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-keyed-fetch")
        defer { work.remove() }
        let served = work.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let keying = try Self.keying(8)
        var tree = Self.tree(seed: 8)
        let sameKeys = work.appending("same.cairn")
        let otherKeys = work.appending("other.cairn")
        _ = try await Self.create(tree, at: sameKeys, in: work, name: "old", keying: keying)
        _ = try await Self.create(tree, at: otherKeys, in: work, name: "other", keying: try Self.keying(9))
        var generator = SeededGenerator(seed: 80)
        tree.file("added.bin", generator.bytes(200 << 10))
        tree = RebuildTests.editing(tree) { path, contents, _ in
            if path == "notes/n3.txt" { contents = Array("changed".utf8) }
        }
        _ = try await Self.create(tree, at: served + "/a.cairn", in: work, name: "new", keying: keying)
        let expected = try RawFileSystem.contents(ofFile: Array((served + "/a.cairn").utf8))
        let server = try NginxServer(root: served)
        defer { server.stop() }

        var reports: [FetchReport] = []
        for (number, seed) in [sameKeys, otherKeys].enumerated() {
            var options = FetchOptions(seeds: [.file(path: seed)])
            options.keying = keying
            let out = work.appending("copy\(number).cairn")
            let report = try await ArchiveFetcher(from: ArchiveLocation(parsing: server.url("a.cairn")), options: options)
                .fetch(to: .file(path: out))
            #expect(try RawFileSystem.contents(ofFile: Array(out.utf8)) == expected)
            // Rebuilt by the writer from the seed (`Spec/0001 §13.6.1`), packs checked by the keyed
            // rule: no divergence, no fallback to copies and downloads.
            #expect(report.rejectedCopies == 0, "seed \(number)")
            reports.append(report)
        }
        // The same keys: big.bin and copy.bin (one set of chunk records) come from the seed.
        #expect(reports[0].seedBytes > UInt64(expected.count / 2), "\(reports[0].seedBytes) of \(expected.count)")
        #expect(reports[0].fetchedBytes < UInt64(expected.count / 2), "\(reports[0].fetchedBytes) of \(expected.count)")
        // Other keys: no chunk id in common; at most a few manifest records (paths and sizes).
        #expect(reports[1].seedBytes < UInt64(expected.count / 20), "\(reports[1].seedBytes) of \(expected.count)")
        #expect(reports[1].fetchedBytes > UInt64(expected.count / 2))
    }
}

extension KeyedChunkingTests {
    @Test("§6.6/§6.7: the chunk keys come from the archive's key block: its idKey and chunkerKey")
    func keysFromSecrets() throws {
        let secrets = ArchiveSecrets(blockKey: Array(repeating: 1, count: 32), idKey: Array(0..<32), chunkerKey: Array(32..<64))
        let keying = try ArchiveSecrets.decode(secrets.encoded()).chunkKeying()
        #expect(keying == (try Self.keying(0)))
        #expect(keying.gearValues == (try GearTable.keyedValues(chunkerKey: Array(32..<64))))
    }
}
