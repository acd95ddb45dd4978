/// An archive known only in pieces (the first block, the manifest and footer of a remote archive
/// assembled from seeds and range requests), read by the seekable reader's own checks
/// (``ArchiveReader/init(source:verifyingStructure:keepingManifestRegion:trustedKeys:)``) without another
/// request: a read outside the pieces is an error.
package struct SparseArchiveSource: ArchiveSource {
    package let name: String
    package let size: UInt64
    package var isRemote: Bool { true }
    /// Byte strings by archive offset.
    private let pieces: [(offset: UInt64, bytes: [UInt8])]

    /// - Parameters:
    ///   - name: what errors name (the URL).
    ///   - size: the archive's size.
    ///   - pieces: the known bytes, each at its archive offset.
    package init(name: String, size: UInt64, pieces: [(offset: UInt64, bytes: [UInt8])]) {
        self.name = name
        self.size = size
        self.pieces = pieces
    }

    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(CairnError) -> Int {
        guard offset < size, !buffer.isEmpty else { return 0 }
        let count = Int(min(UInt64(buffer.count), size - offset))
        for piece in pieces where piece.offset <= offset && offset - piece.offset < UInt64(piece.bytes.count) {
            let start = Int(offset - piece.offset)
            let n = min(count, piece.bytes.count - start)
            piece.bytes.withUnsafeBytes { raw in
                UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]).copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[start..<(start + n)]))
            }
            return n
        }
        throw CairnError(.invalidArgument, "internal error: bytes at \(offset) were not fetched", path: name, offset: offset)
    }

    package func read(ranges: [Range<UInt64>]) throws(CairnError) -> [[UInt8]] {
        try ranges.map { (range) throws(CairnError) in
            var bytes = [UInt8](repeating: 0, count: Int(range.upperBound - range.lowerBound))
            var done = 0
            while done < bytes.count {
                let n = try bytes.withMutableBytes { (raw) throws(CairnError) in
                    try read(fromAbsoluteOffset: range.lowerBound + UInt64(done), into: UnsafeMutableRawBufferPointer(rebasing: raw[done...]))
                }
                guard n > 0 else { throw CairnError(.truncated, "a read runs past the archive's end", path: name, offset: range.lowerBound) }
                done += n
            }
            return bytes
        }
    }

    package func openSequential() throws(CairnError) -> SequentialArchiveBytes {
        throw CairnError(.invalidArgument, "internal error: an archive known in pieces is not read front to back", path: name)
    }

    package func close() {}
}
