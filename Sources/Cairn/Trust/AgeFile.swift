/// Whole age v1 files in memory (age-encryption.org/v1, `Spec/0004-trusted-archives.md §6`):
/// what `age -e` writes and `age -d` reads, for Cairn's key block.
///
/// A file is an ``AgeHeader`` (stanzas wrapping a random 16-byte file key, and the header MAC)
/// followed by the ``AgePayload``. Stock `age -d -i IDENTITY` decrypts what ``encrypt(_:to:)``
/// writes, and ``decrypt(_:with:what:)`` reads what `age -r age1…` writes.
package enum AgeFile {
    /// The bytes of a file key.
    package static let fileKeyByteCount = 16
    /// The ChaCha20-Poly1305 nonce of every stanza body: 12 zero bytes (each wrap key is used once).
    package static let stanzaNonce = [UInt8](repeating: 0, count: ChaCha20Poly1305.nonceByteCount)

    /// `payload` encrypted to `recipients` (each gets its own `X25519` stanza), under a fresh
    /// file key and payload nonce.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` when `recipients` is empty or holds a
    ///   point of small order, `.io` when libsodium cannot give random bytes.
    package static func encrypt(_ payload: [UInt8], to recipients: [AgeRecipient]) throws(CairnError) -> [UInt8] {
        guard !recipients.isEmpty else { throw CairnError(.invalidArgument, "an age file needs at least one recipient") }
        let fileKey = try Sodium.randomBytes(fileKeyByteCount)
        var stanzas: [AgeStanza] = []
        for recipient in recipients { stanzas.append(try recipient.stanza(wrapping: fileKey)) }
        return try seal(payload, stanzas: stanzas, fileKey: fileKey, nonce: Sodium.randomBytes(AgePayload.nonceByteCount))
    }

    /// `payload` encrypted under `passphrase` (one `cairn-argon2id` stanza, alone).
    ///
    /// - Throws: ``CairnError`` with code `.io` when libsodium cannot give random bytes or
    ///   Argon2id cannot allocate its memory.
    package static func encrypt(_ payload: [UInt8], with passphrase: AgePassphrase) throws(CairnError) -> [UInt8] {
        let fileKey = try Sodium.randomBytes(fileKeyByteCount)
        let stanza = try passphrase.stanza(wrapping: fileKey)
        return try seal(payload, stanzas: [stanza], fileKey: fileKey, nonce: Sodium.randomBytes(AgePayload.nonceByteCount))
    }

    /// The file of `stanzas` (which must wrap `fileKey`), `fileKey` and payload nonce `nonce`:
    /// the header with its MAC, then the payload.
    ///
    /// - Throws: ``CairnError`` with code `.invalidArgument` for a key or nonce of the wrong
    ///   length or stanzas a reader would refuse.
    package static func seal(_ payload: [UInt8], stanzas: [AgeStanza], fileKey: [UInt8], nonce: [UInt8]) throws(CairnError) -> [UInt8] {
        let header = try AgeHeader(stanzas: stanzas, fileKey: fileKey)
        return try header.encoded + AgePayload.seal(payload, fileKey: fileKey, nonce: nonce)
    }

    /// The payload of the age file `bytes`, its file key unwrapped by one of `identities`.
    ///
    /// - Parameter what: what the file is, for the refusal ("key block").
    /// - Throws: ``CairnError``: `.untrusted` when no identity unwraps any stanza; the header's
    ///   and payload's errors otherwise (``AgeHeader``, `AgePayload.open`), each with its offset.
    package static func decrypt(_ bytes: [UInt8], with identities: [AgeIdentity], what: String = "age file") throws(CairnError) -> [UInt8] {
        let header = try AgeHeader(parsing: bytes)
        let fileKey = try header.fileKey(with: identities, what: what)
        return try AgePayload.open(bytes, at: header.byteCount, fileKey: fileKey)
    }

    /// The payload of the age file `bytes`, its file key unwrapped by `passphrase`.
    ///
    /// - Throws: ``CairnError``: `.untrusted` when the passphrase does not unwrap it or the
    ///   header has no `cairn-argon2id` stanza; as ``decrypt(_:with:what:)`` otherwise.
    package static func decrypt(_ bytes: [UInt8], with passphrase: AgePassphrase, what: String = "age file") throws(CairnError) -> [UInt8] {
        let header = try AgeHeader(parsing: bytes)
        let fileKey = try header.fileKey(with: passphrase, what: what)
        return try AgePayload.open(bytes, at: header.byteCount, fileKey: fileKey)
    }
}
