import Glibc

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

    /// 48 bytes. A chunk's length is at most ``FormatLimits/maximumChunkLength``; files and
    /// chunks number far fewer than 2³² in memory.
    private struct Chunk {
        var id: Digest
        var offset: UInt64
        var length: UInt32
        var file: UInt32
    }

    /// 16 bytes.
    private struct File {
        var pathStart: Int
        var pathCount: UInt32
        /// Index in ``scratchFiles``, or −1.
        var scratch: Int32
    }

    private var chunks: [Chunk] = []
    private var files: [File] = []
    private var paths: [UInt8] = []
    /// The distinct scratch files (few: files `stripComponents` drops).
    private var scratchFiles: [FileDescriptor] = []
    /// Descriptor → index in ``scratchFiles``.
    private var scratchIndices: [Int32: Int32] = [:]
    /// The id's first 8 bytes → index in ``chunks``.
    private var index: [UInt64: UInt32] = [:]
    /// Ids whose first 8 bytes another id had first → index in ``chunks``.
    private var collisions: [Digest: UInt32] = [:]

    /// Makes room for `count` chunks (a seekable archive's chunk count: no row array grows by
    /// doubling past what it needs).
    mutating func reserveCapacity(_ count: Int) {
        chunks.reserveCapacity(count)
        index.reserveCapacity(count)
    }

    /// The location of the chunk `id`, if it was recorded.
    ///
    /// - Complexity: O(1) expected; builds the path array.
    subscript(id: Digest) -> Location? {
        guard let position = position(of: id) else { return nil }
        let chunk = chunks[position]
        let file = files[Int(chunk.file)]
        return Location(
            path: Array(paths[file.pathStart..<(file.pathStart + Int(file.pathCount))]),
            scratch: file.scratch >= 0 ? scratchFiles[Int(file.scratch)] : nil, offset: chunk.offset, length: Int(chunk.length))
    }

    /// Whether a location is recorded for `id`.
    func contains(_ id: Digest) -> Bool { position(of: id) != nil }

    /// Records where the chunk `id` lies unless a location is recorded for it already (the first
    /// place a chunk was written is kept).
    mutating func recordFirst(_ id: Digest, path: [UInt8], scratch: FileDescriptor?, offset: UInt64, length: Int) {
        guard !contains(id) else { return }
        // Consecutive chunks of one file share its record.
        var scratchIndex: Int32 = -1
        if let scratch {
            if let known = scratchIndices[scratch.rawValue] {
                scratchIndex = known
            } else {
                scratchIndex = Int32(clamping: scratchFiles.count)
                scratchIndices[scratch.rawValue] = scratchIndex
                scratchFiles.append(scratch)
            }
        }
        let sameFile = files.last.map {
            $0.scratch == scratchIndex && Int($0.pathCount) == path.count && paths[$0.pathStart...].elementsEqual(path)
        }
        if sameFile != true {
            files.append(File(pathStart: paths.count, pathCount: UInt32(clamping: path.count), scratch: scratchIndex))
            paths.append(contentsOf: path)
        }
        let position = UInt32(clamping: chunks.count)
        chunks.append(Chunk(id: id, offset: offset, length: UInt32(clamping: length), file: UInt32(clamping: files.count - 1)))
        let key = Self.key(id)
        if index[key] == nil {
            index[key] = position
        } else {
            collisions[id] = position
        }
    }

    private func position(of id: Digest) -> Int? {
        if let position = index[Self.key(id)].map(Int.init), chunks[position].id == id { return position }
        return collisions.isEmpty ? nil : collisions[id].map(Int.init)
    }

    private static func key(_ id: Digest) -> UInt64 {
        id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }
}

extension ChunkLocations {
    /// Reads a chunk back from where an extraction first wrote it and checks its SHA-256: the one
    /// way a later reference to a chunk is served from the staging directory instead of the
    /// archive (the streaming extraction, `Spec/0003 §4` item 6, and the seekable one,
    /// `Spec/0001 §13.7`).
    ///
    /// - Parameters:
    ///   - location: the staged file (or scratch file), offset and length.
    ///   - id: the id the bytes must have.
    ///   - ids: the archive's chunk id rule.
    ///   - staging: the staging directory the file's path is relative to.
    ///   - open: the file being written, as its path and descriptor: a location in it is read
    ///     through that descriptor.
    ///   - entryPath: the entry being written, which errors name.
    /// - Returns: the chunk's `location.length` bytes.
    /// - Throws: `.checksumMismatch` naming `entryPath` when the bytes read back are short or
    ///   hash to another id; `.io` when the file cannot be opened or read.
    static func readBack(
        _ location: Location, id: Digest, ids: ChunkIDFunction, staging: StagingDirectory, open: (path: [UInt8], fd: FileDescriptor),
        entryPath: String
    ) throws(CairnError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: location.length)
        let got: Int
        if let scratch = location.scratch {
            got = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try scratch.read(fromAbsoluteOffset: location.offset, into: raw)
            }
        } else if location.path == open.path {
            got = try bytes.withMutableBytes { (raw) throws(CairnError) in
                try open.fd.read(fromAbsoluteOffset: location.offset, into: raw)
            }
        } else {
            let fd = try staging.openStagedFile(location.path)
            got = try fd.closeAfter { () throws(CairnError) in
                try bytes.withMutableBytes { (raw) throws(CairnError) in
                    try fd.read(fromAbsoluteOffset: location.offset, into: raw)
                }
            }
        }
        guard got == location.length, try ids.id(of: bytes) == id else {
            throw CairnError(
                .checksumMismatch, "chunk \(id) read back from \(PathBytes.display(location.path)) no longer matches",
                path: entryPath)
        }
        return bytes
    }
}

extension ChunkLocations {
    /// How many of a file's chunk references, from its first, the file an interrupted extraction
    /// left at `path` in the staging directory holds verified (`Spec/0003 §4`): each whole chunk
    /// is read back with ``readBack(_:id:ids:staging:open:entryPath:)`` and counts only if its id
    /// (by `ids`) is its manifest id; the count ends at the first chunk that is short, differs or is packed
    /// (a packed chunk's row holds no id of its own). A file holding some is made writable by
    /// its owner (mode 0600), so the rest can be appended after them.
    ///
    /// - Parameters:
    ///   - path: the staged path of the file, relative to the staging root.
    ///   - references: the file's chunk references (indices into `chunks`), in order.
    ///   - chunks: the manifest's chunk table.
    ///   - ids: the archive's chunk id rule.
    ///   - staging: the staging directory.
    /// - Returns: the number of leading references held, 0 when there is no such file or it
    ///   cannot be read or made writable. Never throws: what cannot be verified is fetched again.
    static func verifiedPrefix(
        of path: [UInt8], references: ArraySlice<UInt32>, chunks: [Manifest.ChunkRow], ids: ChunkIDFunction, staging: StagingDirectory
    ) -> Int {
        guard !references.isEmpty, let fd = try? staging.openStagedFile(path) else { return 0 }
        defer { _ = try? fd.close() }
        var count = 0
        var offset: UInt64 = 0
        for reference in references {
            guard Int(reference) < chunks.count, chunks[Int(reference)].pack == nil else { break }
            let row = chunks[Int(reference)]
            let location = Location(path: path, scratch: nil, offset: offset, length: Int(row.rawLength))
            guard (try? readBack(location, id: row.id, ids: ids, staging: staging, open: (path, fd), entryPath: fd.path)) != nil else { break }
            count += 1
            offset += UInt64(row.rawLength)
        }
        guard count > 0, fchmod(fd.rawValue, 0o600) == 0 else { return 0 }
        return count
    }
}
