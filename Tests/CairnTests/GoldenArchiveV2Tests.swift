import CairnTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

import Cairn

/// Pins format 2.0 (`Spec/0001-container-format.md`, issue 9) with a golden archive:
/// `Fixtures/golden-v2.cairn` is built in code by ``GoldenArchiveV2/make()`` through the
/// package-level ``ArchiveWriter`` and checked in. Any change to the bytes the writer produces
/// fails ``writerReproducesFixture()``; if the change is intended, regenerate with
///
/// ```
/// CAIRN_UPDATE_GOLDEN=1 swift test --disable-xctest --filter GoldenArchiveV2Tests
/// ```
///
/// and update the pinned digest (see `Fixtures/README.md`). The checks of the record sequence,
/// the chain digests and the pack contents are computed here from the Spec's rules, with their
/// own loops, so they do not share the code they check.
@Suite("Golden archive 2.0")
struct GoldenArchiveV2Tests {
    // MARK: (a) the writer reproduces the fixture byte for byte

    @Test("writing the golden archive again gives exactly the fixture's bytes (Spec §9: the writer is deterministic)")
    func writerReproducesFixture() throws {
        try Self.expectReproduced(
            try GoldenArchiveV2.make(), source: GoldenArchiveV2.sourceFixtureURL, fixture: GoldenArchiveV2.fixtureBytes,
            pinnedDigest: GoldenArchiveV2.pinnedDigest)
    }

