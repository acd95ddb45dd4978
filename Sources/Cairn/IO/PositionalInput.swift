/// Bytes read at any offset, as `pread(2)` reads a file: a local archive's descriptor, or the
/// inner archive of an encrypted one (its sealed blocks opened as they are read). The seekable
/// reader walks and scans an archive's records through this, whichever it is.
package protocol PositionalInput {
    /// Reads up to `buffer.count` bytes at `offset`: fewer only at the end.
    ///
    /// - Returns: the bytes read; 0 at or past the end.
    /// - Throws: `CairnError` naming the input and `offset`.
    func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int
}

extension FileDescriptor: PositionalInput {}

/// A ``PositionalInput`` read front to back from offset 0, as a ``ByteInput``: a scan that does
/// not disturb other readers of the same input.
package final class PositionalByteInput: ByteInput {
    private let base: any PositionalInput
    private var position: UInt64 = 0

    package init(_ base: any PositionalInput) { self.base = base }

    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        let n = try base.read(fromAbsoluteOffset: position, into: buffer)
        position += UInt64(n)
        return n
    }
}
