import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The age v1 header and payload as Cairn parses them: strict grammar, hard limits, and every
/// changed byte refused (`Spec/0004-trusted-archives.md §6.4.1`, §6.4.5), and the key files (§6.4.4).
@Suite("age header and payload")
struct AgeHeaderTests {
    static let fileKey = [UInt8](repeating: 7, count: 16)
    static let identity = try? AgeIdentity(secretBytes: [UInt8](repeating: 0x42, count: 32))

    /// A file of `payload` for `Self.identity` with fixed secrets, and any extra stanzas.
    static func file(_ payload: [UInt8], extra: [AgeStanza] = []) throws -> [UInt8] {
        let identity = try #require(Self.identity)
        let stanza = try identity.recipient.stanza(wrapping: fileKey, ephemeralSecret: [UInt8](repeating: 9, count: 32))
        return try AgeFile.seal(payload, stanzas: [stanza] + extra, fileKey: fileKey, nonce: [UInt8](repeating: 3, count: 16))
    }

    static func text(_ lines: [String]) -> [UInt8] { Array(lines.joined(separator: "\n").utf8) + [0x0A] }

    /// `body`'s error, which must be a CairnError.
    static func refusal(_ body: () throws -> Void) -> CairnError? {
        #expect(throws: CairnError.self) { try body() }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.1: stanza bodies of 0-97 bytes wrap at 64 columns, with a final short (maybe empty) line, and parse back")
    func stanzaBodiesRoundTrip() throws {
        for count in [0, 1, 47, 48, 49, 95, 96, 97] {
            let body = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7) }
            let stanza = try AgeStanza(arguments: ["test-type", "a", "b"], body: body)
            let header = try AgeHeader(stanzas: [stanza], fileKey: Self.fileKey)
            let lines = String(decoding: header.encoded, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            // Version, arguments, count/48 full lines, the final line, MAC, then "" after the last LF.
            #expect(lines.count == 2 + count / 48 + 1 + 1 + 1)
            #expect(lines[2 + count / 48].count < 64)
            let parsed = try AgeHeader(parsing: header.encoded + [1, 2, 3])
            #expect(parsed.stanzas == [stanza])
            #expect(parsed.byteCount == header.encoded.count)
            try parsed.verifyMAC(fileKey: Self.fileKey)
        }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.1: the header grammar is strict, each refusal names its line and offset")
    func grammarRefusals() throws {
        let mac = "--- " + String(repeating: "A", count: 43)
        let cases: [(lines: [String], code: CairnError.Code, line: Int)] = [
            (["age-encryption.org/v2", "-> a", "", mac], .unsupportedVersion, 1),
            (["age-encryption.org/v1 ", "-> a", "", mac], .corrupted, 1),
            (["not age"], .corrupted, 1),
            (["age-encryption.org/v1", mac], .corrupted, 2),  // no stanza
            (["age-encryption.org/v1", "-> a  b", "", mac], .corrupted, 2),  // empty argument
            (["age-encryption.org/v1", "-> ", "", mac], .corrupted, 2),
            (["age-encryption.org/v1", "-> a\tb", "", mac], .corrupted, 2),
            (["age-encryption.org/v1", "->a", "", mac], .corrupted, 2),
            (["age-encryption.org/v1", "-> a", String(repeating: "A", count: 65), "", mac], .corrupted, 3),
            (["age-encryption.org/v1", "-> a", String(repeating: "A", count: 64), mac], .corrupted, 4),  // no final short line
            (["age-encryption.org/v1", "-> a", "AB", mac], .corrupted, 3),  // non-canonical
            (["age-encryption.org/v1", "-> a", "AA==", mac], .corrupted, 3),  // padding
            (["age-encryption.org/v1", "-> a", "A", mac], .corrupted, 3),
            (["age-encryption.org/v1", "-> a", "", "---"], .corrupted, 4),
            (["age-encryption.org/v1", "-> a", "", "---  " + String(repeating: "A", count: 42)], .corrupted, 4),
            (["age-encryption.org/v1", "-> a", "", mac + "A"], .corrupted, 4),
            (["age-encryption.org/v1", "-> a", "", "-- x"], .corrupted, 4),
        ]
        for (lines, code, line) in cases {
            let bytes = Self.text(lines)
            let error = Self.refusal { _ = try AgeHeader(parsing: bytes) }
            #expect(error?.code == code, "\(lines)")
            #expect(error?.message.hasPrefix("age header line \(line): ") == true, "\(lines): \(error?.message ?? "")")
            let start = lines.prefix(line - 1).reduce(0) { $0 + $1.utf8.count + 1 }
            #expect(error?.offset == UInt64(start), "\(lines)")
        }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.1, §6.4.5: a header cut anywhere is truncated; past the size, stanza and body limits it is refused")
    func truncationAndLimits() throws {
        let file = try Self.file([1, 2, 3])
        let header = try AgeHeader(parsing: file)
        for length in 0..<header.byteCount {
            let error = Self.refusal { _ = try AgeHeader(parsing: Array(file.prefix(length))) }
            #expect(error?.code == .truncated || error?.code == .corrupted, "cut at \(length)")
        }
        let many = ["age-encryption.org/v1"] + Array(repeating: ["-> a", ""], count: AgeHeader.maximumStanzaCount + 1).flatMap { $0 }
        #expect(Self.refusal { _ = try AgeHeader(parsing: Self.text(many)) }?.code == .limitExceeded)
        let arguments = ["age-encryption.org/v1", "-> " + Array(repeating: "a", count: AgeHeader.maximumArgumentCount + 1).joined(separator: " "), ""]
        #expect(Self.refusal { _ = try AgeHeader(parsing: Self.text(arguments)) }?.code == .limitExceeded)
        let bigBody = ["age-encryption.org/v1", "-> a"] + Array(repeating: String(repeating: "A", count: 64), count: 400) + [""]
        #expect(Self.refusal { _ = try AgeHeader(parsing: Self.text(bigBody)) }?.code == .limitExceeded)
        // No LF within the size limit.
        let endless = Array("age-encryption.org/v1\n-> a ".utf8) + [UInt8](repeating: 0x41, count: AgeHeader.maximumByteCount)
        #expect(Self.refusal { _ = try AgeHeader(parsing: endless) }?.code == .limitExceeded)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.3: a passphrase stanza (or age's scrypt) with any other stanza is refused when parsed")
    func loneStanzas() throws {
        let identity = try #require(Self.identity)
        let x25519 = try identity.recipient.stanza(wrapping: Self.fileKey, ephemeralSecret: [UInt8](repeating: 9, count: 32))
        for type in ["cairn-argon2id", "scrypt"] {
            let lone = try AgeStanza(arguments: [type, "x"], body: [])
            let header = Self.refusal { _ = try AgeHeader(stanzas: [x25519, lone], fileKey: Self.fileKey) }
            #expect(header?.code == .invalidArgument)
            var bytes = Array("age-encryption.org/v1\n".utf8) + x25519.encoded + lone.encoded
            bytes += Array("--- AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n".utf8)
            let error = Self.refusal { _ = try AgeHeader(parsing: bytes) }
            #expect(error?.code == .corrupted)
            #expect(error?.message.contains("must be the only stanza") == true)
        }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.1: every changed byte of a file is refused: header by the MAC or the grammar, payload by its chunk's tag")
    func everyFlippedByteRefused() throws {
        let identity = try #require(Self.identity)
        let unknown = try AgeStanza(arguments: ["other.example/type", "abc"], body: [1, 2, 3])
        let file = try Self.file(Array("hello, key block".utf8), extra: [unknown])
        #expect(try AgeFile.decrypt(file, with: [identity]) == Array("hello, key block".utf8))
        let headerCount = try AgeHeader(parsing: file).byteCount
        var codes: [String: Int] = [:]
        for index in file.indices {
            var changed = file
            changed[index] ^= 0x01
            let error = Self.refusal { _ = try AgeFile.decrypt(changed, with: [identity]) }
            codes[error?.code.description ?? "none", default: 0] += 1
            if index >= headerCount + 16 {
                #expect(error?.code == .checksumMismatch, "payload byte \(index)")
                #expect(error?.offset == UInt64(headerCount + 16), "payload byte \(index)")
            }
        }
        // The unknown stanza's argument: the header parses and the X25519 stanza unwraps, so only
        // the MAC can see it.
        let argument = try #require(file.firstRange(of: Array(" abc\n".utf8)))
        var changed = file
        changed[argument.lowerBound + 1] = UInt8(ascii: "x")
        let error = Self.refusal { _ = try AgeFile.decrypt(changed, with: [identity]) }
        #expect(error?.code == .checksumMismatch)
        #expect(error?.message.contains("the header MAC does not match") == true)
        #expect(codes["checksumMismatch", default: 0] > 0 && codes["untrusted", default: 0] > 0 && codes["corrupted", default: 0] > 0)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.1: a payload cut anywhere is refused; cut at a chunk boundary it is named truncated")
    func truncatedPayload() throws {
        let identity = try #require(Self.identity)
        let payload = (0..<(AgePayload.chunkByteCount * 2 + 5)).map { UInt8(truncatingIfNeeded: $0) }
        let file = try Self.file(payload)
        #expect(try AgeFile.decrypt(file, with: [identity]) == payload)
        let headerCount = try AgeHeader(parsing: file).byteCount
        let boundary = headerCount + 16 + AgePayload.sealedChunkByteCount
        for length in [headerCount, headerCount + 15, headerCount + 16, headerCount + 31, boundary - 1, boundary + 16, boundary * 2 - headerCount - 16, file.count - 1] {
            #expect(throws: CairnError.self, "cut at \(length)") { try AgeFile.decrypt(Array(file.prefix(length)), with: [identity]) }
        }
        let atBoundary = Self.refusal { _ = try AgeFile.decrypt(Array(file.prefix(boundary)), with: [identity]) }
        #expect(atBoundary?.code == .truncated)
        #expect(atBoundary?.message.contains("not its final chunk") == true)
        // A full chunk and then an empty final chunk: only an empty payload may end so.
        let exact = try Self.file([UInt8](repeating: 5, count: AgePayload.chunkByteCount))
        #expect(try AgeFile.decrypt(exact, with: [identity]).count == AgePayload.chunkByteCount)
        let withEmpty = Self.refusal { _ = try AgeFile.decrypt(exact + [UInt8](repeating: 0, count: 16), with: [identity]) }
        #expect(withEmpty?.code == .corrupted)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.2: an X25519 stanza of the wrong shape is refused by line, whichever identity is asked")
    func malformedX25519Stanzas() throws {
        let identity = try #require(Self.identity)
        let good = try identity.recipient.stanza(wrapping: Self.fileKey, ephemeralSecret: [UInt8](repeating: 9, count: 32))
        let bad: [AgeStanza] = [
            try AgeStanza(arguments: ["X25519"], body: good.body),
            try AgeStanza(arguments: good.arguments + ["extra"], body: good.body),
            try AgeStanza(arguments: ["X25519", "AAAA"], body: good.body),
            try AgeStanza(arguments: good.arguments, body: good.body + [0]),
            // A share of small order (the zero point): the shared secret is zero.
            try AgeStanza(arguments: ["X25519", Base64.encodeUnpadded([UInt8](repeating: 0, count: 32))], body: good.body),
        ]
        for stanza in bad {
            let file = try AgeFile.seal([1], stanzas: [stanza], fileKey: Self.fileKey, nonce: [UInt8](repeating: 3, count: 16))
            let error = Self.refusal { _ = try AgeFile.decrypt(file, with: [identity]) }
            #expect(error?.code == .corrupted, "\(stanza.arguments)")
            #expect(error?.message.hasPrefix("age header line 2: ") == true)
            #expect(error?.offset == 22)
        }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.2: no matching identity is refused as untrusted, counting the stanzas by type")
    func wrongIdentity() throws {
        let other = try AgeIdentity(secretBytes: [UInt8](repeating: 0x43, count: 32))
        let unknown = try AgeStanza(arguments: ["other.example/type"], body: [])
        let file = try Self.file([1, 2], extra: [unknown])
        let error = Self.refusal { _ = try AgeFile.decrypt(file, with: [other], what: "key block") }
        #expect(error?.code == .untrusted)
        #expect(
            error?.message
                == "no identity matches: the key block is for 1 X25519 recipient and 1 stanza of type other.example/type, and the identity given does not unwrap it")
        let none = Self.refusal { _ = try AgeFile.decrypt(file, with: []) }
        #expect(none?.code == .untrusted)
    }

    // MARK: - Key files

    @Test("Spec/0004-trusted-archives.md §6.4.4: an identity file with comments, blank lines, CRLF and two keys; a bad line is named, its text is not")
    func identityFile() throws {
        let first = try AgeIdentity(secretBytes: [UInt8](repeating: 1, count: 32))
        let second = try AgeIdentity(secretBytes: [UInt8](repeating: 2, count: 32))
        let text = "# created: 2026-12-07\r\n# public key: \(first.recipient)\r\n\(first.secretKeyText)\r\n\n  \(second.secretKeyText)\t\n"
        let identities = try AgeIdentity.identities(parsingFileText: Array(text.utf8), source: "id.txt")
        #expect(identities.map(\.recipient) == [first.recipient, second.recipient])
        let broken = String(second.secretKeyText.dropLast()) + "Q"
        let error = Self.refusal {
            _ = try AgeIdentity.identities(parsingFileText: Array("# c\n\(first.secretKeyText)\n\(broken)\n".utf8), source: "id.txt")
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.path == "id.txt")
        #expect(error?.message.hasPrefix("line 3: not an age identity (AGE-SECRET-KEY-1...): not Bech32: the checksum does not match") == true)
        #expect(error?.description.contains(broken) == false)
        let empty = Self.refusal { _ = try AgeIdentity.identities(parsingFileText: Array("# nothing\n\n".utf8), source: "id.txt") }
        #expect(empty?.code == .invalidArgument)
        let recipientLine = Self.refusal { _ = try AgeIdentity.identities(parsingFileText: Array("\(first.recipient)\n".utf8), source: "id.txt") }
        #expect(recipientLine?.message == "line 1: not an age identity (AGE-SECRET-KEY-1...)")
        let plugin = Self.refusal {
            _ = try AgeIdentity.identities(
                parsingFileText: Array(Bech32.encode(humanReadablePart: "AGE-PLUGIN-X-", bytes: [1, 2, 3], uppercase: true).utf8), source: "id.txt")
        }
        #expect(plugin?.message.hasPrefix("line 1: not an age X25519 identity") == true, "a plugin's identity is named as one")
    }

    @Test("Spec/0004-trusted-archives.md §6.4.4: a recipients file; an SSH key or plugin recipient line is refused by line; files are read with a size limit")
    func recipientsFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let first = try AgeIdentity(secretBytes: [UInt8](repeating: 1, count: 32)).recipient
        let second = try AgeIdentity(secretBytes: [UInt8](repeating: 2, count: 32)).recipient
        let path = directory.appending("recipients.txt")
        try Data("# team\n\(first)\n\n\(second)\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try AgeRecipient.readRecipients(fromFile: path) == [first, second])
        try Data("\(first)\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA user@host\n".utf8).write(to: URL(fileURLWithPath: path))
        let ssh = Self.refusal { _ = try AgeRecipient.readRecipients(fromFile: path) }
        #expect(ssh?.code == .invalidArgument)
        #expect(ssh?.path == path)
        #expect(ssh?.message.hasPrefix("line 2: ") == true)
        try Data([UInt8](repeating: 0x23, count: AgeKeyFile.byteLimit + 1)).write(to: URL(fileURLWithPath: path))
        #expect(Self.refusal { _ = try AgeRecipient.readRecipients(fromFile: path) }?.code == .limitExceeded)
        #expect(Self.refusal { _ = try AgeIdentity.readIdentities(fromFile: directory.appending("missing")) }?.code == .notFound)
    }
}