    /// Expects `written` to be the fixture's bytes, whose SHA-256 is `pinnedDigest`; with
    /// `CAIRN_UPDATE_GOLDEN=1`, first writes it to `source` (the fixture beside the test source).
    static func expectReproduced(
        _ written: [UInt8], source: URL, fixture: () throws -> [UInt8], pinnedDigest: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        if ProcessInfo.processInfo.environment["CAIRN_UPDATE_GOLDEN"] == "1" {
            try Data(written).write(to: source)
        }
        let fixture = try fixture()
        #expect(written.count == fixture.count, sourceLocation: sourceLocation)
        let firstDifference = zip(written, fixture).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(written == fixture, "first difference at offset \(firstDifference.map(String.init) ?? "none")", sourceLocation: sourceLocation)
        #expect(
            try SHA256.hash(fixture).hexString == pinnedDigest, "regenerated? update pinnedDigest and the README",
            sourceLocation: sourceLocation)
    }

    @Test("the fixture holds every item the 2.0 golden archive is meant to pin")
    func fixtureCoversTheBrief() throws {
        let model = try GoldenArchiveV2.model()
        let entries = model.items.map(\.entry)
        let kinds = Set(entries.map(\.kind.rawValue))
        #expect(kinds == Set<UInt8>(1...6), "files, directories, symlinks, hard links, FIFOs, character devices")
        #expect(model.packCount >= 2)
        #expect(entries.contains { $0.modificationTime.nanosecondsSinceEpoch == nil && $0.modificationTime.seconds < 0 }, "a time before 1677")
        #expect(entries.contains { $0.modificationTime.nanosecondsSinceEpoch == nil && $0.modificationTime.seconds > 0 }, "a time after 2262")
        #expect(entries.contains { $0.userID > 1 << 31 } && entries.contains { $0.groupID > 1 << 31 })
        #expect(entries.contains { String(validating: $0.pathBytes, as: UTF8.self) == nil }, "a name that is not UTF-8")
        #expect(entries.contains { !$0.extendedAttributes.isEmpty })
        // The big file has several chunks, one of them twice.
        let big = try GoldenArchiveV2.chunkIDs(GoldenArchiveV2.contents().big)
        #expect(big.count >= 6)
        #expect(Set(big).count < big.count, "the big file repeats a chunk")
        // Packed content kinds: inline, a reference inside the pack, to a chunk record, to an
        // earlier pack's chunk; and a chunk record equal to a packed chunk.
        let placements = model.items.compactMap(\.placement)
        #expect(placements.contains(.inline))
        #expect(placements.contains(.samePack))
        #expect(placements.contains(.chunkRecord))
        #expect(placements.contains(.earlierPack))
        #expect(model.recordChunkEqualToPacked)
    }

    // MARK: (b) header, version and every entry's metadata

    @Test("the prelude says 2.0 and the header's fields are the ones written (Spec §2, §5)")
    func headerAndVersion() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        #expect(Array(bytes[0..<12]) == Prelude.magic + [0x02, 0x00, 0x00, 0x00])
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        #expect(extractor.formatVersion == FormatVersion(major: 2, minor: 0))
        #expect(extractor.header == GoldenArchiveV2.header)
        #expect(extractor.header.resourcesVersion == "golden-2")
        #expect(extractor.header.compression == .lz4)
        #expect(extractor.header.chunking == .contentDefined(minimum: 2048, average: 8192, maximum: 32768))
        let header = try #require(GoldenArchive.record(in: bytes, at: 12))
        #expect(header.type == 1)
    }

    @Test("every entry reads back with the metadata it was written with (Spec §6): kinds, modes, exact times, ids, targets, devices, xattrs")
    func entriesAndMetadata() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        let expected = try GoldenArchiveV2.expectedEntries()
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
            #expect(actual.device == wanted.device, "\(wanted.path)")
            #expect(actual.extendedAttributes == wanted.extendedAttributes, "\(wanted.path)")
            #expect(actual.chunkCount == wanted.chunkCount, "\(wanted.path)")
        }
        // Files with an entry record carry their digest in the manifest; packed files get theirs
        // by reading their packs (Spec §7.5, §11), and both are SHA-256 over the chunk ids.
        let withDigests = try extractor.entriesWithContentDigests()
        for (actual, wanted) in zip(withDigests, expected) {
            #expect(actual.contentDigest == wanted.contentDigest, "\(wanted.path)")
        }
        #expect(extractor.entry(atPathInArchive: "golden2/null")?.device == ArchiveEntry.Device(major: 1, minor: 3))
        #expect(extractor.entries.contains { $0.path == "golden2/caf\\xe9.txt" })
    }

    @Test("the totals count packed and recorded chunks, references and content (Spec §7.5, §12)")
    func totals() throws {
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        let model = try GoldenArchiveV2.model()
        let summary = extractor.summary
        #expect(summary.entryCount == model.items.count)
        #expect(summary.fileCount == model.items.filter { $0.entry.kind == .file }.count)
        #expect(summary.contentBytes == model.contentBytes)
        #expect(summary.chunkCount == model.chunkCount)
        #expect(summary.referenceCount == model.referenceCount)
        #expect(extractor.reader.manifest.packs.count == model.packCount)
        let codecs = Set(extractor.reader.manifest.chunks.filter { $0.pack == nil }.map(\.codec))
        #expect(codecs == [.lz4, .none], "both compressed and stored-raw chunk records (Spec §7.3)")
    }

    // MARK: (c) record grammar and CRCs

    @Test("the records follow the 2.0 grammar (Spec §9): header commit (pack commit | entry [chunk|refs]* [file-end] commit)* manifest(12)+ footer, every CRC valid")
    func recordSequence() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let records = try GoldenArchiveV2.records(bytes)
        for record in records {
            let body = Array(bytes[record.offset..<(record.offset + 8 + record.length)])
            #expect(CRC32.checksum(body) == GoldenArchive.u32(bytes, record.offset + 8 + record.length), "CRC at \(record.offset)")
            #expect(bytes[record.offset + 1] == 0 && bytes[record.offset + 2] == 0 && bytes[record.offset + 3] == 0, "flags at \(record.offset)")
        }
        let compact = records.map { record -> String in
            // An entry record's payload is a list of one entry: count 1, then its kind.
            record.type == 3 ? "3(\(bytes[record.offset + 9]))" : String(record.type)
        }.joined(separator: " ")
        // Two packs, the file a-again.txt (one chunk record), big.bin (chunks, references),
        // and commit records after each item; then the manifest record(s) and the footer.
        let expected = try GoldenArchiveV2.expectedRecordTypes(records: records, bytes: bytes)
        #expect(compact == expected, "\(compact)")
        #expect(!records.contains { (7...9).contains($0.type) }, "1.x manifest tables are corrupted in 2.0")
        #expect(records.last?.type == 10 && records.last?.length == 128)
        #expect(records.filter { $0.type == 11 }.count == (try GoldenArchiveV2.model().packCount))
        #expect(records.filter { $0.type == 12 }.count >= 1)
        // Each commit counts the entries and chunks before it (chunk records and packed chunks).
        var sequence: UInt64 = 0
        for record in records where record.type == 6 {
            let payload = Array(bytes[(record.offset + 8)..<(record.offset + 8 + record.length)])
            #expect(GoldenArchive.u64(payload, 0) == sequence)
            sequence += 1
        }
    }

    @Test("each manifest record is codec | reserved[3] | rawLength and decodes to the body the writer encodes (Spec §11)")
    func manifestRecords() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let records = try GoldenArchiveV2.records(bytes)
        let manifest = records.filter { $0.type == 12 }
        let decompressor = ChunkDecompressor()
        var body: [UInt8] = []
        for record in manifest {
            let payload = Array(bytes[(record.offset + 8)..<(record.offset + 8 + record.length)])
            #expect(payload[0] == ChunkCodec.zstd.rawValue || payload[0] == ChunkCodec.none.rawValue)
            #expect(Array(payload[1..<4]) == [0, 0, 0])
            let segment = try Manifest.decodeSegment(payload, offset: UInt64(record.offset), decompressor: decompressor)
            #expect(segment.count == Int(GoldenArchive.u32(payload, 4)))
            body += segment
        }
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        #expect(body == extractor.reader.manifest.encodedBody(), "the stored body is the one the writer encodes")
        let footer = try #require(records.last)
        let payload = Array(bytes[(footer.offset + 8)..<(footer.offset + 8 + 128)])
        let manifestOffset = Int(GoldenArchive.u64(payload, 0))
        #expect(manifestOffset == manifest.first?.offset)
        #expect(manifestOffset + Int(GoldenArchive.u64(payload, 8)) == footer.offset)
        #expect(Array(payload[16..<48]) == (try SHA256.hash(Array(bytes[manifestOffset..<footer.offset])).bytes))
        #expect(Array(payload[120..<128]) == Array("CAIRNEND".utf8))
    }

    // MARK: (d) chain digests from the Spec's rule

    @Test("every commit's chain digest and the footer's are the Spec §10.3 construction over per-record digests")
    func chainDigests() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let records = try GoldenArchiveV2.records(bytes)
        func d(_ record: GoldenArchiveV2.FramedRecord) throws -> [UInt8] {
            try SHA256.hash(Array(bytes[record.offset..<(record.offset + record.framedLength)])).bytes
        }
        // C_0 = SHA-256(Z ‖ SHA-256(prelude) ‖ d(header)); then C_k over the commit before and
        // the records between; the footer's over the last commit and the manifest records.
        var input: [UInt8] = Array(repeating: 0, count: 32) + (try SHA256.hash(Array(bytes[0..<12])).bytes)
        var commits = 0
        for record in records {
            switch record.type {
            case 6:
                let stored = Array(bytes[(record.offset + 8 + 56)..<(record.offset + 8 + 88)])
                let computed = try SHA256.hash(input).bytes
                #expect(stored == computed, "commit \(commits) at \(record.offset)")
                input = computed + (try d(record))
                commits += 1
            case 10:
                let stored = Array(bytes[(record.offset + 8 + 88)..<(record.offset + 8 + 120)])
                #expect(stored == (try SHA256.hash(input).bytes), "footer")
            default:
                input += try d(record)
            }
        }
        #expect(commits == records.filter { $0.type == 6 }.count && commits > 4)
    }

    // MARK: (e) pack contents

    @Test("each pack's content digest is SHA-256 over its inline chunks' ids, recomputed from the content (Spec §7.5)")
    func packContentDigests() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let model = try GoldenArchiveV2.model()
        let packs = try GoldenArchiveV2.records(bytes).filter { $0.type == 11 }
        #expect(packs.count == model.packCount)
        let decompressor = ChunkDecompressor()
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        for (index, record) in packs.enumerated() {
            let payload = Array(bytes[(record.offset + 8)..<(record.offset + 8 + record.length)])
            let tableStored = Int(GoldenArchive.u32(payload, 8))
            let contentRaw = Int(GoldenArchive.u32(payload, 12))
            #expect(Array(payload[2..<4]) == [0, 0])
            let stored = Array(payload[(48 + tableStored)...])
            let codec = try #require(ChunkCodec(rawValue: payload[1]))
            let content =
                contentRaw == 0
                ? [] : try stored.withUnsafeBytes { try decompressor.decompress(codec: codec, stored: $0, rawLength: contentRaw) }
            let inline = model.inlineChunks(ofPack: index)
            #expect(content == inline.flatMap { $0 }, "pack \(index)'s content is its inline files, in order")
            var joined: [UInt8] = []
            var position = 0
            for chunk in inline {
                joined += try SHA256.hash(Array(content[position..<(position + chunk.count)])).bytes
                position += chunk.count
            }
            let digest = try SHA256.hash(joined).bytes
            #expect(Array(payload[16..<48]) == digest, "pack \(index)")
            #expect(extractor.reader.manifest.packs[index].contentDigest.bytes == digest, "the manifest's pack row \(index)")
            #expect(extractor.reader.manifest.packs[index].offset == UInt64(record.offset))
        }
        // The LZ4 codec is used where it shrinks: pack 0's text compresses.
        #expect(packs.first.map { bytes[$0.offset + 9] } == ChunkCodec.lz4.rawValue)
    }

    @Test("each packed file's content is stored as intended: inline, or naming an earlier chunk of this pack, of an earlier pack, or a chunk record (Spec §7.5)")
    func packItemPlacements() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let packs = try GoldenArchiveV2.records(bytes).filter { $0.type == 11 }
        let extractor = try Extractor(reader: ArchiveReader(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        let chunks = extractor.reader.manifest.chunks
        var placements: [[UInt8]: GoldenArchiveV2.Placement] = [:]
        for (index, record) in packs.enumerated() {
            let payload = Array(bytes[(record.offset + 8)..<(record.offset + 8 + record.length)])
            let before = UInt64(chunks.filter { $0.offset < UInt64(record.offset) }.count)
            let pack = try PackContent.read(payload: payload, offset: UInt64(record.offset), chunkCount: before, contentIDs: .sha256, using: ChunkDecompressor())
            for item in pack.items {
                switch item.content {
                case .inline: placements[item.entry.pathBytes] = .inline
                case .chunk(let k):
                    let row = try #require(chunks.indices.contains(Int(k)) ? chunks[Int(k)] : nil, "\(item.entry.path) names chunk \(k)")
                    #expect(row.rawLength == UInt32(item.entry.size), "\(item.entry.path)")
                    placements[item.entry.pathBytes] = row.pack == nil ? .chunkRecord : row.pack == index ? .samePack : .earlierPack
                case .none: break
                }
            }
        }
        for item in try GoldenArchiveV2.items() where item.pack != nil {
            #expect(placements[item.entry.pathBytes] == item.placement, "\(item.entry.path)")
        }
    }

    // MARK: (f) every reader gives the written contents

    @Test("verify reads the fixture front to back and counts what was written (Spec §13.2)")
    func verifies() async throws {
        let report = try await Extractor.verifyArchive(at: .file(path: GoldenArchiveV2.fixturePath()))
        let model = try GoldenArchiveV2.model()
        let records = try GoldenArchiveV2.records(try GoldenArchiveV2.fixtureBytes())
        #expect(report.archiveBytes == UInt64(try GoldenArchiveV2.fixtureBytes().count))
        #expect(report.entryCount == model.items.count)
        #expect(report.contentBytes == model.contentBytes)
        #expect(report.commitCount == records.filter { $0.type == 6 }.count)
    }

    @Test("verify --partial on cut copies verifies up to the last commit before the cut (Spec §13.3, Spec 0003 §7.1)")
    func verifyPartialAtCutPoints() throws {
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let records = try GoldenArchiveV2.records(bytes)
        let work = try TemporaryDirectory(prefix: "cairn-golden2-cut")
        defer { work.remove() }
        let packs = records.filter { $0.type == 11 }
        let chunk = try #require(records.first { $0.type == 2 })
        let manifest = try #require(records.first { $0.type == 12 })
        // Inside the first pack, inside a chunk record, inside the second pack, in the manifest.
        let cuts = [packs[0].offset + 30, chunk.offset + chunk.framedLength / 2, packs[1].offset + packs[1].framedLength - 1, manifest.offset + 5]
        for cut in cuts {
            let path = work.appending("cut-\(cut).cairn")
            try Data(bytes[0..<cut]).write(to: URL(fileURLWithPath: path))
            let expected = records.filter { $0.type == 6 && $0.offset + $0.framedLength <= cut }.last.map { $0.offset + $0.framedLength } ?? 0
            let result = try BehaviourCLI.run(["verify", "--partial", "--json", path])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdoutBytes)) as? [String: Any], "\(result.stdout)")
            #expect((json["verifiedLength"] as? NSNumber)?.intValue == expected, "cut at \(cut): \(result.stdout)")
            #expect((json["complete"] as? Bool) == false)
            #expect((json["fileBytes"] as? NSNumber)?.intValue == cut)
        }
        let whole = try BehaviourCLI.run(["verify", "--partial", "--json", GoldenArchiveV2.fixturePath()])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(whole.stdoutBytes)) as? [String: Any], "\(whole.stdout)")
        #expect((json["complete"] as? Bool) == true)
        #expect((json["verifiedLength"] as? NSNumber)?.intValue == bytes.count)
    }

    @Test("extractAll gives every written content, mode, kind, device and exact time (or a warning naming the file)")
    func extractAll() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-golden2-all")
        defer { work.remove() }
        let extractor = try await Extractor(at: .file(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        let (options, warnings) = GoldenArchiveV2.collectingOptions()
        try await extractor.extractAll(to: work.url(appending: "out"), options: options)
        try GoldenArchiveV2.checkExtracted(at: work.appending("out"), warnings: warnings.all)
    }

    @Test(
        "extractItem of single packed files (the seekable path) gives their contents, modes and times",
        arguments: ["golden2/a.txt", "golden2/a-copy.txt", "golden2/empty", "golden2/sub/chunk-of-big.bin", "golden2/sub/a-third.txt", "golden2/pipe"])
    func extractSinglePackedItem(path: String) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-golden2-item")
        defer { work.remove() }
        let extractor = try await Extractor(at: .file(path: GoldenArchiveV2.fixturePath()))
        defer { extractor.close() }
        let (options, warnings) = GoldenArchiveV2.collectingOptions()
        try await extractor.extractItem(atPathInArchive: path, to: work.url(appending: "out"), options: options)
        try GoldenArchiveV2.checkExtracted(at: work.appending("out"), warnings: warnings.all, only: [Array(path.utf8)])
    }

    @Test("streaming the fixture from a pipe gives the same tree (Spec §13.4)")
    func extractFromPipe() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-golden2-pipe")
        defer { work.remove() }
        let bytes = try GoldenArchiveV2.fixtureBytes()
        let pipe = Pipe()
        let writer = Thread {
            pipe.fileHandleForWriting.write(Data(bytes))
            try? pipe.fileHandleForWriting.close()
        }
        writer.start()
        let (options, warnings) = GoldenArchiveV2.collectingOptions()
        let report = try await Extractor.extractStream(from: pipe.fileHandleForReading, to: work.url(appending: "out"), options: options)
        #expect(report.archiveBytes == UInt64(bytes.count))
        try GoldenArchiveV2.checkExtracted(at: work.appending("out"), warnings: warnings.all)
    }

    // MARK: (g) the command line

    @Test("list --json of the fixture shows every kind, the FIFO and the character device included (Spec 0003 §5)")
    func listJSON() throws {
        let result = try BehaviourCLI.run(["list", "--json", GoldenArchiveV2.fixturePath()])
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(result.stdoutBytes)) as? [[String: Any]], "\(result.stdout)")
        let kinds = Dictionary(uniqueKeysWithValues: rows.compactMap { row in (row["path"] as? String).map { ($0, row["kind"] as? String ?? "") } })
        #expect(kinds["golden2/pipe"] == "fifo", "\(result.stdout)")
        #expect(kinds["golden2/null"] == "chardev", "\(result.stdout)")
        #expect(kinds["golden2"] == "directory")
        #expect(kinds["golden2/link"] == "symlink")
        #expect(kinds["golden2/hard"] == "hardlink")
        #expect(kinds["golden2/a.txt"] == "file")
        #expect(rows.count == (try GoldenArchiveV2.model().items.count))
        let a = try #require(rows.first { $0["path"] as? String == "golden2/a.txt" })
        let digest = try GoldenArchiveV2.expectedEntries().first { $0.path == "golden2/a.txt" }?.contentDigest?.hexString
        #expect(a["contentDigest"] as? String == digest)
        #expect((a["uid"] as? NSNumber)?.uint32Value == 3_000_000_000)
        // A packed file's contentDigest is §8.3's over its one chunk id, however the chunk is
        // stored (inline, the same pack, an earlier pack); SHA-256("") when empty (Spec 0003 §5).
        let c = try GoldenArchiveV2.contents()
        let overOneID = try SHA256.hash(try SHA256.hash(c.a).bytes).hexString
        for path in ["golden2/a.txt", "golden2/a-copy.txt", "golden2/sub/a-third.txt", "golden2/a-again.txt"] {
            let row = try #require(rows.first { $0["path"] as? String == path })
            #expect(row["contentDigest"] as? String == overOneID, "\(path)")
            #expect((row["chunkCount"] as? NSNumber)?.intValue == 1, "\(path)")
        }
        let empty = try #require(rows.first { $0["path"] as? String == "golden2/empty" })
        #expect(empty["contentDigest"] as? String == (try SHA256.hash([])).hexString)
        #expect((empty["chunkCount"] as? NSNumber)?.intValue == 0)
        // xattrs only where an entry has some.
        #expect(a["xattrs"] == nil)
        #expect((rows.first { $0["path"] as? String == "golden2/big.bin" }?["xattrs"] as? [[String: String]])?.count == 1)
    }
}

