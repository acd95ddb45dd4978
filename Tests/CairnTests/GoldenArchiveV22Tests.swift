import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// Pins format 2.2 (`Spec/0004-trusted-archives.md §3`) with `Fixtures/golden-v2.2.cairn`: the
/// items of the 2.0 golden archive (``GoldenArchiveV2``) written by the signing writer with the
/// published test key (``TestSigningKey``). Its layout and signatures are checked by
/// ``ArchiveSignatureTests/SignedLayout``, its own walk over the records from the Spec's rules.
/// To write the fixture again after a deliberate change:
///
/// ```
/// CAIRN_UPDATE_GOLDEN=1 swift test --disable-xctest --filter GoldenArchiveV22Tests
/// ```
@Suite("Golden archive 2.2 (signed)")
struct GoldenArchiveV22Tests {
    /// SHA-256 of `Fixtures/golden-v2.2.cairn`.
    static let pinnedDigest = "984d8575f1e45d6b721a9501af42126295342dabed953100f8cd9a2c443a9385"

    static var sourceFixtureURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v2.2.cairn")
    }

    static func fixtureBytes() throws -> [UInt8] {
        let url = try #require(
            Bundle.module.url(forResource: "golden-v2.2", withExtension: "cairn", subdirectory: "Fixtures"),
            "Fixtures/golden-v2.2.cairn is missing from the test bundle; generate it with CAIRN_UPDATE_GOLDEN=1")
        return try Array(Data(contentsOf: url))
    }

    @Test("writing the signed golden archive again gives exactly the fixture's bytes (Spec/0004 §3.4: Ed25519 is deterministic)")
    func writerReproducesFixture() throws {
        try GoldenArchiveV2Tests.expectReproduced(
            try GoldenArchiveV2.make(minorVersion: 1, signingKey: try TestSigningKey.key()), source: Self.sourceFixtureURL,
            fixture: Self.fixtureBytes, pinnedDigest: Self.pinnedDigest)
    }

    @Test("Spec/0004 §3.3: the fixture is 2.2, signed after commit 0, the root signature before the index and the final commit written again; every signature verifies with the test key and no other")
    func layoutAndSignatures() throws {
        let bytes = try Self.fixtureBytes()
        let layout = try ArchiveSignatureTests.SignedLayout(bytes, key: try TestSigningKey.key().publicKey)
        #expect(layout.prefixSignedLengths.first == UInt64(layout.commitEnds[0]))
        // The 2.1 fixture's record types, with commit 0's prefix signature after it and the root
        // signature before the manifest index: the layout of 2.1 (Spec/0004 §3.1, §3.4 rule 3).
        let old = try GoldenArchiveV2.records(try GoldenArchiveV21Tests.fixtureBytes()).map(\.type)
        let new = layout.records.map(\.type)
        let oldIndex = try #require(old.firstIndex(of: RecordType.manifestIndex.rawValue))
        var expected = old
        expected.insert(RecordType.signature.rawValue, at: oldIndex)
        expected.insert(RecordType.signature.rawValue, at: 2)
        #expect(new == expected)
    }
}
