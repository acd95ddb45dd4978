import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// The sealed blocks of an encrypted archive (`Spec/0004-trusted-archives.md §6.2`, §6.3): the
/// outer layout, a round trip through the seekable and the stream reader, and every tampering
/// of the outer bytes refused at the block it hit, with nothing extracted.
///
/// The key block here is opened by a stand-in that returns its bytes as they are (the keys in
/// clear), so that these tests check the blocks alone; the age key block has its own tests.
@Suite("Encrypted archives: sealed blocks")
struct SealedArchiveTests {
    static func secrets(_ seed: UInt8) -> ArchiveSecrets {
        ArchiveSecrets(
            blockKey: (0..<32).map { UInt8($0) &+ seed }, idKey: (0..<32).map { UInt8($0) &+ seed &+ 64 },
            chunkerKey: (0..<32).map { UInt8($0) &+ seed &+ 128 })
    }

    static func sealing(_ seed: UInt8, archiveID: UInt8) -> ArchiveSealing {
        let secrets = secrets(seed)
        return ArchiveSealing(
            envelope: EnvelopeRecord(archiveID: [UInt8](repeating: archiveID, count: 16), keyBlock: secrets.encoded()), secrets: secrets)
    }

    /// The stand-in key block opener: the key block is the secrets in clear.
    static func clearKeyBlock(_ record: EnvelopeRecord) throws(CairnError) -> [UInt8] { record.keyBlock }

    static func tree() -> TreeBuilder {
        var generator = SeededGenerator(seed: 2506)
        var tree = TreeBuilder()
        tree.file("secret-name.txt", Array("plaintext marker: the quick brown fox\n".utf8))
        tree.directory("d")
        for number in 0..<30 { tree.file("d/\(number).txt", generator.bytes(200 + number * 91)) }
        tree.file("large.bin", generator.bytes(700_000))
        tree.symlink("link", target: "secret-name.txt")
        return tree
    }