// MARK: - The golden archive 2.0, described in code

/// Builds the 2.0 golden archive with the package-level ``ArchiveWriter`` (`appendPack` for
/// runs of small items, `beginEntry`/`appendChunk`/`endFile` for the rest), chunking with the
/// 1.0 golden archive's policy (``GoldenArchive/chunkLengths(_:)``) and compressing with LZ4,
/// so every choice is fixed here and nothing depends on the machine.
enum GoldenArchiveV2 {
    static let header = ArchiveHeader(
        chunking: GoldenArchive.chunking, compression: .lz4, isCompressible: true, sizeEstimate: 400_000,
        resourcesVersion: "golden-2", sourcePlatform: "Linux x86_64", appIdentifier: "org.cairn.golden",
        metadata: ["purpose": "format 2.0 pinning", "generator": "GoldenArchiveV2Tests"])

    /// SHA-256 of `Fixtures/golden-v2.cairn`.
    static let pinnedDigest = "abf768b71fe978b628d9e09e0cb8d62408dad581e75101e3f292bfd203d05c92"

    /// 2023-11-14T22:13:20.123456789Z.
    static let base = Timestamp(seconds: 1_700_000_000, nanoseconds: 123_456_789)
    /// 1600-01-01T00:00:00.123456789Z: before what an `i64` of nanoseconds holds (1677).
    static let early = Timestamp(seconds: -11_676_096_000, nanoseconds: 123_456_789)
    /// 2600-01-01T00:00:00.987654321Z: after 2262 (and after ext4's 2446).
    static let late = Timestamp(seconds: 19_880_899_200, nanoseconds: 987_654_321)
    static let nonUTF8Name: [UInt8] = Array("golden2/caf".utf8) + [0xE9] + Array(".txt".utf8)

