/// A source of bytes read front to back: a descriptor (a file, a pipe, standard input) or an
/// in-process channel (a fetch's ``FetchChannel``).
package protocol ByteInput {
    /// Reads up to `buffer.count` bytes into `buffer`, blocking until some are there.
    ///
    /// - Returns: the bytes read; 0 only at the end of the input.
    /// - Throws: `.io` naming the input.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int
}
