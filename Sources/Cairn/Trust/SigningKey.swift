internal import CSodium

/// An Ed25519 secret key (RFC 8032) with its minisign key id: what a writer signs with.
///
/// Signatures are made by libsodium's `crypto_sign_detached`, and are deterministic: the same key
/// and message give the same 64 bytes, so a resumed signed write writes the bytes an uninterrupted
/// one would. The secret bytes are never printed (`description` shows the key id only).
public struct SigningKey: Sendable, CustomStringConvertible {
    /// The key's id (minisign's key number).
    public let keyID: SigningKeyID
    /// libsodium's 64-byte secret key: the 32-byte seed, then the 32-byte public key; wiped when
    /// the last copy of the key goes.
    let secretKey: SecretBytes

    /// The number of bytes in libsodium's Ed25519 secret key (seed and public key).
    public static let secretKeyByteCount = 64
    /// The number of bytes in an Ed25519 seed.
    public static let seedByteCount = 32

    /// The key derived from a 32-byte seed (`crypto_sign_seed_keypair`).
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `seed` holds 32 bytes, not
    ///   all zero, and `.io` when libsodium cannot initialize.
    public init(keyID: SigningKeyID, seed: [UInt8]) throws(CairnError) {
        guard seed.count == Self.seedByteCount else {
            throw CairnError(.invalidArgument, "an Ed25519 seed is \(Self.seedByteCount) bytes, not \(seed.count)")
        }
        try Sodium.ready()
        try Sodium.requireNotAllZero(seed, "Ed25519 secret key")
        var publicKey = [UInt8](repeating: 0, count: PublicKey.byteCount)
        self.keyID = keyID
        self.secretKey = SecretBytes(count: Self.secretKeyByteCount) { secret in
            _ = crypto_sign_seed_keypair(&publicKey, secret, seed)
        }
    }

    /// A key from libsodium's 64-byte secret key (seed, then public key), as minisign stores it.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `secretKey` holds 64 bytes
    ///   whose second half is the public key of its first half (a damaged or mistyped key).
    public init(keyID: SigningKeyID, secretKey: [UInt8]) throws(CairnError) {
        guard secretKey.count == Self.secretKeyByteCount else {
            throw CairnError(
                .invalidArgument, "an Ed25519 secret key is \(Self.secretKeyByteCount) bytes, not \(secretKey.count)")
        }
        var seed = Array(secretKey[0..<Self.seedByteCount])
        defer { SecretBytes.wipe(&seed) }
        let derived = try SigningKey(keyID: keyID, seed: seed)
        guard derived.secretKey.matches(SecretBytes(copying: secretKey)) else {
            throw CairnError(.invalidArgument, "the secret key \(keyID) does not hold its own public key: it is damaged")
        }
        self = derived
    }

    /// A new key pair with a random seed and a random key id.
    ///
    /// - Throws: ``CairnError`` with code `.io` when libsodium cannot initialize.
    public static func generate() throws(CairnError) -> SigningKey {
        let keyID = try SigningKeyID(bytes: Sodium.randomBytes(SigningKeyID.byteCount))
        return try SigningKey(keyID: keyID, seed: Sodium.randomBytes(seedByteCount))
    }

    /// The public half, to give to readers.
    public var publicKey: PublicKey {
        // The second half of libsodium's secret key is the public key (checked by every init).
        let raw = secretKey.withUnsafeBytes { Array($0[Self.seedByteCount...]) }
        return (try? PublicKey(keyID: keyID, rawBytes: raw)) ?? PublicKey(unchecked: keyID, raw)
    }

    /// This key's 64-byte Ed25519 signature of `message`.
    package func signature(of message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: PublicKey.signatureByteCount)
        // Arrays pass as non-null pointers, an empty message included.
        secretKey.withPointer { secret in
            _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), secret)
        }
        return signature
    }

    /// Calls `body` with the 32-byte seed (the maker keys' input, `Spec/0004 §6.5`), in a
    /// temporary wiped after it.
    package func withSeed<R, E: Error>(_ body: ([UInt8]) throws(E) -> R) throws(E) -> R {
        var seed = secretKey.withUnsafeBytes { Array($0[0..<Self.seedByteCount]) }
        defer { SecretBytes.wipe(&seed) }
        return try body(seed)
    }

    /// The key id; never the secret.
    public var description: String { "secret key \(keyID)" }
}

extension PublicKey {
    /// A key whose 32 bytes the caller has already checked.
    fileprivate init(unchecked keyID: SigningKeyID, _ rawBytes: [UInt8]) {
        self.keyID = keyID
        self.rawBytes = rawBytes
    }
}