    struct Contents {
        var a: [UInt8]
        var b: [UInt8]
        var c: [UInt8]
        var caf: [UInt8]
        var big: [UInt8]
    }

    /// Text from a seed: words, so LZ4 shrinks it.
    static func text(_ generator: inout SeededGenerator, length: Int) -> [UInt8] {
        let words = ["cairn ", "pack ", "entry ", "varint ", "commit ", "digest ", "manifest ", "record\n", "of ", "the "]
        var text: [UInt8] = []
        while text.count < length { text += words[Int(generator.next() % UInt64(words.count))].utf8 }
        return Array(text.prefix(length))
    }

    static func contents() throws -> Contents {
        var generator = SeededGenerator(seed: 0x0CA1_12B6_01DE_0002)
        let a = text(&generator, length: 1500)
        let b = text(&generator, length: 900)
        let c = text(&generator, length: 700)
        // Text runs and random runs (stored raw) of 12–40 KiB.
        var base: [UInt8] = []
        var run = 0
        while base.count < 96 * 1024 {
            let length = Int(12 * 1024 + generator.next() % (28 * 1024))
            base += run % 3 == 2 ? generator.bytes(length) : text(&generator, length: length)
            run += 1
        }
        base.removeLast(base.count - 96 * 1024)
        // A chunk-aligned prefix, then the whole again: the prefix's chunks come twice.
        var boundary = 0
        for length in GoldenArchive.chunkLengths(base) {
            guard boundary + length <= 40 * 1024 else { break }
            boundary += length
        }
        guard boundary > 0 else { throw CairnError(.invalidArgument, "no chunk boundary below 40 KiB") }
        return Contents(a: a, b: b, c: c, caf: Array("bonjour, cairn 2.0\n".utf8), big: Array(base[0..<boundary]) + base)
    }

