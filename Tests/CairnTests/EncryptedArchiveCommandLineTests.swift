import CairnTestSupport
import Foundation
import Glibc
import Testing

@testable import Cairn

/// `cairn create --recipient` and `--identity` on the reading commands
/// (`Spec/0004-trusted-archives.md §6`), with identities made by Debian's `age-keygen` and the key
/// block checked by stock `age -d`: the interop oracles.
@Suite("Encrypted archives (command line)", .serialized)
struct EncryptedArchiveCommandLineTests {
    /// An identity file made by `age-keygen -o` in `directory`, and its recipient (`age-keygen -y`).
    static func identity(in directory: String, name: String) throws -> (file: String, recipient: String) {
        let file = directory + "/\(name).txt"
        let made = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/age-keygen"), ["-o", file], in: directory)
        try #require(made.status == 0, "age-keygen: \(made.stderr)")
        let shown = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/age-keygen"), ["-y", file], in: directory)
        try #require(shown.status == 0, "age-keygen -y: \(shown.stderr)")
        return (file, shown.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func source(_ work: TemporaryDirectory) throws -> String {
        let source = work.appending("src")
        var tree = SealedArchiveTests.tree()
        tree.file("notes/secret-plan.txt", Array("the password is swordfish\n".utf8))
        try tree.materialize(at: source + "/data")
        return source
    }

    @Test("§6: create --recipient with an age-keygen recipient; list, info, verify, extract (file and standard input) with --identity give back the tree; nothing is readable without it")
    func roundTrip() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try Self.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        #expect(Array(bytes[8..<12]) == [3, 0, 0, 0], "§6.2: an encrypted archive is format 3.0")
        for needle in ["secret-plan", "swordfish", "data/notes"] {
            let pattern = Array(needle.utf8)
            #expect(!bytes.indices.dropLast(pattern.count).contains { bytes[$0..<($0 + pattern.count)].elementsEqual(pattern) }, "\(needle) readable")
        }

        let listed = try FetchCLI.run(["list", "--identity", identity, archive], in: work.path)
        #expect(listed.status == 0 && listed.stdout.contains("data/notes/secret-plan.txt"), "\(listed.stderr)")
        #expect(try FetchCLI.run(["info", "--identity", identity, archive], in: work.path).status == 0)
        let verified = try FetchCLI.run(["verify", "--identity", identity, archive], in: work.path)
        #expect(verified.status == 0 && verified.stdout.hasPrefix("OK"), "\(verified.stderr)")
        let original = try TreeSnapshot(at: source + "/data")
        let extracted = try FetchCLI.run(["extract", "-q", "--identity", identity, archive, "-C", work.appending("out")], in: work.path)
        #expect(extracted.status == 0, "\(extracted.stderr)")
        #expect(try TreeSnapshot(at: work.appending("out/data")) == original)
        let streamed = try ChildProcess.run(
            FetchCLI.executable, ["extract", "-q", "--identity", identity, "-", "-C", work.appending("stream")], in: work.path,
            standardInput: archive)
        #expect(streamed.status == 0, "\(streamed.stderr)")
        #expect(try TreeSnapshot(at: work.appending("stream/data")) == original)

        let blind = try FetchCLI.run(["list", archive], in: work.path)
        #expect(blind.status == 1 && blind.stderr.contains("encrypted") && blind.stderr.contains("--identity"), "\(blind.stderr)")
    }

    @Test("§6.2 rule 1, §14.1: cat --trusted-key of an encrypted archive without an identity names --identity (not a bad header record); key files are checked before either is written (a failed -f never replaces a secret key), named as asked for, and an empty name is a usage error")
    func reviewMessages() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-messages")
        defer { work.remove() }
        let source = try Self.source(work)
        let (_, recipient) = try Self.identity(in: work.path, name: "me")
        let (pub, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--recipient", recipient, "--sign", sec, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let cat = try FetchCLI.run(["cat", "--trusted-key", pub, archive], in: work.path)
        #expect(cat.status == 1 && cat.stderr.contains("encrypted") && cat.stderr.contains("--identity") && cat.stdout.isEmpty, "\(cat.stderr)")
        let missing = work.appending("no-such-dir/maker.key")
        let maker = try FetchCLI.run(["key", "generate", "--maker", missing], in: work.path)
        #expect(maker.status == 1 && maker.stderr.contains("\(missing): its directory does not exist") && !maker.stderr.contains(".tmp"), "\(maker.stderr)")
        let empty = try FetchCLI.run(["key", "generate", "--maker", ""], in: work.path)
        #expect(empty.status == 2 && empty.stderr.contains("--maker needs a file name"), "\(empty.stderr)")
        // A key pair whose public half cannot be written is refused before the secret half is
        // replaced: an existing secret key is never lost to a failed -f.
        let pair = try FetchCLI.run(["key", "generate", "-W", "-p", work.appending("pub"), "-s", work.appending("sec")], in: work.path)
        try #require(pair.status == 0, "\(pair.stderr)")
        let secret = try RawFileSystem.contents(ofFile: Array(work.appending("sec").utf8))
        try FileManager.default.createDirectory(atPath: work.appending("adir"), withIntermediateDirectories: false)
        let replaced = try FetchCLI.run(["key", "generate", "-W", "-f", "-p", work.appending("adir"), "-s", work.appending("sec")], in: work.path)
        #expect(replaced.status == 1 && replaced.stderr.contains("is a directory"), "\(replaced.stderr)")
        #expect(try RawFileSystem.contents(ofFile: Array(work.appending("sec").utf8)) == secret, "the secret key was replaced")
    }

    @Test("§6.3 Opening 1: extract - of an archive whose middle block was altered is refused with exit 1 naming the block, and leaves no staging directory (damage is not a cut to resume); one cut short keeps its staging directory for --resume")
    func streamedDamageIsNotKept() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-damage")
        defer { work.remove() }
        let source = try Self.source(work)
        var generator = SeededGenerator(seed: 0xDA4A6E)
        try RawFileSystem.writeFile(Array((source + "/data/big.bin").utf8), generator.bytes(300_000))
        let (identity, recipient) = try Self.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        let created = try FetchCLI.run(["create", "-q", "--compression", "none", "--recipient", recipient, "-o", archive, "data"], in: source)
        try #require(created.status == 0, "\(created.stderr)")
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let (dataStart, sealedSize) = try EncryptedFetchTests.blocks(of: bytes)
        try #require(UInt64(bytes.count) > dataStart + 12 * sealedSize)
        var altered = bytes
        altered[Int(dataStart + 9 * sealedSize + 500)] ^= 0x04
        let cases: [(name: String, bytes: [UInt8], keepsStaging: Bool, says: String)] = [
            ("altered", altered, false, "sealed block 9 fails authentication"),
            ("cut", Array(bytes[0..<Int(dataStart + 11 * sealedSize + 700)]), true, "--resume"),
        ]
        for test in cases {
            let input = work.appending("\(test.name).cairn")
            try RawFileSystem.writeFile(Array(input.utf8), test.bytes)
            let destination = work.appending("out-\(test.name)")
            let result = try ChildProcess.run(
                FetchCLI.executable, ["extract", "-q", "--identity", identity, "-", "-C", destination], in: work.path, standardInput: input)
            #expect(result.status == 1 && result.stderr.contains(test.says), "\(test.name): \(result.stderr)")
            #expect(!EncryptedFetchTests.exists(destination), "\(test.name): the destination appeared")
            let staging = work.appending(".out-\(test.name).cairn-staging")
            #expect(EncryptedFetchTests.exists(staging) == test.keepsStaging, "\(test.name): staging kept \(EncryptedFetchTests.exists(staging))")
        }
    }

