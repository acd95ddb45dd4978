/// An age X25519 identity: the secret key that unwraps a file key wrapped to its
/// ``AgeRecipient`` (age-encryption.org/v1, `Spec/0004-trusted-archives.md §6.4.2`).
///
/// Its text form is what `age-keygen` writes and `age -d -i` reads: Bech32 with the
/// human-readable part `AGE-SECRET-KEY-`, all uppercase (`AGE-SECRET-KEY-1…`). Its
/// ``description`` names only the recipient: the secret never appears in logs.
public struct AgeIdentity: Sendable, CustomStringConvertible {
    /// The 32 bytes of the X25519 secret key; wiped when the last copy of the identity goes.
    private let secret: SecretBytes
    /// The recipient of this identity: its public key.
    public let recipient: AgeRecipient

    /// The human-readable part of an identity's Bech32 form.
    public static let humanReadablePart = "AGE-SECRET-KEY-"

    /// An identity from the 32 bytes of its X25519 secret key.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `secretBytes` holds 32
    ///   bytes, not all zero; `.io` when libsodium cannot initialize.
    public init(secretBytes: [UInt8]) throws(CairnError) {
        try Sodium.requireNotAllZero(secretBytes, "age identity")
        self.recipient = try AgeRecipient(rawBytes: X25519.publicKey(of: secretBytes))
        secret = SecretBytes(copying: secretBytes)
    }

    /// An identity from its text form, `AGE-SECRET-KEY-1…` (uppercase Bech32 of 32 bytes).
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` saying why the text is not one
    ///   (the message never repeats the text): not Bech32, another human-readable part (a
    ///   plugin's identity), lowercase, or not 32 bytes.
    public init(_ text: String) throws(CairnError) {
        // Another kind of key (a minisign key, an age recipient) is named as such, not as
        // text that fails Bech32; a plugin's AGE-PLUGIN-… identity is named below.
        guard text.uppercased().hasPrefix("AGE-") else {
            throw CairnError(.invalidArgument, "not an age identity (AGE-SECRET-KEY-1...)")
        }
        let decoded: Bech32.Decoded
        do throws(CairnError) { decoded = try Bech32.decode(text) } catch {
            throw CairnError(.invalidArgument, "not an age identity (AGE-SECRET-KEY-1...): \(error.message)")
        }
        guard decoded.humanReadablePart == Self.humanReadablePart else {
            throw CairnError(
                .invalidArgument, "not an age X25519 identity (AGE-SECRET-KEY-1..., uppercase): Cairn reads only X25519 identities")
        }
        guard let bytes = Bech32.bytes(fromValues: decoded.values), bytes.count == X25519.byteCount else {
            throw CairnError(.invalidArgument, "not an age X25519 identity: it does not hold \(X25519.byteCount) bytes")
        }
        try self.init(secretBytes: bytes)
    }

    /// A new identity from libsodium's random generator, as `age-keygen` makes one.
    ///
    /// - Throws: ``CairnError`` with code `.io` when libsodium cannot give random bytes.
    public static func generate() throws(CairnError) -> AgeIdentity {
        try AgeIdentity(secretBytes: Sodium.randomBytes(X25519.byteCount))
    }

    /// The identity's text form, `AGE-SECRET-KEY-1…`: a secret, for an identity file only.
    public var secretKeyText: String {
        withSecretBytes { Bech32.encode(humanReadablePart: Self.humanReadablePart, bytes: $0, uppercase: true) }
    }

    /// `age identity for age1…`: the recipient, never the secret.
    public var description: String { "age identity for \(recipient)" }

    /// The file key in an `X25519` stanza when it is wrapped to this identity; nil when it is not
    /// (the body does not authenticate under this identity's wrap key).
    ///
    /// - Throws: ``CairnError`` with code `.corrupted` when the stanza does not have the shape age
    ///   requires (two arguments, a 32-byte share, a 32-byte body) or its share gives an all-zero
    ///   shared secret (age aborts there too).
    package func fileKey(in stanza: AgeStanza) throws(CairnError) -> [UInt8]? {
        let share = try AgeRecipient.ephemeralShare(of: stanza)
        guard var shared = try withSecretBytes({ (scalar) throws(CairnError) in try X25519.sharedSecret(scalar, share) }) else {
            throw CairnError(.corrupted, "an X25519 stanza's share is a point of small order (the shared secret is zero)")
        }
        defer { SecretBytes.wipe(&shared) }
        var key = try AgeRecipient.wrapKey(sharedSecret: shared, share: share, recipient: recipient.rawBytes)
        defer { SecretBytes.wipe(&key) }
        return try ChaCha20Poly1305.open(stanza.body[...], key: key, nonce: AgeFile.stanzaNonce)
    }

    /// Calls `body` with the 32 secret bytes, in a temporary wiped after it.
    private func withSecretBytes<R, E: Error>(_ body: ([UInt8]) throws(E) -> R) throws(E) -> R {
        var bytes = secret.withUnsafeBytes { Array($0) }
        defer { SecretBytes.wipe(&bytes) }
        return try body(bytes)
    }
}