    static func chunkIDs(_ bytes: [UInt8]) throws -> [Digest] {
        try GoldenArchive.chunks(bytes).map { chunk in try chunk.withUnsafeBytes { try SHA256.hash($0) } }
    }

    /// Where a packed file's content goes (Spec §7.5), as the test expects it.
    enum Placement: Equatable {
        case inline, samePack, earlierPack, chunkRecord
    }

    struct Item {
        var entry: ArchiveEntry
        /// A file's content.
        var content: [UInt8]?
        /// The pack it is in, or nil for an entry record.
        var pack: Int?
        /// For a packed file with content, where its chunk is stored.
        var placement: Placement?
    }

    /// The items in archive order: pack 0, two files with entry records, pack 1.
    static func items() throws -> [Item] {
        let c = try contents()
        let bigChunk = Array(GoldenArchive.chunks(c.big)[1])
        func entry(
            _ path: String, _ kind: ArchiveEntry.Kind, _ mode: UInt32, _ time: Timestamp, uid: UInt32 = 1000, gid: UInt32 = 1000,
            target: String = "", device: ArchiveEntry.Device? = nil, xattrs: [ArchiveEntry.ExtendedAttribute] = [], size: Int = 0
        ) -> ArchiveEntry {
            ArchiveEntry(
                pathBytes: Array(path.utf8), kind: kind, permissions: mode, modificationTime: time, size: UInt64(size), userID: uid,
                groupID: gid, linkTarget: Array(target.utf8), extendedAttributes: xattrs, device: device)
        }
        var caf = entry(
            "", .file, 0o640, Timestamp(seconds: base.seconds + 3, nanoseconds: 999_999_999), uid: 4_000_000_000,
            xattrs: [
                .init(name: Array("user.cairn.golden".utf8), value: Array("2".utf8)),
                .init(name: Array("user.cairn.bytes".utf8), value: [0, 1, 0xFF]),
            ], size: c.caf.count)
        caf.pathBytes = nonUTF8Name
        return [
            Item(entry: entry("golden2", .directory, 0o755, base), content: nil, pack: 0),
            Item(entry: entry("golden2/a.txt", .file, 0o644, early, uid: 3_000_000_000, gid: 4_294_967_295, size: c.a.count), content: c.a, pack: 0, placement: .inline),
            Item(entry: entry("golden2/b.txt", .file, 0o600, Timestamp(seconds: base.seconds, nanoseconds: 1), size: c.b.count), content: c.b, pack: 0, placement: .inline),
            Item(entry: entry("golden2/empty", .file, 0o444, Timestamp(seconds: 0), gid: 100), content: [], pack: 0),
            Item(entry: entry("golden2/a-copy.txt", .file, 0o640, late, size: c.a.count), content: c.a, pack: 0, placement: .samePack),
            Item(entry: entry("golden2/link", .symlink, 0o777, base, target: "a.txt"), content: nil, pack: 0),
            Item(entry: entry("golden2/hard", .hardLink, 0o644, early, uid: 3_000_000_000, gid: 4_294_967_295, target: "golden2/a.txt"), content: nil, pack: 0),
            Item(entry: entry("golden2/pipe", .fifo, 0o640, Timestamp(seconds: -1, nanoseconds: 5)), content: nil, pack: 0),
            Item(entry: entry("golden2/null", .characterDevice, 0o666, base, uid: 0, gid: 0, device: .init(major: 1, minor: 3)), content: nil, pack: 0),
            Item(entry: caf, content: c.caf, pack: 0, placement: .inline),
            // A file whose one chunk equals a packed chunk: stored again as a chunk record (§7.5).
            Item(entry: entry("golden2/a-again.txt", .file, 0o644, base, size: c.a.count), content: c.a, pack: nil),
            Item(
                entry: entry(
                    "golden2/big.bin", .file, 0o644, Timestamp(seconds: base.seconds + 2, nanoseconds: 0),
                    xattrs: [.init(name: Array("user.cairn.big".utf8), value: Array("yes".utf8))], size: c.big.count),
                content: c.big, pack: nil),
            Item(entry: entry("golden2/sub", .directory, 0o750, late), content: nil, pack: 1),
            Item(entry: entry("golden2/sub/chunk-of-big.bin", .file, 0o600, base, size: bigChunk.count), content: bigChunk, pack: 1, placement: .chunkRecord),
            Item(entry: entry("golden2/sub/a-third.txt", .file, 0o644, early, size: c.a.count), content: c.a, pack: 1, placement: .earlierPack),
            Item(entry: entry("golden2/sub/c.txt", .file, 0o644, late, size: c.c.count), content: c.c, pack: 1, placement: .inline),
        ]
    }

