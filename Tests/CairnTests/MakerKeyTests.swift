import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// A maker key file (`Spec/0004-trusted-archives.md §6.5`): `cairn key generate --maker`,
/// `cairn create --maker-key`, the derivation checked against Python `cryptography`'s HKDF and
/// the key block opened by stock `age -d`.
@Suite("Maker key files", .serialized)
struct MakerKeyTests {
    /// idKey and chunkerKey of `seed` by Python `cryptography`'s HKDF-SHA-256 (the oracle), hex.
    static func pythonMakerKeys(_ seed: [UInt8]) throws -> (idKey: String, chunkerKey: String) {
        let script = """
            import sys
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
            seed = bytes.fromhex(sys.argv[1])
            for info in (b"chunk id key", b"chunker key"):
                print(HKDF(algorithm=hashes.SHA256(), length=32, salt=b"cairn-maker-v1", info=info).derive(seed).hex())
            """
        let run = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, hex(seed)], in: "/")
        try #require(run.status == 0, "python3: \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 2)
        return (lines[0], lines[1])
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// The 97-byte secrets of `archive`'s key block, opened by stock `age -d` with `identity`.
    static func secrets(of archive: String, identity: String, in work: TemporaryDirectory) throws -> [UInt8] {
        let (record, _) = try EncryptedInfoDiffCommandLineTests.envelope(of: archive)
        let block = work.appending("keyblock-\(UUID().uuidString).age")
        try RawFileSystem.writeFile(Array(block.utf8), record.keyBlock)
        let out = block + ".plain"
        let opened = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/age"), ["-d", "-i", identity, "-o", out, block], in: work.path)
        try #require(opened.status == 0, "age -d: \(opened.stderr)")
        let secrets = try RawFileSystem.contents(ofFile: Array(out.utf8))
        try #require(secrets.count == 97 && secrets[0] == 1)
        return secrets
    }

    /// The ids of the chunk records of an encrypted archive, read with `identity`.
    static func chunkIDs(of archive: String, identity: String) async throws -> Set<Digest> {
        let decryption = ArchiveDecryption(identities: try AgeIdentity.readIdentities(fromFile: identity))
        return try await Extractor.withExtractor(at: .file(path: archive), decryption: decryption) { extractor in
            // A packed row's id is zero (`Manifest.ChunkRow`): only chunk records' ids count.
            Set(extractor.reader.manifest.chunks.map(\.id).filter { $0 != Digest.zero })
        }
    }

    @Test("§6.5: key generate --maker writes one 0600 line; create --maker-key derives idKey and chunkerKey by HKDF as Python computes them, and --maker-key wins over --sign")
    func makerKeyDerivation() throws {
        let work = try TemporaryDirectory(prefix: "cairn-maker-key")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let keyFile = work.appending("maker.key")
        let generated = try FetchCLI.run(["key", "generate", "--maker", keyFile], in: work.path)
        try #require(generated.status == 0, "\(generated.stderr)")
        var status = stat()
        #expect(stat(keyFile, &status) == 0 && status.st_mode & 0o777 == 0o600)
        let text = String(decoding: try RawFileSystem.contents(ofFile: Array(keyFile.utf8)), as: UTF8.self)
        #expect(text.hasPrefix("cairn-maker-key-v1 ") && text.hasSuffix("\n") && text.count == 19 + 44 + 1, "\(text.count)")
        let seed = try #require(Data(base64Encoded: String(text.dropFirst(19).dropLast())).map { [UInt8]($0) })
        #expect(try MakerKey.read(fromFile: keyFile).withSecretBytes { $0 } == seed)
        let again = try FetchCLI.run(["key", "generate", "--maker", keyFile], in: work.path)
        #expect(again.status == 1 && again.stderr.contains("already exists"), "\(again.stderr)")
        #expect(String(decoding: try RawFileSystem.contents(ofFile: Array(keyFile.utf8)), as: UTF8.self) == text, "nothing was written")

        let expected = try Self.pythonMakerKeys(seed)
        let archive = work.appending("m.cairn")
        let made = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--maker-key", keyFile, "-o", archive, "data"], in: source)
        try #require(made.status == 0, "\(made.stderr)")
        let secrets = try Self.secrets(of: archive, identity: identity, in: work)
        #expect(Self.hex(Array(secrets[33..<65])) == expected.idKey)
        #expect(Self.hex(Array(secrets[65..<97])) == expected.chunkerKey)

        // Signed too: the maker key still gives the keys (not the signing key's seed).
        let secret = work.appending("sign.key")
        try #require(try FetchCLI.run(["key", "generate", "-W", "-p", work.appending("sign.pub"), "-s", secret], in: work.path).status == 0)
        let signed = work.appending("s.cairn")
        let both = try FetchCLI.run(
            ["create", "-q", "--sign", secret, "--recipient", recipient, "--maker-key", keyFile, "-o", signed, "data"], in: source)
        try #require(both.status == 0, "\(both.stderr)")
        let signedSecrets = try Self.secrets(of: signed, identity: identity, in: work)
        #expect(Self.hex(Array(signedSecrets[33..<97])) == expected.idKey + expected.chunkerKey)
    }

    @Test("§6.5: two encrypted archives with one maker key share chunk ids; with another maker key they share none")
    func sharedChunkIDs() async throws {
        let work = try TemporaryDirectory(prefix: "cairn-maker-key")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let first = work.appending("one.key")
        let second = work.appending("two.key")
        try #require(try FetchCLI.run(["key", "generate", "--maker", first], in: work.path).status == 0)
        try #require(try FetchCLI.run(["key", "generate", "--maker", second], in: work.path).status == 0)
        var archives: [String] = []
        for (name, key) in [("a", first), ("b", first), ("c", second)] {
            let archive = work.appending("\(name).cairn")
            let made = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--maker-key", key, "-o", archive, "data"], in: source)
            try #require(made.status == 0, "\(made.stderr)")
            archives.append(archive)
        }
        let a = try await Self.chunkIDs(of: archives[0], identity: identity)
        let b = try await Self.chunkIDs(of: archives[1], identity: identity)
        let c = try await Self.chunkIDs(of: archives[2], identity: identity)
        #expect(!a.isEmpty && a == b, "one maker key: the same ids")
        #expect(a.isDisjoint(with: c), "another maker key: no id in common")
    }

    @Test("§6.5: --maker-key without encryption is a usage error; a group-readable (exit 2) or malformed key file is refused naming it; nothing is written")
    func makerKeyRefusals() throws {
        let work = try TemporaryDirectory(prefix: "cairn-maker-key")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let (_, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let keyFile = work.appending("maker.key")
        try #require(try FetchCLI.run(["key", "generate", "--maker", keyFile], in: work.path).status == 0)
        let archive = work.appending("x.cairn")

        let plain = try FetchCLI.run(["create", "-q", "--maker-key", keyFile, "-o", archive, "data"], in: source)
        #expect(plain.status == 2 && plain.stderr.contains("--maker-key"), "\(plain.stderr)")
        #expect(access(archive, F_OK) != 0)

        #expect(chmod(keyFile, 0o640) == 0)
        let open = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--maker-key", keyFile, "-o", archive, "data"], in: source)
        // As ssh refuses such a key: exit 2 (`Spec/0004 §2.2`, "Secret files").
        #expect(open.status == 2 && open.stderr.contains("permissions 0640 for '\(keyFile)' are too open") && open.stderr.contains("chmod 600"), "\(open.stderr)")
        #expect(access(archive, F_OK) != 0)

        let bad = work.appending("bad.key")
        try RawFileSystem.writeFile(Array(bad.utf8), Array("cairn-maker-key-v1 AAAA\n".utf8))
        #expect(chmod(bad, 0o600) == 0)
        let malformed = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--maker-key", bad, "-o", archive, "data"], in: source)
        #expect(malformed.status == 1 && malformed.stderr.contains("not a maker key file"), "\(malformed.stderr)")
        #expect(access(archive, F_OK) != 0)
        #expect(throws: CairnError.self) { try MakerKey(fileText: "cairn-maker-key-v1 " + String(repeating: "A", count: 44) + "\n\n") }
        #expect(throws: CairnError.self) { try MakerKey(secretBytes: Array(repeating: 1, count: 31)) }
    }
}
