import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The format 3.0 test vectors of `Spec/0004-trusted-archives.md` ("Test vectors"), as
/// `Spec/vectors/v3.0.txt` holds them and `Spec/vectors/verify_v3.py` recomputes them from the
/// Spec's rules with Python's `cryptography`: here the Swift code makes (or, for the sealed
/// block, whose nonce the writer draws at random, opens) the same bytes from the same fixed
/// inputs, and stock `age` decrypts the X25519 key block.
@Suite("Spec test vectors 3.0")
struct SpecVectorV3Tests {
    static func run(_ start: UInt8, _ count: Int) -> [UInt8] { (0..<count).map { start &+ UInt8($0) } }

    // The fixed inputs, as verify_v3.py and the Spec list them.
    static let blockKey = run(0x00, 32)
    static let idKey = run(0x20, 32)
    static let chunkerKey = run(0x40, 32)
    static let archiveID = run(0x80, 16)
    static let blockIndex: UInt64 = 1
    static let blockPlaintext = Array("cairn 3.0 sealed block vector\n".utf8)
    static let identitySecret = run(0x60, 32)
    static let ephemeral = run(0xA0, 32)
    static let fileKey = run(0xE0, 16)
    static let payloadNonce = run(0xF0, 16)
    static let salt = run(0x90, 16)

