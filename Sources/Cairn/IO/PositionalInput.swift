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
    /// When not nil, no read runs past a multiple of this many bytes.
    private let unit: UInt64?
    /// When not nil, the input ends here.
    private let end: UInt64?

    /// - Parameter unit: when given (> 0), every read stops at the next multiple of `unit` bytes
    ///   (a short read), so that a unit that fails to read (an encrypted archive's sealed block
    ///   that fails authentication) fails only the read that starts in it, never the whole
    ///   units before it that a larger read would have covered too.
    ///   - end: when given, the input ends at this offset (a parallel fetch's partial file is
    ///     in archive order only up to the end of the ranges it received from offset 0).
    package init(_ base: any PositionalInput, readingUnitsOf unit: UInt64? = nil, endingAt end: UInt64? = nil) {
        self.base = base
        self.unit = unit.flatMap { $0 > 0 ? $0 : nil }
        self.end = end
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        var buffer = buffer
        if let unit {
            let left = unit - position % unit
            if UInt64(buffer.count) > left { buffer = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(left)]) }
        }
        if let end {
            guard position < end else { return 0 }
            if UInt64(buffer.count) > end - position { buffer = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(end - position)]) }
        }
        let n = try base.read(fromAbsoluteOffset: position, into: buffer)
        position += UInt64(n)
        return n
    }
}
