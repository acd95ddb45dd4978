import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// What a reader given trusted keys refuses (`Spec/0004-trusted-archives.md §3.3`, §4): changed,
/// cut, moved, swapped, stripped and foreign signatures, each refused at the right offset with the
/// right code by the streaming verifier, the streaming extractor and the seekable reader alike,
/// with nothing extracted. The hostile archives are made here from a signed one by re-framing
/// records (``Reframe``): a changed record gets its CRC-32 and the chain digests after it
/// recomputed, so that only a signature can tell.
@Suite("Trusted archives: hostile input")
struct TrustedArchiveHostileTests {
    /// Records of an archive and their rewriting, from `Spec/0001 §3` (framing) and §10.3 (chain).
    enum Reframe {
        struct Record {
            var offset: Int
            var type: UInt8
            var flags: UInt8
            var length: Int
            var end: Int { offset + 12 + length }
            var payload: Range<Int> { (offset + 8)..<(offset + 8 + length) }
        }

        /// The records after the 12-byte prelude.
        static func records(_ bytes: [UInt8]) -> [Record] {
            var out: [Record] = []
            var offset = 12
            while offset + 12 <= bytes.count {
                let length = (0..<4).reduce(0) { $0 | Int(bytes[offset + 4 + $1]) << (8 * $1) }
                guard offset + 12 + length <= bytes.count else { break }
                out.append(Record(offset: offset, type: bytes[offset], flags: bytes[offset + 1], length: length))
                offset += 12 + length
            }
            return out
        }

        /// Writes the CRC-32 of the record at `record` (header and payload, §3).
        static func recomputeCRC(_ bytes: inout [UInt8], _ record: Record) {
            let crc = CRC32.checksum(Array(bytes[record.offset..<(record.end - 4)]))
            for i in 0..<4 { bytes[record.end - 4 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        }

        /// Recomputes every commit's and the footer's chain digest (§10.3: `C_0 = H(Z ‖ H(prelude) ‖
        /// d(header))`, `C_k = H(C_(k−1) ‖ d(c_(k−1)) ‖ d(r)…)`) and their CRCs, so that an archive
        /// changed elsewhere is self-consistent again.
        static func rechain(_ bytes: inout [UInt8]) throws {
            let chain = RecordChain()
            try chain.add(recordBytes: Array(bytes[0..<12]))
            for record in records(bytes) {
                if record.type == RecordType.commit.rawValue || record.type == RecordType.footer.rawValue {
                    let digest = try chain.finalize()
                    // The chain digest: after 7 u64 fields of a commit, after 88 bytes of a footer.
                    let at = record.offset + 8 + (record.type == RecordType.commit.rawValue ? 56 : 88)
                    bytes.replaceSubrange(at..<(at + 32), with: digest.bytes)
                    recomputeCRC(&bytes, record)
                    chain.prime(digest)
                }
                try chain.add(recordBytes: Array(bytes[record.offset..<record.end]))
            }
        }

        static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }

        static func putU64(_ value: UInt64, into bytes: inout [UInt8], at: Int) {
            for i in 0..<8 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
        }
    }

    /// The signature records of `bytes`: offset, kind (payload byte 0) and `signedLength`.
    static func signatures(_ bytes: [UInt8]) -> [(record: Reframe.Record, kind: UInt8, signedLength: UInt64)] {
        Reframe.records(bytes).filter { $0.type == RecordType.signature.rawValue }.map {
            ($0, bytes[$0.offset + 8], Reframe.u64(bytes, $0.offset + 8 + 10))
        }
    }

    static func tree(seed: UInt64 = 25) -> TreeBuilder {
        var generator = SeededGenerator(seed: seed)
        var tree = TreeBuilder()
        tree.file("a.txt", Array("hello\n".utf8))
        tree.directory("d")
        for number in 0..<12 { tree.file("d/\(number).txt", generator.bytes(100 + number * 37)) }
        tree.symlink("link", target: "a.txt")
        tree.file("large.bin", generator.bytes(9 * 1024 * 1024))
        tree.file("z.txt", Array("last\n".utf8))
        return tree
    }

