import CairnTestSupport
import Foundation
import Testing

@testable import Cairn

/// The encodings under the age v1 key layer, with published vectors: HKDF-SHA-256 (RFC 5869),
/// Bech32 (BIP 173), unpadded canonical base64, the header grammar and its limits, and the
/// identity and recipients files (`Spec/0004-trusted-archives.md §6`).
@Suite("age encodings")
struct AgeEncodingTests {
    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var characters = hex.makeIterator()
        while let high = characters.next(), let low = characters.next() {
            bytes.append(UInt8(String([high, low]), radix: 16) ?? 0)
        }
        return bytes
    }

    // MARK: - HKDF

    @Test(
        "HKDF-SHA-256 gives RFC 5869's test cases 1-3 (Spec/0004-trusted-archives.md §6.4.1)",
        arguments: [
            (
                String(repeating: "0b", count: 22), "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9", 42,
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
            ),
            (
                (0x00...0x4f).map { String(format: "%02x", $0) }.joined(), (0x60...0xaf).map { String(format: "%02x", $0) }.joined(),
                (0xb0...0xff).map { String(format: "%02x", $0) }.joined(), 82,
                "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"
            ),
            (String(repeating: "0b", count: 22), "", "", 42, "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
        ])
    func hkdfVectors(ikm: String, salt: String, info: String, length: Int, okm: String) throws {
        let output = try HKDF.sha256(
            inputKeyMaterial: Self.bytes(hex: ikm), salt: Self.bytes(hex: salt), info: Self.bytes(hex: info), outputByteCount: length)
        #expect(output == Self.bytes(hex: okm))
    }

    @Test("HKDF-SHA-256 refuses an empty IKM and output lengths outside 1-8160")
    func hkdfRefusals() {
        for length in [0, 8161] {
            #expect(throws: CairnError.self) { try HKDF.sha256(inputKeyMaterial: [1], salt: [], info: [], outputByteCount: length) }
        }
        #expect(throws: CairnError.self) { try HKDF.sha256(inputKeyMaterial: [], salt: [], info: []) }
    }

    // MARK: - Bech32

    static let validBech32 = [
        "A12UEL5L", "a12uel5l",
        "an83characterlonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1tt5tgs",
        "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
        "11qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqc8247j",
        "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w", "?1ezyfcl",
    ]

    @Test("Spec/0004-trusted-archives.md §6.4.2: BIP 173's valid Bech32 strings decode, and encode back to themselves", arguments: validBech32)
    func bech32Valid(text: String) throws {
        let decoded = try Bech32.decode(text)
        let uppercase = text.uppercased() == text && text.lowercased() != text
        #expect(Bech32.encode(humanReadablePart: decoded.humanReadablePart, values: decoded.values, uppercase: uppercase) == text)
    }

    @Test("Spec/0004-trusted-archives.md §6.4.2: BIP 173's invalid Bech32 strings are refused (the 90-character limit aside)")
    func bech32Invalid() {
        let invalid: [[UInt8]] = [
            [0x20] + Array("1nwldj5".utf8), [0x7F] + Array("1axkwrx".utf8), [0x80] + Array("1eym55h".utf8),
            Array("pzry9x0s0muk".utf8), Array("1pzry9x0s0muk".utf8), Array("x1b4n0q5v".utf8), Array("li1dgmt3".utf8),
            Array("de1lg7wt".utf8) + [0xFF], Array("A1G7SGD8".utf8), Array("10a06t8".utf8), Array("1qzzfhee".utf8),
            Array("a12UEL5L".utf8), Array("A12uEL5L".utf8),
        ]
        for bytes in invalid {
            #expect(throws: CairnError.self, "\(bytes)") { try Bech32.decode(String(decoding: bytes, as: UTF8.self)) }
        }
        // BIP 173 refuses this one only for its length (91 > 90); age's Bech32 has no length limit.
        let long = "an84characterslonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1569pvx"
        #expect((try? Bech32.decode(long)) != nil)
        // One mistyped character fails the checksum.
        #expect(throws: CairnError.self) { try Bech32.decode("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxx") }
    }

    @Test("Spec/0004-trusted-archives.md §6.4.2: Bech32 data regroups into bytes (BIP 173's abcdef vector), and left-over bits must be zero")
    func bech32Bytes() throws {
        let decoded = try Bech32.decode("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw")
        #expect(Bech32.bytes(fromValues: decoded.values) == Self.bytes(hex: "00443214c74254b635cf84653a56d7c675be77df"))
        #expect(Bech32.bytes(fromValues: [0, 1]) == nil)  // 10 bits: 2 left over, not zero
        #expect(Bech32.bytes(fromValues: [0, 0, 0]) == nil)  // 15 bits: 7 left over
        #expect(Bech32.bytes(fromValues: [0, 0]) == [0])
    }

    @Test("Spec/0004-trusted-archives.md §6.4.2: the age spec's example identity gives its example recipient, and both print back")
    func ageSpecExampleKeys() throws {
        let identityText = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
        let identity = try AgeIdentity(identityText)
        #expect(identity.recipient.description == "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")
        #expect(identity.secretKeyText == identityText)
        #expect(!identity.description.contains("SECRET"))
        #expect(try AgeRecipient(identity.recipient.description) == identity.recipient)
        // Case is part of the form: an identity is uppercase, a recipient lowercase.
        #expect(throws: CairnError.self) { try AgeIdentity(identityText.lowercased()) }
        #expect(throws: CairnError.self) { try AgeRecipient(identity.recipient.description.uppercased()) }
        // An identity is not a recipient, nor the reverse.
        #expect(throws: CairnError.self) { try AgeRecipient(identityText) }
        #expect(throws: CairnError.self) { try AgeIdentity(identity.recipient.description) }
    }

    // MARK: - Base64

    @Test("Spec/0004-trusted-archives.md §6.4.1: only canonical unpadded base64 decodes")
    func unpaddedBase64() {
        func decode(_ text: String, count: Int? = nil) -> [UInt8]? { Base64.decodeUnpadded(Array(text.utf8)[...], count: count) }
        #expect(decode("") == [])
        #expect(decode("AA") == [0])
        #expect(decode("AB") == nil)  // low bits set
        #expect(decode("AAA") == [0, 0])
        #expect(decode("AAB") == nil)
        #expect(decode("A") == nil)
        #expect(decode("AA==") == nil)
        #expect(decode("AA\n") == nil)
        #expect(decode("A A") == nil)
        #expect(decode("AAAA", count: 2) == nil)
        #expect(decode("/+8", count: 2) == [0xFF, 0xEF])
        for count in 0..<50 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(decode(Base64.encodeUnpadded(bytes)) == bytes)
        }
    }
}
