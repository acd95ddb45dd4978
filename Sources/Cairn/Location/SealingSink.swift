import Dispatch
import Foundation

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
        guard pending.count < Int(envelope.blockSize) else {
            throw CairnError(.invalidArgument, "a resumed block holds fewer than \(envelope.blockSize) bytes, not \(pending.count)")
        }
        self.base = base
        sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        blockSize = Int(envelope.blockSize)
        self.envelope = nil
        nextIndex = index
        self.pending = pending
        self.pending.reserveCapacity(blockSize * 2)
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        var out = envelope ?? []
        envelope = nil
        pending.append(contentsOf: bytes)
        // Seal whole blocks that more bytes follow; the last block waits for finish().
        let count = (pending.count - 1) / blockSize
        if count > 0 {
            out += sealBlocks(count)
            pending.removeSubrange(0..<(count * blockSize))
        }
        if !out.isEmpty { try await base.write(out) }
    }

    /// The first `count` blocks of `pending`, sealed (none of them final) and numbered from
    /// `nextIndex`. Blocks are independent, so a run of them is sealed on every core, each thread
    /// its own share, each block into its own place.
    private func sealBlocks(_ count: Int) -> [UInt8] {
        let sealedSize = blockSize + BlockSealer.overhead
        var sealed = [UInt8](repeating: 0, count: count * sealedSize)
        let first = nextIndex
        let workers = count >= 8 ? min(ProcessInfo.processInfo.activeProcessorCount, count / 4) : 1
        let (sealer, blockSize) = (self.sealer, self.blockSize)
        pending.withUnsafeBytes { input in
            sealed.withUnsafeMutableBytes { output in
                // Each worker reads its own blocks of `input` and writes its own part of
                // `output`; both outlive concurrentPerform, which returns when every worker has.
                nonisolated(unsafe) let plaintext = input
                nonisolated(unsafe) let out = output
                let share = (count + workers - 1) / workers
                DispatchQueue.concurrentPerform(iterations: workers) { worker in
                    for block in (worker * share)..<min(count, (worker + 1) * share) {
                        sealer.seal(
                            UnsafeRawBufferPointer(rebasing: plaintext[(block * blockSize)..<((block + 1) * blockSize)]),
                            index: first + UInt64(block), isFinal: false,
                            into: UnsafeMutableRawBufferPointer(rebasing: out[(block * sealedSize)..<((block + 1) * sealedSize)]))
                    }
                }
            }
        }
        nextIndex += UInt64(count)
        return sealed
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
