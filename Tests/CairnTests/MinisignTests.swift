import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// minisign's key and signature files, with Debian's `minisign` 0.11 as the oracle
/// (`Spec/0004-trusted-archives.md §2`). Serialized: a password-protected key costs scrypt 1 GiB.
@Suite("minisign keys and signatures", .serialized)
struct MinisignTests {
    /// Runs `minisign arguments` with `input` on its standard input (minisign reads passwords
    /// there when it is not a terminal).
    static func minisign(_ arguments: [String], input: String = "", in directory: TemporaryDirectory) throws
        -> ChildProcess.Result
    {
        let inputFile = directory.appending(".minisign-input-\(UUID().uuidString)")
        try Data(input.utf8).write(to: URL(fileURLWithPath: inputFile))
        defer { unlink(inputFile) }
        return try ChildProcess.run(
            URL(fileURLWithPath: minisignPath), arguments, in: directory.path, standardInput: inputFile)
    }

    static let minisignPath = "/usr/bin/minisign"
    static let minisignMissing = !FileManager.default.isExecutableFile(atPath: minisignPath)
    static let skipReason: Comment = "Debian's minisign is not installed (make deps installs it)"

    static func text(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.1, §2.2: keys made by minisign -G -W load, and the public halves agree",
        .disabled(if: minisignMissing, skipReason))
    func minisignKeysWithoutPassword() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let result = try Self.minisign(["-G", "-W", "-p", "k.pub", "-s", "k.key"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let publicKeys = try PublicKey.readKeys(fromFile: directory.appending("k.pub"))
        #expect(publicKeys.count == 1)
        #expect(try !SigningKey.secretKeyFileNeedsPassword(directory.appending("k.key")))
        let key = try SigningKey.read(secretKeyFile: directory.appending("k.key"), password: nil)
        #expect(key.publicKey == publicKeys.first)
        // The comment line names the id as minisign prints it.
        #expect(try Self.text(directory.appending("k.pub")).hasPrefix("untrusted comment: minisign public key \(key.keyID)\n"))
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.2: a key made by minisign -G with a password loads with it, and a wrong password is refused by name",
        .disabled(if: minisignMissing, skipReason))
    func minisignKeyWithPassword() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let result = try Self.minisign(["-G", "-p", "k.pub", "-s", "k.key"], input: "correct horse\ncorrect horse\n", in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let path = directory.appending("k.key")
        #expect(try SigningKey.secretKeyFileNeedsPassword(path))
        let key = try SigningKey.read(secretKeyFile: path, password: Array("correct horse".utf8))
        #expect(try [key.publicKey] == PublicKey.readKeys(fromFile: directory.appending("k.pub")))
        let wrong = #expect(throws: CairnError.self) {
            try SigningKey.read(secretKeyFile: path, password: Array("correct horsf".utf8))
        }
        #expect(wrong?.code == .invalidArgument)
        #expect(wrong?.description == "\(path): wrong password for secret key")
        #expect(throws: CairnError.self) { try SigningKey.read(secretKeyFile: path, password: nil) }
    }

