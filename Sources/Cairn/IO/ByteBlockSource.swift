/// Where a verifier takes its bytes from, block by block, giving each block back once it is done
/// with it: a fetch's ``FetchChannel`` (blocks the writer filled), or ``InputBlocks`` over any
/// ``ByteInput``.
package protocol ByteBlockSource: AnyObject {
    /// The next block (its valid bytes are the input's next ones, at least one), or nil at the end
    /// of the input.
    ///
    /// - Throws: `.io` naming the input.
    nonisolated(nonsending) func nextBlock() async throws -> ByteBlock?
    /// Gives back a block that ``nextBlock()`` returned, once nothing reads it any more.
    func recycle(_ block: ByteBlock)
    /// Whether ``nextBlock()`` would return at once (a block, or the end of the input): a reader
    /// with work in hand does that first instead of waiting for the input.
    var hasBlockReady: Bool { get }
}

/// Blocks read from a ``ByteInput`` (a file, a pipe), each filled as far as the input gives
/// (``blockSize`` bytes, or less at its end), and reused once given back.
package final class InputBlocks: ByteBlockSource {
    /// The size of a block (1 MiB).
    package static let blockSize = 1 << 20
    private let input: any ByteInput
    private var free: [ByteBlock] = []
    private var ended = false

    package init(_ input: any ByteInput) { self.input = input }

    nonisolated(nonsending) package func nextBlock() async throws -> ByteBlock? {
        guard !ended else { return nil }
        let block = free.popLast() ?? ByteBlock(capacity: Self.blockSize)
        block.start = 0
        block.end = 0
        while block.room > 0 {
            let n = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: block.bytes[block.end...]))
            guard n > 0 else {
                ended = true
                break
            }
            block.end += n
        }
        guard block.end > 0 else {
            free.append(block)
            return nil
        }
        return block
    }

    package func recycle(_ block: ByteBlock) { free.append(block) }

    /// A file is always ready; a pipe's reads block briefly at worst.
    package var hasBlockReady: Bool { true }
}
