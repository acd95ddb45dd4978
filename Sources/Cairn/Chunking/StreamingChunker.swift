/// Chunks one input that arrives in slices of any size, with the same boundaries as chunking
/// it whole (`Spec/0002-chunking.md §4`).
///
/// Feed the input with ``append(_:)`` and end it with ``finish()``; both return the lengths of
/// the chunks completed by that call, in order. At most ``Chunker/maximum`` − 1 bytes stay
/// buffered between calls, and a scan that needs more bytes resumes where it stopped, so
/// feeding byte by byte costs O(1) per byte. After ``finish()`` the value is ready for the next
/// input.
package struct StreamingChunker {
    private let chunker: Chunker
    /// The bytes of the current chunk received so far (fewer than `chunker.maximum`).
    private var pending: [UInt8] = []
    private var state = Chunker.ScanState()

    /// Creates a streaming chunker.
    ///
    /// - Parameters:
    ///   - policy: A policy that passed ``ChunkingPolicy/validate()``.
    ///   - keying: The archive's keys (their gear table), nil for the published table.
    package init(policy: ChunkingPolicy, keying: ChunkKeying?) {
        self.chunker = Chunker(policy: policy, keying: keying)
    }

    /// The number of bytes received that belong to no completed chunk yet.
    package var bufferedByteCount: Int { pending.count }

    /// Adds the next bytes of the input.
    ///
    /// - Parameter bytes: The next slice of the input; may be empty.
    /// - Returns: The lengths of the chunks this slice completed, in input order.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) -> [Int] {
        let chunker = self.chunker
        var lengths: [Int] = []
        var offset = 0
        let count = bytes.count
        while offset < count {
            if pending.isEmpty {
                // At a chunk start with nothing buffered: scan the caller's bytes in place.
                let rest = UnsafeRawBufferPointer(rebasing: bytes[offset..<count])
                var scan = state
                let found = chunker.nextChunkLength(in: rest, isFinal: false, state: &scan)
                state = scan
                if let found {
                    lengths.append(found)
                    offset += found
                } else {
                    // Fewer than `maximum` bytes: keep them and the scan progress.
                    pending.reserveCapacity(chunker.maximum)
                    pending.append(contentsOf: rest)
                    offset = count
                }
            } else {
                let previous = pending.count
                let taken = min(chunker.maximum - previous, count - offset)
                pending.append(
                    contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + taken]))
                var scan = state
                let found = pending.withUnsafeBytes { buffer in
                    chunker.nextChunkLength(in: buffer, isFinal: false, state: &scan)
                }
                state = scan
                guard let found else {
                    offset += taken
                    continue
                }
                lengths.append(found)
                if found >= previous {
                    // The usual case: the chunk ends inside the bytes just taken; scan the
                    // rest of them in place on the next turn.
                    offset += found - previous
                    pending.removeAll(keepingCapacity: true)
                } else {
                    // Not reached for a valid scan (the buffered prefix was undetermined),
                    // but correct anyway: give back the bytes taken and drop the chunk.
                    pending.removeLast(taken)
                    pending.removeFirst(found)
                }
            }
        }
        return lengths
    }

    /// Ends the input.
    ///
    /// - Returns: The lengths of the remaining chunks (none when nothing is buffered).
    package mutating func finish() -> [Int] {
        let chunker = self.chunker
        var lengths: [Int] = []
        var scan = state
        while !pending.isEmpty {
            let found = pending.withUnsafeBytes { buffer in
                chunker.nextChunkLength(in: buffer, isFinal: true, state: &scan)
            }
            guard let found else { break }
            lengths.append(found)
            pending.removeFirst(found)
        }
        pending.removeAll(keepingCapacity: true)
        state = Chunker.ScanState()
        return lengths
    }
}
