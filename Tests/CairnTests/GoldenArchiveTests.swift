import CairnTestSupport
import Foundation
import Glibc
import Testing

import Cairn

/// Pins the container format (`Spec/0001-container-format.md`) with a golden archive:
/// `Fixtures/golden-v1.cairn` is built in code by ``GoldenArchive/make()`` and checked in. Any
/// change to the bytes the writer produces fails ``writerReproducesFixture()``; if the change is
/// intended (a new format version), regenerate with
///
/// ```
/// CAIRN_UPDATE_GOLDEN=1 swift test --disable-xctest --filter GoldenArchiveTests
/// ```
///
/// and update the pinned digests below (see `Fixtures/README.md`).
@Suite("Golden archive")
struct GoldenArchiveTests {
    // MARK: (a) the writer reproduces the fixture byte for byte

    @Test("the 1.0 fixture is the one written by the 1.0 writer (its SHA-256 is pinned; this writer writes 2.0)")
    func fixtureIsPinned() throws {
        // Format 1.0 is read, no longer written: the fixture, produced by the 1.0 writer from
        // `make()`'s inputs, must stay exactly as it was, so every 1.x reader path keeps a test.
        let digest = try SHA256.hash(try GoldenArchive.fixtureBytes()).hexString
        #expect(digest == "cd3ceff906442ad36c1753069ba98c21fe4b16764574fe8b1c42a5805c6f03f7")
    }

    @Test("the writer is deterministic (Spec §9): two runs give the same bytes")
    func writerIsDeterministic() throws {
        let identical = try GoldenArchive.make() == GoldenArchive.make()
        #expect(identical)
    }