    static func archive(_ tree: TreeBuilder, key: SigningKey?, in directory: TemporaryDirectory, name: String) async throws -> String {
        let source = directory.appending("tree-\(name)")
        try tree.materialize(at: source)
        var configuration = Archiver.Configuration()
        configuration.signingKey = key
        configuration.sourcePlatform = "test"
        configuration.workerCount = 2
        let path = directory.appending("\(name).cairn")
        _ = try await RoundTrip.archive(path: source, to: path, configuration: configuration)
        return path
    }

    /// How each reader refuses `bytes` with `keys`: the streaming verifier, the streaming
    /// extractor (from a pipe's worth of bytes: a descriptor read once), and the seekable reader
    /// (open, then extract everything). Expects that nothing was extracted.
    struct Refusals {
        var verify: CairnError?
        var stream: CairnError?
        var seekable: CairnError?
    }

    static func refusals(_ bytes: [UInt8], keys: [PublicKey], in directory: TemporaryDirectory, name: String) async throws -> Refusals {
        let path = directory.appending("\(name).hostile.cairn")
        try RawFileSystem.writeFile(Array(path.utf8), bytes)
        var result = Refusals()
        do { _ = try await Extractor.verifyArchive(at: .file(path: path), trustedKeys: keys) } catch let error as CairnError {
            result.verify = error
        }
        let streamDestination = directory.appending("\(name).stream-out")
        try FileManager.default.createDirectory(atPath: streamDestination, withIntermediateDirectories: false)
        do {
            let handle = try #require(FileHandle(forReadingAtPath: path))
            defer { try? handle.close() }
            _ = try await Extractor.extractStream(from: handle, to: URL(fileURLWithPath: streamDestination), trustedKeys: keys)
        } catch let error as CairnError {
            result.stream = error
        }
        let seekableDestination = directory.appending("\(name).seekable-out")
        try FileManager.default.createDirectory(atPath: seekableDestination, withIntermediateDirectories: false)
        do {
            try await Extractor.withExtractor(at: .file(path: path), trustedKeys: keys) { extractor in
                try await extractor.extractAll(to: URL(fileURLWithPath: seekableDestination))
            }
        } catch let error as CairnError {
            result.seekable = error
        }
        for (destination, error) in [(streamDestination, result.stream), (seekableDestination, result.seekable)] {
            let left = try FileManager.default.contentsOfDirectory(atPath: destination)
            if error != nil {
                #expect(left.isEmpty, "\(name): nothing is extracted on refusal, found \(left)")
            } else {
                #expect(!left.isEmpty, "\(name): extracted")
            }
        }
        return result
    }

    /// Every reader refused with `code` at `offset`.
    static func expectRefused(_ r: Refusals, _ code: CairnError.Code, at offset: Int, _ what: String) {
        for (reader, error) in [("verify", r.verify), ("stream extract", r.stream), ("seekable", r.seekable)] {
            #expect(error?.code == code, "\(what), \(reader): \(String(describing: error))")
            #expect(error?.offset == UInt64(offset), "\(what), \(reader): \(String(describing: error)), wanted offset \(offset)")
        }
    }

    // MARK: - Changed bytes

    @Test("§4.1/§4.2: a byte changed in any record of a signed archive (its CRC and the chain recomputed) is refused no later than the first signature that covers it, alike by every reader, with nothing extracted")
    func changedByteInEveryRecordType() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-flip")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let path = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let original = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let records = Reframe.records(original)
        let signatures = Self.signatures(original)
        try #require(signatures.count >= 3, "commit 0's, one after 4 MiB, the root")
        // The untouched archive reads with the key (the positive control).
        let clean = try await Self.refusals(original, keys: [key.publicKey], in: directory, name: "clean")
        #expect(clean.verify == nil && clean.stream == nil && clean.seekable == nil, "\(clean)")

