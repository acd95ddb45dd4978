import Glibc

/// A small file read whole, with a hard limit: key files, signatures, password files.
package enum SmallFile {
    /// The bytes of the file at `path`, which must hold at most `limit` bytes.
    ///
    /// - Parameter what: what the file is, for the error ("public key file").
    /// - Throws: ``CairnError`` naming `path`: `.notFound` or `.io` when it cannot be opened or
    ///   read, `.limitExceeded` when it holds more than `limit` bytes (nothing more is read).
    package static func read(_ path: String, limit: Int, what: String) throws(CairnError) -> [UInt8] {
        let descriptor = try FileDescriptor.open(path, flags: O_RDONLY)
        return try descriptor.closeAfter { () throws(CairnError) -> [UInt8] in
            // One byte more than allowed tells a file at the limit from a longer one.
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: limit + 1, alignment: 1)
            defer { buffer.deallocate() }
            let count = try descriptor.readFully(into: buffer)
            guard count <= limit else {
                throw CairnError(.limitExceeded, "too large for a \(what): more than \(limit) bytes", path: path)
            }
            return Array(buffer[..<count])
        }
    }
}