    @Test("the seeded generator still produces its known first values (the fixture's content depends on it)")
    func seededGeneratorKnownAnswer() {
        var generator = SeededGenerator(seed: 0)
        // SplitMix64 reference values for seed 0.
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    // MARK: (b) the fixture reads back as expected

    @Test("the fixture's header fields are the ones it was written with (Spec §5)")
    func headerFields() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchive.fixturePath()))
        defer { extractor.close() }
        let header = extractor.header
        #expect(header == GoldenArchive.header)
        #expect(header.resourcesVersion == "golden-1")
        #expect(header.appIdentifier == "org.cairn.golden")
        #expect(header.sourcePlatform == "Linux x86_64")
        #expect(header.metadata == ["purpose": "format pinning", "generator": "GoldenArchiveTests"])
        #expect(header.chunking == .contentDefined(minimum: 2048, average: 8192, maximum: 32768))
        #expect(header.compression == .lz4)
        #expect(header.isCompressible)
        #expect(header.sizeEstimate == 500_000)
    }

    @Test("the fixture lists exactly the expected entries, in order, with their metadata (Spec §6)")
    func entriesAndMetadata() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchive.fixturePath()))
        defer { extractor.close() }
        let expected = try GoldenArchive.expectedEntries()
        #expect(extractor.entries.count == expected.count)
        for (actual, wanted) in zip(extractor.entries, expected) {
            #expect(actual.pathBytes == wanted.pathBytes)
            #expect(actual.kind == wanted.kind, "\(wanted.path)")
            #expect(actual.permissions == wanted.permissions, "\(wanted.path)")
            #expect(actual.modificationTime == wanted.modificationTime, "\(wanted.path)")
            #expect(actual.size == wanted.size, "\(wanted.path)")
            #expect(actual.userID == wanted.userID, "\(wanted.path)")
            #expect(actual.groupID == wanted.groupID, "\(wanted.path)")
            #expect(actual.linkTarget == wanted.linkTarget, "\(wanted.path)")
            #expect(actual.extendedAttributes == wanted.extendedAttributes, "\(wanted.path)")
            #expect(actual.contentDigest == wanted.contentDigest, "\(wanted.path)")
            #expect(actual.chunkCount == wanted.chunkCount, "\(wanted.path)")
        }
        // The name that is not UTF-8 is kept as raw bytes and displayed escaped.
        #expect(extractor.entries.last?.path == "golden/caf\\xe9.txt")
    }

    @Test("content digests are SHA-256 over the chunk ids (Spec §8.3) and pinned")
    func contentDigests() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchive.fixturePath()))
        defer { extractor.close() }
        let digests = Dictionary(
            uniqueKeysWithValues: extractor.entries.compactMap { entry in entry.contentDigest.map { (entry.path, $0.hexString) } })
        #expect(digests == GoldenArchive.pinnedContentDigests)
        // The empty file's digest is SHA-256("").
        #expect(digests["golden/empty"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("totals show several chunks, deduplication and LZ4 compression (Spec §7, §8.4, §12)")
    func totals() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchive.fixturePath()))
        defer { extractor.close() }
        let summary = extractor.summary
        let model = try GoldenArchive.model()
        let contents = try GoldenArchive.contents()
        #expect(summary.entryCount == 7)
        #expect(summary.fileCount == 4)
        #expect(summary.contentBytes == UInt64(contents.data.count + contents.copy.count + GoldenArchive.smallText.count))
        #expect(summary.chunkCount == model.distinctChunks)
        #expect(summary.referenceCount == model.references)
        #expect(summary.chunkCount >= 8, "the big file should span several chunks")
        #expect(summary.referenceCount > summary.chunkCount, "the copy should reuse stored chunks")
        #expect(summary.uniqueBytes < summary.contentBytes)
        #expect(summary.storedBytes < summary.uniqueBytes, "LZ4 should shrink the text chunks")
        let codecs = Set(extractor.reader.manifest.chunks.map(\.codec))
        #expect(codecs == [.lz4, .none], "the fixture should pin both compressed and stored-raw chunks (Spec §7.3)")
    }

    @Test("the fixture extracts to the generated contents")
    func extractsToGeneratedContents() async throws {
        let extractor = try await Extractor(at: .file(path: GoldenArchive.fixturePath()))
        defer { extractor.close() }
        let destination = FileManager.default.temporaryDirectory
            .appendingPathComponent("cairn-golden-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        try await extractor.extractAll(to: destination)
        let root = destination.appendingPathComponent("golden")
        let contents = try GoldenArchive.contents()
        #expect(try Data(contentsOf: root.appendingPathComponent("data.bin")) == Data(contents.data))
        #expect(try Data(contentsOf: root.appendingPathComponent("data-copy.bin")) == Data(contents.copy))
        #expect(try Data(contentsOf: root.appendingPathComponent("hard")) == Data(contents.data))
        #expect(try Data(contentsOf: root.appendingPathComponent("empty")).isEmpty)
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: root.appendingPathComponent("link").path) == "data.bin")
        // The non-UTF-8 name must come back byte for byte: open it by raw bytes.
        let rawPath = Array(root.path.utf8) + Array("/caf".utf8) + [0xE9] + Array(".txt".utf8)
        #expect(try readFile(rawPath) == GoldenArchive.smallText)
    }

    // MARK: (c) front-to-back verification

    @Test("the fixture passes the front-to-back verifier (Spec §13.2)")
    func verifies() async throws {
        let report = try await Extractor.verifyArchive(at: .file(path: GoldenArchive.fixturePath()))
        let fixture = try GoldenArchive.fixtureBytes()
        #expect(report.archiveBytes == UInt64(fixture.count))
        #expect(report.entryCount == 7)
        #expect(report.fileCount == 4)
        let contents = try GoldenArchive.contents()
        #expect(report.contentBytes == UInt64(contents.data.count + contents.copy.count + GoldenArchive.smallText.count))
        // Commit 0 after the header, then one per entry (Spec §10.2); no file reaches 4 MiB.
        #expect(report.commitCount == 8)
    }

    // MARK: (d) byte-level rules

    @Test("the archive starts with the 12-byte prelude: magic, major 1, minor 0 (Spec §2.1)")
    func prelude() throws {
        let bytes = try GoldenArchive.fixtureBytes()
        #expect(Array(bytes[0..<12]) == [0x89, 0x43, 0x41, 0x49, 0x52, 0x4E, 0x0D, 0x0A, 0x01, 0x00, 0x00, 0x00])
    }

    @Test("the first record, at offset 12, is the header record (Spec §4, §5)")
    func headerRecordFirst() throws {
        let bytes = try GoldenArchive.fixtureBytes()
        let header = try #require(GoldenArchive.record(in: bytes, at: 12))
        #expect(header.type == 1)
        #expect(Array(bytes[13..<16]) == [0, 0, 0], "flags and reserved are zero (Spec §3.1, §3.3)")
        let payload = Array(bytes[20..<(20 + header.length)])
        #expect(payload[0] == 0, "content-defined chunking")
        #expect(payload[1] == 1, "codec lz4")
        #expect(payload[2] == 1, "isCompressible")
        #expect(payload[3] == 0, "level 0 for lz4")
        #expect(GoldenArchive.u32(payload, 4) == 2048)
        #expect(GoldenArchive.u32(payload, 8) == 8192)
        #expect(GoldenArchive.u32(payload, 12) == 32768)
        #expect(GoldenArchive.u64(payload, 16) == 500_000, "size estimate")
        #expect(GoldenArchive.u16(payload, 24) == 8)
        #expect(Array(payload[26..<34]) == Array("golden-1".utf8))
    }

    @Test("commit 0 follows the header record and chains over the prelude and header (Spec §10.2, §10.3)")
    func commitAfterHeader() throws {
        let bytes = try GoldenArchive.fixtureBytes()
        let header = try #require(GoldenArchive.record(in: bytes, at: 12))
        let commitOffset = 12 + header.framedLength
        let commit = try #require(GoldenArchive.record(in: bytes, at: commitOffset))
        #expect(Array(bytes[commitOffset..<(commitOffset + 8)]) == [0x06, 0, 0, 0, 0x58, 0, 0, 0])
        #expect(commit.framedLength == 100)
        let payload = Array(bytes[(commitOffset + 8)..<(commitOffset + 96)])
        #expect(payload[0..<40].allSatisfy { $0 == 0 }, "sequence 0 and zero counts")
        #expect(GoldenArchive.u64(payload, 40) == UInt64.max, "no open entry")
        #expect(GoldenArchive.u64(payload, 48) == 0)
        // C_0 = SHA-256(Z ‖ bytes[0, start(0)))
        let c0 = try sha256(Array(repeating: 0, count: 32) + Array(bytes[0..<commitOffset]))
        #expect(Array(payload[56..<88]) == c0)
    }

    @Test("every record is framed with a valid CRC-32 and they follow the grammar of Spec §9 (§3.1, §4)")
    func recordSequence() throws {
        let bytes = try GoldenArchive.fixtureBytes()
        var offset = 12
        var types: [UInt8] = []
        while offset < bytes.count {
            let record = try #require(GoldenArchive.record(in: bytes, at: offset), "record at \(offset)")
            let body = Array(bytes[offset..<(offset + 8 + record.length)])
            #expect(CRC32.checksum(body) == GoldenArchive.u32(bytes, offset + 8 + record.length), "CRC at \(offset)")
            types.append(record.type)
            offset += record.framedLength
        }
        #expect(offset == bytes.count)
        // header, commit 0, dir+commit, file(data.bin, chunks, refs, end)+commit, ..., manifest, footer.
        let compact = types.map { String($0) }.joined(separator: " ")
        #expect(types.first == 1 && types.dropFirst().first == 6)
        #expect(types.last == 10)
        #expect(types.filter { $0 == 6 }.count == 8)
        #expect(types.filter { $0 == 3 }.count == 7)
        #expect(types.filter { $0 == 5 }.count == 4)
        #expect(Array(types.suffix(4)) == [7, 8, 9, 10], "\(compact)")
        // Chunk (2) and chunk-references (4) records appear only while a file is open (Spec §8.4).
        var fileOpen = false
        for type in types {
            switch type {
            case 3: fileOpen = true
            case 5, 6: fileOpen = false
            case 2, 4: #expect(fileOpen, "\(compact)")
            default: break
            }
        }
    }

    @Test("the footer is the last 140 bytes, framed as type 10 length 128, payload ending with CAIRNEND (Spec §12)")
    func footer() throws {
        let bytes = try GoldenArchive.fixtureBytes()
        let footerOffset = bytes.count - 140
        #expect(Array(bytes[footerOffset..<(footerOffset + 8)]) == [0x0A, 0, 0, 0, 0x80, 0, 0, 0])
        let payload = Array(bytes[(footerOffset + 8)..<(footerOffset + 136)])
        #expect(Array(payload[120..<128]) == Array("CAIRNEND".utf8))
        #expect(Array(bytes[(bytes.count - 12)..<(bytes.count - 4)]) == Array("CAIRNEND".utf8))
        #expect(CRC32.checksum(Array(bytes[footerOffset..<(bytes.count - 4)])) == GoldenArchive.u32(bytes, bytes.count - 4))
        let manifestOffset = Int(GoldenArchive.u64(payload, 0))
        let manifestLength = Int(GoldenArchive.u64(payload, 8))
        #expect(manifestOffset + manifestLength == footerOffset, "§12.3 step 4")
        #expect(Array(payload[16..<48]) == (try sha256(Array(bytes[manifestOffset..<footerOffset]))), "manifest digest")
        #expect(GoldenArchive.u64(payload, 48) == 7, "entry count")
        let contents = try GoldenArchive.contents()
        #expect(
            GoldenArchive.u64(payload, 72) == UInt64(contents.data.count + contents.copy.count + GoldenArchive.smallText.count),
            "content bytes")
        #expect(bytes[manifestOffset] == 7, "the manifest starts with the chunk table (Spec §11.1)")
    }
}

