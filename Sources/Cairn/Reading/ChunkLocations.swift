/// Where an extraction first wrote each chunk (the staged file, or a dropped file's unnamed
/// scratch file, the offset in it and the length), so a later reference to the same chunk can
/// be read back from there.
///
/// Held compactly, because it has a row for every distinct chunk of the archive (issue 9: for
/// 100,000 small files a dictionary of tuples holding a path array each took about 42 MiB of an
/// 80 MiB peak RSS target): each file's path once, in one byte arena; per chunk its id, offset,
/// length and file; and an index keyed by the id's first 8 bytes (full ids are compared, and
/// the rare ids sharing a prefix with an earlier one go to a small dictionary of their own).
struct ChunkLocations {
    /// One chunk's location.
    struct Location {
        /// The staged path in archive of the file holding the chunk.
        var path: [UInt8]
        /// The unnamed file holding it, for a file `stripComponents` drops; nil otherwise.
        var scratch: FileDescriptor?
        /// Offset of the chunk's first byte in the file.
        var offset: UInt64
        /// The chunk's length in bytes.
        var length: Int
    }

    private struct Chunk {
        var id: Digest
        var offset: UInt64
        var length: Int
        var file: Int
    }

    private struct File {
        var pathStart: Int
        var pathCount: Int
        var scratch: FileDescriptor?
    }

    private var chunks: [Chunk] = []
    private var files: [File] = []
    private var paths: [UInt8] = []
    /// The id's first 8 bytes → index in ``chunks``.
    private var index: [UInt64: Int] = [:]
    /// Ids whose first 8 bytes another id had first → index in ``chunks``.
    private var collisions: [Digest: Int] = [:]

    /// The location of the chunk `id`, if it was recorded.
    ///
    /// - Complexity: O(1) expected; builds the path array.
    subscript(id: Digest) -> Location? {
        guard let position = position(of: id) else { return nil }
        let chunk = chunks[position]
        let file = files[chunk.file]
        return Location(
            path: Array(paths[file.pathStart..<(file.pathStart + file.pathCount)]), scratch: file.scratch, offset: chunk.offset,
            length: chunk.length)
    }

    /// Whether a location is recorded for `id`.
    func contains(_ id: Digest) -> Bool { position(of: id) != nil }

    /// Records where the chunk `id` lies unless a location is recorded for it already (the first
    /// place a chunk was written is kept).
    mutating func recordFirst(_ id: Digest, path: [UInt8], scratch: FileDescriptor?, offset: UInt64, length: Int) {
        guard !contains(id) else { return }
        // Consecutive chunks of one file share its record.
        let sameFile = files.last.map {
            $0.scratch?.rawValue == scratch?.rawValue && $0.pathCount == path.count && paths[$0.pathStart...].elementsEqual(path)
        }
        if sameFile != true {
            files.append(File(pathStart: paths.count, pathCount: path.count, scratch: scratch))
            paths.append(contentsOf: path)
        }
        let position = chunks.count
        chunks.append(Chunk(id: id, offset: offset, length: length, file: files.count - 1))
        let key = Self.key(id)
        if index[key] == nil {
            index[key] = position
        } else {
            collisions[id] = position
        }
    }

    private func position(of id: Digest) -> Int? {
        if let position = index[Self.key(id)], chunks[position].id == id { return position }
        return collisions[id]
    }

    private static func key(_ id: Digest) -> UInt64 {
        id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }
}
