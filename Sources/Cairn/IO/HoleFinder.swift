import Glibc

/// Finds the holes of a regular file that archiving treats as holes
/// (`Spec/0002-chunking.md §8`), with `lseek(2)`'s `SEEK_HOLE` and `SEEK_DATA`, without reading
/// a byte.
///
/// Holes are found in order from offset 0, always: a caller continuing a file part way (a
/// resumed archive) walks the same holes from the start and skips those that end before its
/// offset, so it sees the same hole extents, and cuts the same chunks, as the first run.
///
/// A file without holes costs one `lseek` (`SEEK_HOLE` answers the file size); a file shorter
/// than ``minimumLength`` costs none. A file system without hole support answers the same as a
/// file without holes, and a failing `lseek` is treated so too: the bytes are then read (as
/// zeros), which gives a valid archive, only slower.
///
/// - Important: `lseek` moves the descriptor's file offset; read the file with `pread`
///   (``FileDescriptor/read(fromAbsoluteOffset:into:)``).
package struct HoleFinder {
    /// The file, open for reading.
    package let file: FileDescriptor
    /// The end of the content considered, in bytes (the size at open); holes are clipped to it.
    package let size: UInt64
    /// Holes shorter than this many bytes are read as data.
    package let minimumLength: UInt64
    /// Where the next search starts: 0, or the end of a hole found (the start of data).
    private var cursor: UInt64 = 0

    /// `SEEK_DATA` and `SEEK_HOLE` (Linux `<unistd.h>`, declared by Glibc only under `_GNU_SOURCE`).
    private static let seekData: Int32 = 3
    private static let seekHole: Int32 = 4

    /// - Parameters:
    ///   - file: a regular file open for reading.
    ///   - size: the bytes of `file` that are archived (its size when it was opened).
    ///   - minimumLength: the shortest hole to report, in bytes (at least 1).
    package init(file: FileDescriptor, size: UInt64, minimumLength: UInt64) {
        self.file = file
        self.size = size
        self.minimumLength = max(1, minimumLength)
    }

    /// The next hole at least ``minimumLength`` long, as a byte range inside `0..<size`, or nil
    /// when no further hole is that long.
    ///
    /// - Complexity: two `lseek` calls per hole of the file, reported or not.
    package mutating func next() -> Range<UInt64>? {
        while cursor < size, size - cursor >= minimumLength {
            let hole = Glibc.lseek(file.rawValue, off_t(truncatingIfNeeded: cursor), Self.seekHole)
            guard hole >= 0, UInt64(hole) < size else { break }
            let start = UInt64(hole)
            // ENXIO: no data after the hole, which runs to the end of the file. Any other
            // failure: read the rest as data (never take data for a hole).
            let data = Glibc.lseek(file.rawValue, hole, Self.seekData)
            guard data >= 0 || errno == ENXIO else { break }
            let end = data < 0 ? size : min(size, UInt64(data))
            guard end > start else { break }
            cursor = end
            if end - start >= minimumLength { return start..<end }
        }
        cursor = size
        return nil
    }

    /// The first hole, at least ``minimumLength`` long, that ends after `offset` (it may contain
    /// `offset`), found by walking from the start as ``next()`` does.
    package mutating func first(endingAfter offset: UInt64) -> Range<UInt64>? {
        while let hole = next() {
            if hole.upperBound > offset { return hole }
        }
        return nil
    }
}