// MARK: - The golden archive, described in code

/// Builds the golden archive with the package-level ``ArchiveWriter``, chunking and compressing
/// in the test so every choice is fixed here.
enum GoldenArchive {
    static let chunking = ChunkingPolicy.contentDefined(minimum: 2048, average: 8192, maximum: 32768)
    static let sizeEstimate: UInt64 = 500_000
    static let header = ArchiveHeader(
        chunking: chunking, compression: .lz4,
        isCompressible: true, sizeEstimate: sizeEstimate, resourcesVersion: "golden-1",
        sourcePlatform: "Linux x86_64", appIdentifier: "org.cairn.golden",
        metadata: ["purpose": "format pinning", "generator": "GoldenArchiveTests"])

    /// 2023-11-14T22:13:20.123456789Z
    static let mtime: Int64 = 1_700_000_000_123_456_789
    static let smallText: [UInt8] = Array("bonjour, cairn\n".utf8)
    static let nonUTF8Name: [UInt8] = Array("golden/caf".utf8) + [0xE9] + Array(".txt".utf8)

    static let dataLength = 200 * 1024
    /// The copy is a prefix of data.bin ending at a chunk boundary, twice, plus a tail.
    static let copyPrefixTarget = 64 * 1024
    static let copyTail: [UInt8] = Array("-- end of copy --\n".utf8)

