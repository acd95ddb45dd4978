import Dispatch
import Foundation

/// Writes an encrypted archive (`Spec/0004-trusted-archives.md §6`): the prelude and envelope
/// record first, then the inner archive's bytes sealed block by block into another sink (a file,
/// standard output, an object).
///
/// A block is sealed once the bytes after it exist, since the last block is sealed as the final
/// one: at most one block of plaintext (16 KiB by default) waits here, and ``finish()`` seals it.
/// The blocks of one write are sealed while the archiver makes the next (one write in flight),
/// and reach the base sink before the next write's.
/// The sealed blocks hide where records begin and end; only the total size shows.
package final class SealingSink: ArchiveSink, LocalFileWritingSink {
    private let base: any ArchiveSink
    private let sealer: BlockSealer
    private let blockSize: Int
    private var pending: [UInt8] = []
    private var nextIndex: UInt64 = 0
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
        sealer = try BlockSealer(key: secrets.blockKey, archiveID: envelope.archiveID)
        blockSize = Int(envelope.blockSize)
        self.envelope = EnvelopeRecord.prelude + envelope.framed()
        pending.reserveCapacity(blockSize)
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
        guard let next = startSealing(appending: bytes) else { return }
        let previous = sealing
        sealing = next
        try await drain(previous)
    }

    /// Waits for `job` and writes what it sealed to `base`.
    nonisolated(nonsending) private func drain(_ job: Task<[UInt8], Never>?) async throws {
        guard let job else { return }
        let out = await job.value
        if !out.isEmpty { try await base.write(out) }
    }

    /// Starts sealing the outer bytes that `bytes`, appended to the inner archive, completes:
    /// the envelope the first time, then every block that more bytes now follow (none of them
    /// final). The last block stays in `pending` for the next write or ``finish()``.
    ///
    /// The blocks are sealed straight from `bytes` (only a block begun by an earlier write is
    /// completed in `pending`) into one buffer that is never zero-filled: each of its bytes is
    /// written once, by a copy of the envelope or by the sealer. Block numbers and `pending` are
    /// settled here, in write order; the sealing itself runs beside the archiver.
    ///
    /// - Returns: the job, or nil when `bytes` completes nothing.
    private func startSealing(appending bytes: [UInt8]) -> Task<[UInt8], Never>? {
        let prefix = envelope ?? []
        envelope = nil
        let total = pending.count + bytes.count
        // Whole blocks that more bytes follow; the last block waits for finish().
        let count = total == 0 ? 0 : (total - 1) / blockSize
        guard count > 0 else {
            pending.append(contentsOf: bytes)
            return prefix.isEmpty ? nil : Task.detached { prefix }
        }
        // A block begun earlier is completed from the start of `bytes` (count > 0 means
        // `bytes` holds more than that) and sealed first; the others are read in place.
        let fill = pending.isEmpty ? 0 : blockSize - pending.count
        if fill > 0 { pending.append(contentsOf: bytes[0..<fill]) }
        let carried = pending
        let consumed = fill + (carried.isEmpty ? count : count - 1) * blockSize
        pending.removeAll(keepingCapacity: true)
        pending.append(contentsOf: bytes[consumed...])
        let job = SealingJob(
            prefix: prefix, carried: carried, bytes: bytes, fill: fill, count: count, first: nextIndex, sealer: sealer, blockSize: blockSize)
        nextIndex += UInt64(count)
        return Task.detached { job.run() }
    }

    /// Seals the last block as the final one, writes it, and finishes the base sink.
    package func finish() async throws {
        let previous = sealing
        sealing = nil
        try await drain(previous)
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

    /// Writes the blocks still being sealed (what the archive wrote stays a prefix that can be
    /// resumed), then abandons the base sink.
    package func abandon() async {
        let previous = sealing
        sealing = nil
        try? await drain(previous)
        await base.abandon()
    }
}

/// The sealing of one write's blocks (``SealingSink``): values only, so it runs on any thread.
private struct SealingJob: Sendable {
    /// Outer bytes that go first (the envelope, on the first write).
    var prefix: [UInt8]
    /// A whole block begun by earlier writes, sealed first; empty when there is none.
    var carried: [UInt8]
    /// The write's bytes: blocks are read in place from `fill` on.
    var bytes: [UInt8]
    var fill: Int
    var count: Int
    var first: UInt64
    var sealer: BlockSealer
    var blockSize: Int

    /// `prefix` and the `count` sealed blocks (none of them final) numbered from `first`, in
    /// one buffer that is never zero-filled: each byte is written once, by the copy of the
    /// prefix or by the sealer.
    func run() -> [UInt8] {
        let sealedSize = blockSize + BlockSealer.overhead
        return [UInt8](unsafeUninitializedCapacity: prefix.count + count * sealedSize) { buffer, initialized in
            let output = UnsafeMutableRawBufferPointer(buffer)
            prefix.withUnsafeBytes { output.copyMemory(from: $0) }
            carried.withUnsafeBytes { carried in
                bytes.withUnsafeBytes { input in
                    sealBlocks(
                        carried: carried, from: UnsafeRawBufferPointer(rebasing: input[fill...]),
                        into: UnsafeMutableRawBufferPointer(rebasing: output[prefix.count...]))
                }
            }
            initialized = buffer.count
        }
    }

    /// Seals the blocks into `output` (`count` sealed blocks): `carried` first when it is not
    /// empty, then consecutive blocks of `input`. Blocks are independent, so a run of them is
    /// sealed on every core, each thread its own share, each block into its own place.
    private func sealBlocks(carried: UnsafeRawBufferPointer, from input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        let sealedSize = blockSize + BlockSealer.overhead
        let skip = carried.isEmpty ? 0 : 1
        let workers = count >= 8 ? min(ProcessInfo.processInfo.activeProcessorCount, count / 4) : 1
        let (count, first, sealer, blockSize) = (count, first, sealer, blockSize)
        // Each worker reads its own blocks of `input` and writes its own part of `output`; both
        // outlive concurrentPerform, which returns when every worker has.
        nonisolated(unsafe) let (carried, plaintext, out) = (carried, input, output)
        let share = (count + workers - 1) / workers
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            for block in (worker * share)..<min(count, (worker + 1) * share) {
                let source =
                    block < skip
                    ? carried : UnsafeRawBufferPointer(rebasing: plaintext[((block - skip) * blockSize)..<((block - skip + 1) * blockSize)])
                sealer.seal(
                    source, index: first + UInt64(block), isFinal: false,
                    into: UnsafeMutableRawBufferPointer(rebasing: out[(block * sealedSize)..<((block + 1) * sealedSize)]))
            }
        }
    }
}
