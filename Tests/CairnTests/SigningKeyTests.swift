import Testing

@testable import Cairn

/// Ed25519 through libsodium, checked against RFC 8032 §7.1's test vectors, and the key id's
/// display as minisign prints it.
@Suite("Signing keys")
struct SigningKeyTests {
    private static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var digits = Array(hex.utf8).makeIterator()
        while let high = digits.next(), let low = digits.next() {
            result.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) ?? 0)
        }
        return result
    }

    private static let keyID = (try? SigningKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8]))

    @Test("RFC 8032 test 1: the empty message")
    func rfc8032Test1() throws {
        let id = try #require(Self.keyID)
        let key = try SigningKey(
            keyID: id, seed: Self.bytes("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
        #expect(key.publicKey.rawBytes == Self.bytes("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"))
        let signature = key.signature(of: [])
        #expect(
            signature == Self.bytes(
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
                    + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"))
        #expect(key.publicKey.isValidSignature(signature, of: []))
    }

    @Test("RFC 8032 test 2: one byte; a changed message, signature or key fails")
    func rfc8032Test2() throws {
        let id = try #require(Self.keyID)
        let key = try SigningKey(
            keyID: id, seed: Self.bytes("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"))
        #expect(key.publicKey.rawBytes == Self.bytes("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"))
        let signature = key.signature(of: [0x72])
        #expect(
            signature == Self.bytes(
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
                    + "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"))
        #expect(key.publicKey.isValidSignature(signature, of: [0x72]))
        #expect(!key.publicKey.isValidSignature(signature, of: [0x73]))
        var flipped = signature
        flipped[10] ^= 1
        #expect(!key.publicKey.isValidSignature(flipped, of: [0x72]))
        #expect(!key.publicKey.isValidSignature(Array(signature.prefix(63)), of: [0x72]))
        let other = try SigningKey.generate()
        #expect(!other.publicKey.isValidSignature(signature, of: [0x72]))
    }

    @Test("A secret key must hold its own public key; ids are 8 bytes shown as minisign shows them")
    func secretKeyAndKeyID() throws {
        let key = try SigningKey.generate()
        var secret = key.secretKey.withUnsafeBytes { Array($0) }
        #expect(try SigningKey(keyID: key.keyID, secretKey: secret).publicKey == key.publicKey)
        secret[40] ^= 1
        #expect(throws: CairnError.self) { try SigningKey(keyID: key.keyID, secretKey: secret) }
        #expect(throws: CairnError.self) { try SigningKeyID(bytes: [1, 2, 3]) }
        let id = try SigningKeyID(bytes: [0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01])
        #expect(id.description == "0123456789ABCDEF")
        #expect(key.description == "secret key \(key.keyID)")
    }
}
