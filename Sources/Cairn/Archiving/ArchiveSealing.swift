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

    /// The sealing of a new archive for `recipients`, or for `passphrase` (age's rule: a
    /// passphrase is the only way in when there is one), with a random archive id and block key,
    /// and the id and chunker keys of the maker (`Spec/0004 §6.5`).
    ///
    /// - Parameters:
    ///   - maker: the maker's signing key, from which the id and chunker keys are derived, so
    ///     that its exports share chunk ids and boundaries.
    ///   - makerKey: the maker's key file, used instead of `maker` when given. With neither:
    ///     keys random for this archive alone.
    /// - Throws: `.invalidArgument` with neither recipients nor a passphrase, or both.
    package init(
        recipients: [AgeRecipient], passphrase: AgePassphrase?, maker: SigningKey?, makerKey: MakerKey? = nil
    ) throws(CairnError) {
        guard recipients.isEmpty != (passphrase == nil) else {
            throw CairnError(
                .invalidArgument,
                recipients.isEmpty ? "an encrypted archive needs a recipient or a passphrase" : "a passphrase cannot be combined with recipients")
        }
        // The maker's secret bytes are lent in temporaries wiped after the derivation.
        let (idKey, chunkerKey) =
            if let makerKey {
                try makerKey.withSecretBytes { (m) throws(CairnError) in try Self.makerKeys(from: m) }
            } else if let maker {
                try maker.withSeed { (seed) throws(CairnError) in try Self.makerKeys(from: seed) }
            } else {
                try Self.makerKeys(from: nil)
            }
        let secrets = ArchiveSecrets(blockKey: try Sodium.randomBytes(32), idKey: idKey, chunkerKey: chunkerKey)
        let keyBlock =
            if let passphrase { try AgeFile.encrypt(secrets.encoded(), with: passphrase) } else {
                try AgeFile.encrypt(secrets.encoded(), to: recipients)
            }
        self.init(envelope: EnvelopeRecord(archiveID: try Sodium.randomBytes(EnvelopeRecord.archiveIDByteCount), keyBlock: keyBlock), secrets: secrets)
    }

    /// The domain of the maker's derived keys.
    package static let makerSalt: [UInt8] = Array("cairn-maker-v1".utf8)

    /// `idKey` and `chunkerKey` of a maker (`Spec/0004 §6.5`): HKDF-SHA-256 of its 32 secret
    /// bytes (a maker key's, or its signing key's Ed25519 seed) with salt "cairn-maker-v1" and
    /// info "chunk id key" or "chunker key"; random without them. The one derivation of both.
    package static func makerKeys(from seed: [UInt8]?) throws(CairnError) -> (idKey: [UInt8], chunkerKey: [UInt8]) {
        guard let seed else { return (try Sodium.randomBytes(32), try Sodium.randomBytes(32)) }
        return (
            try HKDF.sha256(inputKeyMaterial: seed, salt: makerSalt, info: Array("chunk id key".utf8)),
            try HKDF.sha256(inputKeyMaterial: seed, salt: makerSalt, info: Array("chunker key".utf8))
        )
    }
}
