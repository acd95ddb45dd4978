/// What an archiver needs to write an encrypted archive (`Spec/0004-trusted-archives.md §6`):
/// the envelope record (block size, archive id, and the key block made for the recipients) and
/// the keys that key block holds.
package struct ArchiveSealing: Sendable {
    package var envelope: EnvelopeRecord
    package var secrets: ArchiveSecrets

    package init(envelope: EnvelopeRecord, secrets: ArchiveSecrets) {
        self.envelope = envelope
        self.secrets = secrets
    }
}