    @Test("§6.4: stock age -d opens the key block with the age-keygen identity: 97 bytes of version 1, the block key the archive was sealed with")
    func keyBlockOpensWithStockAge() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try Self.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        try #require(try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source).status == 0)
        let bytes = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        let record = try #require(GoldenArchive.record(in: bytes, at: 12))
        #expect(record.type == RecordType.envelope.rawValue)
        let envelope = try EnvelopeRecord.decode(payload: Array(bytes[20..<(20 + record.length)]), offset: 12)
        try RawFileSystem.writeFile(Array(work.appending("keyblock.age").utf8), envelope.keyBlock)
        let opened = try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/age"), ["-d", "-i", identity, "-o", work.appending("secrets"), work.appending("keyblock.age")],
            in: work.path)
        try #require(opened.status == 0, "age -d: \(opened.stderr)")
        let plaintext = try RawFileSystem.contents(ofFile: Array(work.appending("secrets").utf8))
        let secrets = try ArchiveSecrets.decode(plaintext)
        // The block key age gave back opens the archive's first block.
        let layout = try SealedBlockLayout(dataStart: UInt64(20 + record.length + 4), blockSize: UInt64(envelope.blockSize), outerSize: UInt64(bytes.count))
        let sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        let first = layout.outerRange(of: 0)
        var inner = [UInt8](repeating: 0, count: first.count - BlockSealer.overhead)
        let ok = Array(bytes[Int(first.lowerBound)..<Int(first.upperBound)]).withUnsafeBytes { sealed in
            inner.withUnsafeMutableBytes { sealer.open(sealed, index: 0, isFinal: layout.blockCount == 1, into: $0) }
        }
        #expect(ok)
        #expect(Array(inner[0..<12]) == Prelude.magic + [2, 0, 1, 0], "the inner archive is a 2.1 archive")
    }

    @Test("§6.2, §6.4: a stranger's identity, a plain archive given --identity, a passphrase where recipients are: refused with exit 1, nothing extracted")
    func refusals() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (_, recipient) = try Self.identity(in: work.path, name: "me")
        let (stranger, _) = try Self.identity(in: work.path, name: "stranger")
        let archive = work.appending("e.cairn")
        try #require(try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source).status == 0)
        let foreign = try FetchCLI.run(["extract", "-q", "--identity", stranger, archive, "-C", work.appending("x")], in: work.path)
        #expect(foreign.status == 1 && foreign.stderr.contains("no identity matches"), "\(foreign.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appending("x/data")))
        let foreignStream = try ChildProcess.run(
            FetchCLI.executable, ["extract", "-q", "--identity", stranger, "-", "-C", work.appending("y")], in: work.path,
            standardInput: archive)
        #expect(foreignStream.status == 1 && foreignStream.stderr.contains("no identity matches"), "\(foreignStream.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appending("y/data")))

        let plain = work.appending("p.cairn")
        try #require(try FetchCLI.run(["create", "-q", "-o", plain, "data"], in: source).status == 0)
        let mine = work.appending("me.txt")
        let downgraded = try FetchCLI.run(["extract", "-q", "--identity", mine, plain, "-C", work.appending("z")], in: work.path)
        #expect(downgraded.status == 1 && downgraded.stderr.contains("not encrypted"), "\(downgraded.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appending("z/data")))

        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: work.appending("pass")))
        let both = try FetchCLI.run(
            ["create", "-q", "--recipient", recipient, "--passphrase-file", work.appending("pass"), "-o", work.appending("b.cairn"), "data"],
            in: source)
        #expect(both.status == 2, "\(both.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appending("b.cairn")))
    }

    @Test("§6.2 rules 1-3, §6.4.3: a fresh user's option mistakes: extract --passphrase is known; --passphrase without a terminal names --passphrase-file; both passphrase options are a usage error; a minisign key given to --identity is not an age identity; a bad --recipient is repeated; a version-4 prelude with --identity is unsupportedVersion; an extra operand is refused")
    func optionMistakes() throws {
        let work = try TemporaryDirectory(prefix: "cairn-encrypt-cli")
        defer { work.remove() }
        let source = try Self.source(work)
        let (identity, recipient) = try Self.identity(in: work.path, name: "me")
        let archive = work.appending("e.cairn")
        try #require(try FetchCLI.run(["create", "-q", "--recipient", recipient, "-o", archive, "data"], in: source).status == 0)

        // setsid --wait: no controlling terminal, so /dev/tty cannot be opened, as under cron or CI.
        let noTerminal = try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/setsid"), ["--wait", FetchCLI.executable.path, "extract", archive, "-C", work.appending("out"), "--passphrase"],
            in: work.path)
        #expect(noTerminal.status == 1 && noTerminal.stderr.contains("--passphrase-file"), "\(noTerminal.stderr)")
        #expect(!noTerminal.stderr.contains("CAIRN_KEY_PASSWORD_FILE"), "\(noTerminal.stderr)")
        try RawFileSystem.writeFile(Array(work.appending("pass.txt").utf8), Array("a passphrase\n".utf8))
        let both = try FetchCLI.run(["list", archive, "--passphrase-file", work.appending("pass.txt"), "--passphrase"], in: work.path)
        #expect(both.status == 2 && both.stderr.contains("not both"), "\(both.stderr)")

        let (_, sec) = try SignedCreateCommandLineTests.minisignKeys(in: work.path, name: "maker")
        let minisignKey = try FetchCLI.run(["list", archive, "--identity", sec], in: work.path)
        #expect(minisignKey.status == 1 && minisignKey.stderr.contains("not an age identity (AGE-SECRET-KEY-1"), "\(minisignKey.stderr)")
        #expect(!minisignKey.stderr.contains("Bech32"), "\(minisignKey.stderr)")
        let badRecipient = try FetchCLI.run(["create", "-q", "--recipient", "age1qqqq", "-o", work.appending("x.cairn"), "data"], in: source)
        #expect(badRecipient.status == 1 && badRecipient.stderr.contains("'age1qqqq'"), "\(badRecipient.stderr)")

        // Rule 2: another major is unsupportedVersion, identities given or not (a plain 4.0 is
        // not "not encrypted").
        var future = try RawFileSystem.contents(ofFile: Array(archive.utf8))
        future[8] = 4
        try RawFileSystem.writeFile(Array(work.appending("v4.cairn").utf8), future)
        for extra in [["--identity", identity], []] {
            let read = try FetchCLI.run(["list", work.appending("v4.cairn")] + extra, in: work.path)
            #expect(read.status == 1 && read.stderr.contains("version 4.0 is not supported") && read.stderr.contains("3.x"), "\(read.stderr)")
        }

        // cat sends stored bytes, but given identities it opens the key block first: a plain
        // archive or an identity that does not open it is refused, and nothing is sent.
        let plain = work.appending("p.cairn")
        try #require(try FetchCLI.run(["create", "-q", "-o", plain, "data"], in: source).status == 0)
        let (other, _) = try Self.identity(in: work.path, name: "other")
        for (file, who, says) in [(plain, identity, "not encrypted"), (archive, other, "no identity")] {
            let cat = try FetchCLI.run(["cat", file, "--identity", who], in: work.path)
            #expect(cat.status == 1 && cat.stderr.contains(says) && cat.stdout.isEmpty, "\(cat.stderr)")
        }
        #expect(try FetchCLI.run(["cat", archive, "--identity", identity], in: work.path).status == 0)

        // An operand after ARCHIVE is refused where the command takes one ARCHIVE (it used to be
        // ignored: verify said OK, cat sent the whole archive).
        for command in ["list", "info", "verify", "cat"] {
            let extra = try FetchCLI.run([command, archive, "data/a.txt", "--identity", identity], in: work.path)
            #expect(extra.status == 2 && extra.stderr.contains("unexpected operand 'data/a.txt'"), "\(command): \(extra.stderr)")
            #expect(extra.stdout.isEmpty, "\(command) wrote \(extra.stdout.count) characters")
        }
    }
}
