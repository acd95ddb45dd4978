import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// `cairn info` and `cairn diff` on an encrypted archive (`Spec/0003-command-line.md §6, §14.5`,
/// `Spec/0004-trusted-archives.md §6.1`), with identities made by Debian's `age-keygen`.
@Suite("Encrypted archives: info and diff (command line)", .serialized)
struct EncryptedInfoDiffCommandLineTests {
    /// The envelope record of the archive at `path`, decoded by the format's own decoder from the
    /// bytes at offset 12 (`Spec/0004 §6.2`), and the outer offset of block 0.
    static func envelope(of path: String) throws -> (record: EnvelopeRecord, dataStart: Int) {
        let bytes = try RawFileSystem.contents(ofFile: Array(path.utf8))
        let record = try #require(GoldenArchive.record(in: bytes, at: 12))
        let envelope = try EnvelopeRecord.decode(payload: Array(bytes[20..<(20 + record.length)]), offset: 12)
        return (envelope, 12 + 8 + record.length + 4)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("§6.1: info without --identity prints the envelope (2 X25519 recipients, block size, archive id, inner size) and exits 0; with it, the inner header too")
    func infoEnvelope() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-info")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let (_, other) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "other")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--recipient", other, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let (record, dataStart) = try Self.envelope(of: archive)
        let fileSize = try RawFileSystem.contents(ofFile: Array(archive.utf8)).count

        let blind = try FetchCLI.run(["info", "--json", archive], in: work.path)
        try #require(blind.status == 0, "\(blind.stderr)")
        let object = try Self.json(blind.stdout)
        #expect(object["encrypted"] as? Bool == true && object["contentsReadable"] as? Bool == false)
        #expect(object["formatVersion"] as? String == "3.0")
        #expect(object["archiveBytes"] as? Int == fileSize)
        #expect(object["entryCount"] == nil && object["appIdentifier"] == nil, "no inner field without an identity")
        let encryption = try #require(object["encryption"] as? [String: Any])
        #expect(encryption["recipientCount"] as? Int == 2)
        #expect(encryption["recipientKinds"] as? [String] == ["X25519", "X25519"])
        #expect(encryption["blockSize"] as? Int == 16384)
        #expect(encryption["archiveID"] as? String == Self.hex(record.archiveID))
        let inner = try #require(encryption["innerBytes"] as? Int)
        let blocks = try #require(encryption["blockCount"] as? Int)
        #expect(blocks == (inner + 16383) / 16384)
        #expect(dataStart + inner + 40 * blocks == fileSize, "§6.3: 40 bytes of nonce and tag per block")

        let text = try FetchCLI.run(["info", archive], in: work.path)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("format:            Cairn 3.0 (encrypted)"), "\(text.stdout)")
        #expect(text.stdout.contains("recipients:        2 (2 X25519 recipients)"), "\(text.stdout)")
        #expect(text.stdout.contains("archive id:        \(Self.hex(record.archiveID))"), "\(text.stdout)")
        #expect(text.stdout.contains("--identity"), "\(text.stdout)")
        #expect(!text.stdout.contains("secret-plan") && !text.stdout.contains("data/"), "\(text.stdout)")
        // The other reading commands still refuse, and so does info asked to check a signature.
        let listed = try FetchCLI.run(["list", archive], in: work.path)
        #expect(listed.status == 1 && listed.stderr.contains("--identity"), "\(listed.stderr)")
        let pub = work.appending("k.pub")
        try #require(
            try FetchCLI.run(["key", "generate", "-W", "-p", pub, "-s", work.appending("k.key")], in: work.path).status == 0)
        let trusting = try FetchCLI.run(["info", "--trusted-key", pub, archive], in: work.path)
        #expect(trusting.status == 1 && trusting.stderr.contains("--identity"), "\(trusting.stderr)")

        let opened = try FetchCLI.run(["info", "--json", "--identity", identity, archive], in: work.path)
        try #require(opened.status == 0, "\(opened.stderr)")
        let full = try Self.json(opened.stdout)
        #expect(full["encrypted"] as? Bool == true && full["formatVersion"] as? String == "3.0")
        #expect((full["innerFormatVersion"] as? String)?.hasPrefix("2.") == true)
        #expect(full["archiveBytes"] as? Int == fileSize)
        #expect((full["entryCount"] as? Int ?? 0) > 0)
        let openedEncryption = try #require(full["encryption"] as? [String: Any])
        #expect(openedEncryption["recipientCount"] as? Int == 2 && openedEncryption["innerBytes"] as? Int == inner)
        let openedText = try FetchCLI.run(["info", "--identity", identity, archive], in: work.path)
        #expect(openedText.stdout.contains("(encrypted; inner archive 2."), "\(openedText.stdout)")
        #expect(openedText.stdout.contains("recipients:        2 (2 X25519 recipients)"), "\(openedText.stdout)")

        // A plain archive says it is not encrypted.
        let plain = work.appending("p.cairn")
        try #require(try FetchCLI.run(["create", "-q", "-o", plain, "data"], in: source).status == 0)
        let plainInfo = try Self.json(try FetchCLI.run(["info", "--json", plain], in: work.path).stdout)
        #expect(plainInfo["encrypted"] as? Bool == false && plainInfo["encryption"] is NSNull)
    }

    @Test("§6.1: info of a passphrase archive without a passphrase names one passphrase recipient")
    func infoPassphrase() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-info")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let passphraseFile = work.appending("pass.txt")
        try RawFileSystem.writeFile(Array(passphraseFile.utf8), Array("correct horse battery staple\n".utf8))
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--passphrase-file", passphraseFile, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let blind = try FetchCLI.run(["info", "--json", archive], in: work.path)
        try #require(blind.status == 0, "\(blind.stderr)")
        let encryption = try #require(try Self.json(blind.stdout)["encryption"] as? [String: Any])
        #expect(encryption["recipientKinds"] as? [String] == ["passphrase"])
    }

    @Test("§6.6, §6.7: diff --identity compares an encrypted archive with its keyed chunker and ids; without an identity it is refused")
    func diffEncrypted() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-diff")
        defer { work.remove() }
        let source = try EncryptedArchiveCommandLineTests.source(work)
        let (identity, recipient) = try EncryptedArchiveCommandLineTests.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        try #require(try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source).status == 0)

        let same = try FetchCLI.run(["diff", "--identity", identity, archive, source], in: work.path)
        #expect(same.status == 0 && same.stdout.isEmpty, "\(same.stdout) \(same.stderr)")
        try RawFileSystem.writeFile(Array((source + "/data/notes/secret-plan.txt").utf8), Array("the password is hunter2\n".utf8))
        let changed = try FetchCLI.run(["diff", "--identity", identity, archive, source], in: work.path)
        #expect(changed.status == 1, "\(changed.stderr)")
        #expect(changed.stdout.contains("M data/notes/secret-plan.txt: content"), "\(changed.stdout)")
        #expect(changed.stdout.split(separator: "\n").count == 1, "\(changed.stdout)")

        let blind = try FetchCLI.run(["diff", archive, source], in: work.path)
        #expect(blind.status == 1 && blind.stderr.contains("--identity"), "\(blind.stderr)")
        let plain = work.appending("p.cairn")
        try #require(try FetchCLI.run(["create", "-q", "-o", plain, "data"], in: source).status == 0)
        let downgrade = try FetchCLI.run(["diff", "--identity", identity, plain, source], in: work.path)
        #expect(downgrade.status == 1 && downgrade.stderr.contains("not encrypted"), "\(downgrade.stderr)")
    }
}