    /// Writes `tree` sealed with `sealing` to `directory/name` and returns the outer bytes.
    static func write(_ tree: TreeBuilder, sealing: ArchiveSealing, in directory: TemporaryDirectory, name: String = "e.cairn")
        async throws -> [UInt8]
    {
        if !FileManager.default.fileExists(atPath: directory.appending("tree")) { try tree.materialize(at: directory.appending("tree")) }
        var configuration = Archiver.Configuration()
        configuration.sourcePlatform = "test"
        configuration.workerCount = 2
        configuration.sealing = sealing
        let archiver = try await Archiver(writingTo: .file(path: directory.appending(name)), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: directory.appending("tree")))
        _ = try await archiver.finish()
        return try Array(Data(contentsOf: URL(fileURLWithPath: directory.appending(name))))
    }

    /// Extracts the encrypted archive at `path` with the seekable reader into `destination`.
    static func extractSeekable(_ path: String, to destination: String) async throws {
        let source = try SealedArchiveSource.open(LocalArchiveSource(path: path), openKeyBlock: clearKeyBlock)
        let extractor = try Extractor(reader: ArchiveReader(source: source, keying: nil))
        defer { extractor.close() }
        try await extractor.extractAll(to: URL(fileURLWithPath: destination))
    }

    /// Extracts the encrypted archive read once from `path` (as standard input would be).
    static func extractStream(_ path: String, to destination: String) async throws -> VerificationReport {
        let input = try FileDescriptor.open(Array(path.utf8), flags: O_RDONLY)
        defer { _ = try? input.close() }
        let outer = SequentialArchiveBytes(descriptor: input, finish: {}, cancel: {})
        let (bytes, _) = try SealedBlockStream.open(outer, name: "<input>", openKeyBlock: clearKeyBlock)
        do {
            let report = try await Extractor.extractStream(
                from: bytes.descriptor, to: Array(destination.utf8), options: ExtractionOptions(), progress: nil, keying: bytes.keying)
            try bytes.finish()
            return report
        } catch {
            // The opening thread's error (a block that does not open) explains the cut.
            throw Extractor.ending(bytes, after: error, path: "<input>")
        }
    }

    @Test("§6.2/§6.3: the outer file is the 3.0 prelude, the envelope record, and blocks of 16 KiB + 40; no name or content shows")
    func layout() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed")
        defer { directory.remove() }
        let outer = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 7), in: directory)
        #expect(Array(outer[0..<12]) == Prelude.magic + [3, 0, 0, 0])
        #expect(outer[12] == RecordType.envelope.rawValue)
        let source = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("e.cairn")), openKeyBlock: Self.clearKeyBlock)
        defer { source.close() }
        let layout = source.layout
        #expect(layout.blockSize == 16384)
        #expect(layout.outerSize == UInt64(outer.count))
        #expect(layout.blockCount > 40)
        #expect(UInt64(outer.count) == layout.dataStart + layout.innerSize + 40 * layout.blockCount)
        // The inner archive is a plain 2.1 archive.
        var prelude = [UInt8](repeating: 0, count: 12)
        _ = try prelude.withUnsafeMutableBytes { try source.read(fromAbsoluteOffset: 0, into: $0) }
        #expect(prelude == Prelude.magic + [2, 0, 1, 0])
        for needle in ["secret-name", "plaintext marker", "large.bin"] {
            let bytes = Array(needle.utf8)
            let found = outer.indices.dropLast(bytes.count).contains { Array(outer[$0..<($0 + bytes.count)]) == bytes }
            #expect(!found, "\(needle) is readable in the outer file")
        }
    }

    @Test("§6.3: the seekable and the stream reader extract the same tree as went in")
    func roundTrip() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed")
        defer { directory.remove() }
        _ = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 7), in: directory)
        let original = try TreeSnapshot(at: directory.appending("tree"))
        try await Self.extractSeekable(directory.appending("e.cairn"), to: directory.appending("seekable"))
        #expect(try TreeSnapshot(at: directory.appending("seekable/tree")) == original)
        let report = try await Self.extractStream(directory.appending("e.cairn"), to: directory.appending("stream"))
        #expect(report.entryCount > 30)
        #expect(try TreeSnapshot(at: directory.appending("stream/tree")) == original)
        // The seekable source's own sequential read verifies the whole inner archive.
        let source = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("e.cairn")), openKeyBlock: Self.clearKeyBlock)
        defer { source.close() }
        let verified = try await Extractor.verify(source.openSequential(), path: source.name, keying: nil)
        #expect(verified.entryCount == report.entryCount)
    }

    /// Both readers refuse `outer` (written to `name`) with `code` at `offset`, and extract nothing.
    static func expectRefused(
        _ outer: [UInt8], code: CairnError.Code, offset: UInt64?, in directory: TemporaryDirectory, name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let path = directory.appending(name)
        try Data(outer).write(to: URL(fileURLWithPath: path))
        for (reader, extract) in [("seekable", 0), ("stream", 1)] {
            let destination = directory.appending("\(name)-\(reader)")
            do {
                if extract == 0 {
                    try await extractSeekable(path, to: destination)
                } else {
                    _ = try await extractStream(path, to: destination)
                }
                Issue.record("the \(reader) reader accepted \(name)", sourceLocation: sourceLocation)
            } catch let error as CairnError {
                #expect(error.code == code, "\(reader) \(name): \(error)", sourceLocation: sourceLocation)
                if let offset { #expect(error.offset == offset, "\(reader): \(error)", sourceLocation: sourceLocation) }
            }
            #expect(!FileManager.default.fileExists(atPath: destination + "/tree"), "\(reader) released \(name)", sourceLocation: sourceLocation)
        }
    }

    @Test("§6.3: a flipped byte in the first, a middle and the last block, in a nonce, a ciphertext or a tag, is refused at that block")
    func flippedBytes() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed")
        defer { directory.remove() }
        let outer = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 7), in: directory)
        let source = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("e.cairn")), openKeyBlock: Self.clearKeyBlock)
        let layout = source.layout
        source.close()
        for (number, block) in [0, layout.blockCount / 2, layout.blockCount - 1].enumerated() {
            let range = layout.outerRange(of: block)
            for (part, position) in [("nonce", range.lowerBound + 3), ("ciphertext", range.lowerBound + 100), ("tag", range.upperBound - 2)] {
                var tampered = outer
                tampered[Int(position)] ^= 0x20
                try await Self.expectRefused(
                    tampered, code: .checksumMismatch, offset: range.lowerBound, in: directory,
                    name: "flip-\(number)-\(part)")
            }
        }
    }

    @Test("§6.3: blocks swapped, a block from another archive of the same keys, a cut at a block boundary, a torn last block: refused")
    func movedAndCutBlocks() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed")
        defer { directory.remove() }
        let outer = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 7), in: directory)
        let other = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 8), in: directory, name: "other.cairn")
        let source = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("e.cairn")), openKeyBlock: Self.clearKeyBlock)
        let layout = source.layout
        source.close()
        let first = layout.outerRange(of: 1)
        let second = layout.outerRange(of: 2)
        var swapped = outer
        swapped.replaceSubrange(Int(first.lowerBound)..<Int(first.upperBound), with: outer[Int(second.lowerBound)..<Int(second.upperBound)])
        swapped.replaceSubrange(Int(second.lowerBound)..<Int(second.upperBound), with: outer[Int(first.lowerBound)..<Int(first.upperBound)])
        try await Self.expectRefused(swapped, code: .checksumMismatch, offset: first.lowerBound, in: directory, name: "swapped")
        // Same keys, same position, another archive id: the envelope of one, a block of the other.
        var spliced = outer
        spliced.replaceSubrange(Int(first.lowerBound)..<Int(first.upperBound), with: other[Int(first.lowerBound)..<Int(first.upperBound)])
        try await Self.expectRefused(spliced, code: .checksumMismatch, offset: first.lowerBound, in: directory, name: "spliced")
        // Cut after a whole block: the last block left is not marked final.
        let cutEnd = layout.outerRange(of: layout.blockCount / 2).upperBound
        try await Self.expectRefused(Array(outer[0..<Int(cutEnd)]), code: .truncated, offset: cutEnd, in: directory, name: "cut")
        // A last block too short for a nonce, a tag and a byte.
        let torn = Array(outer[0..<(Int(layout.outerRange(of: 3).lowerBound) + 30)])
        try await Self.expectRefused(torn, code: .truncated, offset: layout.outerRange(of: 3).lowerBound, in: directory, name: "torn")
    }

    @Test("§6.2: a plain archive where identities are given is refused (.untrusted); an encrypted one read without an identity says so")
    func downgrade() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed")
        defer { directory.remove() }
        try Self.tree().materialize(at: directory.appending("tree"))
        let plain = try await RoundTrip.archive(path: directory.appending("tree"), to: directory.appending("plain.cairn"))
        _ = plain
        #expect(throws: CairnError.self) {
            _ = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("plain.cairn")), openKeyBlock: Self.clearKeyBlock)
        }
        do {
            _ = try SealedArchiveSource.open(LocalArchiveSource(path: directory.appending("plain.cairn")), openKeyBlock: Self.clearKeyBlock)
        } catch {
            #expect(error.code == .untrusted)
            #expect(error.message.contains("not encrypted"))
        }
        _ = try await Self.write(Self.tree(), sealing: Self.sealing(1, archiveID: 7), in: directory)
        do {
            _ = try await Extractor(at: .file(path: directory.appending("e.cairn")))
            Issue.record("an encrypted archive opened without an identity")
        } catch {
            #expect(error.code == .untrusted)
            #expect(error.message.contains("encrypted"), "\(error)")
        }
    }
}