        // The first record of each type, and the root signature apart from the prefix ones.
        var chosen: [(String, Reframe.Record)] = []
        var seen = Set<UInt8>()
        for record in records where record.length > 0 && seen.insert(record.type).inserted {
            chosen.append((RecordType(rawValue: record.type)?.name ?? "type \(record.type)", record))
        }
        if let root = signatures.last(where: { $0.kind == 1 }) { chosen.append(("root signature", root.record)) }
        for (name, record) in chosen {
            var bytes = original
            // In a signature record, a byte of the signature itself (past kind, algorithm, key id
            // and signed length); elsewhere the payload's middle.
            let at = record.type == RecordType.signature.rawValue ? record.payload.lowerBound + 40 : record.payload.lowerBound + record.length / 2
            bytes[at] ^= 0x01
            Reframe.recomputeCRC(&bytes, record)
            try Reframe.rechain(&bytes)
            let r = try await Self.refusals(bytes, keys: [key.publicKey], in: directory, name: "flip-\(record.type)-\(record.offset)")
            if record.type == RecordType.signature.rawValue {
                Self.expectRefused(r, .checksumMismatch, at: record.offset, "\(name) changed")
                #expect(r.verify?.message.contains("does not verify") == true, "\(String(describing: r.verify))")
                continue
            }
            // Refused no later than the first signature record after the change (the footer's
            // root check for the manifest and the footer).
            let bound = signatures.first { $0.record.offset > record.offset }?.record.offset ?? records.last?.offset ?? 0
            for (reader, error) in [("verify", r.verify), ("stream extract", r.stream), ("seekable", r.seekable)] {
                let error = try #require(error, "\(name) changed at \(at): \(reader) refused")
                #expect([.checksumMismatch, .corrupted].contains(error.code), "\(name), \(reader): \(error)")
                #expect((error.offset ?? .max) <= UInt64(bound), "\(name), \(reader): \(error), bound \(bound)")
            }
            // The two streaming readers are one scanner: the same first problem.
            #expect(r.verify?.code == r.stream?.code && r.verify?.offset == r.stream?.offset, "\(name): \(r)")
            #expect(r.seekable?.code == r.verify?.code, "\(name): \(r)")
        }
    }

    // MARK: - Cut archives

