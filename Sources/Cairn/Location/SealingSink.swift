/// Writes an encrypted archive (`Spec/0004-trusted-archives.md §6`): the prelude and envelope
/// record first, then the inner archive's bytes sealed block by block into another sink (a file,
/// standard output, an object).
///
/// A block is sealed once the bytes after it exist, since the last block is sealed as the final
/// one: at most one block of plaintext (16 KiB by default) waits here, and ``finish()`` seals it.
/// The sealed blocks hide where records begin and end; only the total size shows.
package final class SealingSink: ArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private let sealer: BlockSealer
    private let blockSize: Int
    private var pending: [UInt8] = []
    private var nextIndex: UInt64 = 0
    private var envelope: [UInt8]?

    /// - Parameters:
    ///   - base: where the outer bytes go.
    ///   - envelope: the envelope record (block size, archive id, key block) written first.
    ///   - secrets: the keys the key block holds; the block key seals.
    /// - Throws: `.invalidArgument` for keys of the wrong length.
    package init(base: any ArchiveSink, envelope: EnvelopeRecord, secrets: ArchiveSecrets) throws(CairnError) {
        self.base = base
        sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        blockSize = Int(envelope.blockSize)
        self.envelope = EnvelopeRecord.prelude + envelope.framed()
        pending.reserveCapacity(blockSize * 2)
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        var out = envelope ?? []
        envelope = nil
        pending.append(contentsOf: bytes)
        var start = 0
        // Seal whole blocks that more bytes follow; the last block waits for finish().
        while pending.count - start > blockSize {
            pending.withUnsafeBytes { raw in
                out.append(contentsOf: sealer.seal(UnsafeRawBufferPointer(rebasing: raw[start..<(start + blockSize)]), index: nextIndex, isFinal: false))
            }
            nextIndex += 1
            start += blockSize
        }
        if start > 0 { pending.removeSubrange(0..<start) }
        if !out.isEmpty { try await base.write(out) }
    }

    /// Seals the last block as the final one, writes it, and finishes the base sink.
    package func finish() async throws {
        var out = envelope ?? []
        envelope = nil
        if !pending.isEmpty {
            pending.withUnsafeBytes { out.append(contentsOf: sealer.seal($0, index: nextIndex, isFinal: true)) }
            nextIndex += 1
            pending = []
        }
        if !out.isEmpty { try await base.write(out) }
        try await base.finish()
    }

    package func abandon() async {
        await base.abandon()
    }
}
