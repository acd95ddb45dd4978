/// Unwrapping the file key of an age header (`Spec/0004-trusted-archives.md §6.4.2`, §6.4.3).
extension AgeHeader {
    /// The file key, unwrapped from an `X25519` stanza by one of `identities` and checked
    /// against the header MAC.
    ///
    /// Every `X25519` stanza must have age's shape, whoever it is for; stanzas of other types
    /// are skipped, as age's identities skip them.
    ///
    /// - Parameter what: what the file is, for the refusal ("key block").
    /// - Throws: ``CairnError``: `.untrusted` when no identity unwraps any stanza (the message
    ///   counts the stanzas by type), `.corrupted` naming the line of a malformed `X25519`
    ///   stanza, `.checksumMismatch` when the MAC does not match.
    package func fileKey(with identities: [AgeIdentity], what: String = "age file") throws(CairnError) -> [UInt8] {
        for (stanza, location) in zip(stanzas, stanzaLocations) where stanza.type == AgeRecipient.stanzaType {
            for identity in identities {
                let unwrapped = try at(location) { () throws(CairnError) in try identity.fileKey(in: stanza) }
                if let fileKey = unwrapped {
                    try verifyMAC(fileKey: fileKey)
                    return fileKey
                }
            }
        }
        let given = identities.count == 1 ? "the identity given does not" : "none of the \(identities.count) identities given does"
        throw CairnError(.untrusted, "no identity matches: the \(what) is for \(stanzaCounts), and \(given) unwrap it")
    }

    /// The file key, unwrapped from the header's `cairn-argon2id` stanza by `passphrase` and
    /// checked against the header MAC.
    ///
    /// - Parameter what: what the file is, for the refusal ("key block").
    /// - Throws: ``CairnError``: `.untrusted` when the header has no `cairn-argon2id` stanza or
    ///   the passphrase does not unwrap it, `.corrupted` or `.limitExceeded` naming the line of a
    ///   malformed stanza or of work factors beyond the reader's limits, `.checksumMismatch` when
    ///   the MAC does not match.
    package func fileKey(with passphrase: AgePassphrase, what: String = "age file") throws(CairnError) -> [UInt8] {
        // A passphrase stanza is alone in its header (`init(parsing:)` checks it).
        guard stanzas.count == 1, stanzas[0].type == AgePassphrase.stanzaType else {
            throw CairnError(.untrusted, "no passphrase stanza: the \(what) is for \(stanzaCounts)")
        }
        let unwrapped = try at(stanzaLocations[0]) { () throws(CairnError) in try passphrase.fileKey(in: stanzas[0]) }
        guard let fileKey = unwrapped else {
            throw CairnError(.untrusted, "the passphrase does not unwrap the \(what)'s file key (a wrong passphrase, or a changed stanza)")
        }
        try verifyMAC(fileKey: fileKey)
        return fileKey
    }

    /// `1 X25519 recipient`, `2 X25519 recipients and 1 stanza of type scrypt`.
    package var stanzaCounts: String {
        var counts: [(type: String, count: Int)] = []
        for stanza in stanzas {
            if let index = counts.firstIndex(where: { $0.type == stanza.type }) {
                counts[index].count += 1
            } else {
                counts.append((stanza.type, 1))
            }
        }
        return counts.map { entry in
            switch entry.type {
            case AgeRecipient.stanzaType: "\(entry.count) X25519 recipient\(entry.count == 1 ? "" : "s")"
            case AgePassphrase.stanzaType: "a passphrase (\(AgePassphrase.stanzaType))"
            default: "\(entry.count) stanza\(entry.count == 1 ? "" : "s") of type \(entry.type)"
            }
        }.joined(separator: " and ")
    }

    /// `body`'s result; an error it throws names the line and offset of the stanza at `location`.
    private func at<T>(_ location: Location, _ body: () throws(CairnError) -> T) throws(CairnError) -> T {
        do {
            return try body()
        } catch {
            var located = error
            located.message = "age header line \(location.line): \(error.message)"
            located.offset = located.offset ?? UInt64(location.offset)
            throw located
        }
    }
}
