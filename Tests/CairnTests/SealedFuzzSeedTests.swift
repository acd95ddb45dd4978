import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The seeds of the `sealed` fuzz target (Tests/Fuzz/README.md): small encrypted archives whose
/// key blocks the target opens (`Spec/0004-trusted-archives.md §6.2`-§6.4), so that mutations of
/// them reach the sealed blocks and the inner archive. To write them again:
///
/// ```
/// CAIRN_UPDATE_FUZZ_SEEDS=1 swift test --disable-xctest --filter SealedFuzzSeedTests
/// ```
@Suite("Fuzz seeds of the sealed target")
struct SealedFuzzSeedTests {
    static var corpus: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")
    }

    /// The `age` and `sealed` targets' identity: 32 bytes of 0x42.
    static func fuzzIdentity() throws -> AgeIdentity { try AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32)) }

    static let secrets = ArchiveSecrets(
        blockKey: [UInt8](repeating: 1, count: 32), idKey: [UInt8](repeating: 2, count: 32), chunkerKey: [UInt8](repeating: 3, count: 32))

    /// The seeds: the keys in clear in the key block, and an age key block for the fuzz identity;
    /// a small block size (4 KiB) so that a small inner archive spans several blocks.
    static func seeds() throws -> [(name: String, sealing: ArchiveSealing)] {
        let id = [UInt8](repeating: 0x5E, count: 16)
        return [
            ("sealed-clear-keys.cairn", ArchiveSealing(envelope: EnvelopeRecord(blockSize: 4096, archiveID: id, keyBlock: secrets.encoded()), secrets: secrets)),
            (
                "sealed-x25519.cairn",
                ArchiveSealing(
                    envelope: EnvelopeRecord(
                        blockSize: 4096, archiveID: id, keyBlock: try AgeFile.encrypt(secrets.encoded(), to: [try fuzzIdentity().recipient])),
                    secrets: secrets)
            ),
        ]
    }

    static func write(_ sealing: ArchiveSealing, to path: String, in directory: TemporaryDirectory) async throws {
        var generator = SeededGenerator(seed: 2540)
        var tree = TreeBuilder()
        tree.file("a.txt", Array("a sealed fuzz seed\n".utf8))
        tree.file("b.bin", generator.bytes(9000))
        tree.symlink("link", target: "a.txt")
        let source = directory.appending("tree")
        if !FileManager.default.fileExists(atPath: source) { try tree.materialize(at: source) }
        var configuration = Archiver.Configuration()
        configuration.sealing = sealing
        configuration.signingKey = try TestSigningKey.key()
        configuration.sourcePlatform = "fuzz"
        configuration.workerCount = 1
        let archiver = try await Archiver(writingTo: .file(path: path), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: source), pathInArchive: "seed")
        _ = try await archiver.finish()
    }

    @Test("the sealed fuzz seeds stay meaningful: the target's key openers open them, and both readers verify them")
    func seedsOpen() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-sealed-seeds")
        defer { directory.remove() }
        for (name, sealing) in try Self.seeds() {
            let path = Self.corpus.appendingPathComponent(name).path
            if ProcessInfo.processInfo.environment["CAIRN_UPDATE_FUZZ_SEEDS"] == "1" {
                try await Self.write(sealing, to: path, in: directory)
            }
            // The fuzz target's opener: the keys in clear, or the fuzz identity.
            let identity = try Self.fuzzIdentity()
            let open: (EnvelopeRecord) throws(CairnError) -> [UInt8] = { (record) throws(CairnError) in
                if record.keyBlock.count == ArchiveSecrets.encodedLength { return record.keyBlock }
                return try AgeFile.decrypt(record.keyBlock, with: [identity])
            }
            let source = try SealedArchiveSource.open(LocalArchiveSource(path: path), openKeyBlock: open)
            #expect(source.layout.blockCount >= 3, "\(name): several blocks")
            let extractor = try Extractor(reader: ArchiveReader(source: source, keying: nil))
            defer { extractor.close() }
            let report = try await extractor.verify()
            #expect(report.entryCount == 4, "\(name)")
            let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
            defer { _ = try? descriptor.close() }
            let (bytes, _) = try SealedBlockStream.open(SequentialArchiveBytes(descriptor: descriptor, finish: {}, cancel: {}), name: name, openKeyBlock: open)
            #expect(try await Extractor.verify(bytes, path: name, keying: nil).entryCount == 4, "\(name)")
        }
    }
}
