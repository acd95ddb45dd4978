import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The seekable reader's header is the one the root signature covers
/// (`Spec/0004-trusted-archives.md §4.3`): `C_0` is computed from the bytes the header was decoded
/// from, so a source answering two reads of the header differently is caught.
@Suite("Trusted archives: the seekable reader's header")
struct SeekableHeaderTrustTests {
    /// A remote-looking source that answers positioned reads of the header record with `forged`
    /// and range reads with the archive's own bytes, as a hostile server answering each request
    /// differently could.
    final class SplitAnswerSource: ArchiveSource {
        let base: LocalArchiveSource
        let forged: [UInt8]
        let headerRange: Range<UInt64>
        var name: String { "http://example.invalid/archive.cairn" }
        var size: UInt64 { base.size }
        var isRemote: Bool { true }

        init(path: String, forged: [UInt8], at offset: UInt64) throws {
            base = try LocalArchiveSource(path: path)
            self.forged = forged
            headerRange = offset..<(offset + UInt64(forged.count))
        }

        func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
            let n = try base.read(fromAbsoluteOffset: offset, into: buffer)
            for position in offset..<(offset + UInt64(n)) where headerRange.contains(position) {
                buffer[Int(position - offset)] = forged[Int(position - headerRange.lowerBound)]
            }
            return n
        }

        func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] { try base.read(ranges: ranges) }
        func openSequential() throws(CairnError) -> SequentialArchiveBytes { try base.openSequential() }
        func close() { base.close() }
    }

    @Test("§4.3: a header answered differently to a second read is refused: C_0 comes from the bytes decoded")
    func headerFromOneRead() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let tree = directory.url(appending: "tree")
        try FileManager.default.createDirectory(at: tree, withIntermediateDirectories: true)
        try Data("signed content\n".utf8).write(to: tree.appending(path: "a.txt"))
        let path = directory.appending("signed.cairn")
        let key = try TestSigningKey.key()
        var configuration = Archiver.Configuration()
        configuration.signingKey = key
        configuration.appIdentifier = "org.example.genuine"
        _ = try await Archiver.withArchiver(writingTo: .file(path: path), configuration: configuration) { archiver in
            try await archiver.appendItem(at: tree)
        }

        // The header record with another app identifier of the same length, framed with a valid CRC.
        let genuine = try LocalArchiveSource(path: path)
        let (record, _) = try genuine.readRecord(at: UInt64(Prelude.length), fileSize: genuine.size)
        genuine.close()
        var header = try ArchiveHeader.decode(record.payload, offset: UInt64(Prelude.length))
        header.appIdentifier = "org.example.forged!"
        var forged: [UInt8] = []
        RecordCodec.append(.header, payload: header.encoded(), to: &forged)
        try #require(forged.count == record.framed.count && forged != record.framed)

        // Without trusted keys the forged header is what the reader decodes: the source works.
        let plain = try Extractor(source: SplitAnswerSource(path: path, forged: forged, at: UInt64(Prelude.length)), keying: nil)
        #expect(plain.header.appIdentifier == "org.example.forged!")
        plain.close()
        // With the maker's key trusted, the root signature does not verify over the forged header.
        let refused = #expect(throws: CairnError.self) {
            let extractor = try Extractor(
                source: SplitAnswerSource(path: path, forged: forged, at: UInt64(Prelude.length)), trustedKeys: [key.publicKey], keying: nil)
            extractor.close()
        }
        #expect(refused?.code == .checksumMismatch, "\(String(describing: refused))")
        // The genuine archive opens trusted, with its own header.
        let trusted = try Extractor(source: LocalArchiveSource(path: path), trustedKeys: [key.publicKey], keying: nil)
        #expect(trusted.header.appIdentifier == "org.example.genuine")
        trusted.close()
    }
}
