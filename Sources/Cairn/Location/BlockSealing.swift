import Dispatch
import Foundation

/// The one rule by which an inner archive's bytes become sealed blocks (`Spec/0004-trusted-archives.md
/// §6.3`): plaintext goes in, sealed blocks come out, numbered in order, and a block is sealed
/// only once bytes after it exist, since the last block is sealed as the final one
/// (``finish()``). At most one block of plaintext waits here.
///
/// ``SealingSink`` (an archive being written) takes each write's blocks as a ``SealingJob`` and
/// runs it beside the archiver; a seeded fetch of an encrypted archive (resealing the inner
/// archive it rebuilds, on its writer thread) calls ``seal(_:)``, which runs the job at once.
/// Block numbers and the waiting plaintext are settled here, in write order, either way.
package struct BlockSealing {
    private let sealer: BlockSealer
    private let blockSize: Int
    private var pending: [UInt8] = []
    private var nextIndex: UInt64 = 0

    /// - Parameters:
    ///   - sealer: the block key and archive id (`BlockSealer`).
    ///   - blockSize: plaintext bytes per block (the envelope record's block size).
    package init(sealer: BlockSealer, blockSize: Int) {
        self.sealer = sealer
        self.blockSize = blockSize
        pending.reserveCapacity(blockSize)
    }

    /// Continues sealing a partial archive (`Spec/0004-trusted-archives.md §6.9`) whose blocks
    /// `0..<index` are already written: `pending`, the plaintext of block `index` before the
    /// resume point (fewer than `blockSize` bytes), is sealed again with the bytes that follow,
    /// under a fresh nonce (§6.3's nonce rule).
    ///
    /// - Throws: `.invalidArgument` for `pending` of a whole block or more.
    package init(sealer: BlockSealer, blockSize: Int, continuingAt index: UInt64, pending: [UInt8]) throws(CairnError) {
        guard pending.count < blockSize else {
            throw CairnError(.invalidArgument, "a resumed block holds fewer than \(blockSize) bytes, not \(pending.count)")
        }
        self.init(sealer: sealer, blockSize: blockSize)
        nextIndex = index
        self.pending = pending
    }

    /// Takes `bytes` of plaintext and returns the job that seals what they complete: `prefix`
    /// (outer bytes to go first, such as the envelope), then every block that more bytes now
    /// follow (none of them final). The last block stays here for the next call or ``finish()``.
    ///
    /// The blocks are sealed straight from `bytes` (only a block begun by an earlier call is
    /// completed in `pending`) into one buffer that is never zero-filled.
    ///
    /// - Returns: the job, or nil when `bytes` completes nothing and `prefix` is empty.
    package mutating func prepare(appending bytes: [UInt8], prefix: [UInt8] = []) -> SealingJob? {
        let total = pending.count + bytes.count
        let count = total == 0 ? 0 : (total - 1) / blockSize
        guard count > 0 else {
            pending.append(contentsOf: bytes)
            return prefix.isEmpty
                ? nil : SealingJob(prefix: prefix, carried: [], bytes: [], fill: 0, count: 0, first: nextIndex, sealer: sealer, blockSize: blockSize)
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
        return job
    }

    /// Takes `bytes` of plaintext and returns the blocks they completed that more bytes follow,
    /// sealed now (none of them final); empty when none did.
    package mutating func seal(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        prepare(appending: Array(bytes))?.run() ?? []
    }

    /// The last block, sealed as the final one; empty when no plaintext waits.
    package mutating func finish() -> [UInt8] {
        guard !pending.isEmpty else { return [] }
        let sealed = pending.withUnsafeBytes { sealer.seal($0, index: nextIndex, isFinal: true) }
        nextIndex += 1
        pending = []
        return sealed
    }
}

/// The sealing of one run of blocks (``BlockSealing``): values only, so it runs on any thread.
package struct SealingJob: Sendable {
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
    package func run() -> [UInt8] {
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
