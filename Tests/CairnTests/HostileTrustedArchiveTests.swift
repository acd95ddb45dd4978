import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// The hostile suite against trusted archives, signed and encrypted
/// (`Spec/0004-trusted-archives.md §4`, §6.2–§6.4): every tampering of the outer bytes (blocks,
/// envelope, key block, stanzas), every cut, blocks moved within an archive or swapped in from
/// another archive made with the same secrets, the inner archive altered and sealed again with
/// the secrets known, a key block for someone else, and the downgrades (encryption or signature
/// stripped). For each, three readers are run with the identity and the trusted key:
///
/// - the seekable reader (``Extractor/init(at:trustedKeys:decryption:)`` and `extractAll`),
/// - the stream verifier (``Extractor/verifyArchive(at:trustedKeys:decryption:)``, which reads
///   the sealed blocks front to back once, as from a pipe),
/// - the stream extractor (the sealed stream of a descriptor read once, as `cairn extract -`).
///
/// Each must refuse, name an offset, agree with the others on the error code, and leave its
/// destination empty. The archives are built with the library from a seeded tree, with fixed
/// secrets (package `Archiver.Configuration.sealing`) so that blocks can be opened and sealed
/// again by the test. Count: 0 accepted.
@Suite("Trusted archives: hostile encrypted input")
struct HostileTrustedArchiveTests {
    // MARK: - Fixtures