    static func cairn(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) throws
        -> ChildProcess.Result
    {
        try ChildProcess.run(
            ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL), arguments, in: directory.path,
            environment: environment)
    }

    static func write(_ text: String, _ name: String, in directory: TemporaryDirectory) throws {
        try Data(text.utf8).write(to: directory.url(appending: name))
    }

    static func bytes(_ name: String, in directory: TemporaryDirectory) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.url(appending: name)))
    }

    /// Deterministic file contents, `count` bytes.
    static func seededBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return generator.bytes(count)
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.1–§2.4: cairn key generate -W keys sign with minisign -S and check with minisign -V and cairn verify --minisig",
        .disabled(if: minisignMissing, skipReason))
    func cairnKeysWorkWithMinisign() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let generated = try Self.cairn(["key", "generate", "-p", "k.pub", "-s", "k.key", "-W"], in: directory)
        #expect(generated.status == 0, "\(generated.stderr)")
        var status = stat()
        #expect(stat(directory.appending("k.key"), &status) == 0 && status.st_mode & 0o777 == 0o600)
        try Data(Self.seededBytes(200_000, seed: 1)).write(to: directory.url(appending: "a.cairn"))
        let signed = try Self.minisign(["-S", "-s", "k.key", "-m", "a.cairn"], in: directory)
        #expect(signed.status == 0, "\(signed.stderr)")
        let checked = try Self.minisign(["-V", "-p", "k.pub", "-m", "a.cairn"], in: directory)
        #expect(checked.status == 0, "\(checked.stderr)")
        let verified = try Self.cairn(["verify", "--minisig", "a.cairn", "-p", "k.pub"], in: directory)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("Trusted comment: timestamp:"))
        #expect(verified.stdout.contains("\tfile:a.cairn\thashed"))
        // Existing keys are kept without -f, and replaced with it.
        let again = try Self.cairn(["key", "generate", "-p", "k.pub", "-s", "other.key", "-W"], in: directory)
        #expect(again.status == 1)
        #expect(again.stderr.contains("k.pub: already exists"))
        #expect(!FileManager.default.fileExists(atPath: directory.appending("other.key")))
        let forced = try Self.cairn(["key", "generate", "-p", "k.pub", "-s", "k.key", "-W", "-f"], in: directory)
        #expect(forced.status == 0, "\(forced.stderr)")
        // The new key did not make the old signature.
        let stale = try Self.cairn(["verify", "--minisig", "a.cairn", "-p", "k.pub"], in: directory)
        #expect(stale.status == 1)
        #expect(stale.stderr.contains("not by the trusted key"))
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.2, §2.4: cairn sign with a password-protected cairn key verifies with minisign -V; minisign -S with it verifies with cairn",
        .disabled(if: minisignMissing, skipReason))
    func encryptedCairnKeyWithMinisign() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Self.write("pass word\n", "pw", in: directory)
        let environment = ["CAIRN_KEY_PASSWORD_FILE": directory.appending("pw")]
        let generated = try Self.cairn(["key", "generate", "-p", "k.pub", "-s", "k.key"], in: directory, environment: environment)
        #expect(generated.status == 0, "\(generated.stderr)")
        #expect(try Self.text(directory.appending("k.key")).hasPrefix("untrusted comment: minisign encrypted secret key\n"))
        try Data(Self.seededBytes(100_000, seed: 2)).write(to: directory.url(appending: "a.cairn"))
        let signed = try Self.cairn(["sign", "-s", "k.key", "a.cairn"], in: directory, environment: environment)
        #expect(signed.status == 0, "\(signed.stderr)")
        let checked = try Self.minisign(["-V", "-p", "k.pub", "-m", "a.cairn"], in: directory)
        #expect(checked.status == 0, "\(checked.stderr)")
        // minisign decrypts cairn's key with the same password.
        let minisigned = try Self.minisign(["-S", "-s", "k.key", "-m", "a.cairn", "-x", "m.minisig"], input: "pass word\n", in: directory)
        #expect(minisigned.status == 0, "\(minisigned.stderr)")
        let verified = try Self.cairn(["verify", "--minisig", "a.cairn", "-p", "k.pub", "-x", "m.minisig"], in: directory)
        #expect(verified.status == 0, "\(verified.stderr)")
        // A wrong password is named, and nothing is signed.
        try Self.write("pass wort\n", "pw", in: directory)
        let wrong = try Self.cairn(["sign", "-s", "k.key", "-x", "w.minisig", "a.cairn"], in: directory, environment: environment)
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("k.key: wrong password for secret key"), "\(wrong.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("w.minisig")))
        // Without a password file and without a terminal, the refusal says what to do.
        let noTerminal = try Self.cairn(["sign", "-s", "k.key", "-x", "w.minisig", "a.cairn"], in: directory, environment: ["CAIRN_KEY_PASSWORD_FILE": ""])
        #expect(noTerminal.status == 1)
        #expect(noTerminal.stderr.contains("CAIRN_KEY_PASSWORD_FILE"), "\(noTerminal.stderr)")
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.4: minisign -S signatures, prehashed and legacy, verify in cairn; a changed file, signature, comment or key is refused",
        .disabled(if: minisignMissing, skipReason))
    func minisignSignaturesAndRefusals() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for name in ["k", "other"] {
            let made = try Self.minisign(["-G", "-W", "-p", "\(name).pub", "-s", "\(name).key"], in: directory)
            #expect(made.status == 0, "\(made.stderr)")
        }
        let original = Self.seededBytes(70_000, seed: 3)
        try Data(original).write(to: directory.url(appending: "a.cairn"))
        #expect(try Self.minisign(["-S", "-s", "k.key", "-m", "a.cairn"], in: directory).status == 0)
        #expect(try Self.minisign(["-S", "-l", "-s", "k.key", "-m", "a.cairn", "-x", "legacy.minisig"], in: directory).status == 0)
        let keys = try PublicKey.readKeys(fromFile: directory.appending("k.pub"))
        let others = try PublicKey.readKeys(fromFile: directory.appending("other.pub"))
        let path = directory.appending("a.cairn")
        let prehashed = try MinisignSignature.verify(fileAt: path, trustedKeys: keys)
        #expect(prehashed.isPrehashed && prehashed.trustedComment.hasSuffix("\tfile:a.cairn\thashed"))
        let legacy = try MinisignSignature.verify(fileAt: path, signatureFile: directory.appending("legacy.minisig"), trustedKeys: keys)
        #expect(!legacy.isPrehashed)

        // Another key: .untrusted, naming both ids.
        let untrusted = #expect(throws: CairnError.self) { try MinisignSignature.verify(fileAt: path, trustedKeys: others) }
        #expect(untrusted?.code == .untrusted)
        #expect(untrusted?.message == "signed by key \(keys[0].keyID), not by the trusted key \(others[0].keyID)")
        // A file of both keys accepts it.
        try Self.write(Self.text(directory.appending("other.pub")) + "\n" + Self.text(directory.appending("k.pub")), "both.pub", in: directory)
        #expect(try PublicKey.readKeys(fromFile: directory.appending("both.pub")).count == 2)
        #expect(try Self.cairn(["verify", "--minisig", "a.cairn", "-p", "both.pub"], in: directory).status == 0)

        // A flipped byte in the file: both signature forms refuse it, and minisign agrees.
        var changed = original
        changed[12_345] ^= 0x01
        try Data(changed).write(to: directory.url(appending: "a.cairn"))
        for signature in ["a.cairn.minisig", "legacy.minisig"] {
            let refused = #expect(throws: CairnError.self) {
                try MinisignSignature.verify(fileAt: path, signatureFile: directory.appending(signature), trustedKeys: keys)
            }
            #expect(refused?.code == .checksumMismatch)
        }
        #expect(try Self.minisign(["-V", "-p", "k.pub", "-m", "a.cairn"], in: directory).status != 0)
        let cli = try Self.cairn(["verify", "--minisig", "a.cairn", "-p", "k.pub"], in: directory)
        #expect(cli.status == 1)
        #expect(cli.stderr.contains("a.cairn.minisig: the signature by key \(keys[0].keyID) does not match the file"), "\(cli.stderr)")
        try Data(original).write(to: directory.url(appending: "a.cairn"))

        // A changed trusted comment, and a flipped bit in the signature line.
        let text = try Self.text(directory.appending("a.cairn.minisig"))
        try Self.write(text.replacingOccurrences(of: "file:a.cairn", with: "file:b.cairn"), "comment.minisig", in: directory)
        let comment = #expect(throws: CairnError.self) {
            try MinisignSignature.verify(fileAt: path, signatureFile: directory.appending("comment.minisig"), trustedKeys: keys)
        }
        #expect(comment?.code == .checksumMismatch)
        #expect(comment?.message.contains("trusted comment") == true)
        var lines = text.split(separator: "\n").map(String.init)
        var signatureBytes = Array(Data(base64Encoded: lines[1]) ?? Data())
        signatureBytes[40] ^= 0x80
        lines[1] = Data(signatureBytes).base64EncodedString()
        try Self.write(lines.joined(separator: "\n") + "\n", "flipped.minisig", in: directory)
        let flipped = #expect(throws: CairnError.self) {
            try MinisignSignature.verify(fileAt: path, signatureFile: directory.appending("flipped.minisig"), trustedKeys: keys)
        }
        #expect(flipped?.code == .checksumMismatch)
        #expect(try Self.minisign(["-V", "-p", "k.pub", "-m", "a.cairn", "-x", "flipped.minisig"], in: directory).status != 0)
    }

    @Test(
        "Spec/0004-trusted-archives.md §2.4: cairn sign writes what minisign -V accepts, and keeps an existing .minisig without -f",
        .disabled(if: minisignMissing, skipReason))
    func cairnSignVerifiesWithMinisign() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(try Self.minisign(["-G", "-W", "-p", "k.pub", "-s", "k.key"], in: directory).status == 0)
        try Data(Self.seededBytes(1 << 20, seed: 4)).write(to: directory.url(appending: "name with space.cairn"))
        let signed = try Self.cairn(["sign", "-s", "k.key", "name with space.cairn"], in: directory)
        #expect(signed.status == 0, "\(signed.stderr)")
        let checked = try Self.minisign(["-V", "-p", "k.pub", "-m", "name with space.cairn"], in: directory)
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.contains("\tfile:name with space.cairn\thashed"))
        let before = try Self.bytes("name with space.cairn.minisig", in: directory)
        let again = try Self.cairn(["sign", "-s", "k.key", "name with space.cairn"], in: directory)
        #expect(again.status == 1)
        #expect(again.stderr.contains("already exists"))
        #expect(try Self.bytes("name with space.cairn.minisig", in: directory) == before)
        #expect(try Self.cairn(["sign", "-f", "-s", "k.key", "name with space.cairn"], in: directory).status == 0)
        // Usage mistakes are exit 2.
        #expect(try Self.cairn(["sign", "name with space.cairn"], in: directory).status == 2)
        #expect(try Self.cairn(["verify", "--minisig", "name with space.cairn"], in: directory).status == 2)
        #expect(try Self.cairn(["key", "generate", "-p", "x.pub"], in: directory).status == 2)
        #expect(try Self.cairn(["verify", "x.cairn", "-p", "k.pub"], in: directory).status == 2)
    }

    @Test("Spec/0004-trusted-archives.md §2.2: an encrypted secret key round-trips; a wrong password, truncation or a flipped byte is refused")
    func secretKeyRoundTrip() throws {
        let key = try SigningKey(keyID: SigningKeyID(bytes: [8, 7, 6, 5, 4, 3, 2, 1]), seed: Self.seededBytes(32, seed: 5))
        // Small scrypt limits keep the test fast; the layout is the same.
        let text = Array(try key.minisignSecretKeyText(password: Array("pw".utf8), opsLimit: 1 << 15, memoryLimit: 1 << 20).utf8)
        let loaded = try SigningKey(minisignSecretKeyText: text, password: Array("pw".utf8), path: "k.key")
        #expect(loaded.publicKey == key.publicKey)
        #expect(try SigningKey.minisignSecretKeyNeedsPassword(text, path: "k.key"))
        let wrong = #expect(throws: CairnError.self) { try SigningKey(minisignSecretKeyText: text, password: Array("pv".utf8), path: "k.key") }
        #expect(wrong?.description == "k.key: wrong password for secret key")
        let unencrypted = Array(try key.minisignSecretKeyText(password: nil).utf8)
        #expect(try SigningKey(minisignSecretKeyText: unencrypted, password: nil, path: "k.key").publicKey == key.publicKey)
        // Damage anywhere in the key line, or a cut, is refused; never a different key.
        let lineStart = text.firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
        for cut in [0, 10, lineStart, lineStart + 100, text.count - 3] {
            #expect(throws: CairnError.self) { try SigningKey(minisignSecretKeyText: Array(text.prefix(cut)), password: Array("pw".utf8), path: "k.key") }
        }
        var changed = unencrypted
        changed[lineStart + 120] = changed[lineStart + 120] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: CairnError.self) { try SigningKey(minisignSecretKeyText: changed, password: nil, path: "k.key") }
        #expect(throws: CairnError.self) { try SigningKey(minisignSecretKeyText: Array("garbage\n\u{0}\u{1}".utf8), password: nil, path: "k.key") }
    }

    @Test("Spec/0004-trusted-archives.md §2.1: public key files: bare keys, comments, several keys; garbage and truncation name the file and line")
    func publicKeyFiles() throws {
        let key = try SigningKey(keyID: SigningKeyID(bytes: [1, 1, 2, 3, 5, 8, 13, 21]), seed: Self.seededBytes(32, seed: 6)).publicKey
        #expect(key.minisignFileText == "untrusted comment: minisign public key 150D080503020101\n\(key.minisignBase64)\n")
        #expect(try PublicKey(minisignBase64: key.minisignBase64) == key)
        let several = "# readers' keys\n\n" + key.minisignFileText + "\r\n  \(key.minisignBase64)  \r\n"
        #expect(try PublicKey.keys(parsingMinisignText: Array(several.utf8), source: "keys.txt") == [key, key])
        let truncated = String(key.minisignBase64.dropLast(4))
        let error = #expect(throws: CairnError.self) {
            try PublicKey.keys(parsingMinisignText: Array("untrusted comment: x\n\(truncated)\n".utf8), source: "keys.txt")
        }
        #expect(error?.path == "keys.txt")
        #expect(error?.message.hasPrefix("line 2: not a minisign public key") == true)
        let empty = #expect(throws: CairnError.self) { try PublicKey.keys(parsingMinisignText: Array("# nothing\n".utf8), source: "keys.txt") }
        #expect(empty?.message.hasPrefix("no minisign public key") == true)
        // A secret key file is not a public key file.
        let secret = Array(try SigningKey.generate().minisignSecretKeyText(password: nil).utf8)
        #expect(throws: CairnError.self) { try PublicKey.keys(parsingMinisignText: secret, source: "k.key") }
    }

    static let scriptMissing = !FileManager.default.isExecutableFile(atPath: "/usr/bin/script")

    /// Runs `cairn arguments` on a pseudo-terminal (util-linux `script`), typing `typed` into it.
    static func cairnOnTerminal(_ arguments: [String], typed: String, in directory: TemporaryDirectory) throws -> ChildProcess.Result {
        let cairn = try ChildProcess.cairnExecutable(besideBundle: Bundle.module.bundleURL).path
        let inputFile = directory.appending(".typed-\(UUID().uuidString)")
        try Data(typed.utf8).write(to: URL(fileURLWithPath: inputFile))
        defer { unlink(inputFile) }
        let command = ([cairn] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"], in: directory.path, standardInput: inputFile,
            environment: ["CAIRN_KEY_PASSWORD_FILE": ""])
    }

    @Test(
        "Spec/0003-command-line.md §14.1: key generate asks the password twice on the terminal; minisign -S decrypts the key with it; differing passwords write nothing",
        .disabled(if: minisignMissing || scriptMissing, "Debian's minisign or util-linux script is not installed"))
    func passwordOnTheTerminal() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let differ = try Self.cairnOnTerminal(["key", "generate", "-p", "d.pub", "-s", "d.key"], typed: "one\ntwo\n", in: directory)
        #expect(differ.status == 1)
        #expect(differ.stdout.contains("the passwords do not match"), "\(differ.stdout)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("d.key")))
        let generated = try Self.cairnOnTerminal(["key", "generate", "-p", "k.pub", "-s", "k.key"], typed: "typed pw\ntyped pw\n", in: directory)
        #expect(generated.status == 0, "\(generated.stdout)")
        try Data(Self.seededBytes(10_000, seed: 7)).write(to: directory.url(appending: "a.cairn"))
        let signed = try Self.minisign(["-S", "-s", "k.key", "-m", "a.cairn"], input: "typed pw\n", in: directory)
        #expect(signed.status == 0, "\(signed.stderr)")
        #expect(try Self.minisign(["-V", "-p", "k.pub", "-m", "a.cairn"], in: directory).status == 0)
    }

    @Test("Spec/0004-trusted-archives.md §2.1, §2.4: a key file over 1 MiB and a signature file over 16 KiB are refused as too large")
    func oversizedFiles() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = try SigningKey(keyID: SigningKeyID(bytes: [9, 9, 9, 9, 9, 9, 9, 9]), seed: Self.seededBytes(32, seed: 8)).publicKey
        let line = "# " + String(repeating: "x", count: 1000) + "\n"
        try Self.write(key.minisignFileText + String(repeating: line, count: 1100), "big.pub", in: directory)
        let big = #expect(throws: CairnError.self) { try PublicKey.readKeys(fromFile: directory.appending("big.pub")) }
        #expect(big?.code == .limitExceeded)
        #expect(big?.path == directory.appending("big.pub"))
        try Self.write("x", "a.cairn", in: directory)
        try Self.write(String(repeating: line, count: 20), "a.cairn.minisig", in: directory)
        let signature = #expect(throws: CairnError.self) { try MinisignSignature.verify(fileAt: directory.appending("a.cairn"), trustedKeys: [key]) }
        #expect(signature?.code == .limitExceeded)
    }
}
