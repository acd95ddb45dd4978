import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// Pins format 3.0 (`Spec/0004-trusted-archives.md §6`) with `Fixtures/golden-v3.0.cairn`: a
/// seeded tree (``tree()``) written once by the archiver, signed with the published test key
/// (``TestSigningKey``) and encrypted for the vectors' X25519 identity (the 32 bytes `60 … 7f`,
/// `Fixtures/golden-v3.0.identity`; the test key's public key is `Fixtures/golden-v3.0.pub`).
/// Its nonces, file key and ephemeral share are random, so the writer cannot reproduce its bytes:
/// the file is kept, and every future reader must read it, with the same contents and the same
/// inner chain digest. To write it again after a deliberate change of format:
///
/// ```
/// CAIRN_UPDATE_GOLDEN=1 swift test --disable-xctest --filter GoldenArchiveV30Tests
/// ```
///
/// then update ``pinnedDigest`` and ``pinnedChainDigest``.
@Suite("Golden archive 3.0 (signed and encrypted)")
struct GoldenArchiveV30Tests {
    /// SHA-256 of `Fixtures/golden-v3.0.cairn`.
    static let pinnedDigest = "818a40b657904ac45db24685d52e5deb043502cafdb4436333e471a70816c2ab"
    /// The inner archive's final chain digest, as its footer records it (`Spec/0001 §10.3`).
    static let pinnedChainDigest = "7036cafe447ddca7e7971096666a8277d2059136653b92f925b823bcf390b2fa"

    static var sourceFixtures: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures") }

