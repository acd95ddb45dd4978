import Cairn

/// The last successful import of a signed archive into a container, kept in its import status
/// (``StoredImportStatus``) for the rollback guard (`Spec/0004-trusted-archives.md §7.3`).
///
/// JSON: `{"signer":"<key id, 16 uppercase hex digits>","created":"<cairn.created, decimal>"}`.
struct SignedImportRecord: Codable, Equatable {
    /// The key id of the signature that verified, as messages show it (`Spec/0004 §2.1`).
    var signer: String
    /// The archive's `cairn.created`, nanoseconds since 1970 in decimal (``ExportCreationTime``).
    var created: String

    /// The rollback guard, the one place it is decided (§7.3): whether an archive whose header
    /// `header` a trusted key with id `signer` signed may be imported after `last`.
    ///
    /// An archive signed by the key of `last` whose creation time is earlier than `last.created`,
    /// or that has none, is refused unless `allowOlder`; an archive of another key, an equal or
    /// later time, or no record pass.
    ///
    /// - Parameters:
    ///   - signer: the key whose signature verified; nil when none was checked (no trusted
    ///     signers): nothing is guarded or recorded.
    /// - Returns: the record a successful import of this archive keeps, or nil when it keeps
    ///   `last` (unsigned, or no creation time).
    /// - Throws: `.untrusted` "… is older than the last import: created X, last imported Y";
    ///   `.corrupted` for a `cairn.created` not in its form.
    static func admit(
        _ header: ArchiveHeader, signer: SigningKeyID?, after last: SignedImportRecord?, allowOlder: Bool
    ) throws(CairnError) -> SignedImportRecord? {
        guard let signer else { return nil }
        let created = try ExportCreationTime.read(from: header)
        if !allowOlder, let last, last.signer == signer.description, let lastCreated = ExportCreationTime.parse(last.created) {
            let lastText = ExportCreationTime.describe(lastCreated)
            guard let created else {
                throw CairnError(
                    .untrusted,
                    "the archive signed by key \(signer) has no creation time (\(ExportCreationTime.metadataKey)); the last import by this key was created \(lastText) (allowOlder imports it)"
                )
            }
            guard created >= lastCreated else {
                throw CairnError(
                    .untrusted,
                    "the archive signed by key \(signer) is older than the last import: created \(ExportCreationTime.describe(created)), last imported \(lastText) (allowOlder imports it)"
                )
            }
        }
        return created.map { SignedImportRecord(signer: signer.description, created: String($0)) }
    }
}