    /// The hex content digests (Spec §8.3) pinned when the fixture was made.
    static let pinnedContentDigests: [String: String] = [
        "golden/data.bin": "bbf99056fd20a1695fdd2b4254853e0218ed02a21d3d5fcf2edc9a488c9eed2b",
        "golden/data-copy.bin": "2387c3766f7703ec1885abe9d2e76e418b7b1e7e07b09ae6b7edcbe22447f6ce",
        "golden/empty": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "golden/caf\\xe9.txt": "4b39cc7b3196a80efbd26ac5352f797fbd3e4c6eb365540ffa4fd960ad5d6d26",
    ]

    struct Contents {
        var data: [UInt8]
        var copy: [UInt8]
    }

    /// Text-like runs (LZ4 shrinks them) alternating with random runs (stored raw), from a seed.
    static func contents() throws -> Contents {
        var generator = SeededGenerator(seed: 0x0CA1_12B6_01DE_0001)
        let words = ["cairn ", "chunk ", "archive ", "stream ", "commit ", "digest ", "footer ", "record\n", "of ", "the "]
        var data: [UInt8] = []
        data.reserveCapacity(dataLength)
        var run = 0
        while data.count < dataLength {
            // Each run is 12–40 KiB so both kinds fill whole chunks.
            let length = Int(12 * 1024 + generator.next() % (28 * 1024))
            if run % 3 == 2 {
                data += generator.bytes(length)
            } else {
                var text: [UInt8] = []
                while text.count < length { text += words[Int(generator.next() % UInt64(words.count))].utf8 }
                data += text.prefix(length)
            }
            run += 1
        }
        data.removeLast(data.count - dataLength)
        let cuts = chunkLengths(data)
        var boundary = 0
        for length in cuts where boundary + length <= copyPrefixTarget { boundary += length }
        guard boundary > 0 else { throw CairnError(.invalidArgument, "no chunk boundary below the copy target") }
        let prefix = Array(data[0..<boundary])
        return Contents(data: data, copy: prefix + prefix + copyTail)
    }