    /// `name = value` lines of `Spec/vectors/v3.0.txt`.
    static func vectors() throws -> [String: String] {
        let text = try String(contentsOf: SpecVectorTests.vectorURL("v3.0.txt"), encoding: .utf8)
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " = ", maxSplits: 1)
            if parts.count == 2 { result[String(parts[0])] = String(parts[1]) }
        }
        return result
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func bytes(_ name: String, in vectors: [String: String]) throws -> [UInt8] {
        let text = try #require(vectors[name], "\(name) is missing from v3.0.txt")
        return try #require(Base16.decode(text), "\(name) is not hex")
    }

    enum Base16 {
        static func decode(_ text: String) -> [UInt8]? {
            let digits = Array(text.utf8)
            guard digits.count % 2 == 0 else { return nil }
            var out: [UInt8] = []
            for i in stride(from: 0, to: digits.count, by: 2) {
                guard let byte = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                out.append(byte)
            }
            return out
        }
    }

    static var secrets: ArchiveSecrets { ArchiveSecrets(blockKey: blockKey, idKey: idKey, chunkerKey: chunkerKey) }

    @Test("§6.4: the secrets record is version 1 and the three keys (97 bytes)")
    func secretsRecord() throws {
        let vectors = try Self.vectors()
        #expect(Self.hex(Self.secrets.encoded()) == vectors["secrets"])
        #expect(try ArchiveSecrets.decode(Self.bytes("secrets", in: vectors)) == Self.secrets)
    }

    @Test("§6.3: a sealed block's associated data, and the vector's block opens at its index only with its final flag (XChaCha20-Poly1305)")
    func sealedBlock() throws {
        let vectors = try Self.vectors()
        let sealer = try BlockSealer(key: Self.blockKey, archiveID: Self.archiveID)
        for final in [false, true] {
            let name = "block.final\(final ? 1 : 0)"
            #expect(Self.hex(sealer.associatedData(index: Self.blockIndex, isFinal: final)) == vectors["\(name).ad"])
            let sealed = try Self.bytes("\(name).sealed", in: vectors)
            #expect(sealed.count == Self.blockPlaintext.count + BlockSealer.overhead)
            for (index, isFinal) in [(Self.blockIndex, final), (Self.blockIndex, !final), (Self.blockIndex + 1, final), (0, final)] {
                var plain = [UInt8](repeating: 0xEE, count: Self.blockPlaintext.count)
                let opened = sealed.withUnsafeBytes { s in plain.withUnsafeMutableBytes { sealer.open(s, index: index, isFinal: isFinal, into: $0) } }
                let expected = index == Self.blockIndex && isFinal == final
                #expect(opened == expected, "\(name) at index \(index), final \(isFinal)")
                #expect(plain == (expected ? Self.blockPlaintext : [UInt8](repeating: 0, count: plain.count)))
            }
            // Sealed by the Swift code (its own random nonce), it opens and has the same length.
            let again = Self.blockPlaintext.withUnsafeBytes { sealer.seal($0, index: Self.blockIndex, isFinal: final) }
            var plain = [UInt8](repeating: 0, count: Self.blockPlaintext.count)
            #expect(again.withUnsafeBytes { s in plain.withUnsafeMutableBytes { sealer.open(s, index: Self.blockIndex, isFinal: final, into: $0) } })
            #expect(plain == Self.blockPlaintext && again.count == sealed.count)
        }
    }

    @Test("§6.4.1-§6.4.2: the X25519 recipient, stanza and key block from the fixed identity, ephemeral secret, file key and nonce; stock age decrypts it")
    func x25519KeyBlock() throws {
        let vectors = try Self.vectors()
        let identity = try AgeIdentity(secretBytes: Self.identitySecret)
        #expect(identity.recipient.description == vectors["x25519.recipient"])
        let stanza = try identity.recipient.stanza(wrapping: Self.fileKey, ephemeralSecret: Self.ephemeral)
        let keyBlock = try AgeFile.seal(Self.secrets.encoded(), stanzas: [stanza], fileKey: Self.fileKey, nonce: Self.payloadNonce)
        #expect(Self.hex(keyBlock) == vectors["x25519.keyblock"])
        #expect(keyBlock.starts(with: Array("age-encryption.org/v1\n".utf8) + (try Self.bytes("x25519.stanza", in: vectors))))
        #expect(try AgeFile.decrypt(Self.bytes("x25519.keyblock", in: vectors), with: [identity]) == Self.secrets.encoded())
        guard !AgeInteropTests.toolsMissing else { return }
        let directory = try TemporaryDirectory(prefix: "cairn-v3-vector")
        defer { directory.remove() }
        try Data(keyBlock).write(to: directory.url(appending: "k.age"))
        try Data((identity.secretKeyText + "\n").utf8).write(to: directory.url(appending: "id.txt"))
        let result = try ChildProcess.run(URL(fileURLWithPath: AgeInteropTests.agePath), ["-d", "-i", "id.txt", "-o", "out", "k.age"], in: directory.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Array(Data(contentsOf: directory.url(appending: "out"))) == Self.secrets.encoded())
    }

    @Test("§6.4.3: the cairn-argon2id stanza and key block from the fixed passphrase, salt and work factors (1 pass, 8 KiB)")
    func argon2idKeyBlock() throws {
        let vectors = try Self.vectors()
        let passphrase = try AgePassphrase("cairn test passphrase", opsLimit: 1, memoryLimit: 8192)
        let stanza = try passphrase.stanza(wrapping: Self.fileKey, salt: Self.salt)
        let keyBlock = try AgeFile.seal(Self.secrets.encoded(), stanzas: [stanza], fileKey: Self.fileKey, nonce: Self.payloadNonce)
        #expect(Self.hex(keyBlock) == vectors["argon2id.keyblock"])
        #expect(keyBlock.starts(with: Array("age-encryption.org/v1\n".utf8) + (try Self.bytes("argon2id.stanza", in: vectors))))
        #expect(try AgeFile.decrypt(Self.bytes("argon2id.keyblock", in: vectors), with: passphrase) == Self.secrets.encoded())
    }

    @Test("§6.2: the prelude 3.0 and the envelope record (block size 16384, the archive id, the X25519 key block), framed with its CRC-32; it opens with the vector's identity")
    func envelope() throws {
        let vectors = try Self.vectors()
        let keyBlock = try Self.bytes("x25519.keyblock", in: vectors)
        let record = EnvelopeRecord(blockSize: 16384, archiveID: Self.archiveID, keyBlock: keyBlock)
        let outer = EnvelopeRecord.prelude + record.framed()
        #expect(Self.hex(outer) == vectors["envelope"])
        // Read back by the one envelope parser of both readers, and opened.
        var position = 0
        let (read, prefix) = try OpenedEnvelope.readRecord(name: "vector") { (count) throws(CairnError) in
            defer { position = min(outer.count, position + count) }
            return Array(outer[position..<min(outer.count, position + count)])
        }
        #expect(prefix == outer)
        let opened = try OpenedEnvelope(record: read, prefix: prefix) { (record) throws(CairnError) in
            try AgeFile.decrypt(record.keyBlock, with: [try AgeIdentity(secretBytes: Self.identitySecret)])
        }
        #expect(opened.secrets == Self.secrets)
        #expect(opened.dataStart == UInt64(outer.count))
    }
}
