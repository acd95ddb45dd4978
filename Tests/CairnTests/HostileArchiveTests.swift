import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Archives that lie about themselves (`Spec/0001-container-format.md §2`, `§3`, `§7.4`, `§11`,
/// `§12`, `§13`, `§14`; issue 5, "Archives that lie"): every lie is refused with the error code
/// and offset the spec names, nothing crashes, nothing is allocated from a number in the file
/// beyond the documented limits, and nothing is written.
///
/// Hostile paths, links, duplicates, flipped chunk bytes, a truncated archive, output limits and
/// the dedup bomb are in `ExtractorTests`; this suite covers the framing, sizes, offsets, counts,
/// versions and names. Archives are crafted with ``ArchiveWriter`` and patched by hand; every
/// patch recomputes the CRCs (and, where the change is meant to be valid, the chain digests and
/// the manifest), so the check under test is the one that fires.
@Suite("Hostile archives")
struct HostileArchiveTests {
    typealias Crafter = ExtractorTests.Crafter

    // MARK: - Crafting and patching

    /// A small archive: a directory, two files sharing a chunk, a symlink. About 1.5 KB.
    static func smallArchive() throws -> [UInt8] {
        let crafter = try Crafter()
        try crafter.directory(Array("d".utf8))
        var generator = SeededGenerator(seed: 501)
        let content = generator.bytes(300)
        try crafter.file("d/a.txt", content)
        try crafter.file("d/b.txt", content)
        try crafter.symlink(Array("d/link".utf8), target: Array("a.txt".utf8))
        return try crafter.finish()
    }

    struct RecordSpan {
        var offset: Int
        var type: UInt8
        var length: Int
        var end: Int { offset + 12 + length }
    }

    /// The records of a well-formed archive, in order.
    static func records(_ bytes: [UInt8]) -> [RecordSpan] {
        var spans: [RecordSpan] = []
        var offset = Prelude.length
        while offset + 12 <= bytes.count {
            let length = Int(u32(bytes, offset + 4))
            spans.append(RecordSpan(offset: offset, type: bytes[offset], length: length))
            offset += 12 + length
        }
        return spans
    }

    static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
    }

    static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
    }

    static func put32(_ value: UInt32, into bytes: inout [UInt8], at offset: Int) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(index))) }
    }

    static func put64(_ value: UInt64, into bytes: inout [UInt8], at offset: Int) {
        Crafter.put(value, into: &bytes, at: offset)
    }

    /// Recomputes the CRC-32 of the record at `offset` from its header and payload (§3.1).
    static func recomputeCRC(_ bytes: inout [UInt8], at offset: Int) {
        let length = Int(u32(bytes, offset + 4))
        let crc = CRC32.checksum(Array(bytes[offset..<(offset + 8 + length)]))
        put32(crc, into: &bytes, at: offset + 8 + length)
    }

    /// Recomputes every commit's chain digest and the footer's (§10.3, §12.2), and their CRCs,
    /// so an archive whose bytes were edited on purpose passes the chain again.
    static func rechain(_ bytes: inout [UInt8]) throws {
        if bytes.count > 8, bytes[8] >= 2 { return try rechainVersion2(&bytes) }
        var previous = [UInt8](repeating: 0, count: 32)
        var segmentStart = 0
        // Only well-formed commits and footers carry a chain digest (a hostile one is left as is).
        for record in records(bytes)
        where (record.type == RecordType.commit.rawValue && record.length == 88)
            || (record.type == RecordType.footer.rawValue && record.length == Footer.payloadLength)
        {
            let hasher = SHA256()
            hasher.update(previous)
            hasher.update(Array(bytes[segmentStart..<record.offset]))
            let digest = try hasher.finalize().bytes
            let field = record.offset + 8 + (record.type == RecordType.commit.rawValue ? 56 : 88)
            bytes.replaceSubrange(field..<(field + 32), with: digest)
            recomputeCRC(&bytes, at: record.offset)
            previous = digest
            segmentStart = record.offset
        }
    }

    /// ``rechain(_:)`` for format 2.0: the chain over record digests (§10.3).
    static func rechainVersion2(_ bytes: inout [UInt8]) throws {
        let chain = RecordChain()
        try chain.add(recordBytes: Array(bytes[0..<Prelude.length]))
        for record in records(bytes) where record.end <= bytes.count {
            let isCommit = record.type == RecordType.commit.rawValue && record.length == 88
            let isFooter = record.type == RecordType.footer.rawValue && record.length == Footer.payloadLength
            guard isCommit || isFooter else {
                try chain.add(recordBytes: Array(bytes[record.offset..<record.end]))
                continue
            }
            let digest = try chain.finalize()
            let field = record.offset + 8 + (isCommit ? 56 : 88)
            bytes.replaceSubrange(field..<(field + 32), with: digest.bytes)
            recomputeCRC(&bytes, at: record.offset)
            chain.prime(digest)
            try chain.add(recordBytes: Array(bytes[record.offset..<record.end]))
        }
    }

    /// The footer's payload (128 bytes) of a complete archive.
    static func footerPayload(_ bytes: [UInt8]) -> [UInt8] {
        let start = bytes.count - Footer.framedLength + 8
        return Array(bytes[start..<(start + Footer.payloadLength)])
    }

    /// `archive` with a framed `record` inserted at `position`, made consistent again: with
    /// `intoManifest`, the record becomes the first record of the manifest region (`position`
    /// must be the manifest's offset); otherwise it goes into the body and the manifest's
    /// offsets after it move. The footer and every chain digest are recomputed.
    static func inserting(_ record: [UInt8], at position: Int, in archive: [UInt8], intoManifest: Bool = false) throws -> [UInt8] {
        var footer = footerPayload(archive)
        let manifestOffset = Int(u64(footer, 0))
        let manifestLength = Int(u64(footer, 8))
        let manifestBytes = Array(archive[manifestOffset..<(manifestOffset + manifestLength)])
        var result: [UInt8]
        let region: [UInt8]
        if intoManifest {
            precondition(position == manifestOffset)
            result = Array(archive[0..<manifestOffset])
            region = record + manifestBytes
            put64(UInt64(manifestLength + record.count), into: &footer, at: 8)
        } else {
            precondition(position <= manifestOffset)
            var (manifest, _) = try Manifest.decode(
                region: manifestBytes, offset: UInt64(manifestOffset), version: try Prelude.parse(Array(archive[0..<12])))
            let shift = UInt64(record.count)
            for index in manifest.chunks.indices where manifest.chunks[index].offset >= UInt64(position) {
                manifest.chunks[index].offset += shift
            }
            for index in manifest.packs.indices where manifest.packs[index].offset >= UInt64(position) {
                manifest.packs[index].offset += shift
            }
            for index in manifest.entries.indices where manifest.entries[index].recordOffset >= UInt64(position) {
                manifest.entries[index].recordOffset += shift
            }
            var encoded: [UInt8] = []
            manifest.encode(into: &encoded)
            result = Array(archive[0..<position]) + record + Array(archive[position..<manifestOffset])
            region = encoded
            let indexShift = try reindex(&result, manifest: encoded)
            put64(UInt64(Int(manifestOffset) + Int(shift) + indexShift), into: &footer, at: 0)
            put64(UInt64(encoded.count), into: &footer, at: 8)
        }
        footer.replaceSubrange(16..<48, with: try SHA256.hash(region).bytes)
        result += region
        RecordCodec.append(.footer, payload: footer, to: &result)
        try rechain(&result)
        return result
    }

    /// Format 2.1: makes the manifest index in `prefix` (the archive before its manifest)
    /// describe `manifest` instead, as a writer of that manifest would have written it.
    ///
    /// - Returns: how many bytes longer `prefix` became.
    static func reindex(_ prefix: inout [UInt8], manifest: [UInt8]) throws -> Int {
        guard let index = records(prefix).last(where: { $0.type == RecordType.manifestIndex.rawValue }) else { return 0 }
        let framed = try ManifestIndex(manifestRecords: manifest).framed()
        prefix.replaceSubrange(index.offset..<index.end, with: framed)
        return framed.count - (index.end - index.offset)
    }

    /// A framed record of any type byte and flags.
    static func framed(type: UInt8, flags: UInt8 = 0, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [type, flags, 0, 0, 0, 0, 0, 0]
        put32(UInt32(payload.count), into: &out, at: 4)
        out += payload
        withUnsafeBytes(of: CRC32.checksum(out).littleEndian) { out.append(contentsOf: $0) }
        return out
    }

    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return generator.bytes(count)
    }

    /// Writes `bytes` as `<directory>/<name>` and returns the path.
    static func write(_ bytes: [UInt8], _ name: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.appending(name)
        try RawFileSystem.writeFile(Array(path.utf8), bytes)
        return path
    }

    /// Opens `path` and extracts it into `<directory>/output`; returns the error it throws.
    static func openAndExtract(_ path: String, in directory: TemporaryDirectory) async -> CairnError? {
        do {
            let extractor = try await Extractor(at: .file(path: path))
            defer { extractor.close() }
            try await extractor.extractAll(to: directory.url(appending: "output"))
            return nil
        } catch let error as CairnError {
            return error
        } catch {
            Issue.record("not a CairnError: \(error)")
            return nil
        }
    }

    static func verifyError(_ path: String) async -> CairnError? {
        do {
            _ = try await Extractor.verifyArchive(at: .file(path: path))
            return nil
        } catch let error as CairnError {
            return error
        } catch {
            Issue.record("not a CairnError: \(error)")
            return nil
        }
    }

    /// The process's peak resident set size, in bytes.
    static func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss * 1024
    }

    // MARK: - Chunks that inflate past their declared length (§7.4)

    @Test("a chunk whose payload inflates past its declared raw length is corrupted at the chunk record; nothing is written",
          arguments: [CompressionMethod.lz4, .zlib(), .zstd()])
    func chunkInflatesPastDeclaredLength(method: CompressionMethod) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let declared = Array(repeating: Array("cairn stone ".utf8), count: 400).joined().prefix(4096)
        let inflated = Array(declared) + Array(declared)  // what the payload really decodes to
        let compressor = ChunkCompressor(method: method)
        var stored: [UInt8] = []
        let codec = inflated.withUnsafeBytes { compressor.compress($0, appendingTo: &stored) }
        try #require(codec == method.codec, "the test content must compress")

        let crafter = try Crafter()
        try crafter.writer.beginEntry(
            ArchiveEntry(pathBytes: Array("bomb.txt".utf8), kind: .file, permissions: 0o644, modificationTime: 1_000, size: 4096))
        // The id is the declared bytes' digest, so only the length check can catch the lie.
        try stored.withUnsafeBytes { raw in
            try crafter.writer.appendChunk(id: try SHA256.hash(Array(declared)), rawLength: declared.count, codec: codec, stored: raw)
        }
        try crafter.writer.endFile()
        let bytes = try crafter.finish()
        let chunkOffset = crafter.writer.manifest.chunks[0].offset
        let path = try Self.write(bytes, "inflates.cairn", in: directory)
        let before = try TreeSnapshot(at: directory.path)

        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        #expect(verify?.offset == chunkOffset, "\(String(describing: verify))")
        if case .zlib = method.codec {
            // zlib streams carry no length: this is the decoder's own output bound firing.
            #expect(verify?.message.contains("past its declared length") == true, "\(String(describing: verify))")
        }

        let extract = await Self.openAndExtract(path, in: directory)
        #expect(extract?.code == .corrupted, "\(String(describing: extract))")
        #expect(extract?.offset == chunkOffset, "\(String(describing: extract))")
        var after = try TreeSnapshot(at: directory.path)
        var unchanged = before
        unchanged.nodes[[]]?.modificationTime = nil
        after.nodes[[]]?.modificationTime = nil
        #expect(unchanged == after, "\(unchanged.diff(after))")
    }

    // MARK: - Record lengths over the limit (§3.2 step 3, §14)

    enum HugeRecordPlace: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case header, chunk, manifest
        var testDescription: String { rawValue }
    }

    @Test("a record header declaring 0xFFFFFFFF or 16 MiB + 1 payload bytes is limitExceeded at its offset, before allocating",
          arguments: HugeRecordPlace.allCases, [UInt32.max, UInt32(FormatLimits.maximumRecordPayload + 1)])
    func recordLengthOverLimit(place: HugeRecordPlace, length: UInt32) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var bytes = try Self.smallArchive()
        let spans = Self.records(bytes)
        let target: Int
        switch place {
        case .header: target = Prelude.length
        case .chunk: target = try #require(spans.first { $0.type == RecordType.chunk.rawValue }).offset
        case .manifest: target = Int(Self.u64(Self.footerPayload(bytes), 0))
        }
        Self.put32(length, into: &bytes, at: target + 4)
        let path = try Self.write(bytes, "huge.cairn", in: directory)

        let verify = await Self.verifyError(path)
        #expect(verify?.code == .limitExceeded, "\(String(describing: verify))")
        #expect(verify?.offset == UInt64(target), "\(String(describing: verify))")

        if place == .header {
            // A bad header record is not a cut copy: verifyPrefix refuses it (Spec/0003 §7.1).
            let prefixError = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyPrefix(at: .file(path: path)) }
            #expect(prefixError?.code == .limitExceeded, "\(String(describing: prefixError))")
        } else {
            let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
            #expect(!prefix.isComplete)
            #expect(prefix.stopReason?.code == .limitExceeded, "\(String(describing: prefix.stopReason))")
            #expect(prefix.stopReason?.offset == UInt64(target))
        }

        // The seekable reader meets the header and the manifest when opening, a chunk only
        // when extracting it.
        let extract = await Self.openAndExtract(path, in: directory)
        #expect(extract?.code == .limitExceeded, "\(String(describing: extract))")
        #expect(extract?.offset == UInt64(target), "\(String(describing: extract))")
        #expect(!RawFileSystem.exists(Array(directory.appending("output").utf8)))
        // Nothing sized by the lie was allocated (4 GiB would show; the whole test process
        // stays far below this).
        #expect(Self.peakResidentBytes() < 3 << 30, "peak RSS \(Self.peakResidentBytes() >> 20) MiB")
    }

    // MARK: - Records of length zero (§3, §5–§12)

    /// Where a zero-length record of `type` goes: in place of the header or footer, or inserted
    /// where a record of that type is expected next.
    @Test("a record of payload length zero of each known type is corrupted at that record, never a crash",
          arguments: RecordType.allKnown)
    func zeroLengthRecord(type: RecordType) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let spans = Self.records(original)
        let empty = Self.framed(type: type.rawValue, payload: [])
        let manifestOffset = Int(Self.u64(Self.footerPayload(original), 0))
        let firstEntry = try #require(spans.first { $0.type == RecordType.entry.rawValue })
        let firstChunk = try #require(spans.first { $0.type == RecordType.chunk.rawValue })
        let firstReferences = try #require(spans.first { $0.type == RecordType.chunkReferences.rawValue })
        let firstFileEnd = try #require(spans.first { $0.type == RecordType.fileEnd.rawValue })
        let bytes: [UInt8]
        let at: Int
        switch type {
        case .header:
            let header = spans[0]
            bytes = Array(original[0..<header.offset]) + empty + Array(original[header.end...])
            at = header.offset
        case .footer:
            bytes = Array(original.dropLast(Footer.framedLength)) + empty
            at = original.count - Footer.framedLength
        case .entry, .commit:
            at = firstEntry.offset
            bytes = try Self.inserting(empty, at: at, in: original)
        case .chunk:
            at = firstChunk.offset
            bytes = try Self.inserting(empty, at: at, in: original)
        case .chunkReferences:
            at = firstReferences.offset
            bytes = try Self.inserting(empty, at: at, in: original)
        case .fileEnd:
            at = firstFileEnd.offset
            bytes = try Self.inserting(empty, at: at, in: original)
        case .manifestChunks, .manifestReferences, .manifestEntries, .manifest:
            at = manifestOffset
            bytes = try Self.inserting(empty, at: at, in: original, intoManifest: true)
        case .pack, .manifestIndex, .signature, .envelope:
            at = firstEntry.offset
            bytes = try Self.inserting(empty, at: at, in: original)
        }
        let path = try Self.write(bytes, "zero.cairn", in: directory)

        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        // The record, or its (empty) payload, is named.
        #expect(verify?.offset == UInt64(at) || verify?.offset == UInt64(at + 8), "\(String(describing: verify)), record at \(at)")

        if type == .header {
            await #expect(throws: CairnError.self) { _ = try await Extractor.verifyPrefix(at: .file(path: path)) }
        } else {
            let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
            #expect(!prefix.isComplete)
            #expect(prefix.stopReason?.code == .corrupted, "\(String(describing: prefix.stopReason))")
        }

        // Opening walks every record but chunk payloads (§13.1 step 5), so the seekable reader
        // refuses the same record `verify` does.
        switch type {
        case .footer:
            // The last 140 bytes are no longer a footer record: incomplete (§12.3 step 2).
            let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
            #expect(error?.code == .truncated, "\(String(describing: error))")
        default:
            let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
            #expect(error?.code == .corrupted, "\(String(describing: error))")
            #expect(error?.offset == UInt64(at) || error?.offset == UInt64(at + 8), "\(String(describing: error)), record at \(at)")
        }
    }

    // MARK: - Footer lies (§12.3)

    struct FooterLie: Sendable, CustomTestStringConvertible {
        var name: String
        /// Edits the footer payload; gets the footer's own offset.
        var edit: @Sendable (inout [UInt8], UInt64) -> Void
        var testDescription: String { name }
    }

    static let footerLies: [FooterLie] = [
        FooterLie(name: "chunk count 2^64-1") { p, _ in put64(.max, into: &p, at: 56) },
        FooterLie(name: "entry count 2^64-2") { p, _ in put64(.max - 1, into: &p, at: 48) },
        FooterLie(name: "reference count 2^63") { p, _ in put64(1 << 63, into: &p, at: 64) },
        FooterLie(name: "entry count 2^32") { p, _ in put64(1 << 32, into: &p, at: 48) },
        FooterLie(name: "manifest offset near 2^64, offset + length wraps to the footer") { p, footer in
            let offset = UInt64.max - 99
            put64(offset, into: &p, at: 0)
            put64(footer &- offset, into: &p, at: 8)
        },
        FooterLie(name: "manifest length points past the end of the file") { p, _ in
            put64(u64(p, 8) + 1_000_000, into: &p, at: 8)
        },
        FooterLie(name: "manifest length 2^64-1") { p, _ in put64(.max, into: &p, at: 8) },
        FooterLie(name: "manifest offset 0, before the body") { p, footer in
            put64(0, into: &p, at: 0)
            put64(footer, into: &p, at: 8)
        },
    ]

    @Test("footer counts near 2^64 and manifest offsets that wrap or point past the file are corrupted when opening",
          arguments: footerLies)
    func footerLie(_ lie: FooterLie) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var bytes = try Self.smallArchive()
        let footerOffset = bytes.count - Footer.framedLength
        var payload = Self.footerPayload(bytes)
        lie.edit(&payload, UInt64(footerOffset))
        bytes.replaceSubrange((footerOffset + 8)..<(footerOffset + 8 + Footer.payloadLength), with: payload)
        Self.recomputeCRC(&bytes, at: footerOffset)
        let path = try Self.write(bytes, "footer.cairn", in: directory)
        let before = try TreeSnapshot(at: directory.path)

        let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(error?.code == .corrupted, "\(String(describing: error))")
        #expect(error?.offset == UInt64(footerOffset), "\(String(describing: error))")
        #expect(error?.path == path)

        // The front-to-back verifier checks the footer against what it read (§13.2).
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        #expect(verify?.offset == UInt64(footerOffset), "\(String(describing: verify))")
        #expect(try TreeSnapshot(at: directory.path) == before)
    }

    @Test("a chunk-table row whose offset is near 2^64, or points at another record, is corrupted",
          arguments: [UInt64.max, UInt64.max - 51, UInt64.max - 1_000, 1 << 63])
    func chunkRowOffsetNearMaximum(offset: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        try crafter.file("a.txt", Array("the only chunk".utf8))
        let bytes = try crafter.finish { manifest in manifest.chunks[0].offset = offset }
        let path = try Self.write(bytes, "row.cairn", in: directory)
        let error = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(error?.code == .corrupted, "\(String(describing: error))")
        #expect(error?.offset == offset, "\(String(describing: error))")
    }

    @Test("a chunk-table row pointing at an entry record is corrupted when opening, at the real chunk record")
    func chunkRowPointsAtAnotherRecord() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        try crafter.file("a.txt", Array("the only chunk".utf8))
        let chunkOffset = crafter.writer.manifest.chunks[0].offset
        let bytes = try crafter.finish { manifest in manifest.chunks[0].offset = manifest.entries[0].recordOffset }
        let path = try Self.write(bytes, "row.cairn", in: directory)
        // The walk reaches the chunk record the row should describe and finds them different.
        let extract = await Self.openAndExtract(path, in: directory)
        #expect(extract?.code == .corrupted, "\(String(describing: extract))")
        #expect(extract?.offset == chunkOffset, "\(String(describing: extract))")
        #expect(!RawFileSystem.exists(Array(directory.appending("output").utf8)))
    }

    // MARK: - Truncation anywhere (§13.3)

    @Test("every prefix of a small archive: open throws truncated or corrupted, verify throws truncated, verifyPrefix never throws")
    func everyPrefix() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let bytes = try Self.smallArchive()
        let commitEnds = Set(Self.records(bytes).filter { $0.type == RecordType.commit.rawValue }.map(\.end))
        let path = directory.appending("prefix.cairn")
        for length in 0...bytes.count {
            try RawFileSystem.writeFile(Array(path.utf8), Array(bytes.prefix(length)))
            let complete = length == bytes.count
            do {
                let extractor = try await Extractor(at: .file(path: path))
                extractor.close()
                #expect(complete, "a prefix of \(length) bytes opened")
            } catch {
                #expect(error.code == .truncated || error.code == .corrupted, "prefix \(length): \(error)")
            }
            let verify = await Self.verifyError(path)
            if complete {
                #expect(verify == nil, "\(String(describing: verify))")
            } else {
                #expect(verify?.code == .truncated, "prefix \(length): \(String(describing: verify))")
            }
            do {
                let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
                #expect(prefix.isComplete == complete, "prefix \(length)")
                #expect(prefix.fileBytes == UInt64(length))
                // The verified length is the end of the last commit inside the prefix.
                let expected = complete ? bytes.count : (commitEnds.filter { $0 <= length }.max() ?? 0)
                #expect(prefix.verifiedLength == UInt64(expected), "prefix \(length)")
            } catch {
                Issue.record("verifyPrefix threw for a prefix of \(length) bytes: \(error)")
            }
        }
    }

    // MARK: - Garbage after the footer (§13.2)

    enum Garbage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A well-framed record (a skippable unknown type with a good CRC).
        case wellFramedRecord
        /// One byte: less than a record header.
        case oneByte
        /// Seeded random bytes.
        case randomBytes
        /// A run of zero bytes (a zero type byte).
        case zeros

        var testDescription: String { rawValue }

        var bytes: [UInt8] {
            switch self {
            case .wellFramedRecord: HostileArchiveTests.framed(type: 200, flags: 1, payload: Array("trailer".utf8))
            case .oneByte: [0x41]
            case .randomBytes: HostileArchiveTests.randomBytes(37, seed: 77)
            case .zeros: [UInt8](repeating: 0, count: 4096)
            }
        }
    }

    @Test("garbage after the footer: verify says corrupted 'data after the footer'; open says truncated (no footer at the end)",
          arguments: Garbage.allCases)
    func garbageAfterFooter(garbage: Garbage) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let path = try Self.write(original + garbage.bytes, "garbage.cairn", in: directory)

        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .truncated, "\(String(describing: open))")

        let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
        #expect(!prefix.isComplete)
        #expect(prefix.verifiedLength == UInt64(original.count))
        #expect(prefix.stopReason?.code == .corrupted, "\(String(describing: prefix.stopReason))")
        #expect(prefix.stopReason?.message.contains("data after the footer") == true, "\(String(describing: prefix.stopReason))")

        let verify = await Self.verifyError(path)
        // Spec/0001 §13.2, footer: "There MUST be no further byte (corrupted, "data after the
        // footer")", whatever the extra bytes look like.
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        #expect(verify?.message.contains("data after the footer") == true, "\(String(describing: verify))")
        #expect(verify?.offset == UInt64(original.count), "\(String(describing: verify))")
    }

    // MARK: - Magic and versions (§2.2)

    @Test("a wrong magic is corrupted at offset 0 for open, verify and verifyPrefix")
    func wrongMagic() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var bytes = try Self.smallArchive()
        bytes[0] = 0x09  // the high bit stripped, as a 7-bit transfer would
        let path = try Self.write(bytes, "magic.cairn", in: directory)
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .corrupted)
        #expect(open?.offset == 0)
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted)
        #expect(verify?.offset == 0)
        let prefix = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyPrefix(at: .file(path: path)) }
        #expect(prefix?.code == .corrupted)
    }

    @Test("major version 3 is unsupportedVersion, naming both numbers, for open, verify and verifyPrefix")
    func majorVersionThree() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var bytes = try Self.smallArchive()
        bytes[8] = 3
        try Self.rechain(&bytes)  // only the version may be wrong
        let path = try Self.write(bytes, "v3.cairn", in: directory)
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .unsupportedVersion)
        #expect(open?.message.contains("3.\(Prelude.minorVersion)") == true, "\(String(describing: open))")
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .unsupportedVersion)
        let prefix = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyPrefix(at: .file(path: path)) }
        #expect(prefix?.code == .unsupportedVersion)
    }

    @Test("minor version 9 of major 2 opens, verifies and extracts (§2.2 rule 4)")
    func minorVersionNine() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var bytes = try Self.smallArchive()
        bytes[10] = 9
        // The prelude is covered by commit 0's chain digest (§10.3): a 1.9 writer's chain covers
        // its own prelude, so recompute it as that writer would have.
        try Self.rechain(&bytes)
        let path = try Self.write(bytes, "v1.9.cairn", in: directory)
        let report = try await Extractor.verifyArchive(at: .file(path: path))
        #expect(report.entryCount == 4)
        let extract = await Self.openAndExtract(path, in: directory)
        #expect(extract == nil, "\(String(describing: extract))")
        #expect(RawFileSystem.exists(Array(directory.appending("output/d/b.txt").utf8)))
    }

    // MARK: - The manifest index (§11.8)

    /// What the seekable reader (open) and the streaming reader (verify) say of `bytes`: both must
    /// say the same (one meaning).
    static func openAndVerify(_ bytes: [UInt8], _ name: String, in directory: TemporaryDirectory) async throws
        -> (open: CairnError?, verify: CairnError?)
    {
        let path = try write(bytes, name, in: directory)
        var open: CairnError?
        do {
            let extractor = try await Extractor(at: .file(path: path))
            extractor.close()
        } catch {
            open = error
        }
        return (open, await verifyError(path))
    }

    @Test("a manifest index without the skippable flag, before commit 0, or listing other bytes than a manifest record is corrupted for open and verify alike; one followed by other records than the final commit is ignored")
    func manifestIndexRules() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let index = try #require(Self.records(original).first { $0.type == RecordType.manifestIndex.rawValue })
        let payload = Array(original[(index.offset + 8)..<(index.offset + 8 + index.length)])
        #expect(original[index.offset + 1] == 1, "written skippable")
        #expect(Self.records(original).first { $0.offset == index.end }?.type == RecordType.commit.rawValue)

        var unflagged = original
        unflagged[index.offset + 1] = 0
        Self.recomputeCRC(&unflagged, at: index.offset)
        try Self.rechain(&unflagged)
        let flag = try await Self.openAndVerify(unflagged, "unflagged.cairn", in: directory)
        for error in [flag.open, flag.verify] {
            #expect(error?.code == .corrupted && error?.offset == UInt64(index.offset), "\(String(describing: error))")
            #expect(error?.message.contains("skippable") == true, "\(String(describing: error))")
        }

        var lying = original
        lying[index.offset + 8 + 4] ^= 0x01  // the first manifest record's digest
        Self.recomputeCRC(&lying, at: index.offset)
        try Self.rechain(&lying)
        let lie = try await Self.openAndVerify(lying, "lying.cairn", in: directory)
        for error in [lie.open, lie.verify] {
            #expect(error?.code == .corrupted, "\(String(describing: error))")
            #expect(error?.message.contains("does not describe manifest record 0") == true, "\(String(describing: error))")
        }

        let firstCommit = try #require(Self.records(original).first { $0.type == RecordType.commit.rawValue }).offset
        let early = try Self.inserting(Self.framed(type: 13, flags: 1, payload: payload), at: firstCommit, in: original)
        let before = try await Self.openAndVerify(early, "early.cairn", in: directory)
        for error in [before.open, before.verify] {
            #expect(error?.code == .corrupted && error?.offset == UInt64(firstCommit), "\(String(describing: error))")
            #expect(error?.message.contains("before the first commit") == true, "\(String(describing: error))")
        }

        // An index of a run that went on after it (its payload describes nothing here): stale.
        let entry = try #require(Self.records(original).first { $0.type == RecordType.entry.rawValue }).offset
        let stale = try Self.inserting(Self.framed(type: 13, flags: 1, payload: payload), at: entry, in: original)
        let ignored = try await Self.openAndVerify(stale, "stale.cairn", in: directory)
        #expect(ignored.open == nil && ignored.verify == nil, "\(String(describing: ignored))")
        #expect(await Self.openAndExtract(try Self.write(stale, "stale2.cairn", in: directory), in: directory) == nil)
    }

    // MARK: - Unknown record types (§3.3, §11.5)

    @Test("an unknown record type in the body: skipped when skippable, corrupted when not")
    func unknownRecordInBody() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let at = try #require(Self.records(original).first { $0.type == RecordType.entry.rawValue }).offset

        let skippable = try Self.inserting(Self.framed(type: 200, flags: 1, payload: Array("from 1.9".utf8)), at: at, in: original)
        let skippablePath = try Self.write(skippable, "skippable.cairn", in: directory)
        let report = try await Extractor.verifyArchive(at: .file(path: skippablePath))
        #expect(report.entryCount == 4)
        #expect(report.archiveBytes == UInt64(original.count + 20))
        let prefix = try await Extractor.verifyPrefix(at: .file(path: skippablePath))
        #expect(prefix.isComplete)
        let extract = await Self.openAndExtract(skippablePath, in: directory)
        #expect(extract == nil, "\(String(describing: extract))")

        let required = try Self.inserting(Self.framed(type: 200, flags: 0, payload: Array("from 2.0".utf8)), at: at, in: original)
        let requiredPath = try Self.write(required, "required.cairn", in: directory)
        let verify = await Self.verifyError(requiredPath)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
        #expect(verify?.offset == UInt64(at))
        #expect(verify?.message.contains("not skippable") == true, "\(String(describing: verify))")
        // Opening walks the body's records (§13.1 step 5) and refuses it the same way.
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: requiredPath)) }
        #expect(open?.code == .corrupted && open?.offset == UInt64(at), "\(String(describing: open))")
    }

    @Test("a skippable record between the final commit and the manifest is corrupted for every reader: no commit covers it (§3.3, §9, §12.2)")
    func skippableAfterFinalCommit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let manifestOffset = Int(Self.u64(Self.footerPayload(original), 0))
        // The footer is rewritten to find the manifest after the record: only the order is wrong.
        let record = Self.framed(type: 200, flags: 1, payload: Array("from 2.9".utf8))
        let bytes = try Self.inserting(record, at: manifestOffset, in: original)
        let path = try Self.write(bytes, "after-final-commit.cairn", in: directory)
        let at = UInt64(manifestOffset + record.count)
        let message = "the manifest does not start right after a commit"
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted && verify?.offset == at && verify?.message == message, "\(String(describing: verify))")
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .corrupted && open?.offset == at && open?.message == message, "\(String(describing: open))")
        let stream = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? stream.close() }
        let streamed = await #expect(throws: CairnError.self) {
            _ = try await Extractor.extractStream(from: stream, to: directory.url(appending: "streamed"))
        }
        #expect(streamed?.code == .corrupted && streamed?.offset == at && streamed?.message == message, "\(String(describing: streamed))")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("streamed")))
        // What the final commit covers still verifies; the rest is not complete.
        let prefix = try await Extractor.verifyPrefix(at: .file(path: path))
        #expect(!prefix.isComplete && prefix.verifiedLength == UInt64(manifestOffset), "\(prefix)")
    }

    @Test("a manifest of a few KB that decompresses past 64 MiB is limitExceeded for the seekable and the streaming reader")
    func manifestBomb() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        var footer = Self.footerPayload(original)
        let manifestOffset = Int(Self.u64(footer, 0))
        // 68 MiB of zeros in 4 MiB segments, zstd: a few KB stored.
        var bomb: [UInt8] = []
        Manifest.appendRecords(
            body: [UInt8](repeating: 0, count: 68 << 20), compressor: ChunkCompressor(method: .zstd(level: 3)),
            cutByContent: false, to: &bomb)
        #expect(bomb.count < 16 << 10, "\(bomb.count) bytes stored")
        Self.put64(UInt64(bomb.count), into: &footer, at: 8)
        footer.replaceSubrange(16..<48, with: try SHA256.hash(bomb).bytes)
        var prefix = Array(original[0..<manifestOffset])
        let shift = try Self.reindex(&prefix, manifest: bomb)
        Self.put64(UInt64(manifestOffset + shift), into: &footer, at: 0)
        var bytes = prefix + bomb
        RecordCodec.append(.footer, payload: footer, to: &bytes)
        try Self.rechain(&bytes)
        let path = try Self.write(bytes, "bomb.cairn", in: directory)
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .limitExceeded, "\(String(describing: open))")
        #expect(open?.message.contains("decompresses to more than") == true, "\(String(describing: open))")
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .limitExceeded, "\(String(describing: verify))")
        #expect((verify?.offset ?? 0) >= UInt64(manifestOffset), "\(String(describing: verify))")
    }

    @Test("an unknown record type inside the manifest is corrupted even when skippable (§11.5)")
    func unknownRecordInManifest() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try Self.smallArchive()
        let manifestOffset = Int(Self.u64(Self.footerPayload(original), 0))
        let bytes = try Self.inserting(
            Self.framed(type: 200, flags: 1, payload: [1, 2, 3]), at: manifestOffset, in: original, intoManifest: true)
        let path = try Self.write(bytes, "manifest.cairn", in: directory)
        let open = #expect(throws: CairnError.self) { _ = try Extractor(reader: ArchiveReader(path: path)) }
        #expect(open?.code == .corrupted, "\(String(describing: open))")
        #expect(open?.offset == UInt64(manifestOffset))
        // The streaming reader takes a skippable record before the first manifest record as
        // part of the body; the manifest then does not start right after a commit.
        let verify = await Self.verifyError(path)
        #expect(verify?.code == .corrupted, "\(String(describing: verify))")
    }

    // MARK: - Names that are not UTF-8 (§6.2; Spec/0003 §5)

    static let oddNames: [(bytes: [UInt8], listed: String)] = [
        ([0x6E, 0x6F, 0x74, 0x2D, 0xFF, 0xFE, 0x75, 0x74, 0x66], "not-\\xff\\xfeutf"),
        (Array("back\\slash".utf8), "back\\\\slash"),
        (Array("tab\tnew\nline\r".utf8) + [0x7F, 0x1B], "tab\\x09new\\x0aline\\x0d\\x7f\\x1b"),
        ([0x63, 0x61, 0x66, 0xE9], "caf\\xe9"),
        (Array("café ☃".utf8), "café ☃"),
        ([0xED, 0xA0, 0x80, 0x2E, 0x74], "\\xed\\xa0\\x80.t"),  // a UTF-16 surrogate, not UTF-8
        (Array("\\x41".utf8), "\\\\x41"),  // looks like an escape: the backslash is doubled
        // C1 controls (NEL, APC) are control characters too: each UTF-8 byte escaped; U+00A0 is not.
        (Array("nel\u{85}apc\u{9F}nbsp\u{A0}".utf8), "nel\\xc2\\x85apc\\xc2\\x9fnbsp\u{A0}"),
    ]

    @Test("cairn list shows names with bad UTF-8, backslashes and control bytes escaped, reversibly")
    func listEscapesNames() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let crafter = try Crafter()
        for (index, name) in Self.oddNames.enumerated() {
            try crafter.file(name.bytes, Array("content \(index)".utf8))
        }
        let path = try Self.write(try crafter.finish(), "names.cairn", in: directory)
        let result = try FaultCLI.run(["list", path])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
        #expect(lines == Self.oddNames.map(\.listed))
        for (line, name) in zip(lines, Self.oddNames) {
            #expect(PathBytes.unescaped(line) == name.bytes, "\(line)")
        }
        // And the names extract byte for byte.
        let extract = await Self.openAndExtract(path, in: directory)
        #expect(extract == nil, "\(String(describing: extract))")
        let names = try RawFileSystem.names(atPath: Array(directory.appending("output").utf8))
        #expect(Set(names) == Set(Self.oddNames.map(\.bytes)))
    }

    @Test("PathBytes.escaped is reversible and printable for 5000 seeded random byte strings")
    func escapingIsReversible() {
        var generator = SeededGenerator(seed: 2024)
        // Bytes that stress the escaper: backslash, 'x', hex digits, controls, DEL, UTF-8 lead
        // and continuation bytes, invalid bytes.
        let interesting: [UInt8] = [
            0x5C, 0x78, 0x30, 0x41, 0x66, 0x00, 0x0A, 0x1F, 0x7F, 0x80, 0x85, 0x9F, 0xA0, 0xBF, 0xC2, 0xE2, 0xED, 0xF0, 0xF4, 0xF5, 0xFF,
        ]
        for round in 0..<5000 {
            let count = Int(generator.next() % 24)
            let bytes = (0..<count).map { _ -> UInt8 in
                let value = generator.next()
                return value % 2 == 0 ? interesting[Int(value >> 8) % interesting.count] : UInt8(truncatingIfNeeded: value >> 16)
            }
            let text = PathBytes.escaped(bytes)
            #expect(PathBytes.unescaped(text) == bytes, "round \(round): \(bytes) → \(text)")
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "round \(round): \(text)")
        }
    }
}

extension RecordType {
    /// The ten record types of format 1.0.
    static let allKnown: [RecordType] = (1...14).compactMap { RecordType(rawValue: $0) }
}
