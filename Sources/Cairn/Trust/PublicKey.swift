internal import CSodium

/// An Ed25519 public key (RFC 8032) with its minisign key id: what a reader trusts.
///
/// A reader given trusted public keys accepts an archive, or a detached signature, only when a
/// signature by one of them covers it. Signatures are verified by libsodium's
/// `crypto_sign_verify_detached`.
public struct PublicKey: Hashable, Sendable, CustomStringConvertible {
    /// The key's id (minisign's key number).
    public let keyID: SigningKeyID
    /// The 32 bytes of the Ed25519 public key.
    public let rawBytes: [UInt8]

    /// The number of bytes in an Ed25519 public key.
    public static let byteCount = 32
    /// The number of bytes in an Ed25519 signature.
    public static let signatureByteCount = 64

    /// A key from its id and its 32 raw bytes.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `rawBytes` holds 32 bytes,
    ///   not all zero.
    public init(keyID: SigningKeyID, rawBytes: [UInt8]) throws(CairnError) {
        guard rawBytes.count == Self.byteCount else {
            throw CairnError(.invalidArgument, "an Ed25519 public key is \(Self.byteCount) bytes, not \(rawBytes.count)")
        }
        try Sodium.requireNotAllZero(rawBytes, "Ed25519 public key")
        self.keyID = keyID
        self.rawBytes = rawBytes
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    ///
    /// A signature of the wrong length is not valid; nothing is thrown for bytes from outside.
    package func isValidSignature(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard signature.count == Self.signatureByteCount, (try? Sodium.ready()) != nil else { return false }
        // Arrays pass as non-null pointers, an empty message included.
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), rawBytes) == 0
    }

    /// The key id, as minisign prints it.
    public var description: String { keyID.description }
}