    /// The archive bytes.
    ///
    /// - Parameter minorVersion: 0 for `golden-v2.cairn`; 1 for `golden-v2.1.cairn` (the same
    ///   items, with the manifest index and content-defined manifest segments of §11.8).
    static func make(minorVersion: UInt16 = 0, signingKey: SigningKey? = nil) throws -> [UInt8] {
        let writer = try ArchiveWriter(header: header, minorVersion: minorVersion, signingKey: signingKey)
        let compressor = ChunkCompressor(method: header.compression)
        var archive = writer.takeOutput()
        let all = try items()
        var index = 0
        while index < all.count {
            if let pack = all[index].pack {
                var run: [Item] = []
                while index < all.count, all[index].pack == pack {
                    run.append(all[index])
                    index += 1
                }
                let inputs = try run.map { item in
                    let chunk = try item.content.flatMap { bytes in bytes.isEmpty ? nil : (id: try SHA256.hash(bytes), length: bytes.count) }
                    return ArchiveWriter.PackInput(entry: item.entry, chunk: chunk)
                }
                var raw: [UInt8] = []
                var inlineIDs: [Digest] = []
                for (item, (input, inline)) in zip(run, zip(inputs, writer.inlinePlan(inputs))) where inline {
                    raw += item.content ?? []
                    if let id = input.chunk?.id { inlineIDs.append(id) }
                }
                let content = try PackContentBuilder.build(raw: raw, inlineIDs: inlineIDs, compression: header.compression)
                try writer.appendPack(inputs, content: content)
            } else {
                let item = all[index]
                index += 1
                try writer.beginEntry(item.entry)
                guard let content = item.content else { continue }
                for chunk in GoldenArchive.chunks(content) {
                    let id = try chunk.withUnsafeBytes { raw in try SHA256.hash(raw) }
                    if writer.contains(id) {
                        try writer.appendChunk(id: id, rawLength: chunk.count, codec: .none, stored: nil)
                    } else {
                        var stored: [UInt8] = []
                        let codec = chunk.withUnsafeBytes { compressor.compress($0, appendingTo: &stored) }
                        try stored.withUnsafeBytes { raw in try writer.appendChunk(id: id, rawLength: chunk.count, codec: codec, stored: raw) }
                    }
                }
                try writer.endFile()
            }
            archive += writer.takeOutput()
        }
        try writer.finish()
        archive += writer.takeOutput()
        return archive
    }

