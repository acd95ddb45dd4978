import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The write side of `Spec/0004-trusted-archives.md §3`: where a signing writer puts its
/// signature records, what they sign, and that a 2.1 reader still reads the archive. The layout
/// is checked by its own walk over the framed records (``SignedLayout``), from the Spec's rules,
/// not by the scanner's code.
@Suite("Archive signatures (writing)")
struct ArchiveSignatureTests {
    /// A signed archive's records as the Spec lays them out, with every signature checked.
    struct SignedLayout {
        struct Record {
            var offset: Int
            var type: UInt8
            var flags: UInt8
            var length: Int
            var end: Int { offset + 12 + length }
        }
        var records: [Record]
        /// The prefix signatures' `signedLength`s, in order.
        var prefixSignedLengths: [UInt64] = []
        /// Every commit record's end, in order (the final commit's last).
        var commitEnds: [Int] = []
        var rootSignedLength: UInt64 = 0

        static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }

        /// Walks `bytes` and checks §3.1 (prelude 2.2), §3.3's placement rules 1–5, §3.4's
        /// writing rules (cadence, root, index, final commit), and every signature with `key`.
        init(_ bytes: [UInt8], key: PublicKey) throws {
            #expect(Array(bytes[8..<12]) == [2, 0, 2, 0], "§3.1: the prelude says 2.2")
            var offset = 12
            var records: [Record] = []
            while offset < bytes.count {
                let record = try #require(GoldenArchive.record(in: bytes, at: offset), "record at \(offset)")
                records.append(Record(offset: offset, type: record.type, flags: bytes[offset + 1], length: record.length))
                offset += record.framedLength
            }
            self.records = records
            let commit = RecordType.commit.rawValue
            let signature = RecordType.signature.rawValue
            #expect(records[0].type == RecordType.header.rawValue && records[1].type == commit)
            // C_0: the chain digest in commit 0's payload (after 7 u64 fields).
            let headerChainDigest = try #require(Digest(bytes: Array(bytes[(records[1].offset + 8 + 56)..<(records[1].offset + 8 + 88)])))
            let footerRecord = try #require(records.last)
            #expect(footerRecord.type == RecordType.footer.rawValue)
            var footerReader = ByteReader(Array(bytes[(footerRecord.offset + 8)..<(footerRecord.end - 4)]), baseOffset: 0, what: "footer")
            let footer = try Footer.decode(&footerReader)
            let manifestStart = Int(footer.manifestOffset)
            let body = records.filter { $0.offset < manifestStart }
            let finalCommit = try #require(body.last)
            #expect(finalCommit.type == commit && finalCommit.end == manifestStart, "the final commit ends the body")
            commitEnds = body.filter { $0.type == commit }.map(\.end)
            var lastCommit: Record?
            var sinceCommit: [Record] = []
            var lastPrefix: UInt64?
            var rootPosition: Int?
            for (position, record) in body.enumerated() {
                if record.type == commit {
                    lastCommit = record
                    sinceCommit = []
                    continue
                }
                defer { sinceCommit.append(record) }
                guard record.type == signature else {
                    // §3.4 rule 2: a commit the archive goes on after gets a prefix signature when due.
                    if let last = lastCommit, sinceCommit.isEmpty, position + 1 < body.count,
                        ArchiveSignatureTests.isDue(end: UInt64(last.end), after: lastPrefix),
                        rootPosition == nil
                    {
                        Issue.record("the commit ending at \(last.end) should carry a prefix signature (§3.4 rule 2)")
                    }
                    continue
                }
                let signer = try #require(lastCommit, "a signature before commit 0")
                #expect(record.flags == 1, "§3.3 rule 1: skippable")
                let decodedKind = bytes[record.offset + 8]
                if decodedKind == 0 {
                    #expect(sinceCommit.allSatisfy { $0.type == signature }, "§3.3 rule 2: only signatures since the commit")
                }
                #expect(record.length == SignatureRecord.payloadLength)
                let payload = Array(bytes[(record.offset + 8)..<(record.end - 4)])
                let decoded = try SignatureRecord.decode(payload, offset: UInt64(record.offset + 8))
                #expect(decoded.signedLength == UInt64(signer.end), "§3.3 rule 2: signs the commit before it")
                #expect(decoded.keyID == key.keyID && decoded.algorithm == 1, "§3.3 rule 4")
                let commitDigest = try SHA256.hash(Array(bytes[signer.offset..<signer.end]))
                #expect(
                    decoded.isValid(
                        for: key, headerChainDigest: headerChainDigest, commitDigest: commitDigest,
                        footer: decoded.kind == .root ? footer : nil),
                    "§3.2: the signature at \(record.offset) verifies")
                switch decoded.kind {
                case .prefix:
                    #expect(rootPosition == nil, "§3.3 rule 3: no prefix signature after the root")
                    #expect(!sinceCommit.contains { $0.type == signature }, "§3.3 rule 3: one prefix signature per commit")
                    prefixSignedLengths.append(decoded.signedLength)
                    lastPrefix = decoded.signedLength
                case .root:
                    #expect(rootPosition == nil, "one root signature")
                    rootPosition = position
                    rootSignedLength = decoded.signedLength
                }
            }
            // §3.3 rule 5: signed, commit 0's prefix signature right after it.
            #expect(records[2].type == signature && prefixSignedLengths.first == UInt64(records[1].end))
            // §3.4 rule 3: the final link is the last item's records, the root signature of the
            // commit it starts from, the manifest index, then the final commit (as in 2.1: no
            // commit follows a commit). With no item (rule 6) the final commit follows the root.
            let root = try #require(rootPosition, "a root signature")
            let tail = body[(root + 1)...].map(\.type)
            #expect(tail == [RecordType.manifestIndex.rawValue, commit] || tail == [commit], "\(tail)")
            let finalPayload = Array(bytes[(finalCommit.offset + 8)..<(finalCommit.end - 4)])
            let signedPosition = try #require(body[..<root].lastIndex { $0.type == commit })
            let signedCommit = body[signedPosition]
            let signedPayload = Array(bytes[(signedCommit.offset + 8)..<(signedCommit.end - 4)])
            #expect(Self.u64(finalPayload, 0) == Self.u64(signedPayload, 0) + 1, "the final commit's sequence")
            let link = body[(signedPosition + 1)..<root]
            // A 2.1 reader looks through skippable records (Spec/0001 §3.3) and refuses a commit
            // right after a commit (§9): none follows one here, but with no item (rule 6).
            let framing = body.filter { $0.flags & 1 == 0 }
            let commitAfterCommit = zip(framing, framing.dropFirst()).contains { $0.type == commit && $1.type == commit }
            #expect(commitAfterCommit == link.allSatisfy { $0.type == signature }, "§3.1: a 2.1 reader reads it")
            if link.allSatisfy({ $0.type == signature }) {
                #expect(Array(finalPayload[8..<56]) == Array(signedPayload[8..<56]), "rule 6: the final commit's counts")
            } else {
                #expect(
                    link.contains { $0.type != signature && $0.type != RecordType.manifestIndex.rawValue },
                    "the final link holds the last item")
            }
        }
    }

    /// §3.4 rule 2, computed here from the Spec's words.
    static func isDue(end: UInt64, after signedLength: UInt64?) -> Bool {
        guard let signedLength else { return true }
        return end - signedLength >= 4_194_304
    }

    static func configuration(_ key: SigningKey?) -> Archiver.Configuration {
        var configuration = Archiver.Configuration()
        configuration.signingKey = key
        configuration.sourcePlatform = "test"
        configuration.workerCount = 2
        return configuration
    }

    /// Small files, a link, and a file of 9 MiB of seeded random bytes (over two signature
    /// intervals of incompressible content).
    static func tree(largeBytes: Int = 9 * 1024 * 1024) -> TreeBuilder {
        var generator = SeededGenerator(seed: 25)
        var tree = TreeBuilder()
        tree.file("a.txt", Array("hello\n".utf8))
        tree.directory("d")
        for number in 0..<40 { tree.file("d/\(number).txt", generator.bytes(100 + number * 37)) }
        tree.symlink("link", target: "a.txt")
        tree.file("large.bin", generator.bytes(largeBytes))
        tree.file("z.txt", Array("last\n".utf8))
        return tree
    }

    static func signedArchive(_ tree: TreeBuilder, key: SigningKey?) async throws -> [UInt8] {
        let directory = try TemporaryDirectory(prefix: "cairn-signed")
        defer { directory.remove() }
        try tree.materialize(at: directory.appending("tree"))
        return try await RoundTrip.archive(
            path: directory.appending("tree"), to: directory.appending("a.cairn"), configuration: configuration(key)
        ).bytes
    }

    @Test("§3.3/§3.4: a signed archive is 2.2 with commit 0's prefix signature, one every 4 MiB after it, and the root and index before the final commit written again; every signature verifies")
    func layoutAndSignatures() async throws {
        let key = try TestSigningKey.key()
        let bytes = try await Self.signedArchive(Self.tree(), key: key)
        let layout = try SignedLayout(bytes, key: key.publicKey)
        // 9 MiB of content: commit 0's and at least two more.
        #expect(layout.prefixSignedLengths.count >= 3, "\(layout.prefixSignedLengths)")
        for (earlier, later) in zip(layout.prefixSignedLengths, layout.prefixSignedLengths.dropFirst()) {
            #expect(later - earlier >= ArchiveWriter.signatureInterval)
        }
        // The root signs the commit the final link starts from; the final commit follows the
        // last item, so a 2.1 reader reads the archive (Spec/0001 §9).
        #expect(Int(layout.rootSignedLength) == layout.commitEnds[layout.commitEnds.count - 2])
        #expect(!layout.prefixSignedLengths.contains(layout.rootSignedLength))
    }

    @Test("§3.4: Ed25519 is deterministic, so the same inputs and key give the same bytes; another key gives other signatures only")
    func deterministic() async throws {
        let key = try TestSigningKey.key()
        let tree = Self.tree(largeBytes: 5 * 1024 * 1024)
        let first = try await Self.signedArchive(tree, key: key)
        let second = try await Self.signedArchive(tree, key: key)
        #expect(first == second)
        let other = try await Self.signedArchive(tree, key: try TestSigningKey.otherKey())
        #expect(other.count == first.count)
        #expect(other != first)
        _ = try SignedLayout(other, key: try TestSigningKey.otherKey().publicKey)
    }

    @Test("§3.4: an archive of nothing is signed too: commit 0, its prefix signature, the root, the final commit")
    func emptyArchive() async throws {
        let key = try TestSigningKey.key()
        let directory = try TemporaryDirectory(prefix: "cairn-signed-empty")
        defer { directory.remove() }
        let path = directory.appending("e.cairn")
        let archiver = try await Archiver(writingTo: .file(path: path), configuration: Self.configuration(key))
        _ = try await archiver.finish()
        let bytes = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let layout = try SignedLayout(bytes, key: key.publicKey)
        #expect(layout.prefixSignedLengths == [UInt64(layout.commitEnds[0])])
        #expect(layout.rootSignedLength == UInt64(layout.commitEnds[0]))
    }

    @Test("§3.4: an entry record right after a due prefix signature is placed after it, so its manifest row names the entry record itself")
    func entryAfterPrefixSignature() async throws {
        // Three files of 3.5 MiB (no commit inside any): the commit at the second one's end is
        // 7 MiB after commit 0's signature, so due one, and the next record is the third file's
        // entry record (not packable). The benchmark corpus found the row pointing 94 bytes
        // early, at the signature.
        var generator = SeededGenerator(seed: 2525)
        var tree = TreeBuilder()
        for name in ["one.bin", "two.bin", "three.bin"] { tree.file(name, generator.bytes(7 * 512 * 1024)) }
        let key = try TestSigningKey.key()
        let directory = try TemporaryDirectory(prefix: "cairn-signed-entry")
        defer { directory.remove() }
        try tree.materialize(at: directory.appending("tree"))
        _ = try await RoundTrip.archive(
            path: directory.appending("tree"), to: directory.appending("s.cairn"), configuration: Self.configuration(key))
        let extractor = try await Extractor(at: .file(path: directory.appending("s.cairn")), trustedKeys: [key.publicKey])
        defer { extractor.close() }
        let output = directory.appending("out")
        try await extractor.extractAll(to: URL(fileURLWithPath: output))
        #expect(try TreeSnapshot(at: output + "/tree") == TreeSnapshot(at: directory.appending("tree")))
    }

    @Test("§3.1: a reader without trusted keys verifies, lists and extracts a signed archive as the unsigned one")
    func readWithoutKeys() async throws {
        let key = try TestSigningKey.key()
        let tree = Self.tree(largeBytes: 5 * 1024 * 1024)
        let directory = try TemporaryDirectory(prefix: "cairn-signed-read")
        defer { directory.remove() }
        try tree.materialize(at: directory.appending("tree"))
        let signed = try await RoundTrip.archive(
            path: directory.appending("tree"), to: directory.appending("s.cairn"), configuration: Self.configuration(key))
        let plain = try await RoundTrip.archive(
            path: directory.appending("tree"), to: directory.appending("p.cairn"), configuration: Self.configuration(nil))
        #expect(signed.properties.entryCount == plain.properties.entryCount)
        #expect(signed.properties.uncompressedBytes == plain.properties.uncompressedBytes)
        #expect(Array(plain.bytes[8..<12]) == [2, 0, 1, 0], "unsigned stays 2.1")
        do {
            let report = try await Extractor.verifyArchive(at: .file(path: directory.appending("s.cairn")))
            #expect(report.entryCount == plain.properties.entryCount)
            let extractor = try await Extractor(at: .file(path: directory.appending("s.cairn")))
            defer { extractor.close() }
            #expect(extractor.formatVersion == FormatVersion(major: 2, minor: 2))
            let output = directory.appending("out")
            try await extractor.extractAll(to: URL(fileURLWithPath: output))
            #expect(try TreeSnapshot(at: output + "/tree") == TreeSnapshot(at: directory.appending("tree")))
        }
    }
}

