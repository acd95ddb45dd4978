/// What anyone who can read an encrypted archive learns without an identity
/// (`Spec/0004-trusted-archives.md §6.1`): its format, block size, archive id, the inner
/// archive's size, and how many recipients its key block names and of which kinds. Nothing of
/// the inner archive (names, contents, chunk ids, the header) is read: `cairn info` prints this
/// for an encrypted archive read without `--identity`.
package struct EnvelopeSummary: Sendable {
    /// The prelude's version (3.x).
    package let formatVersion: FormatVersion
    /// Plaintext bytes per sealed block.
    package let blockSize: UInt32
    /// The envelope's 16-byte archive id.
    package let archiveID: [UInt8]
    /// The outer (file) and inner (plain archive) sizes in bytes, and the number of sealed blocks.
    package let outerSize: UInt64
    package let innerSize: UInt64
    package let blockCount: UInt64
    /// One kind per key block stanza, in order: `X25519`, `passphrase`, or another stanza's type.
    package let recipientKinds: [String]
    /// The stanzas counted by kind, as refusals say it: `2 X25519 recipients`.
    package let recipientsDescription: String

    /// Reads the prelude, the envelope record and the key block's age header of `source`, with
    /// the same parsers as the readers that open it (`OpenedEnvelope`, `AgeHeader`).
    ///
    /// - Throws: `.untrusted` for a plain archive, and the envelope's and key block's errors
    ///   (`.corrupted`, `.truncated`, `.checksumMismatch`, `.limitExceeded`), naming `source`.
    package static func read(_ source: any ArchiveSource) throws(CairnError) -> EnvelopeSummary {
        let (record, prefix) = try OpenedEnvelope.readRecord(from: source)
        do throws(CairnError) {
            let version = try Prelude.parse(Array(prefix[0..<Prelude.length]), sealed: true)
            let layout = try SealedBlockLayout(
                dataStart: UInt64(prefix.count), blockSize: UInt64(record.blockSize), outerSize: source.size)
            let header = try AgeHeader(parsing: record.keyBlock)
            return EnvelopeSummary(
                formatVersion: version, blockSize: record.blockSize, archiveID: record.archiveID, outerSize: source.size,
                innerSize: layout.innerSize, blockCount: layout.blockCount, recipientKinds: header.stanzas.map(\.kind),
                recipientsDescription: header.stanzaCounts)
        } catch {
            throw error.withPath(source.name)
        }
    }
}
