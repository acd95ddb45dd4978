import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The age v1 layer against Debian's `age` and `age-keygen` 1.1 as oracles, and the
/// `cairn-argon2id` passphrase stanza (`Spec/0004-trusted-archives.md §6.4.2`-§6.4.4).
@Suite("age interoperability and passphrases")
struct AgeInteropTests {
    static let agePath = "/usr/bin/age"
    static let keygenPath = "/usr/bin/age-keygen"
    static let toolsMissing =
        !FileManager.default.isExecutableFile(atPath: agePath) || !FileManager.default.isExecutableFile(atPath: keygenPath)
    static let skipReason: Comment = "Debian's age and age-keygen are not installed (make deps installs them)"

    /// Payload sizes around the 64 KiB chunk: empty, one byte, exactly one chunk, one more byte,
    /// and three chunks and a bit.
    static let sizes = [0, 1, 64 << 10, (64 << 10) + 1, 200 * 1024 + 7]

    static func run(_ tool: String, _ arguments: [String], in directory: TemporaryDirectory) throws -> ChildProcess.Result {
        try ChildProcess.run(URL(fileURLWithPath: tool), arguments, in: directory.path)
    }

    /// A key pair from `age-keygen -o id.txt` in `directory`: the identity file's path and the
    /// recipient `age-keygen -y` prints.
    static func keygen(_ name: String, in directory: TemporaryDirectory) throws -> (path: String, recipient: String) {
        let made = try run(keygenPath, ["-o", name], in: directory)
        #expect(made.status == 0, "\(made.stderr)")
        let shown = try run(keygenPath, ["-y", name], in: directory)
        #expect(shown.status == 0, "\(shown.stderr)")
        return (directory.appending(name), shown.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func payload(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return generator.bytes(count)
    }

    @Test(
        "Spec/0004-trusted-archives.md §6.4.4: an identity file from age-keygen -o loads, and its recipient is what age-keygen -y prints",
        .disabled(if: toolsMissing, skipReason))
    func keygenIdentityFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let made = try Self.keygen("id.txt", in: directory)
        let identities = try AgeIdentity.readIdentities(fromFile: made.path)
        #expect(identities.count == 1)
        #expect(identities.first?.recipient.description == made.recipient)
        #expect(try AgeRecipient(made.recipient) == identities.first?.recipient)
        // The file's secret line is what Cairn prints for the identity.
        let text = try String(contentsOfFile: made.path, encoding: .utf8)
        #expect(text.contains(try #require(identities.first).secretKeyText))
    }

    @Test(
        "Spec/0004-trusted-archives.md §6.4.1, §6.4.2: what Cairn encrypts to an age-keygen recipient, age -d -i decrypts to the same bytes",
        .disabled(if: toolsMissing, skipReason), arguments: sizes)
    func stockAgeDecryptsCairn(size: Int) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let made = try Self.keygen("id.txt", in: directory)
        let payload = Self.payload(size, seed: UInt64(size) + 1)
        let file = try AgeFile.encrypt(payload, to: [AgeRecipient(made.recipient)])
        try Data(file).write(to: directory.url(appending: "x.age"))
        // To standard output: age creates an -o file only when it has a byte to write.
        let result = try Self.run(Self.agePath, ["-d", "-i", made.path, "x.age"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutBytes == payload)
    }

    @Test(
        "Spec/0004-trusted-archives.md §6.4.1, §6.4.2: what age -r encrypts, Cairn decrypts with the age-keygen identity file",
        .disabled(if: toolsMissing, skipReason), arguments: sizes)
    func cairnDecryptsStockAge(size: Int) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let made = try Self.keygen("id.txt", in: directory)
        let payload = Self.payload(size, seed: UInt64(size) + 2)
        try Data(payload).write(to: directory.url(appending: "in.bin"))
        let result = try Self.run(Self.agePath, ["-r", made.recipient, "-o", "x.age", "in.bin"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let file = try [UInt8](Data(contentsOf: directory.url(appending: "x.age")))
        let identities = try AgeIdentity.readIdentities(fromFile: made.path)
        #expect(try AgeFile.decrypt(file, with: identities) == payload)
        // The header alone: one X25519 stanza, and the payload starts after it.
        let header = try AgeHeader(parsing: file)
        #expect(header.stanzas.map(\.type) == ["X25519"])
        let fileKey = try header.fileKey(with: identities)
        #expect(try AgePayload.open(file, at: header.byteCount, fileKey: fileKey) == payload)
    }

    @Test(
        "Spec/0004-trusted-archives.md §6.4.2: several recipients each get a stanza; every identity opens the file, both ways, and a stranger's is refused",
        .disabled(if: toolsMissing, skipReason))
    func multipleRecipients() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keys = try (0..<3).map { try Self.keygen("id\($0).txt", in: directory) }
        let stranger = try Self.keygen("stranger.txt", in: directory)
        let payload = Self.payload(70_000, seed: 5)
        // Cairn → age, each identity.
        let file = try AgeFile.encrypt(payload, to: keys.map { try AgeRecipient($0.recipient) })
        #expect(try AgeHeader(parsing: file).stanzas.count == 3)
        try Data(file).write(to: directory.url(appending: "x.age"))
        for (index, key) in keys.enumerated() {
            let result = try Self.run(Self.agePath, ["-d", "-i", key.path, "-o", "out\(index).bin", "x.age"], in: directory)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try [UInt8](Data(contentsOf: directory.url(appending: "out\(index).bin"))) == payload)
        }
        let refused = try Self.run(Self.agePath, ["-d", "-i", stranger.path, "-o", "no.bin", "x.age"], in: directory)
        #expect(refused.status != 0)
        // age → Cairn, each identity, and the stranger refused by Cairn too.
        try Data(payload).write(to: directory.url(appending: "in.bin"))
        let encrypted = try Self.run(
            Self.agePath, ["-r", keys[0].recipient, "-r", keys[1].recipient, "-o", "y.age", "in.bin"], in: directory)
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        let stock = try [UInt8](Data(contentsOf: directory.url(appending: "y.age")))
        for key in keys.prefix(2) {
            #expect(try AgeFile.decrypt(stock, with: AgeIdentity.readIdentities(fromFile: key.path)) == payload)
        }
        let strangers = try AgeIdentity.readIdentities(fromFile: stranger.path) + AgeIdentity.readIdentities(fromFile: keys[2].path)
        let error = #expect(throws: CairnError.self) { try AgeFile.decrypt(stock, with: strangers, what: "key block") }
        #expect(error?.code == .untrusted)
        #expect(error?.message.hasPrefix("no identity matches: the key block is for 2 X25519 recipients") == true)
    }