    /// What the archive must hold, computed from the items without the writer: the chunk index
    /// space of 2.0 (chunk records and inline packed chunks, in archive order).
    struct Model {
        var items: [Item]
        var packCount: Int
        var chunkCount: Int
        var referenceCount: Int
        var contentBytes: UInt64
        /// Whether some chunk record has the id of an inline packed chunk.
        var recordChunkEqualToPacked: Bool
        /// For each pack, the inline chunks in order.
        var inline: [[[UInt8]]]

        func inlineChunks(ofPack pack: Int) -> [[UInt8]] { inline[pack] }
    }

    static func model() throws -> Model {
        let all = try items()
        var packed = Set<[UInt8]>()
        var recorded = Set<[UInt8]>()
        var model = Model(items: all, packCount: 0, chunkCount: 0, referenceCount: 0, contentBytes: 0, recordChunkEqualToPacked: false, inline: [])
        for item in all {
            guard let content = item.content else { continue }
            model.contentBytes += UInt64(content.count)
            if let pack = item.pack {
                while model.inline.count <= pack { model.inline.append([]) }
                guard !content.isEmpty else { continue }
                model.referenceCount += 1
                if !packed.contains(content), !recorded.contains(content) {
                    packed.insert(content)
                    model.inline[pack].append(content)
                    model.chunkCount += 1
                }
            } else {
                for chunk in GoldenArchive.chunks(content).map(Array.init) {
                    model.referenceCount += 1
                    if recorded.insert(chunk).inserted {
                        model.chunkCount += 1
                        if packed.contains(chunk) { model.recordChunkEqualToPacked = true }
                    }
                }
            }
        }
        model.packCount = model.inline.count
        return model
    }

    /// The entries as a reader returns them (`entriesWithContentDigests()`): authoritative
    /// sizes, content digests over the chunk ids, chunk counts.
    static func expectedEntries() throws -> [ArchiveEntry] {
        try items().map { item in
            var entry = item.entry
            guard let content = item.content else { return entry }
            let ids = item.pack == nil ? try chunkIDs(content) : content.isEmpty ? [] : [try SHA256.hash(content)]
            entry.contentDigest = try SHA256.hash(ids.flatMap(\.bytes))
            entry.chunkCount = ids.count
            entry.size = UInt64(content.count)
            return entry
        }
    }

    // MARK: Records

    struct FramedRecord {
        var offset: Int
        var type: UInt8
        var length: Int
        var framedLength: Int { 12 + length }
    }

    /// Every framed record after the prelude (Spec §3.1), read with ``GoldenArchive/record(in:at:)``.
    static func records(_ bytes: [UInt8]) throws -> [FramedRecord] {
        var offset = 12
        var out: [FramedRecord] = []
        while offset < bytes.count {
            let record = try #require(GoldenArchive.record(in: bytes, at: offset), "record at \(offset)")
            out.append(FramedRecord(offset: offset, type: record.type, length: record.length))
            offset += record.framedLength
        }
        return out
    }