    /// The reader's identity (32 × `0x42`) and another one (32 × `0x43`), for stanzas that are not ours.
    static func identity() throws -> AgeIdentity { try AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32)) }
    static func otherIdentity() throws -> AgeIdentity { try AgeIdentity(secretBytes: [UInt8](repeating: 0x43, count: 32)) }

    static let secrets = ArchiveSecrets(
        blockKey: (0..<32).map { UInt8($0) &+ 1 }, idKey: (0..<32).map { UInt8($0) &+ 65 }, chunkerKey: (0..<32).map { UInt8($0) &+ 129 })
    static let archiveID = [UInt8](repeating: 0xA7, count: 16)

    /// Fixed secrets and archive id; the key block a real age file for ``identity()`` (and
    /// `extraRecipients`).
    static func sealing(extraRecipients: [AgeRecipient] = []) throws -> ArchiveSealing {
        let keyBlock = try AgeFile.encrypt(secrets.encoded(), to: [try identity().recipient] + extraRecipients)
        return ArchiveSealing(envelope: EnvelopeRecord(archiveID: archiveID, keyBlock: keyBlock), secrets: secrets)
    }

    static func tree(seed: UInt64) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.file("a.txt", Array("hello\n".utf8))
        tree.directory("d")
        for number in 0..<10 { tree.file("d/\(number).txt", generator.bytes(300 + number * 97)) }
        tree.symlink("link", target: "a.txt")
        tree.file("large.bin", generator.bytes(180_000))
        tree.file("z.txt", Array("last\n".utf8))
        return tree
    }

    /// Writes `tree` signed by `key` (nil: unsigned), sealed with `sealing` (nil: plain), and
    /// returns the archive's bytes.
    static func write(
        _ tree: TreeBuilder, key: SigningKey?, sealing: ArchiveSealing?, in directory: TemporaryDirectory, name: String
    ) async throws -> [UInt8] {
        let source = directory.appending("tree-\(name)")
        try tree.materialize(at: source)
        var configuration = Archiver.Configuration()
        configuration.signingKey = key
        configuration.sealing = sealing
        configuration.sourcePlatform = "test"
        configuration.workerCount = 2
        let path = directory.appending("\(name).cairn")
        let archiver = try await Archiver(writingTo: .file(path: path), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: source))
        _ = try await archiver.finish()
        return try RawFileSystem.contents(ofFile: Array(path.utf8))
    }

    /// The outer layout of an encrypted archive's bytes (`Spec/0004 §6.2`, §6.3).
    static func layout(_ outer: [UInt8]) throws -> SealedBlockLayout {
        let payload = (0..<4).reduce(0) { $0 | Int(outer[16 + $1]) << (8 * $1) }
        let blockSize = (0..<4).reduce(0) { $0 | UInt64(outer[20 + $1]) << (8 * UInt64($1)) }
        return try SealedBlockLayout(dataStart: UInt64(24 + payload), blockSize: blockSize, outerSize: UInt64(outer.count))
    }

    /// The inner archive of `outer`, every block opened with the known secrets.
    static func inner(_ outer: [UInt8]) throws -> [UInt8] {
        let layout = try layout(outer)
        let sealer = try BlockSealer(key: secrets.blockKey, archiveID: archiveID)
        var inner: [UInt8] = []
        for index in 0..<layout.blockCount {
            let range = layout.outerRange(of: index)
            let sealed = Array(outer[Int(range.lowerBound)..<Int(range.upperBound)])
            var plain = [UInt8](repeating: 0, count: sealed.count - BlockSealer.overhead)
            let opened = sealed.withUnsafeBytes { s in plain.withUnsafeMutableBytes { sealer.open(s, index: index, isFinal: layout.isFinal(index), into: $0) } }
            try #require(opened, "block \(index) opens with the known secrets")
            inner += plain
        }
        return inner
    }

    /// `inner` sealed again behind `outer`'s prelude and envelope, properly (fresh nonces, the
    /// right indices, the last block final): what an attacker holding the secrets can write.
    static func reseal(_ inner: [UInt8], like outer: [UInt8]) throws -> [UInt8] {
        let layout = try layout(outer)
        let sealer = try BlockSealer(key: secrets.blockKey, archiveID: archiveID)
        let blocks = SealedBlockLayout(dataStart: layout.dataStart, blockSize: layout.blockSize, innerSize: UInt64(inner.count))
        var result = Array(outer[0..<Int(layout.dataStart)])
        for index in 0..<blocks.blockCount {
            let range = blocks.innerRange(of: index)
            result += inner[Int(range.lowerBound)..<Int(range.upperBound)].withUnsafeBytes {
                sealer.seal($0, index: index, isFinal: blocks.isFinal(index))
            }
        }
        return result
    }

    /// `outer` with its envelope record's payload bytes `at` (outer offsets) changed by `change`
    /// and its CRC-32 written again, so that only what the envelope means can refuse it.
    static func changeEnvelope(_ outer: [UInt8], _ change: (inout [UInt8]) -> Void) throws -> [UInt8] {
        var bytes = outer
        change(&bytes)
        let end = Int(try layout(outer).dataStart)
        let crc = CRC32.checksum(Array(bytes[12..<(end - 4)]))
        for i in 0..<4 { bytes[end - 4 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        return bytes
    }

    // MARK: - The three readers

    struct Refusals: CustomStringConvertible {
        var seekable: CairnError?
        var verify: CairnError?
        var stream: CairnError?
        var all: [(String, CairnError?)] { [("seekable", seekable), ("stream verify", verify), ("stream extract", stream)] }
        var description: String { all.map { "\($0.0): \($0.1.map { "\($0)" } ?? "accepted")" }.joined(separator: "; ") }
    }

    /// Reads `bytes` with `keys` and `decryption` by each reader; expects that nothing was
    /// extracted by a reader that refused.
    static func refusals(
        _ bytes: [UInt8], keys: [PublicKey], decryption: ArchiveDecryption, in directory: TemporaryDirectory, name: String
    ) async throws -> Refusals {
        let path = directory.appending("\(name).hostile.cairn")
        try RawFileSystem.writeFile(Array(path.utf8), bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var result = Refusals()
        let seekableDestination = directory.appending("\(name).seekable-out")
        try FileManager.default.createDirectory(atPath: seekableDestination, withIntermediateDirectories: false)
        do {
            try await Extractor.withExtractor(at: .file(path: path), trustedKeys: keys, decryption: decryption) { extractor in
                try await extractor.extractAll(to: URL(fileURLWithPath: seekableDestination))
            }
        } catch let error as CairnError {
            result.seekable = error
        }
        do { _ = try await Extractor.verifyArchive(at: .file(path: path), trustedKeys: keys, decryption: decryption) } catch let error as CairnError {
            result.verify = error
        }
        let streamDestination = directory.appending("\(name).stream-out")
        try FileManager.default.createDirectory(atPath: streamDestination, withIntermediateDirectories: false)
        do {
            try await extractStream(path, to: streamDestination, keys: keys, decryption: decryption)
        } catch let error as CairnError {
            result.stream = error
        }
        for (destination, error) in [(seekableDestination, result.seekable), (streamDestination, result.stream)] {
            let left = try FileManager.default.contentsOfDirectory(atPath: destination)
            if error != nil {
                #expect(left.isEmpty, "\(name): nothing is released on refusal, found \(left)")
            } else {
                #expect(!left.isEmpty, "\(name): read, and extracted")
            }
            try? FileManager.default.removeItem(atPath: destination)
        }
        return result
    }

    /// The stream extraction of `cat ARCHIVE | cairn extract -`: the archive's bytes read once
    /// from a pipe that `cat` writes, the sealed blocks opened on their own thread as they come.
    static func extractStream(_ path: String, to destination: String, keys: [PublicKey], decryption: ArchiveDecryption) async throws {
        let cat = Process()
        cat.executableURL = URL(fileURLWithPath: "/bin/cat")
        cat.arguments = [path]
        let pipe = Pipe()
        cat.standardOutput = pipe
        try cat.run()
        defer {
            // A refusal leaves bytes unread: cat then ends on SIGPIPE.
            try? pipe.fileHandleForReading.close()
            cat.waitUntilExit()
        }
        let descriptor = FileDescriptor(rawValue: pipe.fileHandleForReading.fileDescriptor, path: "<input>")
        let input = try decryption.open(SequentialArchiveBytes(descriptor: descriptor, finish: {}, cancel: {}), name: "<input>")
        do {
            _ = try await Extractor.extractStream(
                from: input.descriptor, to: Array(destination.utf8), options: ExtractionOptions(), progress: nil, trustedKeys: keys,
                keying: input.keying)
            try input.finish()
        } catch {
            throw Extractor.ending(input, after: error, path: "<input>")
        }
    }

    /// Every reader refused; with the same code (`code` when given) and an offset (`offset` when
    /// given, for every reader; otherwise the two stream readers agree on it).
    static func expectRefused(
        _ r: Refusals, _ code: CairnError.Code? = nil, at offset: UInt64? = nil, _ what: String, sameCode: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (reader, error) in r.all {
            guard let error else {
                Issue.record("ACCEPTED: \(what) by the \(reader) reader", sourceLocation: sourceLocation)
                continue
            }
            #expect(error.offset != nil, "\(what), \(reader): no offset in \(error)", sourceLocation: sourceLocation)
            if let code { #expect(error.code == code, "\(what), \(reader): \(error)", sourceLocation: sourceLocation) }
            if let offset { #expect(error.offset == offset, "\(what), \(reader): \(error), wanted offset \(offset)", sourceLocation: sourceLocation) }
        }
        let codes = Set(r.all.compactMap { $0.1?.code })
        #expect(!sameCode || codes.count <= 1, "\(what): the readers disagree: \(r)", sourceLocation: sourceLocation)
        if offset == nil {
            #expect(r.verify?.offset == r.stream?.offset, "\(what): the stream readers disagree: \(r)", sourceLocation: sourceLocation)
        }
    }

    struct Context {
        let directory: TemporaryDirectory
        let key: SigningKey
        let decryption: ArchiveDecryption
        let outer: [UInt8]
        let layout: SealedBlockLayout

        func refusals(_ bytes: [UInt8], name: String, keys: [PublicKey]? = nil, decryption: ArchiveDecryption? = nil) async throws -> Refusals {
            try await HostileTrustedArchiveTests.refusals(
                bytes, keys: keys ?? [key.publicKey], decryption: decryption ?? self.decryption, in: directory, name: name)
        }
    }

    /// A signed and encrypted archive of ``tree(seed:)``, and the positive control: it reads.
    static func context(prefix: String, extraRecipients: [AgeRecipient] = []) async throws -> Context {
        let directory = try TemporaryDirectory(prefix: prefix)
        let key = try TestSigningKey.key()
        let outer = try await write(tree(seed: 2525), key: key, sealing: sealing(extraRecipients: extraRecipients), in: directory, name: "a")
        let context = Context(
            directory: directory, key: key, decryption: ArchiveDecryption(identities: [try identity()]), outer: outer, layout: try layout(outer))
        let clean = try await context.refusals(outer, name: "clean")
        #expect(clean.all.allSatisfy { $0.1 == nil }, "the untouched archive reads: \(clean)")
        return context
    }

    // MARK: - Outer bytes

    @Test("§6.3 rule 1: a flipped byte in every sealed block (at a seeded place: nonce, ciphertext or tag) is checksumMismatch at that block's outer offset, alike by every reader")
    func flippedByteInSealedBlocks() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-flip")
        defer { c.directory.remove() }
        try #require(c.layout.blockCount >= 8)
        var generator = SeededGenerator(seed: 2511)
        for block in 0..<c.layout.blockCount {
            let range = c.layout.outerRange(of: block)
            let at = Int(UInt64.random(in: range, using: &generator))
            var bytes = c.outer
            bytes[at] ^= UInt8.random(in: 1...255, using: &generator)
            let r = try await c.refusals(bytes, name: "flip-\(block)")
            Self.expectRefused(r, .checksumMismatch, at: range.lowerBound, "block \(block) changed at \(at)")
            #expect(r.verify?.message.contains("sealed block \(block) fails authentication") == true, "\(r)")
        }
    }

    @Test("§6.2, §6.4: a changed envelope (its CRC left, or written again: the block size, the archive id, a stanza, the key block's MAC line or payload) is refused, alike by every reader")
    func changedEnvelope() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-envelope")
        defer { c.directory.remove() }
        let keyBlockStart = 12 + 8 + 24  // record header, block size, archive id, key block length
        let keyBlockText = Array(c.outer[keyBlockStart..<(Int(c.layout.dataStart) - 4)])
        let lines = keyBlockText.split(separator: 0x0A, omittingEmptySubsequences: false)
        // Where the stanza line, its body and the MAC line begin (age header, §6.4.1).
        var lineStarts: [Int] = []
        var position = keyBlockStart
        for line in lines.prefix(4) {
            lineStarts.append(position)
            position += line.count + 1
        }
        let macLine = lineStarts[3]
        try #require(c.outer[lineStarts[1]..<lineStarts[1] + 3].elementsEqual(Array("-> ".utf8)))
        try #require(c.outer[macLine..<macLine + 4].elementsEqual(Array("--- ".utf8)))
        let payload = position + 16 + 10  // past the payload nonce

        // The CRC left as it was: the envelope record's own check.
        var crcOnly = c.outer
        crcOnly[40] ^= 0x01
        Self.expectRefused(try await c.refusals(crcOnly, name: "envelope-crc"), .checksumMismatch, at: 12, "an envelope byte, CRC unchanged")

        let cases: [(String, CairnError.Code, UInt64?, (inout [UInt8]) -> Void)] = [
            // A block size that is not a power of two (49152), and another that is (32768): the
            // blocks then no longer fall where they were sealed.
            ("block size", .corrupted, nil, { $0[21] ^= 0x80 }),
            ("block size 32 KiB", .checksumMismatch, nil, { $0[21] = 0x80 }),
            ("archive id", .checksumMismatch, c.layout.dataStart, { $0[25] ^= 0x01 }),
            // Another share or body: the stanza is no longer one our identity opens.
            ("stanza share", .untrusted, UInt64(keyBlockStart), { $0[lineStarts[1] + 12] = $0[lineStarts[1] + 12] == 0x41 ? 0x42 : 0x41 }),
            ("stanza body", .untrusted, UInt64(keyBlockStart), { $0[lineStarts[2] + 5] = $0[lineStarts[2] + 5] == 0x41 ? 0x42 : 0x41 }),
            // The MAC line, named by its offset in the archive.
            ("MAC", .checksumMismatch, UInt64(macLine), { $0[macLine + 10] = $0[macLine + 10] == 0x41 ? 0x42 : 0x41 }),
            ("key block payload", .checksumMismatch, nil, { $0[payload] ^= 0x01 }),
        ]
        for (what, code, offset, change) in cases {
            let bytes = try Self.changeEnvelope(c.outer, change)
            let r = try await c.refusals(bytes, name: "envelope-\(what)")
            Self.expectRefused(r, nil, at: offset, "envelope \(what) changed (CRC written again)")
            // The code each gives, pinned, so a change of rule is seen.
            #expect(r.verify?.code == code, "\(what): \(r)")
        }
    }

    @Test("§6.3 rules 1-2: cut after every block (truncated at the end of the copy), and inside a seeded sample of blocks (a torn last piece: truncated; a shortened block: checksumMismatch), alike by every reader")
    func truncation() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-cut")
        defer { c.directory.remove() }
        let count = c.layout.blockCount
        // Before the first block: the envelope alone.
        Self.expectRefused(
            try await c.refusals(Array(c.outer[0..<Int(c.layout.dataStart)]), name: "cut-envelope"), .truncated, at: c.layout.dataStart,
            "cut after the envelope")
        for block in 0..<(count - 1) {
            let end = c.layout.outerRange(of: block).upperBound
            let r = try await c.refusals(Array(c.outer[0..<Int(end)]), name: "cut-\(block)")
            Self.expectRefused(r, .truncated, at: end, "cut after block \(block)")
        }
        var generator = SeededGenerator(seed: 2512)
        for block in [0, count / 2, count - 1, UInt64.random(in: 0..<count, using: &generator)] {
            let range = c.layout.outerRange(of: block)
            // A piece of 1...40 bytes cannot hold a nonce, a tag and a byte.
            let torn = Int(range.lowerBound) + Int.random(in: 1...40, using: &generator)
            Self.expectRefused(
                try await c.refusals(Array(c.outer[0..<torn]), name: "torn-\(block)"), .truncated, at: range.lowerBound,
                "cut \(torn - Int(range.lowerBound)) bytes into block \(block)")
            let shortened = Int(range.lowerBound) + Int.random(in: 41..<Int(range.count), using: &generator)
            Self.expectRefused(
                try await c.refusals(Array(c.outer[0..<shortened]), name: "short-\(block)"), .checksumMismatch, at: range.lowerBound,
                "cut \(shortened - Int(range.lowerBound)) bytes into block \(block)")
        }
    }

    @Test("§6.3: a block moved or copied within one archive, the final block duplicated or removed: refused by the block's position (index, final) in its authenticated data")
    func blocksMovedWithinTheArchive() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-move")
        defer { c.directory.remove() }
        let last = c.layout.blockCount - 1
        let (two, five) = (c.layout.outerRange(of: 2), c.layout.outerRange(of: 5))
        // Block 5 copied over block 2 (both full blocks).
        var copied = c.outer
        copied.replaceSubrange(Int(two.lowerBound)..<Int(two.upperBound), with: c.outer[Int(five.lowerBound)..<Int(five.upperBound)])
        Self.expectRefused(try await c.refusals(copied, name: "copied"), .checksumMismatch, at: two.lowerBound, "block 5 copied to 2")
        // Block 2 moved to the end (blocks 3… shift down by one).
        var moved = Array(c.outer[0..<Int(two.lowerBound)]) + c.outer[Int(two.upperBound)..<Int(c.layout.outerRange(of: last).lowerBound)]
        moved += c.outer[Int(two.lowerBound)..<Int(two.upperBound)] + c.outer[Int(c.layout.outerRange(of: last).lowerBound)...]
        Self.expectRefused(try await c.refusals(moved, name: "moved"), .checksumMismatch, at: two.lowerBound, "block 2 moved after the others")
        // The final block written twice; and removed (the one before it is then last, not final).
        let final = c.layout.outerRange(of: last)
        let duplicated = c.outer + c.outer[Int(final.lowerBound)..<Int(final.upperBound)]
        Self.expectRefused(try await c.refusals(duplicated, name: "final-twice"), .checksumMismatch, "the final block duplicated")
        let removed = Array(c.outer[0..<Int(final.lowerBound)])
        Self.expectRefused(try await c.refusals(removed, name: "final-removed"), .truncated, at: final.lowerBound, "the final block removed")
        // The final block put in place of the one before it (with the size of a full block, it
        // is read as non-final there).
        let beforeLast = c.layout.outerRange(of: last - 1)
        let promoted = Array(c.outer[0..<Int(beforeLast.lowerBound)]) + c.outer[Int(final.lowerBound)..<Int(final.upperBound)]
        Self.expectRefused(try await c.refusals(promoted, name: "final-promoted"), .checksumMismatch, at: beforeLast.lowerBound, "the final block moved up")
    }

    @Test("§6.3, §6.1: a block swapped in from another archive sealed with the SAME secrets and archive id opens (inherent to the key), and the inner archive's own checks refuse it: the CRC, chunk id, chain digest and signatures of the inner archive")
    func blocksSwappedBetweenArchivesOfTheSameSecrets() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-swap")
        defer { c.directory.remove() }
        let other = try await Self.write(Self.tree(seed: 2526), key: c.key, sealing: Self.sealing(), in: c.directory, name: "b")
        let (innerA, innerB) = (try Self.inner(c.outer), try Self.inner(other))
        let otherLayout = try Self.layout(other)
        let common = min(c.layout.blockCount, otherLayout.blockCount) - 1  // full blocks of both
        var swappedAny = 0
        for block in [1, common / 2, common - 1] {
            let inner = c.layout.innerRange(of: block)
            guard innerA[Int(inner.lowerBound)..<Int(inner.upperBound)] != innerB[Int(inner.lowerBound)..<Int(inner.upperBound)] else { continue }
            let range = c.layout.outerRange(of: block)
            var bytes = c.outer
            bytes.replaceSubrange(Int(range.lowerBound)..<Int(range.upperBound), with: other[Int(range.lowerBound)..<Int(range.upperBound)])
            let r = try await c.refusals(bytes, name: "swap-\(block)")
            // The block itself opens: the refusal is the inner archive's (a record's CRC or
            // framing, a keyed chunk id), at the inner offset of the first record the swapped
            // bytes break, which the stream readers meet before the swapped block ends.
            Self.expectRefused(r, nil, "block \(block) of another archive of the same secrets")
            for (reader, error) in r.all {
                #expect(error?.message.contains("sealed block") == false, "\(reader): \(String(describing: error))")
            }
            #expect((r.verify?.offset ?? .max) < inner.upperBound, "\(r)")
            swappedAny += 1
        }
        #expect(swappedAny >= 2, "the two archives differ in the blocks tried")
    }

    // MARK: - Inner archive altered and sealed again

    @Test("§4.1, §6.1: with the secrets known, an inner record changed (CRC and chain written again) and sealed again properly is refused by the signatures; stripped signatures are untrusted; another key's signature is untrusted naming both keys")
    func resealedTampering() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-reseal")
        defer { c.directory.remove() }
        typealias Reframe = TrustedArchiveHostileTests.Reframe
        let inner = try Self.inner(c.outer)
        // The reseal itself is sound: the same inner archive sealed again reads.
        let again = try await c.refusals(try Self.reseal(inner, like: c.outer), name: "resealed")
        #expect(again.all.allSatisfy { $0.1 == nil }, "\(again)")

        let records = Reframe.records(inner)
        let signatures = records.filter { $0.type == RecordType.signature.rawValue }
        try #require(signatures.count >= 2)
        for type in [RecordType.entry, .chunk, .commit, .manifest, .footer, .header] {
            guard let record = records.first(where: { $0.type == type.rawValue && $0.length > 0 }) else { continue }
            var changed = inner
            changed[record.payload.lowerBound + record.length / 2] ^= 0x01
            Reframe.recomputeCRC(&changed, record)
            try Reframe.rechain(&changed)
            let r = try await c.refusals(try Self.reseal(changed, like: c.outer), name: "reseal-\(type.rawValue)")
            // A changed manifest record: the stream readers meet the manifest index first
            // (`Spec/0001 §11.8`: corrupted), the seekable reader the footer's manifest digest
            // (§12.3: checksumMismatch), both at the manifest record's offset.
            Self.expectRefused(r, nil, "\(type.name) changed and sealed again", sameCode: type != .manifest)
            if type == .manifest { #expect(r.seekable?.offset == r.verify?.offset, "\(r)") }
            for (reader, error) in r.all {
                #expect([.checksumMismatch, .corrupted].contains(error?.code), "\(type.name), \(reader): \(String(describing: error))")
            }
        }
        // A signature changed in its signature bytes.
        var forged = inner
        forged[signatures[0].payload.lowerBound + 40] ^= 0x01
        Reframe.recomputeCRC(&forged, signatures[0])
        try Reframe.rechain(&forged)
        Self.expectRefused(
            try await c.refusals(try Self.reseal(forged, like: c.outer), name: "reseal-signature"), .checksumMismatch,
            at: UInt64(signatures[0].offset), "a signature changed and sealed again")

        // Every signature stripped (an unknown skippable type, chain written again).
        var stripped = inner
        for signature in signatures {
            stripped[signature.offset] = 0x7E
            Reframe.recomputeCRC(&stripped, signature)
        }
        try Reframe.rechain(&stripped)
        let commit0 = try #require(records.first { $0.type == RecordType.commit.rawValue })
        Self.expectRefused(
            try await c.refusals(try Self.reseal(stripped, like: c.outer), name: "reseal-stripped"), .untrusted, at: UInt64(commit0.end),
            "signatures stripped and sealed again")

        // The same tree, signed by another key, sealed with the same secrets.
        let other = try TestSigningKey.otherKey()
        let foreign = try await Self.write(Self.tree(seed: 2525), key: other, sealing: Self.sealing(), in: c.directory, name: "foreign")
        let r = try await c.refusals(foreign, name: "foreign")
        Self.expectRefused(r, .untrusted, "signed by another key")
        #expect(r.verify?.message.contains("\(other.keyID)") == true && r.verify?.message.contains("\(c.key.keyID)") == true, "\(r)")
    }

    // MARK: - Key block and downgrades

    @Test("§6.4.1-§6.4.2: a key block for another recipient is untrusted for our identity; a stanza swapped in from another key block (ours, for another file key, or another recipient's) breaks the header MAC")
    func recipientStanzasReplaced() async throws {
        let c = try await Self.context(prefix: "cairn-hostile-stanza", extraRecipients: [try Self.otherIdentity().recipient])
        defer { c.directory.remove() }
        let keyBlockStart = 12 + 8 + 24
        let keyBlockLength = (0..<4).reduce(0) { $0 | Int(c.outer[40 + $1]) << (8 * $1) }
        let keyBlock = Array(c.outer[keyBlockStart..<(keyBlockStart + keyBlockLength)])
        // The stanzas of an age header: "-> X25519 SHARE\nBODY\n", the same length for every recipient.
        func stanzas(_ block: [UInt8]) -> [Range<Int>] {
            var result: [Range<Int>] = []
            var start = block.firstIndex(of: 0x0A).map { $0 + 1 } ?? 0
            while block[start..<(start + 3)].elementsEqual(Array("-> ".utf8)) {
                let first = block[start...].firstIndex(of: 0x0A) ?? start
                let second = block[(first + 1)...].firstIndex(of: 0x0A) ?? first
                result.append(start..<(second + 1))
                start = second + 1
            }
            return result
        }
        let ours = stanzas(keyBlock)
        try #require(ours.count == 2)

        // A key block for the other recipient only (the same secrets): our identity opens nothing.
        let elsewhere = try AgeFile.encrypt(Self.secrets.encoded(), to: [try Self.otherIdentity().recipient])
        let forOther = try Self.withKeyBlock(elsewhere, in: c.outer)
        Self.expectRefused(
            try await c.refusals(forOther, name: "for-other"), .untrusted, at: UInt64(keyBlockStart), "a key block for another recipient")

        // Each stanza in turn replaced by the stanza of another key block made for the same two
        // recipients (another file key): ours then unwraps the wrong file key, or the other's
        // stanza is not the one the MAC covered. Either way the header MAC refuses it.
        let donor = try AgeFile.encrypt(Self.secrets.encoded(), to: [try Self.identity().recipient, try Self.otherIdentity().recipient])
        let donorStanzas = stanzas(donor)
        for (index, stanza) in ours.enumerated() {
            var replaced = keyBlock
            replaced.replaceSubrange(stanza, with: donor[donorStanzas[index]])
            let bytes = try Self.withKeyBlock(replaced, in: c.outer)
            let r = try await c.refusals(bytes, name: "stanza-\(index)")
            Self.expectRefused(r, .checksumMismatch, "stanza \(index) from another key block")
            #expect(r.verify?.message.contains("age header line") == true, "\(r)")
        }
    }

    /// `outer` with its key block replaced by `keyBlock` (the envelope's lengths and CRC written again).
    static func withKeyBlock(_ keyBlock: [UInt8], in outer: [UInt8]) throws -> [UInt8] {
        let layout = try layout(outer)
        let record = EnvelopeRecord(blockSize: UInt32(layout.blockSize), archiveID: archiveID, keyBlock: keyBlock)
        return EnvelopeRecord.prelude + record.framed() + outer[Int(layout.dataStart)...]
    }

    @Test("§6.2 rule 2, §4.1: downgrades: a plain signed archive where an identity and a trusted key are given is untrusted at offset 0; an encrypted archive whose inner archive is unsigned is untrusted after commit 0; a signed archive sealed without the trusted key's signature is untrusted")
    func downgrades() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-hostile-downgrade")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let decryption = ArchiveDecryption(identities: [try Self.identity()])
        // The encryption stripped: the same tree, signed, not encrypted.
        let plain = try await Self.write(Self.tree(seed: 2525), key: key, sealing: nil, in: directory, name: "plain")
        let r = try await Self.refusals(plain, keys: [key.publicKey], decryption: decryption, in: directory, name: "plain")
        Self.expectRefused(r, .untrusted, at: 0, "a plain archive given an identity")
        #expect(r.verify?.message.contains("not encrypted") == true, "\(r)")
        // Also the inner archive of an encrypted one presented bare.
        let sealed = try await Self.write(Self.tree(seed: 2525), key: key, sealing: Self.sealing(), in: directory, name: "sealed")
        let bare = try await Self.refusals(try Self.inner(sealed), keys: [key.publicKey], decryption: decryption, in: directory, name: "bare")
        Self.expectRefused(bare, .untrusted, at: 0, "an encrypted archive's inner archive presented bare")

        // The signature stripped before sealing: encrypted but unsigned, read with a trusted key.
        let unsigned = try await Self.write(Self.tree(seed: 2525), key: nil, sealing: Self.sealing(), in: directory, name: "unsigned")
        let inner = try Self.inner(unsigned)
        let commit0 = try #require(TrustedArchiveHostileTests.Reframe.records(inner).first { $0.type == RecordType.commit.rawValue })
        let u = try await Self.refusals(unsigned, keys: [key.publicKey], decryption: decryption, in: directory, name: "unsigned")
        Self.expectRefused(u, .untrusted, at: UInt64(commit0.end), "an encrypted archive whose inner archive is unsigned")
        #expect(u.verify?.message.contains("not signed") == true, "\(u)")
        // Without an identity the encrypted archive says it is encrypted (offset 8), whatever the keys.
        let none = try await Self.refusals(sealed, keys: [key.publicKey], decryption: ArchiveDecryption(), in: directory, name: "no-identity")
        Self.expectRefused(none, .untrusted, at: 8, "an encrypted archive read without an identity")
    }
}
