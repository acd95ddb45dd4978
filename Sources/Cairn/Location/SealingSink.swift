/// Writes an encrypted archive (`Spec/0004-trusted-archives.md §6`): the prelude and envelope
/// record first, then the inner archive's bytes sealed block by block into another sink (a file,
/// standard output, an object).
///
/// A block is sealed once the bytes after it exist, since the last block is sealed as the final
/// one: at most one block of plaintext (16 KiB by default) waits here, and ``finish()`` seals it.
/// The sealed blocks hide where records begin and end; only the total size shows.
package final class SealingSink: ArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private var sealing: BlockSealing
    private var envelope: [UInt8]?

    /// - Parameters:
    ///   - base: where the outer bytes go.
    ///   - envelope: the envelope record (block size, archive id, key block) written first.
    ///   - secrets: the keys the key block holds; the block key seals.
    /// - Throws: `.invalidArgument` for keys of the wrong length.
    package init(base: any ArchiveSink, envelope: EnvelopeRecord, secrets: ArchiveSecrets) throws(CairnError) {
        self.base = base
        sealing = BlockSealing(
            sealer: try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID), blockSize: Int(envelope.blockSize))
        self.envelope = EnvelopeRecord.prelude + envelope.framed()
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        var out = envelope ?? []
        envelope = nil
        // Whole blocks that more bytes follow are sealed; the last block waits for finish().
        out += bytes.withUnsafeBytes { sealing.seal($0) }
        if !out.isEmpty { try await base.write(out) }
    }

    /// Seals the last block as the final one, writes it, and finishes the base sink.
    package func finish() async throws {
        var out = envelope ?? []
        envelope = nil
        out += sealing.finish()
        if !out.isEmpty { try await base.write(out) }
        try await base.finish()
    }

    package func abandon() async {
        await base.abandon()
    }
}
