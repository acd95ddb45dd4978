/// What opens an encrypted archive's key block (`Spec/0004-trusted-archives.md §6.4`): age X25519
/// identities (as `age-keygen` writes them), or the passphrase the archive was made with.
///
/// A reader given any of them reads only an encrypted archive: a plain archive is refused with
/// `untrusted`, since it is what stripping the encryption would leave (`Spec/0004 §6.2`). A
/// reader given none reads only a plain one, and refuses an encrypted archive asking for an
/// identity.
public struct ArchiveDecryption: Sendable {
    /// X25519 identities; any of them may open the key block.
    public var identities: [AgeIdentity]
    /// The passphrase of an archive made with one.
    public var passphrase: AgePassphrase?

    public init(identities: [AgeIdentity] = [], passphrase: AgePassphrase? = nil) {
        self.identities = identities
        self.passphrase = passphrase
    }

    /// No identity and no passphrase: the archive must be plain.
    public var isEmpty: Bool { identities.isEmpty && passphrase == nil }

    /// The plaintext of `record`'s key block.
    ///
    /// - Throws: `.untrusted` when no identity (or the passphrase) opens it, naming how many
    ///   recipients of which kinds it has; `.corrupted` for a malformed key block.
    package func openKeyBlock(_ record: EnvelopeRecord) throws(CairnError) -> [UInt8] {
        if let passphrase { return try AgeFile.decrypt(record.keyBlock, with: passphrase, what: "key block") }
        return try AgeFile.decrypt(record.keyBlock, with: identities, what: "key block")
    }

    /// `source` itself for a plain reader; its inner archive when identities are given.
    ///
    /// - Parameter partial: `source` is a partial file (no block is final, `Spec/0004 §6.3`
    ///   item 3), unless its last block opens as the final one: then it is read as complete.
    package func open(_ source: any ArchiveSource, partial: Bool = false) throws(CairnError) -> any ArchiveSource {
        guard !isEmpty else { return source }
        do throws(CairnError) {
            return try SealedArchiveSource.open(source, partial: partial) { (record) throws(CairnError) in try openKeyBlock(record) }
                .completedIfFinal()
        } catch {
            source.close()
            throw error
        }
    }

    /// `input` itself for a plain reader; its inner archive, opened on a thread of its own, when
    /// identities are given.
    package func open(_ input: SequentialArchiveBytes, name: String) throws(CairnError) -> SequentialArchiveBytes {
        guard !isEmpty else { return input }
        do throws(CairnError) {
            return try SealedBlockStream.open(input, name: name) { (record) throws(CairnError) in try openKeyBlock(record) }.bytes
        } catch {
            input.cancel()
            throw error
        }
    }
}
