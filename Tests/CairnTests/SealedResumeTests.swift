import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Resuming an encrypted write (`Spec/0004-trusted-archives.md §6.9`): the partial file's own key
/// block, opened with the identity, gives the keys back; the inner archive found in its whole
/// blocks is resumed by the plain rule; the block holding the resume point is sealed again.
@Suite("Encrypted archives: resuming a write")
struct SealedResumeTests {
    /// About 1.5 MiB in 60 files: many commits, many blocks.
    static func tree() -> TreeBuilder { ResumeFixture.transferTree(seed: 25) }

    static func configuration(signingKey: SigningKey?) -> Archiver.Configuration {
        var configuration = ResumeFixture.configuration
        configuration.sourcePlatform = "test"
        configuration.workerCount = 2
        configuration.signingKey = signingKey
        return configuration
    }

    /// The inner archive of the encrypted archive at `path`, opened with `decryption`.
    static func inner(_ path: String, _ decryption: ArchiveDecryption) throws -> [UInt8] {
        let source = try decryption.open(try LocalArchiveSource(path: path))
        defer { source.close() }
        var bytes = [UInt8](repeating: 0, count: Int(source.size))
        let read = try bytes.withUnsafeMutableBytes { (raw) throws(CairnError) in try source.read(fromAbsoluteOffset: 0, into: raw) }
        #expect(read == bytes.count)
        return bytes
    }

