import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// Pins format 2.1 (`Spec/0001-container-format.md §2.3`, §11.8) with `Fixtures/golden-v2.1.cairn`:
/// the items of the 2.0 golden archive (``GoldenArchiveV2``) written by the 2.1 writer, which puts
/// the manifest index before the final commit and cuts manifest segments by content. The checks
/// of the index are computed here from the Spec's rules (their own loop over the records), not by
/// the scanner's code they check. To write the fixture again after a deliberate change:
///
/// ```
/// CAIRN_UPDATE_GOLDEN=1 swift test --disable-xctest --filter GoldenArchiveV21Tests
/// ```
@Suite("Golden archive 2.1")
struct GoldenArchiveV21Tests {
    /// SHA-256 of `Fixtures/golden-v2.1.cairn`.
    static let pinnedDigest = "5d0b758a393c91bac17801dc35cb0fc94456a9806cb895a06fd5c67c938bc1b8"

    static var sourceFixtureURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v2.1.cairn")
    }

    static func fixturePath() throws -> String {
        let url = try #require(
            Bundle.module.url(forResource: "golden-v2.1", withExtension: "cairn", subdirectory: "Fixtures"),
            "Fixtures/golden-v2.1.cairn is missing from the test bundle; generate it with CAIRN_UPDATE_GOLDEN=1")
        return url.path
    }

    static func fixtureBytes() throws -> [UInt8] { try Array(Data(contentsOf: URL(fileURLWithPath: fixturePath()))) }

    @Test("writing the 2.1 golden archive again gives exactly the fixture's bytes (Spec §9: the writer is deterministic)")
    func writerReproducesFixture() throws {
        try GoldenArchiveV2Tests.expectReproduced(
            try GoldenArchiveV2.make(minorVersion: 1), source: Self.sourceFixtureURL, fixture: Self.fixtureBytes,
            pinnedDigest: Self.pinnedDigest)
    }

    @Test("the prelude says 2.1; the records are the 2.0 fixture's with one skippable manifest index just before the final commit, listing every manifest record's framed length and SHA-256 (Spec §11.8)")
    func manifestIndexPlacementAndContent() throws {
        let bytes = try Self.fixtureBytes()
        #expect(Array(bytes[8..<12]) == [2, 0, 1, 0])
        let records = try GoldenArchiveV2.records(bytes)
        let old = try GoldenArchiveV2.records(try GoldenArchiveV2.fixtureBytes())
        let indexes = records.enumerated().filter { $0.element.type == RecordType.manifestIndex.rawValue }
        try #require(indexes.count == 1, "\(records.map(\.type))")
        let position = try #require(indexes.first).offset
        let index = records[position]
        #expect(bytes[index.offset + 1] == 1, "the skippable flag")
        #expect(records[position + 1].type == RecordType.commit.rawValue)
        #expect(records[position + 2].type == RecordType.manifest.rawValue)
        // Up to the index, the same record types as 2.0 (the bodies match; the chain differs).
        let before = records[..<position].map(\.type)
        let oldFinalCommit = try #require(old.lastIndex { $0.type == RecordType.commit.rawValue })
        #expect(before == Array(old[..<oldFinalCommit].map(\.type)))
        // The payload, read by the Spec's layout: n × (framedLength u32, digest[32]), then n u32.
        let payload = Array(bytes[(index.offset + 8)..<(index.offset + 8 + index.length)])
        let manifestRecords = records[(position + 2)...].filter { $0.type == RecordType.manifest.rawValue }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 | UInt32(payload[at + $1]) << (8 * UInt32($1)) } }
        #expect(Int(u32(payload.count - 4)) == manifestRecords.count)
        #expect(payload.count == manifestRecords.count * 36 + 4)
        for (number, record) in manifestRecords.enumerated() {
            let framed = Array(bytes[record.offset..<(record.offset + 12 + record.length)])
            #expect(u32(number * 36) == UInt32(framed.count), "manifest record \(number)")
            #expect(Array(payload[(number * 36 + 4)..<(number * 36 + 36)]) == (try SHA256.hash(framed)).bytes, "manifest record \(number)")
        }
    }

    @Test("the 2.1 fixture verifies and holds the same entries, totals and contents as the 2.0 fixture")
    func sameMeaningAsVersion20() async throws {
        let report = try await Extractor.verifyArchive(at: .file(path: Self.fixturePath()))
        let old = try await Extractor.verifyArchive(at: .file(path: GoldenArchiveV2.fixturePath()))
        #expect(report.entryCount == old.entryCount)
        #expect(report.contentBytes == old.contentBytes)
        let new = try await Extractor(at: .file(path: Self.fixturePath()))
        defer { new.close() }
        let previous = try await Extractor(at: .file(path: GoldenArchiveV2.fixturePath()))
        defer { previous.close() }
        #expect(new.formatVersion == FormatVersion(major: 2, minor: 1))
        #expect(new.entries == previous.entries)
        #expect(new.reader.manifest.chunks.map(\.id) == previous.reader.manifest.chunks.map(\.id))
    }
}