    /// The record types the items make under the grammar of Spec §9, as `recordSequence` prints
    /// them: `3(k)` is an entry record of kind k.
    static func expectedRecordTypes(records: [FramedRecord], bytes: [UInt8]) throws -> String {
        var types = ["1", "6"]
        var seenRecords = Set<[UInt8]>()
        let all = try items()
        var index = 0
        while index < all.count {
            if let pack = all[index].pack {
                while index < all.count, all[index].pack == pack { index += 1 }
                types += ["11", "6"]
                continue
            }
            let item = all[index]
            index += 1
            types.append("3(\(item.entry.kind.rawValue))")
            if let content = item.content {
                for chunk in GoldenArchive.chunks(content).map(Array.init) where seenRecords.insert(chunk).inserted { types.append("2") }
                types += ["4", "5"]
            }
            types.append("6")
        }
        types += Array(repeating: "12", count: records.filter { $0.type == 12 }.count)
        types.append("10")
        return types.joined(separator: " ")
    }

    // MARK: Extraction checks

    /// The warnings an extraction reported.
    final class WarningLog: Sendable {
        private let store = Mutex<[CairnError]>([])
        func append(_ warning: CairnError) { store.withLock { $0.append(warning) } }
        var all: [CairnError] { store.withLock { $0 } }
    }

    static func collectingOptions() -> (ExtractionOptions, WarningLog) {
        let warnings = WarningLog()
        var options = ExtractionOptions()
        options.onWarning = { warning in warnings.append(warning) }
        return (options, warnings)
    }

    /// Checks the tree extracted at `root` against the items (all of them, or the paths in
    /// `only`): kinds, contents, modes, device numbers; every time is exact unless a warning
    /// names the file (a file system that cannot hold it, Spec 0003 §4); device nodes are made
    /// as root and otherwise warned about.
    static func checkExtracted(at root: String, warnings: [CairnError], only: [[UInt8]]? = nil) throws {
        let items = try items()
        let selected = items.filter { item in only?.contains(item.entry.pathBytes) ?? true }
        #expect(!selected.isEmpty)
        let isRoot = getuid() == 0
        for item in selected {
            let entry = item.entry
            let path = Array(root.utf8) + [0x2F] + entry.pathBytes
            let display = entry.path
            let named = warnings.filter { $0.path == display }
            if entry.kind.isDevice && !isRoot {
                #expect(!RawFileSystem.exists(path), "\(display)")
                #expect(!named.isEmpty, "\(display): no device node and no warning")
                continue
            }
            let status = try FileStatus.of(path)
            #expect(status.permissions == entry.permissions || entry.kind == .symlink, "\(display): mode \(String(status.permissions, radix: 8))")
            let st = try RawFileSystem.status(path)
            switch entry.kind {
            case .file, .hardLink:
                #expect(st.st_mode & S_IFMT == S_IFREG, "\(display)")
                let source = entry.kind == .hardLink ? items.first { $0.entry.pathBytes == entry.linkTarget }?.content : item.content
                #expect(try RawFileSystem.contents(ofFile: path) == source, "\(display)")
            case .directory: #expect(st.st_mode & S_IFMT == S_IFDIR, "\(display)")
            case .symlink:
                #expect(st.st_mode & S_IFMT == S_IFLNK, "\(display)")
                var buffer = [CChar](repeating: 0, count: 4097)
                let n = RawFileSystem.withCString(path) { readlink($0, &buffer, 4096) }
                #expect(n >= 0 && buffer[0..<max(n, 0)].map { UInt8(bitPattern: $0) } == entry.linkTarget, "\(display)")
                continue  // a symlink's own time is not checked: extraction need not set it
            case .fifo: #expect(st.st_mode & S_IFMT == S_IFIFO, "\(display)")
            case .characterDevice:
                #expect(st.st_mode & S_IFMT == S_IFCHR, "\(display)")
                #expect(SpecialFiles.split(UInt64(st.st_rdev)) == entry.device, "\(display)")
            default: Issue.record("unexpected kind \(entry.kind)")
            }
            if !entry.extendedAttributes.isEmpty {
                // Restored in order, or refused by the destination with a warning naming the file.
                let held = ExtendedAttributes.read(.name(path, in: nil), display: display).attributes
                #expect(held == entry.extendedAttributes || !named.isEmpty, "\(display): \(held.count) attributes")
            }
            // A hard link shares its target's inode, so its time is the target's.
            let timed = entry.kind == .hardLink ? items.first { $0.entry.pathBytes == entry.linkTarget }?.entry ?? entry : entry
            if status.modificationTime != timed.modificationTime {
                #expect(
                    warnings.contains { $0.path == timed.path && $0.message.contains(timed.modificationTime.description) },
                    "\(display): time \(status.modificationTime), wanted \(timed.modificationTime), warnings \(warnings)")
            }
        }
        if let only {
            // Only what was asked for (and its parent directories) is there.
            let names = try RawFileSystem.names(atPath: Array((root + "/golden2").utf8))
            #expect(names.count <= only.count + 1, "\(names.map { String(decoding: $0, as: UTF8.self) })")
        }
    }

    // MARK: Fixture location

    static var sourceFixtureURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v2.cairn")
    }

    static func fixturePath() throws -> String {
        let url = try #require(
            Bundle.module.url(forResource: "golden-v2", withExtension: "cairn", subdirectory: "Fixtures"),
            "Fixtures/golden-v2.cairn is missing from the test bundle; generate it with CAIRN_UPDATE_GOLDEN=1")
        return url.path
    }

    static func fixtureBytes() throws -> [UInt8] {
        try Array(Data(contentsOf: URL(fileURLWithPath: fixturePath())))
    }
}
