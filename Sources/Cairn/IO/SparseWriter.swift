import Glibc

/// Writes a file's content front to back and leaves holes where it is zero, so an archived
/// sparse file comes back sparse (`Spec/0002-chunking.md §8`, `Spec/0003-command-line.md`).
///
/// Every chunk is written with `pwrite(2)` at its offset, except a chunk whose bytes are all
/// zero (or that the caller ``skip(_:)``s because it knows it is zeros): the offset only moves
/// past it, and ``finish(size:)`` sets the size with `ftruncate(2)` when the content ends in
/// such a gap. The file must be new (or empty): skipped ranges are never written, so they read
/// as zeros only because nothing was there. Any chunk of zeros becomes a hole, as with
/// `cp --sparse=always`; a file whose zeros were allocated in the source comes back smaller on
/// disk, never with different bytes.
///
/// Reading back what was written (with `pread`) works at any time: a gap inside the file reads as
/// zeros. A gap at the end exists only after ``finish(size:)``.
package struct SparseWriter {
    /// The file being written, opened for writing.
    package let file: FileDescriptor
    /// Where the next chunk goes: the content bytes written or skipped so far.
    package private(set) var offset: UInt64
    /// Whether bytes were skipped since the last write (the file is shorter than ``offset``).
    private var endsInGap = false

    /// - Parameters:
    ///   - file: a new, empty file open for writing.
    ///   - offset: where the content continues (0 for a new file).
    package init(file: FileDescriptor, offset: UInt64 = 0) {
        self.file = file
        self.offset = offset
    }

    /// Writes `bytes` at ``offset`` with `pwrite(2)`, or skips them when they are all zero.
    ///
    /// - Throws: `.io` naming the file and offset when a write fails (a full disk, for example).
    package mutating func write(_ bytes: UnsafeRawBufferPointer) throws(CairnError) {
        guard !Self.isZero(bytes) else {
            skip(UInt64(bytes.count))
            return
        }
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let position = off_t(truncatingIfNeeded: offset &+ UInt64(done))
            let n = retryOnInterrupt { Glibc.pwrite(file.rawValue, base + done, bytes.count - done, position) }
            guard n > 0 else {
                throw Errno.current.error("write failed", path: file.path, offset: offset &+ UInt64(done))
            }
            done += n
        }
        offset += UInt64(bytes.count)
        endsInGap = false
    }

    /// Writes `bytes` (see ``write(_:)-(UnsafeRawBufferPointer)``).
    package mutating func write(_ bytes: [UInt8]) throws(CairnError) {
        try bytes.withBytes { (raw) throws(CairnError) in try write(raw) }
    }

    /// Leaves `count` bytes (known to be zeros) unwritten: a hole.
    package mutating func skip(_ count: UInt64) {
        guard count > 0 else { return }
        offset += count
        endsInGap = true
    }

    /// Ends the content at `size` bytes: `ftruncate(2)` when it ends in a skipped range (no system
    /// call otherwise, so files without holes cost nothing more).
    ///
    /// - Parameter size: the file's size in bytes, normally ``offset``.
    /// - Throws: `.io` naming the file when `ftruncate` fails.
    package func finish(size: UInt64) throws(CairnError) {
        guard endsInGap || size < offset else { return }
        try file.truncate(to: size)
    }

    /// Whether every byte of `bytes` is zero (true for an empty buffer).
    ///
    /// - Complexity: O(n), stopping at the first non-zero byte (the first word, for most data).
    package static func isZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        // A buffer is all zeros when its first byte is zero and every byte equals the next one:
        // `memcmp` of the buffer against itself shifted by one byte (vectorised in glibc).
        return bytes[0] == 0 && (bytes.count == 1 || memcmp(base, base + 1, bytes.count - 1) == 0)
    }

    /// Whether every byte of `bytes` is zero.
    package static func isZero(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { isZero($0) }
    }
}

/// The seekable extractor's shortcut for holes: the archive's zero chunk of its policy's
/// maximum length (what every hole is mostly made of, `Spec/0002-chunking.md §8`) is decoded and
/// verified at its first reference only; every later reference to it is a hole, neither decoded
/// nor written.
///
/// The planner (which chunks the prefetcher decodes) and the writer walk the same references in
/// the same order, each with its own copy made before either starts, so they agree on which
/// reference is the first.
package struct RepeatedZeroChunk {
    /// The chunk-table index of the zero chunk of the maximum length; nil when the archive has none.
    package let index: UInt32?
    private var seen = false

    /// - Parameters:
    ///   - chunks: the manifest's chunk table.
    ///   - maximum: the archive's maximum chunk length in bytes (its header's policy).
    ///   - ids: the archive's chunk id rule.
    package init(chunks: [Manifest.ChunkRow], maximum: Int, ids: ChunkIDFunction) {
        guard let id = try? ZeroChunks.id(length: maximum, ids: ids) else {
            index = nil
            return
        }
        index = chunks.firstIndex { Int($0.rawLength) == maximum && $0.id == id }.map { UInt32(truncatingIfNeeded: $0) }
    }

    /// Whether the chunk of `reference` must be decoded: true except for the zero chunk after its
    /// first reference.
    package mutating func needsDecoding(_ reference: UInt32) -> Bool {
        guard reference == index else { return true }
        defer { seen = true }
        return !seen
    }
}
