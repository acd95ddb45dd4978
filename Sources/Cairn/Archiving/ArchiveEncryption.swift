/// Whom an archive is encrypted for (`Spec/0004-trusted-archives.md §6`): age X25519 recipients
/// (`age1…`, as `age-keygen` prints them), or a passphrase (Argon2id). age's rule holds: a
/// passphrase is the only way in when there is one.
///
/// The archive's records are sealed in 16 KiB blocks under a random key that the key block
/// wraps for each recipient. Chunk ids and chunk boundaries are keyed with keys derived from the
/// archive's ``makerKey``, or else its signing key (``Archiver/Configuration/signingKey``), so two
/// exports of one maker share them and a seeded fetch between them still saves bytes; with
/// neither they are random for each archive.
public struct ArchiveEncryption: Sendable {
    public var recipients: [AgeRecipient]
    public var passphrase: AgePassphrase?
    /// The key the chunk id and chunker keys are derived from (`Spec/0004-trusted-archives.md
    /// §6.5`), for a maker that does not sign, or one that wants them independent of its signing
    /// key: when set it is used even when the archive is signed; nil: the signing key's, if any.
    public var makerKey: MakerKey?

    /// - Parameters:
    ///   - recipients: each gets its own wrapping of the archive's key.
    ///   - passphrase: instead of recipients.
    ///   - makerKey: the source of the chunk id and chunker keys (see ``makerKey``).
    public init(recipients: [AgeRecipient] = [], passphrase: AgePassphrase? = nil, makerKey: MakerKey? = nil) {
        self.recipients = recipients
        self.passphrase = passphrase
        self.makerKey = makerKey
    }
}