/// `Spec/0004-trusted-archives.md §3.5`: a signed write cut anywhere and resumed with the same
/// key gives the uninterrupted signed bytes; the key must fit the partial archive.
@Suite("Archive signatures (resuming a write)")
struct SignedResumeTests {
    @Test("§3.5: a signed archive cut at commits, signatures and seeded offsets resumes to the uninterrupted signed bytes")
    func resumeIsByteIdentical() async throws {
        let key = try TestSigningKey.key()
        let configuration = ArchiveSignatureTests.configuration(key)
        let work = try TemporaryDirectory(prefix: "cairn-signed-resume")
        defer { work.remove() }
        let source = work.appending("tree")
        try ArchiveSignatureTests.tree().materialize(at: source)
        let bytes = try await RoundTrip.archive(path: source, to: work.appending("reference.cairn"), configuration: configuration).bytes
        let layout = try ArchiveSignatureTests.SignedLayout(bytes, key: key.publicKey)
        // Just before, at and after every signature record, and seeded offsets.
        var offsets: Set<Int> = [0, bytes.count - 1, bytes.count]
        for record in layout.records where record.type == RecordType.signature.rawValue {
            offsets.formUnion([record.offset - 1, record.offset, record.offset + 50, record.end, record.end + 1])
        }
        var generator = SeededGenerator(seed: 0x5EED_0025)
        while offsets.count < 36 { offsets.insert(Int.random(in: 0...bytes.count, using: &generator)) }
        let target = work.appending("resumed.cairn")
        for cut in offsets.sorted() where cut <= bytes.count {
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), Array(bytes[0..<cut]))
            unlink(target)
            let archiver: Archiver
            do {
                archiver = try Archiver(resuming: .file(path: target), configuration: configuration)
                #expect(cut >= layout.records[2].end, "cut at \(cut): resumable only after commit 0's signature")
            } catch {
                #expect(error.code == .notResumable, "cut at \(cut): \(error)")
                #expect(cut < layout.records[2].end, "cut at \(cut) is past commit 0's signature yet not resumable: \(error)")
                archiver = try await Archiver(writingTo: .file(path: target), configuration: configuration)
            }
            try await archiver.appendItem(at: URL(fileURLWithPath: source))
            _ = try await archiver.finish()
            let resumed = try RawFileSystem.contents(ofFile: Array(target.utf8))
            #expect(ResumeFixture.same(resumed, bytes), "cut at \(cut) of \(bytes.count): \(ResumeFixture.difference(resumed, bytes))")
        }
    }

    @Test("§3.5: a signed partial archive is not resumed without its key or with another; an unsigned one not with a key; nothing is touched")
    func keyMustFit() async throws {
        let key = try TestSigningKey.key()
        let other = try TestSigningKey.otherKey()
        let work = try TemporaryDirectory(prefix: "cairn-signed-resume-key")
        defer { work.remove() }
        let source = work.appending("tree")
        try ArchiveSignatureTests.tree(largeBytes: 64 * 1024).materialize(at: source)
        let signed = try await RoundTrip.archive(
            path: source, to: work.appending("s.cairn"), configuration: ArchiveSignatureTests.configuration(key)
        ).bytes
        let plain = try await RoundTrip.archive(
            path: source, to: work.appending("p.cairn"), configuration: ArchiveSignatureTests.configuration(nil)
        ).bytes
        let target = work.appending("t.cairn")
        let cases: [(bytes: [UInt8], key: SigningKey?, words: [String])] = [
            (signed, nil, ["signed by key \(key.keyID)"]),
            (signed, other, ["signed by key \(key.keyID)", "\(other.keyID)"]),
            (plain, key, ["not signed"]),
        ]
        for (bytes, given, words) in cases {
            let partial = Array(bytes[0..<(bytes.count * 2 / 3)])
            try RawFileSystem.writeFile(Array((target + ".partial").utf8), partial)
            let error = #expect(throws: CairnError.self) {
                _ = try Archiver(resuming: .file(path: target), configuration: ArchiveSignatureTests.configuration(given))
            }
            #expect(error?.code == .notResumable)
            for word in words { #expect(error?.message.contains(word) == true, "\(error?.message ?? "")") }
            #expect(try RawFileSystem.contents(ofFile: Array((target + ".partial").utf8)) == partial, "untouched")
        }
    }
}
