import Dispatch
import Foundation

/// Writes an encrypted archive (`Spec/0004-trusted-archives.md §6`): the prelude and envelope
/// record first, then the inner archive's bytes sealed block by block (``BlockSealing``, the one
/// sealing rule) into another sink (a file, standard output, an object).
///
/// A block is sealed once the bytes after it exist, since the last block is sealed as the final
/// one: at most one block of plaintext (16 KiB by default) waits here, and ``finish()`` seals it.
/// The blocks of one write are sealed while the archiver makes the next (one write in flight),
/// and reach the base sink before the next write's.
/// The sealed blocks hide where records begin and end; only the total size shows.
package final class SealingSink: ArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private var blocks: BlockSealing
    private var envelope: [UInt8]?
    /// The sealing of the latest write, not yet handed to `base`: it runs while the archiver
    /// produces the next bytes, and the next write, ``finish()`` or ``abandon()`` waits for it
    /// and writes its blocks first, so `base` gets them in order.
    private var sealing: Task<[UInt8], Never>?

    /// - Parameters:
    ///   - base: where the outer bytes go.
    ///   - envelope: the envelope record (block size, archive id, key block) written first.
    ///   - secrets: the keys the key block holds; the block key seals.
    /// - Throws: `.invalidArgument` for keys of the wrong length.
    package init(base: any ArchiveSink, envelope: EnvelopeRecord, secrets: ArchiveSecrets) throws(CairnError) {
        self.base = base
        blocks = BlockSealing(
            sealer: try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID), blockSize: Int(envelope.blockSize))
        self.envelope = EnvelopeRecord.prelude + envelope.framed()
    }

    /// Continues sealing a partial archive (`Spec/0004-trusted-archives.md §6.9`) whose outer
    /// file `base` was cut back to the start of block `index`: the envelope and blocks
    /// `0..<index` are already there, and `pending`, the plaintext of block `index` before the
    /// resume point (fewer than `blockSize` bytes), is sealed again with the bytes that follow,
    /// under a fresh nonce (§6.3's nonce rule).
    ///
    /// - Throws: `.invalidArgument` for keys of the wrong length, or `pending` of a whole block
    ///   or more.
    package init(
        base: any ArchiveSink, continuing envelope: EnvelopeRecord, secrets: ArchiveSecrets, atBlock index: UInt64, pending: [UInt8]
    ) throws(CairnError) {
        self.base = base
        blocks = try BlockSealing(
            sealer: try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID), blockSize: Int(envelope.blockSize),
            continuingAt: index, pending: pending)
        self.envelope = nil
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        let prefix = envelope ?? []
        envelope = nil
        guard let job = blocks.prepare(appending: bytes, prefix: prefix) else { return }
        let previous = sealing
        sealing = Task.detached { job.run() }
        try await drain(previous)
    }

    /// Waits for `job` and writes what it sealed to `base`.
    nonisolated(nonsending) private func drain(_ job: Task<[UInt8], Never>?) async throws {
        guard let job else { return }
        let out = await job.value
        if !out.isEmpty { try await base.write(out) }
    }

    /// Seals the last block as the final one, writes it, and finishes the base sink.
    package func finish() async throws {
        let previous = sealing
        sealing = nil
        try await drain(previous)
        var out = envelope ?? []
        envelope = nil
        out += blocks.finish()
        if !out.isEmpty { try await base.write(out) }
        try await base.finish()
    }

    /// Writes the blocks still being sealed (what the archive wrote stays a prefix that can be
    /// resumed), then abandons the base sink.
    package func abandon() async {
        let previous = sealing
        sealing = nil
        try? await drain(previous)
        await base.abandon()
    }
}
