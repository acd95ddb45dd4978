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
///
/// Towards a base that cuts at commits (an object store's parts, `Spec/0004 §6.9`), it offers
/// cut points only at sealed-block boundaries: for each inner commit it is told about, the first
/// block boundary at or after it (outer offset `E + k × (B + 40)`), once that block is sealed,
/// each with the SHA-256 of the plaintext from inner offset 0 to that boundary as the cut
/// point's digest, so that a run made again can tell a held part it reproduces. Its `finish()`
/// gives an object store the digest of the whole inner archive with the last part.
package final class SealingSink: ArchiveSink, CommitAwareArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private var blocks: BlockSealing
    private var envelope: [UInt8]?
    /// The sealing of the latest write, not yet handed to `base`, and the cut points that end in
    /// its blocks: it runs while the archiver produces the next bytes, and the next write,
    /// ``finish()`` or ``abandon()`` waits for it and writes its blocks first, so `base` gets
    /// them in order.
    private var sealing: (job: Task<[UInt8], Never>, cuts: [CommitPoint])?
    /// The cut points of a base that cuts at commits; nil for any other base.
    private var cuts: PlaintextCuts?

    /// - Parameters:
    ///   - base: where the outer bytes go.
    ///   - envelope: the envelope record (block size, archive id, key block) written first.
    ///   - secrets: the keys the key block holds; the block key seals.
    /// - Throws: `.invalidArgument` for keys of the wrong length.
    package init(base: any ArchiveSink, envelope: EnvelopeRecord, secrets: ArchiveSecrets) throws(CairnError) {
        self.base = base
        blocks = BlockSealing(
            sealer: try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID), blockSize: Int(envelope.blockSize))
        let framed = EnvelopeRecord.prelude + envelope.framed()
        self.envelope = framed
        if base is any CommitAwareArchiveSink {
            cuts = PlaintextCuts(blockSize: UInt64(envelope.blockSize), dataStart: UInt64(framed.count))
        }
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
        // A continued file is not cut at commits (an upload resumes by running again, §6.9).
    }

    package var writtenFileIdentity: (device: UInt64, inode: UInt64)? {
        (base as? any LocalFileWritingSink)?.writtenFileIdentity
    }

    package func write(_ bytes: [UInt8]) async throws {
        try await write(bytes, commits: [])
    }

    /// Consumes inner bytes and the inner commits ending in them; a base that cuts at commits is
    /// offered the first block boundary at or after each, once that block is sealed.
    package func write(_ bytes: [UInt8], commits: [CommitPoint]) async throws {
        let prefix = envelope ?? []
        envelope = nil
        let offered = try cuts?.add(bytes, commits: commits) ?? []
        guard let job = blocks.prepare(appending: bytes, prefix: prefix) else { return }
        let previous = sealing
        sealing = (Task.detached { job.run() }, offered)
        try await drain(previous)
    }

    /// Waits for a write's sealing and writes what it sealed to `base`, with its cut points.
    nonisolated(nonsending) private func drain(_ sealing: (job: Task<[UInt8], Never>, cuts: [CommitPoint])?) async throws {
        guard let sealing else { return }
        let out = await sealing.job.value
        guard !out.isEmpty else { return }
        if let aware = base as? any CommitAwareArchiveSink {
            try await aware.write(out, commits: sealing.cuts)
        } else {
            try await base.write(out)
        }
    }

    /// Seals the last block as the final one, writes it, and finishes the base sink; an object
    /// store's sink is given the SHA-256 of the whole plaintext with its last part.
    package func finish() async throws {
        let previous = sealing
        sealing = nil
        try await drain(previous)
        var out = envelope ?? []
        envelope = nil
        out += blocks.finish()
        if let store = base as? ObjectStoreSink, let cuts {
            if !out.isEmpty { try await store.write(out, commits: []) }
            try await store.finish(plaintextDigest: try cuts.wholeDigest())
            return
        }
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

/// Where an encrypted archive may be cut for a base that cuts at commits (``SealingSink``,
/// `Spec/0004 §6.9`): block boundaries at or after inner commits, each with the SHA-256 of the
/// plaintext before it. Every inner byte is hashed once, in order, as it is written.
private struct PlaintextCuts {
    let blockSize: UInt64
    /// The outer offset of block 0 (the prelude's and envelope record's length).
    let dataStart: UInt64
    private let hash = SHA256()
    /// Inner bytes given so far (all of them hashed).
    private var length: UInt64 = 0
    /// Boundaries (inner offsets, ascending) not yet reached by the hash.
    private var boundaries: [UInt64] = []
    /// Boundaries reached, with the digest of the plaintext before them, whose block is not
    /// yet sealed.
    private var ready: [(boundary: UInt64, digest: Digest)] = []

    init(blockSize: UInt64, dataStart: UInt64) {
        self.blockSize = blockSize
        self.dataStart = dataStart
    }

    /// Takes the next inner bytes and the commits ending in them, and returns the cut points
    /// whose block these bytes complete (a block is sealed once a byte after it exists).
    mutating func add(_ bytes: [UInt8], commits: [CommitPoint]) throws(CairnError) -> [CommitPoint] {
        for commit in commits {
            let boundary = (commit.end + blockSize - 1) / blockSize * blockSize
            if boundary > length, boundary > (boundaries.last ?? 0), boundary > (ready.last?.boundary ?? 0) {
                boundaries.append(boundary)
            }
        }
        var done = 0
        while let boundary = boundaries.first, boundary <= length + UInt64(bytes.count) {
            boundaries.removeFirst()
            let upTo = Int(boundary - length)
            bytes.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[done..<upTo])) }
            done = upTo
            ready.append((boundary, try hash.copy().finalize()))
        }
        bytes.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[done...])) }
        length += UInt64(bytes.count)
        var offered: [CommitPoint] = []
        while let first = ready.first, first.boundary < length {
            ready.removeFirst()
            offered.append(
                CommitPoint(end: dataStart + first.boundary / blockSize * (blockSize + UInt64(BlockSealer.overhead)), chainDigest: first.digest))
        }
        return offered
    }

    /// The SHA-256 of every inner byte given.
    func wholeDigest() throws(CairnError) -> Digest {
        try hash.copy().finalize()
    }
}
