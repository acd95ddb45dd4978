/// Whom an archive is encrypted for (`Spec/0004-trusted-archives.md §6`): age X25519 recipients
/// (`age1…`, as `age-keygen` prints them), or a passphrase (Argon2id). age's rule holds: a
/// passphrase is the only way in when there is one.
///
/// The archive's records are sealed in 16 KiB blocks under a random key that the key block
/// wraps for each recipient. Chunk ids and chunk boundaries are keyed with keys derived from the
/// archive's signing key (``Archiver/Configuration/signingKey``), so two exports signed with one
/// key share them and a seeded fetch between them still saves bytes; without a signing key they
/// are random for each archive.
public struct ArchiveEncryption: Sendable {
    public var recipients: [AgeRecipient]
    public var passphrase: AgePassphrase?

    /// - Parameters:
    ///   - recipients: each gets its own wrapping of the archive's key.
    ///   - passphrase: instead of recipients.
    public init(recipients: [AgeRecipient] = [], passphrase: AgePassphrase? = nil) {
        self.recipients = recipients
        self.passphrase = passphrase
    }
}