    @Test("§4.2: cut at every commit (and just after each signature), the verified length is the signedLength of the last signature wholly in the copy, never more; without keys it is the last commit")
    func truncationAtEveryCommit() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-cut")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let path = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let original = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let records = Reframe.records(original)
        let signatures = Self.signatures(original)
        let commitEnds = records.filter { $0.type == RecordType.commit.rawValue }.map(\.end)
        let cuts = Set(commitEnds + signatures.map(\.record.end) + commitEnds.map { $0 + 50 }).filter { $0 < original.count }.sorted()
        let cutPath = directory.appending("cut.cairn")
        for cut in cuts {
            try RawFileSystem.writeFile(Array(cutPath.utf8), Array(original[0..<cut]))
            let trusted = try await Extractor.verifyPrefix(at: .file(path: cutPath), trustedKeys: [key.publicKey])
            let wanted = signatures.filter { $0.kind == 0 && $0.record.end <= cut }.map(\.signedLength).max() ?? 0
            #expect(trusted.verifiedLength == wanted, "cut at \(cut): \(trusted.verifiedLength), wanted \(wanted)")
            #expect(trusted.resumeToken.length == wanted)
            #expect(!trusted.isComplete)
            let plain = try await Extractor.verifyPrefix(at: .file(path: cutPath))
            #expect(plain.verifiedLength == UInt64(commitEnds.filter { $0 <= cut }.max() ?? 0), "cut at \(cut) without keys")
        }
        // A cut archive extracts nothing from a stream (truncated, kept only for --resume).
        let destination = directory.appending("out")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false)
        try RawFileSystem.writeFile(Array(cutPath.utf8), Array(original[0..<(original.count - 200)]))
        let handle = try #require(FileHandle(forReadingAtPath: cutPath))
        let error = await #expect(throws: CairnError.self) {
            _ = try await Extractor.extractStream(from: handle, to: URL(fileURLWithPath: destination), trustedKeys: [key.publicKey])
        }
        try? handle.close()
        #expect(error?.code == .truncated, "\(String(describing: error))")
        // What the signatures cover is staged for --resume (§4.2); nothing is in the destination.
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination) == [".cairn-staging"])
    }

    // MARK: - Moved, swapped, stripped, foreign

    @Test("§3.3 rule 2, §4.1: a prefix signature moved to another commit is corrupted there as it is, and does not verify once its signedLength is made to fit")
    func signatureMovedWithinTheArchive() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-move")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let path = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let original = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let prefixes = Self.signatures(original).filter { $0.kind == 0 }
        try #require(prefixes.count >= 2)
        let (first, second) = (prefixes[0], prefixes[1])
        // The second prefix signature copied over the first (both 94 bytes: offsets stay).
        var moved = original
        moved.replaceSubrange(first.record.offset..<first.record.end, with: original[second.record.offset..<second.record.end])
        try Reframe.rechain(&moved)
        let asIs = try await Self.refusals(moved, keys: [key.publicKey], in: directory, name: "moved")
        Self.expectRefused(asIs, .corrupted, at: first.record.offset, "moved as is")
        // Without keys the placement rule refuses it too (§3.3 is checked whatever the trust).
        await #expect(throws: CairnError.self) {
            _ = try await Extractor.verifyArchive(at: .file(path: directory.appending("moved.hostile.cairn")))
        }
        // Its signedLength made to fit: the signature is over another commit.
        Reframe.putU64(first.signedLength, into: &moved, at: first.record.offset + 8 + 10)
        Reframe.recomputeCRC(&moved, first.record)
        try Reframe.rechain(&moved)
        let fitted = try await Self.refusals(moved, keys: [key.publicKey], in: directory, name: "moved-fitted")
        Self.expectRefused(fitted, .checksumMismatch, at: first.record.offset, "moved with its signed length fitted")
    }

    @Test("§4.1: a signature swapped in from another archive signed by the same key does not verify at its offset")
    func signatureSwappedBetweenArchives() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-swap")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let a = try RawFileSystem.contents(ofFile: Array(try await Self.archive(Self.tree(), key: key, in: directory, name: "a").utf8))
        let b = try RawFileSystem.contents(ofFile: Array(try await Self.archive(Self.tree(seed: 26), key: key, in: directory, name: "b").utf8))
        let (sa, sb) = (Self.signatures(a), Self.signatures(b))
        // The second prefix signature of each (the first may sign the same header and commit 0).
        let target = try #require(sa.filter { $0.kind == 0 }.dropFirst().first)
        let donor = try #require(sb.filter { $0.kind == 0 }.dropFirst().first)
        var swapped = a
        swapped.replaceSubrange(target.record.offset..<target.record.end, with: b[donor.record.offset..<donor.record.end])
        Reframe.putU64(target.signedLength, into: &swapped, at: target.record.offset + 8 + 10)
        Reframe.recomputeCRC(&swapped, target.record)
        try Reframe.rechain(&swapped)
        let r = try await Self.refusals(swapped, keys: [key.publicKey], in: directory, name: "swapped")
        Self.expectRefused(r, .checksumMismatch, at: target.record.offset, "swapped from another archive")
        // The root signature of b in a: refused at the root (or earlier, never accepted).
        let rootA = try #require(sa.last)
        let rootB = try #require(sb.last)
        var rootSwapped = a
        rootSwapped.replaceSubrange(rootA.record.offset..<rootA.record.end, with: b[rootB.record.offset..<rootB.record.end])
        Reframe.putU64(rootA.signedLength, into: &rootSwapped, at: rootA.record.offset + 8 + 10)
        Reframe.recomputeCRC(&rootSwapped, rootA.record)
        try Reframe.rechain(&rootSwapped)
        let root = try await Self.refusals(rootSwapped, keys: [key.publicKey], in: directory, name: "root-swapped")
        Self.expectRefused(root, .checksumMismatch, at: rootA.record.offset, "root swapped from another archive")
    }

    @Test("§3.3 rule 5, §4.1: with its signature records replaced by unknown skippable records (chain recomputed), and the same inputs written unsigned, the archive is not signed: untrusted at the record after commit 0")
    func signatureStripped() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-strip")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let signedPath = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let original = try RawFileSystem.contents(ofFile: Array(signedPath.utf8))
        var stripped = original
        for signature in Self.signatures(original) {
            stripped[signature.record.offset] = 0x7E  // a type no version defines, still skippable
            Reframe.recomputeCRC(&stripped, signature.record)
        }
        try Reframe.rechain(&stripped)
        let commit0 = try #require(Reframe.records(original).first { $0.type == RecordType.commit.rawValue })
        let r = try await Self.refusals(stripped, keys: [key.publicKey], in: directory, name: "stripped")
        Self.expectRefused(r, .untrusted, at: commit0.end, "stripped")
        #expect(r.verify?.message.contains("is not signed; wanted a signature by key \(key.keyID)") == true, "\(String(describing: r.verify))")

        let plainPath = try await Self.archive(Self.tree(), key: nil, in: directory, name: "plain")
        let plain = try RawFileSystem.contents(ofFile: Array(plainPath.utf8))
        let plainCommit0 = try #require(Reframe.records(plain).first { $0.type == RecordType.commit.rawValue })
        let unsigned = try await Self.refusals(plain, keys: [key.publicKey], in: directory, name: "unsigned")
        Self.expectRefused(unsigned, .untrusted, at: plainCommit0.end, "written unsigned")
        // verify --partial refuses it too, rather than trusting a prefix.
        let error = await #expect(throws: CairnError.self) {
            _ = try await Extractor.verifyPrefix(at: .file(path: plainPath), trustedKeys: [key.publicKey])
        }
        #expect(error?.code == .untrusted)
    }

    @Test("§4.1: an archive signed by another key is untrusted at its first signature, naming both key ids")
    func signedByAnotherKey() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-other")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let other = try TestSigningKey.otherKey()
        let path = try await Self.archive(Self.tree(), key: other, in: directory, name: "other")
        let bytes = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let first = try #require(Self.signatures(bytes).first)
        let r = try await Self.refusals(bytes, keys: [key.publicKey], in: directory, name: "other")
        Self.expectRefused(r, .untrusted, at: first.record.offset, "another key")
        #expect(r.verify?.message.contains("signed by key \(other.keyID), not by a trusted key (\(key.keyID))") == true, "\(String(describing: r.verify))")
        // Trusting both keys, it reads.
        let both = try await Self.refusals(bytes, keys: [key.publicKey, other.publicKey], in: directory, name: "both")
        #expect(both.verify == nil && both.stream == nil && both.seekable == nil, "\(both)")
    }

    // MARK: - Command line

    @Test("Spec/0003 §14.4, Spec/0004 §4.1/§4.4: --trusted-key on list, info, verify, verify --partial, extract, extract -, cat and diff: a signed archive reads, an unsigned or foreign one exits 1 naming the keys with nothing written; info says who signed")
    func commandLine() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-cli")
        defer { directory.remove() }
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        let dir = directory.path
        for name in ["k", "o"] {
            let made = try ChildProcess.run(cairn, ["key", "generate", "-p", "\(name).pub", "-s", "\(name).sec", "-W"], in: dir)
            try #require(made.status == 0, "\(made.stderr)")
        }
        let key = try SigningKey.read(secretKeyFile: directory.appending("k.sec"), password: nil)
        let signed = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let plain = try await Self.archive(Self.tree(), key: nil, in: directory, name: "plain")
        let k = ["--trusted-key", "k.pub"]
        let o = ["--trusted-key", "o.pub"]

        for command in [["list", signed], ["info", signed], ["verify", signed], ["verify", "--partial", signed], ["diff", signed, "tree-signed"]] {
            let ok = try ChildProcess.run(cairn, command + k, in: dir)
            // diff exits 1 for differences too (the key files beside the tree): no refusal is what counts.
            #expect(ok.status == 0 || command[0] == "diff" && !ok.stderr.contains("signed"), "\(command): \(ok.stderr)")
            for (archive, keys, words) in [(plain, k, "is not signed; wanted a signature by key \(key.keyID)"), (signed, o, "not by a trusted key")] {
                var refused = command
                refused[refused.firstIndex(of: signed) ?? 1] = archive
                let run = try ChildProcess.run(cairn, refused + keys, in: dir)
                #expect(run.status == 1, "\(refused + keys): \(run.stdout) \(run.stderr)")
                #expect(run.stderr.contains(words), "\(refused + keys): \(run.stderr)")
            }
        }
        let info = try ChildProcess.run(cairn, ["info", signed], in: dir)
        #expect(info.stdout.contains("signed by key \(key.keyID) (not checked: no trusted key given)"), "\(info.stdout)")
        #expect(try ChildProcess.run(cairn, ["info", plain], in: dir).stdout.contains("signature:         not signed"))
        let json = try ChildProcess.run(cairn, ["info", "--json", signed] + k, in: dir)
        #expect(json.stdout.contains("\"signedBy\":\"\(key.keyID)\"") && json.stdout.contains("\"signatureVerified\":true"), "\(json.stdout)")

        // extract (seekable and from standard input) and cat: nothing written on refusal.
        for (archive, keys) in [(plain, k), (signed, o)] {
            let seekable = try ChildProcess.run(cairn, ["extract", archive, "-C", "out1"] + keys, in: dir)
            #expect(seekable.status == 1, "\(seekable.stderr)")
            let piped = try ChildProcess.run(
                cairn, ["extract", "-", "-C", "out2"] + keys, in: dir, standardInput: archive)
            #expect(piped.status != 0, "\(piped.stderr)")
            let cat = try ChildProcess.run(cairn, ["cat", archive] + keys, in: dir)
            #expect(cat.status == 1 && cat.stdoutBytes.isEmpty, "\(cat.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("out2/tree-plain")))
        #expect(!FileManager.default.fileExists(atPath: directory.appending("out1/tree-plain")))
        #expect(!FileManager.default.fileExists(atPath: directory.appending("out1/tree-signed")))
        let extracted = try ChildProcess.run(cairn, ["extract", signed, "-C", "out3"] + k, in: dir)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        #expect(try TreeSnapshot(at: directory.appending("out3/tree-signed")) == TreeSnapshot(at: directory.appending("tree-signed")))
        let sent = try ChildProcess.run(cairn, ["cat", signed] + k, in: dir)
        let signedBytes = try RawFileSystem.contents(ofFile: Array(signed.utf8))
        #expect(sent.status == 0 && sent.stdoutBytes == signedBytes, "\(sent.stderr)")
    }

    // MARK: - Remote

    @Test("§4.3: a signed archive over HTTP (nginx) and S3 (rclone serve s3): one file extracted with range requests after the root check; a fetch cut inside a signature interval resumes after the last verified signature")
    func remoteSignedArchive() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-trust-remote")
        defer { directory.remove() }
        let key = try TestSigningKey.key()
        let served = directory.appending("www")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let path = try await Self.archive(Self.tree(), key: key, in: directory, name: "signed")
        let expected = try RawFileSystem.contents(ofFile: Array(path.utf8))
        try RawFileSystem.writeFile(Array((served + "/a.cairn").utf8), expected)
        let unsignedPath = try await Self.archive(Self.tree(), key: nil, in: directory, name: "plain")
        try FileManager.default.copyItem(atPath: unsignedPath, toPath: served + "/plain.cairn")
        let server = try NginxServer(root: served)
        defer { server.stop() }
        let wanted = try RawFileSystem.contents(ofFile: Array(directory.appending("tree-signed/d/3.txt").utf8))

        // Ranged extraction of one file, only after the root signature verified.
        let url = try ArchiveLocation(parsing: server.url("a.cairn"))
        try await Extractor.withExtractor(at: url, trustedKeys: [key.publicKey]) { extractor in
            #expect(try extractor.signingKeyID() == key.keyID)
            try await extractor.extractItem(atPathInArchive: "tree-signed/d/3.txt", to: URL(fileURLWithPath: directory.appending("one")))
        }
        #expect(try RawFileSystem.contents(ofFile: Array(directory.appending("one/tree-signed/d/3.txt").utf8)) == wanted)
        let unsigned = await #expect(throws: CairnError.self) {
            _ = try await Extractor(at: ArchiveLocation(parsing: server.url("plain.cairn")), trustedKeys: [key.publicKey])
        }
        #expect(unsigned?.code == .untrusted, "\(String(describing: unsigned))")
        let foreign = await #expect(throws: CairnError.self) {
            _ = try await Extractor(at: url, trustedKeys: [try TestSigningKey.otherKey().publicKey])
        }
        #expect(foreign?.code == .untrusted, "\(String(describing: foreign))")

        // A fetch whose partial copy was cut between two prefix signatures resumes after the
        // earlier one's record, and ends identical.
        let prefixes = Self.signatures(expected).filter { $0.kind == 0 }
        let target = try #require(prefixes.dropFirst().first)
        let cut = target.record.end + 1000
        let out = directory.appending("copy.cairn")
        try RawFileSystem.writeFile(Array((out + ".partial").utf8), Array(expected[0..<cut]))
        try FetchState(url: server.url("a.cairn"), validator: nil, length: UInt64(expected.count)).save(for: out)
        var options = FetchOptions()
        options.trustedKeys = [key.publicKey]
        let fetcher = ArchiveFetcher(from: url, options: options)
        let report = try await fetcher.fetch(to: .file(path: out))
        #expect(report.resumedFrom == UInt64(target.record.end), "\(report.resumedFrom), wanted \(target.record.end)")
        #expect(try RawFileSystem.contents(ofFile: Array(out.utf8)) == expected)
        // A fetch of an unsigned archive with the key keeps nothing.
        let refusedOut = directory.appending("plain-copy.cairn")
        let fetchError = await #expect(throws: CairnError.self) {
            _ = try await ArchiveFetcher(from: ArchiveLocation(parsing: server.url("plain.cairn")), options: options)
                .fetch(to: .file(path: refusedOut))
        }
        #expect(fetchError?.code == .untrusted, "\(String(describing: fetchError))")
        #expect(!FileManager.default.fileExists(atPath: refusedOut))
        #expect(!FileManager.default.fileExists(atPath: refusedOut + ".partial"))

        // S3 (rclone serve s3): the same ranged extraction.
        let s3 = try RcloneS3Server()
        defer { s3.stop() }
        let object = s3.objectPath(key: "exports/a.cairn")
        try FileManager.default.createDirectory(atPath: (object as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: object)
        var environment = s3.environment
        environment["AWS_SESSION_TOKEN"] = ""
        let location = try ArchiveLocation(try #require(URL(string: "s3://cairn/exports/a.cairn")), environment: environment)
        try await Extractor.withExtractor(at: location, trustedKeys: [key.publicKey]) { extractor in
            try await extractor.extractItem(atPathInArchive: "tree-signed/d/3.txt", to: URL(fileURLWithPath: directory.appending("s3one")))
        }
        #expect(try RawFileSystem.contents(ofFile: Array(directory.appending("s3one/tree-signed/d/3.txt").utf8)) == wanted)
        let s3Foreign = await #expect(throws: CairnError.self) {
            _ = try await Extractor(at: location, trustedKeys: [try TestSigningKey.otherKey().publicKey])
        }
        #expect(s3Foreign?.code == .untrusted, "\(String(describing: s3Foreign))")
    }
}