    @Test(
        "Spec/0004-trusted-archives.md §6.4.1: stock age refuses Cairn's file with a changed header byte or payload byte, as Cairn does",
        .disabled(if: toolsMissing, skipReason))
    func stockAgeRefusesTampering() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let made = try Self.keygen("id.txt", in: directory)
        let identities = try AgeIdentity.readIdentities(fromFile: made.path)
        let file = try AgeFile.encrypt(Self.payload(1000, seed: 9), to: [AgeRecipient(made.recipient)])
        let header = try AgeHeader(parsing: file)
        // The MAC's first character, a byte of the stanza's body line, a payload byte.
        for index in [header.byteCount - 44, header.byteCount - 60, header.byteCount + 100] {
            var changed = file
            changed[index] = changed[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            try Data(changed).write(to: directory.url(appending: "x.age"))
            let result = try Self.run(Self.agePath, ["-d", "-i", made.path, "-o", "out.bin", "x.age"], in: directory)
            #expect(result.status != 0, "byte \(index)")
            #expect(throws: CairnError.self, "byte \(index)") { try AgeFile.decrypt(changed, with: identities) }
        }
    }

    // MARK: - Passphrases

    /// Small work factors: the stanza's construction is what is tested, not Argon2id's cost.
    static func passphrase(_ text: String) throws -> AgePassphrase {
        try AgePassphrase(text, opsLimit: 1, memoryLimit: 64 << 10)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.3: a passphrase round trip; a wrong passphrase or an identity is refused as untrusted")
    func passphraseRoundTrip() throws {
        let payload = Self.payload(100_000, seed: 11)
        let file = try AgeFile.encrypt(payload, with: Self.passphrase("correct horse"))
        let header = try AgeHeader(parsing: file)
        #expect(header.stanzas.count == 1)
        #expect(header.stanzas.first?.arguments.dropFirst(2) == ["1", "65536"])
        #expect(try AgeFile.decrypt(file, with: Self.passphrase("correct horse")) == payload)
        let wrong = #expect(throws: CairnError.self) { try AgeFile.decrypt(file, with: Self.passphrase("correct horsf"), what: "key block") }
        #expect(wrong?.code == .untrusted)
        #expect(wrong?.message.contains("the passphrase does not unwrap the key block's file key") == true)
        let identity = try AgeIdentity(secretBytes: [UInt8](repeating: 1, count: 32))
        let withIdentity = #expect(throws: CairnError.self) { try AgeFile.decrypt(file, with: [identity]) }
        #expect(withIdentity?.code == .untrusted)
        #expect(withIdentity?.message.contains("a passphrase (cairn-argon2id)") == true)
        // And the reverse: a passphrase for a file with X25519 recipients.
        let x25519 = try AgeFile.encrypt(payload, to: [identity.recipient])
        #expect((#expect(throws: CairnError.self) { try AgeFile.decrypt(x25519, with: Self.passphrase("x")) })?.code == .untrusted)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.3: the default work factors (libsodium MODERATE: 3 passes, 256 MiB) round-trip")
    func passphraseDefaults() throws {
        let passphrase = try AgePassphrase("correct horse")
        #expect(passphrase.opsLimit == 3 && passphrase.memoryLimit == 256 << 20)
        let file = try AgeFile.encrypt([1, 2, 3], with: passphrase)
        #expect(try AgeHeader(parsing: file).stanzas.first?.arguments.dropFirst(2) == ["3", "268435456"])
        #expect(try AgeFile.decrypt(file, with: passphrase) == [1, 2, 3])
    }

    @Test("Spec/0004-trusted-archives.md §6.4.3, §6.4.5: a hostile passphrase stanza is refused before Argon2id runs: work factors past the limits, non-canonical numbers, a bad salt or body")
    func hostilePassphraseStanzas() throws {
        let fileKey = [UInt8](repeating: 7, count: 16)
        let good = try Self.passphrase("pw").stanza(wrapping: fileKey, salt: [UInt8](repeating: 1, count: 16))
        let salt = good.arguments[1]
        let cases: [(arguments: [String], body: [UInt8], code: CairnError.Code)] = [
            (["cairn-argon2id", salt, "11", "65536"], good.body, .limitExceeded),
            (["cairn-argon2id", salt, "1", String((256 << 20) + 1024)], good.body, .limitExceeded),
            (["cairn-argon2id", salt, "1", "1099511627776"], good.body, .limitExceeded),
            (["cairn-argon2id", salt, "1", "4096"], good.body, .limitExceeded),
            (["cairn-argon2id", salt, "1", "65537"], good.body, .limitExceeded),
            (["cairn-argon2id", salt, "01", "65536"], good.body, .corrupted),
            (["cairn-argon2id", salt, "1", "+65536"], good.body, .corrupted),
            (["cairn-argon2id", salt, "1", "99999999999999999999"], good.body, .corrupted),
            (["cairn-argon2id", salt, "0", "65536"], good.body, .limitExceeded),  // the shape, out of range
            (["cairn-argon2id", salt, "00", "65536"], good.body, .corrupted),
            (["cairn-argon2id", salt, "1"], good.body, .corrupted),
            (["cairn-argon2id", "AAAA", "1", "65536"], good.body, .corrupted),
            (["cairn-argon2id", salt, "1", "65536"], good.body + [0], .corrupted),
        ]
        let passphrase = try Self.passphrase("pw")
        for (arguments, body, code) in cases {
            let stanza = try AgeStanza(arguments: arguments, body: body)
            let file = try AgeFile.seal([1], stanzas: [stanza], fileKey: fileKey, nonce: [UInt8](repeating: 3, count: 16))
            let error = #expect(throws: CairnError.self) { try AgeFile.decrypt(file, with: passphrase) }
            #expect(error?.code == code, "\(arguments)")
            #expect(error?.message.hasPrefix("age header line 2: ") == true, "\(arguments)")
        }
        let file = try AgeFile.seal([1], stanzas: [good], fileKey: fileKey, nonce: [UInt8](repeating: 3, count: 16))
        #expect(try AgeFile.decrypt(file, with: passphrase) == [1])
        // A writer refuses what a reader would.
        #expect(throws: CairnError.self) { try AgePassphrase("pw", opsLimit: 11) }
        #expect(throws: CairnError.self) { try AgePassphrase("pw", memoryLimit: 512 << 20) }
        #expect(throws: CairnError.self) { try AgePassphrase("") }
    }
}

extension AgeInteropTests {
    @Test("the age fuzz seeds stay meaningful: the fuzzer's identity and passphrase open them, and the key files load")
    func fuzzSeeds() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/Corpus")
        func seed(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: corpus.appendingPathComponent(name))) }
        let identity = try AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32))
        #expect(try AgeFile.decrypt(seed("age-x25519.age"), with: [identity]) == Array("a key block for the fuzzer\n".utf8))
        let passphrase = try AgePassphrase("password", opsLimit: 1, memoryLimit: 64 << 10)
        #expect(try AgeFile.decrypt(seed("age-cairn-argon2id.age"), with: passphrase) == Array("a key block\n".utf8))
        #expect(try AgeIdentity.identities(parsingFileText: seed("age-identity.txt"), source: "seed").count == 1)
        #expect(try AgeRecipient.recipients(parsingFileText: seed("age-recipients.txt"), source: "seed").count == 2)
    }
}
