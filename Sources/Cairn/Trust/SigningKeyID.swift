/// The 8-byte id of an Ed25519 signing key, as minisign assigns it.
///
/// minisign picks the id at random when it generates a key pair and stores it in the public key,
/// the secret key and every signature, so a verifier can say which key it needs. Cairn keeps that
/// rule: an archive signature carries its key's id, and a refusal names the id found and the ids
/// trusted. The id identifies; it does not authenticate (the signature does).
///
/// Shown as minisign shows it: the 8 bytes read as a little-endian 64-bit number, printed as 16
/// uppercase hexadecimal digits.
public struct SigningKeyID: Hashable, Sendable, CustomStringConvertible {
    /// The 8 bytes, in the order they are stored in key and signature files.
    public let bytes: [UInt8]

    /// The number of bytes in a key id.
    public static let byteCount = 8

    /// Wraps 8 stored bytes.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `bytes` holds exactly 8 bytes.
    public init(bytes: [UInt8]) throws(CairnError) {
        guard bytes.count == Self.byteCount else {
            throw CairnError(.invalidArgument, "a signing key id is \(Self.byteCount) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// The id as minisign prints it: 16 uppercase hexadecimal digits, most significant first.
    public var description: String {
        bytes.reversed().map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined()
    }
}
