import Dispatch
import Foundation

/// The one rule by which an inner archive's bytes become sealed blocks (`Spec/0004-trusted-archives.md
/// §6.3`), as a synchronous value: plaintext goes in, sealed blocks come out, numbered from 0, and
/// a block is sealed only once bytes after it exist, since the last block is sealed as the final
/// one (``finish()``). At most one block of plaintext waits here. ``SealingSink`` (an archive
/// being written) and a seeded fetch of an encrypted archive (resealing the inner archive it
/// rebuilds, on its writer thread) both seal through it.
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
        pending.reserveCapacity(blockSize * 2)
    }

    /// Takes `bytes` of plaintext and returns the blocks it completed that more bytes follow,
    /// sealed (none of them final); empty when none did.
    package mutating func seal(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        pending.append(contentsOf: bytes)
        let count = (pending.count - 1) / blockSize
        guard count > 0 else { return [] }
        let sealed = sealBlocks(count)
        pending.removeSubrange(0..<(count * blockSize))
        return sealed
    }

    /// The last block, sealed as the final one; empty when no plaintext waits.
    package mutating func finish() -> [UInt8] {
        guard !pending.isEmpty else { return [] }
        let sealed = pending.withUnsafeBytes { sealer.seal($0, index: nextIndex, isFinal: true) }
        nextIndex += 1
        pending = []
        return sealed
    }

    /// The first `count` blocks of `pending`, sealed (none of them final) and numbered from
    /// `nextIndex`. Blocks are independent, so a run of them is sealed on every core, each thread
    /// its own share, each block into its own place.
    private mutating func sealBlocks(_ count: Int) -> [UInt8] {
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
}