    static func fixture(_ name: String) throws -> String {
        let url = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"),
            "Fixtures/\(name) is missing from the test bundle; generate it with CAIRN_UPDATE_GOLDEN=1")
        // The identity is a secret file (`Spec/0004 §2.2`): its copy in the test bundle is made
        // owner-only, as a checkout cannot record it.
        if name.hasSuffix(".identity") { chmod(url.path, 0o600) }
        return url.path
    }

    static func identitySecret() -> [UInt8] { (0..<32).map { 0x60 + UInt8($0) } }

    /// The archived tree: text, a seeded binary file across several blocks, an empty file, a
    /// symlink and a directory.
    static func tree() -> TreeBuilder {
        var generator = SeededGenerator(seed: 0x0CA1_12B6_0300)
        var tree = TreeBuilder()
        tree.directory("golden3")
        tree.file("golden3/readme.txt", Array("a signed and encrypted Cairn 3.0 archive\n".utf8))
        tree.file("golden3/data.bin", generator.bytes(70_000))
        tree.file("golden3/empty", [])
        tree.symlink("golden3/link", target: "readme.txt")
        tree.directory("golden3/sub")
        for number in 0..<5 { tree.file("golden3/sub/\(number).txt", generator.bytes(100 + 50 * number)) }
        return tree
    }

    /// Writes the fixture and its key files next to this source.
    static func regenerate() async throws {
        let directory = try TemporaryDirectory(prefix: "cairn-golden3")
        defer { directory.remove() }
        try tree().materialize(at: directory.appending("golden3-src"))
        let identity = try AgeIdentity(secretBytes: identitySecret())
        var configuration = Archiver.Configuration()
        configuration.signingKey = try TestSigningKey.key()
        configuration.encryption = ArchiveEncryption(recipients: [identity.recipient])
        configuration.sourcePlatform = "Linux x86_64"
        configuration.workerCount = 1
        let path = directory.appending("g.cairn")
        let archiver = try await Archiver(writingTo: .file(path: path), configuration: configuration)
        try await archiver.appendItem(at: URL(fileURLWithPath: directory.appending("golden3-src/golden3")), pathInArchive: "golden3")
        _ = try await archiver.finish()
        try FileManager.default.createDirectory(at: sourceFixtures, withIntermediateDirectories: true)
        try Data(contentsOf: URL(fileURLWithPath: path)).write(to: sourceFixtures.appendingPathComponent("golden-v3.0.cairn"))
        try Data(("# the X25519 identity of Spec/0004's 3.0 vectors (32 bytes 60 … 7f): tests only\n" + identity.secretKeyText + "\n").utf8)
            .write(to: sourceFixtures.appendingPathComponent("golden-v3.0.identity"))
        try Data(("untrusted comment: the Cairn test key (Spec/0004, Test vectors): tests only\n" + (try TestSigningKey.key().publicKey.minisignBase64) + "\n").utf8)
            .write(to: sourceFixtures.appendingPathComponent("golden-v3.0.pub"))
    }

    static func keys() throws -> (trusted: [PublicKey], decryption: ArchiveDecryption) {
        (
            try PublicKey.readKeys(fromFile: fixture("golden-v3.0.pub")),
            ArchiveDecryption(identities: try AgeIdentity.readIdentities(fromFile: fixture("golden-v3.0.identity")))
        )
    }

    @Test("the fixture is the pinned bytes: a 3.0 prelude and envelope whose key block names one X25519 recipient, the vectors' identity's")
    func pinnedBytes() async throws {
        if ProcessInfo.processInfo.environment["CAIRN_UPDATE_GOLDEN"] == "1" { try await Self.regenerate() }
        let bytes = try RawFileSystem.contents(ofFile: Array(try Self.fixture("golden-v3.0.cairn").utf8))
        #expect(try SHA256.hash(bytes).description == Self.pinnedDigest)
        #expect(Array(bytes[0..<12]) == EnvelopeRecord.prelude)
        #expect(bytes[12] == RecordType.envelope.rawValue)
        let (trusted, decryption) = try Self.keys()
        #expect(trusted.map(\.keyID) == [try TestSigningKey.key().keyID])
        #expect(decryption.identities.map(\.recipient) == [try AgeIdentity(secretBytes: Self.identitySecret()).recipient])
    }

    @Test("Spec/0004 §6.2-§6.4, §4.3: read with the identity and the trusted key: signed by the test key, the pinned entries and inner chain digest, verified front to back, extracted equal to the tree it was made from")
    func readsWithIdentityAndTrustedKey() async throws {
        let path = try Self.fixture("golden-v3.0.cairn")
        let (trusted, decryption) = try Self.keys()
        let directory = try TemporaryDirectory(prefix: "cairn-golden3-read")
        defer { directory.remove() }
        try await Extractor.withExtractor(at: .file(path: path), trustedKeys: trusted, decryption: decryption) { extractor in
            #expect(try extractor.signingKeyID() == (try TestSigningKey.key().keyID))
            #expect(extractor.formatVersion.major == 2, "the inner archive is 2.x: \(extractor.formatVersion)")
            let listed = extractor.entries.map(\.path).sorted()
            #expect(
                listed == [
                    "golden3", "golden3/data.bin", "golden3/empty", "golden3/link", "golden3/readme.txt", "golden3/sub", "golden3/sub/0.txt",
                    "golden3/sub/1.txt", "golden3/sub/2.txt", "golden3/sub/3.txt", "golden3/sub/4.txt",
                ])
            try await extractor.extractAll(to: URL(fileURLWithPath: directory.appending("out")))
        }
        try Self.tree().materialize(at: directory.appending("expected"))
        #expect(try TreeSnapshot(at: directory.appending("out/golden3")) == TreeSnapshot(at: directory.appending("expected/golden3")))
        let report = try await Extractor.verifyArchive(at: .file(path: path), trustedKeys: trusted, decryption: decryption)
        #expect(report.entryCount == 11)

        // The inner archive's final chain digest, from its footer (`Spec/0001 §12`: 88 bytes in).
        let source = try decryption.open(LocalArchiveSource(path: path))
        defer { source.close() }
        var inner = [UInt8](repeating: 0, count: Int(source.size))
        var done = 0
        while done < inner.count {
            let read = try inner.withUnsafeMutableBytes { try source.read(fromAbsoluteOffset: UInt64(done), into: UnsafeMutableRawBufferPointer(rebasing: $0[done...])) }
            try #require(read > 0)
            done += read
        }
        let footer = try #require(TrustedArchiveHostileTests.Reframe.records(inner).last)
        #expect(footer.type == RecordType.footer.rawValue)
        let digest = inner[(footer.payload.lowerBound + 88)..<(footer.payload.lowerBound + 120)]
        #expect(digest.map { String(format: "%02x", $0) }.joined() == Self.pinnedChainDigest)
    }

    @Test("Spec/0003, Spec/0004 §6: the cairn command reads the fixture with --identity and --trusted-key (list, verify, extract, and extract - from standard input), and without --identity refuses it, exit 1, nothing extracted")
    func commandLine() throws {
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL)
        let (archive, identity, key) = (try Self.fixture("golden-v3.0.cairn"), try Self.fixture("golden-v3.0.identity"), try Self.fixture("golden-v3.0.pub"))
        let directory = try TemporaryDirectory(prefix: "cairn-golden3-cli")
        defer { directory.remove() }
        let keys = ["--identity", identity, "--trusted-key", key]
        let listed = try ChildProcess.run(cairn, ["list"] + keys + [archive], in: directory.path)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("golden3/sub/4.txt") && listed.stdout.contains("golden3/data.bin"), "\(listed.stdout)")
        let verified = try ChildProcess.run(cairn, ["verify"] + keys + [archive], in: directory.path)
        #expect(verified.status == 0, "\(verified.stderr)")
        let extracted = try ChildProcess.run(cairn, ["extract"] + keys + [archive, "-C", "out"], in: directory.path)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        let piped = try ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "\"$0\" extract --identity \"$1\" --trusted-key \"$2\" - -C piped < \"$3\"", cairn.path, identity, key, archive],
            in: directory.path)
        #expect(piped.status == 0, "\(piped.stderr)")
        try Self.tree().materialize(at: directory.appending("expected"))
        let expected = try TreeSnapshot(at: directory.appending("expected/golden3"))
        #expect(try TreeSnapshot(at: directory.appending("out/golden3")) == expected)
        #expect(try TreeSnapshot(at: directory.appending("piped/golden3")) == expected)
        let blind = try ChildProcess.run(cairn, ["extract", "--trusted-key", key, archive, "-C", "blind"], in: directory.path)
        #expect(blind.status == 1 && blind.stderr.contains("encrypted"), "\(blind.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("blind/golden3")))
    }

    @Test("Spec/0004 §6.2 rule 1: without an identity the fixture is refused as untrusted at offset 8 (its major version), by the seekable and the stream reader")
    func refusedWithoutIdentity() async throws {
        let path = try Self.fixture("golden-v3.0.cairn")
        let (trusted, _) = try Self.keys()
        for keys in [[], trusted] {
            let seekable = await #expect(throws: CairnError.self) { _ = try await Extractor(at: .file(path: path), trustedKeys: keys) }
            #expect(seekable?.code == .untrusted && seekable?.offset == 8, "\(String(describing: seekable))")
            #expect(seekable?.message.contains("--identity") == true || seekable?.message.contains("identity") == true)
            let stream = await #expect(throws: CairnError.self) { _ = try await Extractor.verifyArchive(at: .file(path: path), trustedKeys: keys) }
            #expect(stream?.code == .untrusted && stream?.offset == 8, "\(String(describing: stream))")
        }
        // Another identity opens nothing.
        let other = ArchiveDecryption(identities: [try AgeIdentity(secretBytes: [UInt8](repeating: 0x43, count: 32))])
        let wrong = await #expect(throws: CairnError.self) { _ = try await Extractor(at: .file(path: path), decryption: other) }
        #expect(wrong?.code == .untrusted, "\(String(describing: wrong))")
    }
}
