import Cairn

/// The published test signing key of `Spec/0004-trusted-archives.md` ("Test vectors"): seed
/// `00 01 02 … 1f`, key id `43 41 49 52 4E 54 45 53` ("CAIRNTES"). It signs the 2.2 vector and
/// the signed golden archive; it is public, so nothing it signs is trusted outside tests.
public enum TestSigningKey {
    /// The 32-byte Ed25519 seed (RFC 8032 §5.1.5's secret key): the bytes 0 … 31.
    public static let seed: [UInt8] = Array(0..<32)
    /// The 8-byte minisign key id: ASCII "CAIRNTES".
    public static let keyIDBytes: [UInt8] = Array("CAIRNTES".utf8)

    /// The signing key.
    public static func key() throws -> SigningKey {
        try SigningKey(keyID: SigningKeyID(bytes: keyIDBytes), seed: seed)
    }

    /// Another key (seed 32 × `0x5A`, key id "OTHERKEY"), for refusals.
    public static func otherKey() throws -> SigningKey {
        try SigningKey(keyID: SigningKeyID(bytes: Array("OTHERKEY".utf8)), seed: [UInt8](repeating: 0x5A, count: 32))
    }
}