    /// The chunk lengths of `bytes` under the header's policy.
    static func chunkLengths(_ bytes: [UInt8]) -> [Int] {
        let chunker = Chunker(policy: chunking, keying: nil)
        var lengths: [Int] = []
        bytes.withUnsafeBytes { raw in
            var start = 0
            while start < raw.count,
                let length = chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[start...]), isFinal: true)
            {
                lengths.append(length)
                start += length
            }
        }
        return lengths
    }

    static func chunks(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var start = 0
        return chunkLengths(bytes).map { length in
            defer { start += length }
            return bytes[start..<(start + length)]
        }
    }

    /// The entries as written; `size` is the content length, digests are filled by `expectedEntries()`.
    static func writtenEntries(_ contents: Contents) -> [(entry: ArchiveEntry, content: [UInt8]?)] {
        [
            (
                ArchiveEntry(
                    pathBytes: Array("golden".utf8), kind: .directory, permissions: 0o755, modificationTime: Timestamp(nanosecondsSinceEpoch: mtime),
                    userID: 1000, groupID: 1000), nil
            ),
            (
                ArchiveEntry(
                    pathBytes: Array("golden/data.bin".utf8), kind: .file, permissions: 0o644,
                    modificationTime: Timestamp(nanosecondsSinceEpoch: mtime + 1), size: UInt64(contents.data.count), userID: 1000, groupID: 1000,
                    extendedAttributes: [.init(name: Array("user.cairn.golden".utf8), value: Array("1".utf8))]),
                contents.data
            ),
            (
                ArchiveEntry(
                    pathBytes: Array("golden/data-copy.bin".utf8), kind: .file, permissions: 0o600,
                    modificationTime: -1_000_000_001, size: UInt64(contents.copy.count), userID: 0, groupID: 0),
                contents.copy
            ),
            (
                ArchiveEntry(
                    pathBytes: Array("golden/empty".utf8), kind: .file, permissions: 0o444, modificationTime: 0,
                    userID: 1000, groupID: 100), []
            ),
            (
                ArchiveEntry(
                    pathBytes: Array("golden/link".utf8), kind: .symlink, permissions: 0o777,
                    modificationTime: Timestamp(nanosecondsSinceEpoch: mtime + 2), userID: 1000, groupID: 1000, linkTarget: Array("data.bin".utf8)), nil
            ),
            (
                ArchiveEntry(
                    pathBytes: Array("golden/hard".utf8), kind: .hardLink, permissions: 0o644,
                    modificationTime: Timestamp(nanosecondsSinceEpoch: mtime + 1), userID: 1000, groupID: 1000,
                    linkTarget: Array("golden/data.bin".utf8)), nil
            ),
            (
                ArchiveEntry(
                    pathBytes: nonUTF8Name, kind: .file, permissions: 0o640, modificationTime: Timestamp(nanosecondsSinceEpoch: mtime + 3),
                    size: UInt64(smallText.count), userID: 4_000_000_000, groupID: 1000), smallText
            ),
        ]
    }

    /// The archive bytes.
    static func make() throws -> [UInt8] {
        let contents = try contents()
        let writer = try ArchiveWriter(header: header)
        let compressor = ChunkCompressor(method: header.compression)
        var archive: [UInt8] = []
        for (entry, content) in writtenEntries(contents) {
            try writer.beginEntry(entry)
            guard let content else { continue }
            for chunk in chunks(content) {
                let id = try chunk.withUnsafeBytes { raw in try SHA256.hash(raw) }
                if writer.contains(id) {
                    try writer.appendChunk(id: id, rawLength: chunk.count, codec: .none, stored: nil)
                } else {
                    var stored: [UInt8] = []
                    let codec = chunk.withUnsafeBytes { compressor.compress($0, appendingTo: &stored) }
                    try stored.withUnsafeBytes { raw in
                        try writer.appendChunk(id: id, rawLength: chunk.count, codec: codec, stored: raw)
                    }
                }
            }
            try writer.endFile()
            archive += writer.takeOutput()
        }
        try writer.finish()
        archive += writer.takeOutput()
        return archive
    }

    /// Distinct chunks and references, computed from the contents independently of the writer.
    static func model() throws -> (distinctChunks: Int, references: Int) {
        let contents = try contents()
        var seen = Set<[UInt8]>()
        var references = 0
        for content in [contents.data, contents.copy, [], smallText] {
            for chunk in chunks(content) {
                seen.insert(Array(chunk))
                references += 1
            }
        }
        return (seen.count, references)
    }

    /// The entries as a reader should return them: authoritative sizes, digests, chunk counts.
    static func expectedEntries() throws -> [ArchiveEntry] {
        try writtenEntries(contents()).map { entry, content in
            var entry = entry
            if let content {
                let ids = try chunks(content).flatMap { chunk in
                    try chunk.withUnsafeBytes { raw in try SHA256.hash(raw) }.bytes
                }
                entry.contentDigest = try ids.withUnsafeBytes { raw in try SHA256.hash(raw) }
                entry.chunkCount = chunks(content).count
                entry.size = UInt64(content.count)
            }
            return entry
        }
    }

    // MARK: Fixture location

    /// The fixture in the source tree, written when `CAIRN_UPDATE_GOLDEN=1`.
    static var sourceFixtureURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/golden-v1.cairn")
    }

    static func fixturePath() throws -> String {
        let url = try #require(
            Bundle.module.url(forResource: "golden-v1", withExtension: "cairn", subdirectory: "Fixtures"),
            "Fixtures/golden-v1.cairn is missing from the test bundle; generate it with CAIRN_UPDATE_GOLDEN=1")
        return url.path
    }

    static func fixtureBytes() throws -> [UInt8] {
        try Array(Data(contentsOf: URL(fileURLWithPath: fixturePath())))
    }

    // MARK: Byte helpers

    struct Record {
        var type: UInt8
        var length: Int
        var framedLength: Int { 12 + length }
    }

    /// The record framed at `offset` (Spec §3.1), if it fits in `bytes`.
    static func record(in bytes: [UInt8], at offset: Int) -> Record? {
        guard offset + 12 <= bytes.count else { return nil }
        let length = Int(u32(bytes, offset + 4))
        guard offset + 12 + length <= bytes.count else { return nil }
        return Record(type: bytes[offset], length: length)
    }

    static func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
    }

    static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
    }
}

private func sha256(_ bytes: [UInt8]) throws -> [UInt8] {
    try bytes.withUnsafeBytes { raw in try SHA256.hash(raw) }.bytes
}

/// Reads a whole file named by raw path bytes (so names that are not UTF-8 work).
private func readFile(_ path: [UInt8]) throws -> [UInt8] {
    let fd = (path + [0]).withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY) }
    }
    guard fd >= 0 else { throw CairnError(.notFound, "cannot open", path: String(decoding: path, as: UTF8.self)) }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { break }
        out += buffer[0..<n]
    }
    return out
}
