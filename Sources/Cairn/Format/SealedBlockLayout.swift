/// Where the sealed blocks of an encrypted archive lie (`Spec/0004-trusted-archives.md §6.3`),
/// and which inner (plaintext) bytes each holds.
///
/// The outer file is `prelude ‖ envelope record ‖ block 0 ‖ block 1 ‖ …`. Block `i` starts at
/// outer offset `dataStart + i × (blockSize + 40)` and holds inner bytes
/// `i × blockSize ..< min((i + 1) × blockSize, innerSize)`; every block but the last holds
/// exactly `blockSize` of them, the last 1 to `blockSize`.
package struct SealedBlockLayout: Sendable, Equatable {
    /// The outer offset of block 0: just after the envelope record.
    package let dataStart: UInt64
    /// Inner bytes per block.
    package let blockSize: UInt64
    /// Inner bytes in all (0 while nothing has been sealed).
    package let innerSize: UInt64

    /// Outer bytes per full block: its inner bytes, the nonce and the tag.
    package var sealedBlockSize: UInt64 { blockSize + UInt64(BlockSealer.overhead) }
    /// How many blocks hold ``innerSize`` bytes.
    package var blockCount: UInt64 { innerSize == 0 ? 0 : (innerSize - 1) / blockSize + 1 }
    /// The outer size of a file holding the whole inner archive.
    package var outerSize: UInt64 { dataStart + innerSize + blockCount * UInt64(BlockSealer.overhead) }

    package init(dataStart: UInt64, blockSize: UInt64, innerSize: UInt64) {
        self.dataStart = dataStart
        self.blockSize = blockSize
        self.innerSize = innerSize
    }

    /// The layout of an outer file of `outerSize` bytes whose blocks start at `dataStart`.
    ///
    /// - Parameter partial: a file still being written (or cut): a torn last block (fewer than
    ///   `blockSize + 40` bytes) is left out instead of refused, since no reader releases it.
    /// - Throws: `.truncated` naming the offset of a last block too short to hold a nonce, a tag
    ///   and one byte, or, for a complete file, the offset where the bytes end when there is no
    ///   block at all (an inner archive has at least one byte, `Spec/0004 §6.3`).
    package init(dataStart: UInt64, blockSize: UInt64, outerSize: UInt64, partial: Bool = false) throws(CairnError) {
        self.dataStart = dataStart
        self.blockSize = blockSize
        let sealed = outerSize >= dataStart ? outerSize - dataStart : 0
        let full = sealed / (blockSize + UInt64(BlockSealer.overhead))
        let rest = sealed % (blockSize + UInt64(BlockSealer.overhead))
        if sealed == 0 && !partial {
            throw CairnError(.truncated, "the archive ends after its envelope record: it has no sealed block", offset: outerSize)
        } else if rest == 0 || partial {
            innerSize = full * blockSize
        } else if rest > UInt64(BlockSealer.overhead) {
            innerSize = full * blockSize + rest - UInt64(BlockSealer.overhead)
        } else {
            throw CairnError(
                .truncated, "the last sealed block has \(rest) bytes, too few for a nonce, a tag and one byte",
                offset: dataStart + full * (blockSize + UInt64(BlockSealer.overhead)))
        }
    }

    /// The block that holds inner offset `offset`.
    package func block(holding offset: UInt64) -> UInt64 { offset / blockSize }

    /// The outer offset where the block holding inner offset `offset` starts:
    /// `dataStart + ⌊offset / blockSize⌋ × (blockSize + 40)`. A copy cut there keeps only whole
    /// blocks before it, so the bytes from there on can be sent again as stored.
    package func outerStart(ofBlockHolding offset: UInt64) -> UInt64 { dataStart + block(holding: offset) * sealedBlockSize }

    /// The inner bytes block `index` holds.
    package func innerRange(of index: UInt64) -> Range<UInt64> {
        let start = index * blockSize
        return start..<min(start + blockSize, innerSize)
    }

    /// The outer bytes of block `index`: nonce, ciphertext and tag.
    package func outerRange(of index: UInt64) -> Range<UInt64> {
        let start = dataStart + index * sealedBlockSize
        return start..<(start + UInt64(innerRange(of: index).count) + UInt64(BlockSealer.overhead))
    }

    /// Whether block `index` is the last of a complete archive (its associated data says so).
    package func isFinal(_ index: UInt64) -> Bool { index + 1 == blockCount }

    /// The blocks that hold any byte of `range` (empty for an empty range).
    package func blocks(covering range: Range<UInt64>) -> Range<UInt64> {
        guard !range.isEmpty else { return 0..<0 }
        return block(holding: range.lowerBound)..<(block(holding: range.upperBound - 1) + 1)
    }
}
