/// An age X25519 recipient: the public key a file key is wrapped to (age-encryption.org/v1,
/// `Spec/0004-trusted-archives.md §6.4.2`).
///
/// Its text form is what `age-keygen` prints as "Public key" and `age -r` takes: Bech32
/// (BIP 173, without its length limit) with the human-readable part `age`, all lowercase,
/// for example `age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj`.
public struct AgeRecipient: Hashable, Sendable, CustomStringConvertible {
    /// The 32 bytes of the X25519 public key (RFC 7748).
    public let rawBytes: [UInt8]

    /// The human-readable part of a recipient's Bech32 form.
    public static let humanReadablePart = "age"
    /// The type (first argument) of the stanza an X25519 recipient gets.
    package static let stanzaType = "X25519"
    /// The HKDF info of the wrap key.
    private static let wrapInfo = Array("age-encryption.org/v1/X25519".utf8)

    /// A recipient from the 32 bytes of its X25519 public key.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` unless `rawBytes` holds 32 bytes,
    ///   not all zero (the zero point: every shared secret with it is zero).
    public init(rawBytes: [UInt8]) throws(CairnError) {
        guard rawBytes.count == X25519.byteCount else {
            throw CairnError(.invalidArgument, "an age X25519 recipient is \(X25519.byteCount) bytes, not \(rawBytes.count)")
        }
        try Sodium.requireNotAllZero(rawBytes, "age recipient")
        self.rawBytes = rawBytes
    }

    /// A recipient from its text form, `age1…` (lowercase Bech32 of 32 bytes).
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` saying why the text is not one:
    ///   not Bech32 (a mistyped character fails the checksum), another human-readable part
    ///   (another recipient type, such as a plugin's `age1yubikey1…`), uppercase, or not 32 bytes.
    public init(_ text: String) throws(CairnError) {
        let decoded = try Bech32.decode(text)
        guard decoded.humanReadablePart == Self.humanReadablePart else {
            throw CairnError(
                .invalidArgument,
                "not an age X25519 recipient (age1...): the prefix is \(decoded.humanReadablePart)1, and Cairn reads only X25519 recipients")
        }
        guard let bytes = Bech32.bytes(fromValues: decoded.values), bytes.count == X25519.byteCount else {
            throw CairnError(.invalidArgument, "not an age X25519 recipient: it does not hold \(X25519.byteCount) bytes")
        }
        self.rawBytes = bytes
    }

    /// The recipient's text form, `age1…`.
    public var description: String {
        Bech32.encode(humanReadablePart: Self.humanReadablePart, bytes: rawBytes, uppercase: false)
    }

    /// An `X25519` stanza wrapping `fileKey` to this recipient, with a fresh ephemeral secret.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a point of small order (the
    ///   shared secret would be zero), `.io` when libsodium cannot give random bytes.
    package func stanza(wrapping fileKey: [UInt8]) throws(CairnError) -> AgeStanza {
        try stanza(wrapping: fileKey, ephemeralSecret: Sodium.randomBytes(X25519.byteCount))
    }

    /// An `X25519` stanza wrapping `fileKey` with the given ephemeral secret (for fixed test
    /// vectors; a writer uses ``stanza(wrapping:)``).
    package func stanza(wrapping fileKey: [UInt8], ephemeralSecret: [UInt8]) throws(CairnError) -> AgeStanza {
        let share = try X25519.publicKey(of: ephemeralSecret)
        guard let shared = try X25519.sharedSecret(ephemeralSecret, rawBytes) else {
            throw CairnError(.invalidArgument, "the age recipient \(self) is a point of small order: nothing can be encrypted to it")
        }
        let key = try Self.wrapKey(sharedSecret: shared, share: share, recipient: rawBytes)
        let body = try ChaCha20Poly1305.seal(fileKey[...], key: key, nonce: AgeFile.stanzaNonce)
        return try AgeStanza(arguments: [Self.stanzaType, Base64.encodeUnpadded(share)], body: body)
    }

    /// The ephemeral share of an `X25519` stanza, when the stanza has the shape age requires:
    /// exactly two arguments, the second the canonical base64 of 32 bytes, and a 32-byte body.
    ///
    /// - Throws: ``CairnError`` with code `.corrupted` saying what is wrong.
    package static func ephemeralShare(of stanza: AgeStanza) throws(CairnError) -> [UInt8] {
        guard stanza.arguments.count == 2 else {
            throw CairnError(.corrupted, "an X25519 stanza has 2 arguments, this one \(stanza.arguments.count)")
        }
        guard let share = Base64.decodeUnpadded(Array(stanza.arguments[1].utf8)[...], count: X25519.byteCount) else {
            throw CairnError(.corrupted, "an X25519 stanza's share is not canonical base64 of \(X25519.byteCount) bytes")
        }
        guard stanza.body.count == AgeFile.fileKeyByteCount + ChaCha20Poly1305.tagByteCount else {
            throw CairnError(.corrupted, "an X25519 stanza's body is 32 bytes, this one \(stanza.body.count)")
        }
        return share
    }

    /// HKDF-SHA-256(ikm = shared secret, salt = ephemeral share ‖ recipient,
    /// info = "age-encryption.org/v1/X25519"): the key that wraps the file key, for both sides.
    static func wrapKey(sharedSecret: [UInt8], share: [UInt8], recipient: [UInt8]) throws(CairnError) -> [UInt8] {
        try HKDF.sha256(inputKeyMaterial: sharedSecret, salt: share + recipient, info: wrapInfo)
    }
}