    /// Writes `tree` (materialized at `work/tree`) encrypted with `sealing` to `path`.
    static func write(_ work: TemporaryDirectory, to path: String, configuration: Archiver.Configuration) async throws {
        let archiver = try await Archiver(writingTo: .file(path: path), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: work.appending("tree")))
        _ = try await archiver.finish()
    }

    @Test(
        "§6.9: an encrypted archive (plain and signed) cut at seeded offsets resumes with its identity: the inner archive is the uninterrupted one's, it verifies with the identity and the trusted key, and extracts the tree",
        arguments: [false, true])
    func resumeGivesTheUninterruptedInnerArchive(signed: Bool) async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-resume")
        defer { work.remove() }
        try Self.tree().materialize(at: work.appending("tree"))
        let identity = try AgeIdentity.generate()
        let decryption = ArchiveDecryption(identities: [identity])
        let key = signed ? try TestSigningKey.key() : nil
        var configuration = Self.configuration(signingKey: key)
        let reference = work.appending("reference.cairn")
        var creating = configuration
        creating.encryption = ArchiveEncryption(recipients: [identity.recipient])
        try await Self.write(work, to: reference, configuration: creating)
        let outer = try RawFileSystem.contents(ofFile: Array(reference.utf8))
        let expected = try Self.inner(reference, decryption)
        configuration.signingKey = key

        var generator = SeededGenerator(seed: 0x5EA1_0025 + (signed ? 1 : 0))
        // Inside the envelope, at block boundaries, inside blocks, and a whole (unrenamed) file.
        var cuts: Set<Int> = [outer.count, outer.count - 1, 40_000, 2 * 16_424 + 300]
        while cuts.count < 14 { cuts.insert(Int.random(in: 200..<outer.count, using: &generator)) }
        let target = work.appending("resumed.cairn")
        var resumedCount = 0
        for cut in cuts.sorted() {
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(outer[0..<cut]))
            unlink(target)
            let archiver: Archiver
            do {
                archiver = try Archiver(resuming: .file(path: target), configuration: configuration, decryption: decryption)
                resumedCount += 1
            } catch {
                // Only before the first commit's block is sealed: nothing to continue, refused.
                #expect(error.code == .notResumable && !error.additionalErrors.isEmpty, "cut at \(cut): \(error)")
                #expect(cut < 3 * 16_424, "cut at \(cut) of \(outer.count) not resumable: \(error)")
                continue
            }
            try await archiver.appendItem(at: URL(fileURLWithPath: work.appending("tree")))
            _ = try await archiver.finish()
            let resumed = try Self.inner(target, decryption)
            let identical = ResumeFixture.same(resumed, expected)
            #expect(identical, "cut at \(cut) of \(outer.count): \(ResumeFixture.difference(resumed, expected))")
            let bytes = try RawFileSystem.contents(ofFile: Array(target.utf8))
            let sameEnvelope = Array(bytes[0..<100]) == Array(outer[0..<100])
            #expect(sameEnvelope, "the envelope is the partial file's own")
        }
        #expect(resumedCount >= 10)
        let report = try await Extractor.verifyArchive(
            at: .file(path: target), trustedKeys: key.map { [$0.publicKey] } ?? [], decryption: decryption)
        #expect(report.fileCount == 60)
        let extractor = try await Extractor(at: .file(path: target), trustedKeys: key.map { [$0.publicKey] } ?? [], decryption: decryption)
        try await extractor.extractAll(to: URL(fileURLWithPath: work.appending("out")))
        extractor.close()
        #expect(try TreeSnapshot(at: work.appending("out/tree")) == TreeSnapshot(at: work.appending("tree")))
    }

    @Test(
        "§6.9: an encrypted partial file is not resumed without its identity, with another, with a tampered block, or with recipients; a plain one not with an identity; nothing is touched"
    )
    func refusals() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-sealed-resume-refused")
        defer { work.remove() }
        try Self.tree().materialize(at: work.appending("tree"))
        let identity = try AgeIdentity.generate()
        let other = try AgeIdentity.generate()
        var creating = Self.configuration(signingKey: nil)
        creating.encryption = ArchiveEncryption(recipients: [identity.recipient])
        try await Self.write(work, to: work.appending("e.cairn"), configuration: creating)
        try await Self.write(work, to: work.appending("p.cairn"), configuration: Self.configuration(signingKey: nil))
        let sealed = Array(try RawFileSystem.contents(ofFile: Array(work.appending("e.cairn").utf8)).prefix(1_000_000))
        let plain = Array(try RawFileSystem.contents(ofFile: Array(work.appending("p.cairn").utf8)).prefix(1_000_000))
        var tampered = sealed
        tampered[sealed.count / 2] ^= 0x01
        let target = work.appending("t.cairn")
        let cases: [(bytes: [UInt8], decryption: ArchiveDecryption, encryption: ArchiveEncryption?, code: CairnError.Code, words: [String])] =
            [
                (sealed, ArchiveDecryption(), nil, .untrusted, ["encrypted", "--identity"]),
                (sealed, ArchiveDecryption(identities: [other]), nil, .untrusted, ["no identity"]),
                (tampered, ArchiveDecryption(identities: [identity]), nil, .checksumMismatch, ["sealed block", "authentication"]),
                (sealed, ArchiveDecryption(identities: [identity]), ArchiveEncryption(recipients: [identity.recipient]), .invalidArgument,
                 ["own key block"]),
                (plain, ArchiveDecryption(identities: [identity]), nil, .untrusted, ["not encrypted"]),
            ]
        for (bytes, decryption, encryption, code, words) in cases {
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), bytes)
            var configuration = Self.configuration(signingKey: nil)
            configuration.encryption = encryption
            let error = #expect(throws: CairnError.self) {
                _ = try Archiver(resuming: .file(path: target), configuration: configuration, decryption: decryption)
            }
            #expect(error?.code == code, "\(String(describing: error))")
            for word in words { #expect(error?.message.contains(word) == true, "\(error?.message ?? "")") }
            #expect(try RawFileSystem.contents(ofFile: Array((target + ".partial").utf8)) == bytes, "untouched")
        }
    }

    @Test("§6.9: a resumed sink seals the block holding the resume point again under a new nonce, from that index on")
    func sinkContinuesAtABlock() async throws {
        let sealing = SealedArchiveTests.sealing(7, archiveID: 9)
        let inner = ResumeFixture.bytes(3 * 16_384 + 1_000, seed: 5)
        let fresh = CollectingSink()
        let first = try SealingSink(base: fresh, envelope: sealing.envelope, secrets: sealing.secrets)
        try await first.write(inner)
        try await first.finish()
        let dataStart = EnvelopeRecord.prelude.count + sealing.envelope.framed().count
        let sealedSize = 16_384 + BlockSealer.overhead
        // Resume at inner offset 2 × 16384 + 500: blocks 0 and 1 kept, block 2 sealed again.
        let continued = CollectingSink()
        continued.bytes = Array(fresh.bytes[0..<(dataStart + 2 * sealedSize)])
        let resumed = try SealingSink(
            base: continued, continuing: sealing.envelope, secrets: sealing.secrets, atBlock: 2,
            pending: Array(inner[(2 * 16_384)..<(2 * 16_384 + 500)]))
        try await resumed.write(Array(inner[(2 * 16_384 + 500)...]))
        try await resumed.finish()
        #expect(continued.bytes.count == fresh.bytes.count)
        #expect(
            Array(continued.bytes[(dataStart + 2 * sealedSize)..<(dataStart + 2 * sealedSize + 24)])
                != Array(fresh.bytes[(dataStart + 2 * sealedSize)..<(dataStart + 2 * sealedSize + 24)]), "a new nonce")
        let path = try TemporaryDirectory(prefix: "cairn-sealed-sink")
        defer { path.remove() }
        try RawFileSystem.writeFile(Array(path.appending("s").utf8), continued.bytes)
        let source = try SealedArchiveSource.open(try LocalArchiveSource(path: path.appending("s")), openKeyBlock: SealedArchiveTests.clearKeyBlock)
        defer { source.close() }
        let all = try source.read(ranges: [0..<source.size])
        #expect(all == [inner])
        #expect(throws: CairnError.self) {
            _ = try SealingSink(
                base: CollectingSink(), continuing: sealing.envelope, secrets: sealing.secrets, atBlock: 0, pending: Array(inner[0..<16_384]))
        }
    }
}

/// Keeps what it is given.
private final class CollectingSink: ArchiveSink {
    var bytes: [UInt8] = []
    func write(_ bytes: [UInt8]) async throws { self.bytes += bytes }
    func finish() async throws {}
    func abandon() async {}
}
