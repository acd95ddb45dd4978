import Dispatch
import Foundation

/// Writes an encrypted archive (`Spec/0004-trusted-archives.md §6`): the prelude and envelope
/// record first, then the inner archive's bytes sealed block by block into another sink (a file,
/// standard output, an object).
///
/// A block is sealed once the bytes after it exist, since the last block is sealed as the final
/// one: at most one block of plaintext (16 KiB by default) waits here, and ``finish()`` seals it.
/// The sealed blocks hide where records begin and end; only the total size shows.
///
/// Towards a base that cuts at commits (an object store's parts, `Spec/0004 §6.9`), it offers
/// cut points only at sealed-block boundaries: for each inner commit it is told about, the first
/// block boundary at or after it (outer offset `E + k × (B + 40)`), each with the SHA-256 of the
/// plaintext from inner offset 0 to that boundary in the cut point's digest, so that a run made
/// again can tell a held part it reproduces. Its `finish()` gives an object store the digest of the
/// whole inner archive with the last part.
package final class SealingSink: ArchiveSink, CommitAwareArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private let sealer: BlockSealer
    private let blockSize: Int
    private var pending: [UInt8] = []
    private var nextIndex: UInt64 = 0
    private var envelope: [UInt8]?
    /// The outer offset of block 0 (the prelude's and envelope record's length).
    private let dataStart: UInt64
    /// The running SHA-256 of the plaintext sealed so far, when the base cuts at commits.
    private let plaintextHash: SHA256?
    /// Block counts `k` (ascending) at whose boundary the base is offered a cut.
    private var cutBlocks: [UInt64] = []

    /// - Parameters:
    ///   - base: where the outer bytes go.
    ///   - envelope: the envelope record (block size, archive id, key block) written first.
    ///   - secrets: the keys the key block holds; the block key seals.
    /// - Throws: `.invalidArgument` for keys of the wrong length.
    package init(base: any ArchiveSink, envelope: EnvelopeRecord, secrets: ArchiveSecrets) throws(CairnError) {
        self.base = base
        sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        blockSize = Int(envelope.blockSize)
        let framed = EnvelopeRecord.prelude + envelope.framed()
        self.envelope = framed
        dataStart = UInt64(framed.count)
        plaintextHash = base is any CommitAwareArchiveSink ? SHA256() : nil
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
        // A continued file is not cut at commits; its offsets are not needed.
        dataStart = 0
        plaintextHash = nil
        nextIndex = index
        self.pending = pending
        self.pending.reserveCapacity(blockSize * 2)
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        try await write(bytes, commits: [])
    }

    /// Consumes inner bytes and the inner commits ending in them; the base is offered the first
    /// block boundary at or after each commit, once that block is sealed.
    package func write(_ bytes: [UInt8], commits: [CommitPoint]) async throws {
        var out = envelope ?? []
        envelope = nil
        if plaintextHash != nil {
            let size = UInt64(blockSize)
            for commit in commits {
                let k = (commit.end + size - 1) / size
                if k > (cutBlocks.last ?? nextIndex), k > nextIndex { cutBlocks.append(k) }
            }
        }
        pending.append(contentsOf: bytes)
        // Seal whole blocks that more bytes follow; the last block waits for finish().
        let count = (pending.count - 1) / blockSize
        var cuts: [CommitPoint] = []
        if count > 0 {
            cuts = try hashPlaintext(blocks: count, outerStart: UInt64(out.count))
            out += sealBlocks(count)
            pending.removeSubrange(0..<(count * blockSize))
        }
        guard !out.isEmpty else { return }
        if let aware = base as? any CommitAwareArchiveSink {
            try await aware.write(out, commits: cuts)
        } else {
            try await base.write(out)
        }
    }

    /// Adds the first `count` blocks of `pending` (numbered from `nextIndex`, not yet sealed) to
    /// the running plaintext digest, and returns the cut points among their ends: outer offset
    /// of the boundary, and the digest of the plaintext before it.
    private func hashPlaintext(blocks count: Int, outerStart: UInt64) throws(CairnError) -> [CommitPoint] {
        guard let plaintextHash else { return [] }
        var cuts: [CommitPoint] = []
        var hashed = 0
        let last = nextIndex + UInt64(count)
        while let k = cutBlocks.first, k <= last {
            cutBlocks.removeFirst()
            let upTo = Int(k - nextIndex) * blockSize
            pending.withUnsafeBytes { plaintextHash.update(UnsafeRawBufferPointer(rebasing: $0[hashed..<upTo])) }
            hashed = upTo
            let digest = try plaintextHash.copy().finalize()
            cuts.append(CommitPoint(end: dataStart + k * UInt64(blockSize + BlockSealer.overhead), chainDigest: digest))
        }
        pending.withUnsafeBytes { plaintextHash.update(UnsafeRawBufferPointer(rebasing: $0[hashed..<(count * blockSize)])) }
        return cuts
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

    /// Seals the last block as the final one, writes it, and finishes the base sink; an object
    /// store's sink is given the SHA-256 of the whole plaintext with its last part.
    package func finish() async throws {
        var out = envelope ?? []
        envelope = nil
        if !pending.isEmpty {
            pending.withUnsafeBytes { plaintextHash?.update($0) }
            pending.withUnsafeBytes { out.append(contentsOf: sealer.seal($0, index: nextIndex, isFinal: true)) }
            nextIndex += 1
            pending = []
        }
        if let store = base as? ObjectStoreSink, let plaintextHash {
            if !out.isEmpty { try await store.write(out, commits: []) }
            try await store.finish(plaintextDigest: try plaintextHash.finalize())
            return
        }
        if !out.isEmpty { try await base.write(out) }
        try await base.finish()
    }

    package func abandon() async {
        await base.abandon()
    }
}
