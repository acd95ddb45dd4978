/// The trailing index (`Spec/0001-container-format.md §11`): every chunk with its record offset,
/// every file's chunk list, every entry with its metadata and record offset.
///
/// On disk it is a run of records: chunk-table records, then reference-table records, then
/// entry-table records, each starting with `firstIndex u64 | count u32`.
package struct Manifest: Sendable {
    /// One row of the chunk table (52 bytes on disk).
    package struct ChunkRow: Sendable, Equatable {
        package static let encodedLength = 52
        package var id: Digest
        /// Offset of the chunk record's first byte.
        package var offset: UInt64
        package var rawLength: UInt32
        package var storedLength: UInt32
        package var codec: ChunkCodec
        // The pack index and offset in 32 bits each, so a row takes 64 bytes instead of 80
        // (issue 9's peak RSS: one row per chunk). Both are bounded far below 2³² − 1 (a pack's
        // content is at most ``FormatLimits/maximumChunkLength``; pack indices are checked
        // against the packs held in memory).
        private var packIndex: UInt32 = .max
        private var packStart: UInt32 = 0

        /// Format 2.0: the index in ``Manifest/packs`` of the pack holding this chunk inline;
        /// nil for a chunk record. A packed row's `id` is zero (it is not stored: the chunk's
        /// bytes are checked through the pack's content digest), `offset` is the pack record's
        /// offset, `storedLength` 0 and `codec` none.
        package var pack: Int? {
            get { packIndex == .max ? nil : Int(packIndex) }
            set { packIndex = newValue.map { UInt32(clamping: $0) } ?? .max }
        }
        /// Format 2.0: where the chunk starts in its pack's content section.
        package var packOffset: Int {
            get { Int(packStart) }
            set { packStart = UInt32(clamping: newValue) }
        }

        package init(
            id: Digest, offset: UInt64, rawLength: UInt32, storedLength: UInt32, codec: ChunkCodec, pack: Int? = nil,
            packOffset: Int = 0
        ) {
            self.id = id
            self.offset = offset
            self.rawLength = rawLength
            self.storedLength = storedLength
            self.codec = codec
            self.pack = pack
            self.packOffset = packOffset
        }
    }

    /// Format 2.0: one pack record (§7.5).
    package struct PackRow: Sendable, Equatable {
        /// Offset of the pack record.
        package var offset: UInt64
        /// Items (entries) in the pack.
        package var entryCount: Int
        /// Bytes of the content section, uncompressed.
        package var contentLength: Int
        /// SHA-256 over the ids of the pack's inline chunks.
        package var contentDigest: Digest
        /// Index of the pack's first entry (not stored: entries are in order).
        package var firstEntry: Int
    }

    /// One row of the entry table.
    package struct EntryRow: Sendable, Equatable {
        /// Offset of the entry record's first byte.
        package var recordOffset: UInt64
        /// Index into ``Manifest/references`` of the file's first chunk reference.
        package var firstReference: UInt64
        package var referenceCount: UInt64
        /// The file's content digest; zero for other kinds.
        package var contentDigest: Digest
        /// The entry, with the size the file had when its content ended.
        package var entry: ArchiveEntry
        /// Format 2.0: the index in ``Manifest/packs`` of the pack holding the entry; nil for an
        /// entry record. A packed file's `contentDigest` is zero.
        package var pack: Int? = nil
    }

    package var chunks: [ChunkRow] = []
    /// Format 2.0: the pack records, in archive order.
    package var packs: [PackRow] = []
    /// Chunk-table indices, file after file.
    package var references: [UInt32] = []
    /// The entry table, packed (``EntryTable``).
    package var entries = EntryTable()

    package init() {}

    /// The paths of the entries whose content uses a chunk, for each chunk record offset in
    /// `offsets` (so an error about a damaged chunk can name every entry it damages).
    ///
    /// - Complexity: O(references + chunks), once for all the offsets.
    package func entryPaths(usingChunksAt offsets: Set<UInt64>) -> [UInt64: [String]] {
        var indices: [Int: UInt64] = [:]
        for (index, row) in chunks.enumerated() where offsets.contains(row.offset) { indices[index] = row.offset }
        guard !indices.isEmpty else { return [:] }
        var users: [UInt64: [String]] = [:]
        for row in entries where row.referenceCount > 0 {
            let start = Int(row.firstReference)
            let end = min(references.count, start + Int(row.referenceCount))
            guard start < end else { continue }
            var seen = Set<UInt64>()
            for reference in references[start..<end] {
                if let offset = indices[Int(reference)], seen.insert(offset).inserted { users[offset, default: []].append(row.entry.path) }
            }
        }
        return users
    }

    /// `error`, about the chunk record at its offset, with the entries that use that chunk named
    /// in its message ("used by a.txt, b.txt").
    package func namingUsers(of error: CairnError) -> CairnError {
        guard let offset = error.offset, let users = entryPaths(usingChunksAt: [offset])[offset], !users.isEmpty else { return error }
        var named = error
        named.message += Self.usersClause(users)
        return named
    }

    /// " (used by a, b and 3 more)".
    package static func usersClause(_ users: [String]) -> String {
        let shown = users.prefix(5).joined(separator: ", ")
        return " (used by \(shown)\(users.count > 5 ? " and \(users.count - 5) more" : ""))"
    }

    /// Adds one decoded manifest record. Records must arrive in order: all chunk tables, then
    /// reference tables, then entry tables, each table's `firstIndex` continuing the previous.
    package mutating func add(_ type: RecordType, payload: [UInt8], offset: UInt64) throws(CairnError) {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "\(type.name) record")
        let first = try r.u64("first index")
        let count = Int(try r.u32("row count"))
        switch type {
        case .manifestChunks:
            guard references.isEmpty, entries.isEmpty else { throw r.error("chunk table after later tables") }
            guard first == UInt64(chunks.count) else { throw r.error("first index \(first), expected \(chunks.count)") }
            guard count <= FormatLimits.maximumChunkRowsPerRecord, r.remaining == count * ChunkRow.encodedLength else {
                throw r.error("\(count) rows do not fit the payload")
            }
            chunks.reserveCapacity(chunks.count + count)
            for _ in 0..<count {
                let id = try r.digest("chunk id")
                let chunkOffset = try r.u64("chunk offset")
                let raw = try r.u32("raw length")
                let stored = try r.u32("stored length")
                let codecByte = try r.u8("codec")
                guard try r.raw(3, "reserved") == [0, 0, 0] else { throw r.error("reserved bytes are not zero") }
                guard let codec = ChunkCodec(rawValue: codecByte) else { throw r.error("unknown codec \(codecByte)") }
                guard raw >= 1, raw <= UInt32(FormatLimits.maximumChunkLength) else {
                    throw r.error("chunk raw length \(raw) is out of range")
                }
                guard codec != .none || stored == raw else {
                    throw r.error("uncompressed chunk row stores \(stored) bytes but declares \(raw)")
                }
                chunks.append(ChunkRow(id: id, offset: chunkOffset, rawLength: raw, storedLength: stored, codec: codec))
            }
        case .manifestReferences:
            guard entries.isEmpty else { throw r.error("reference table after the entry table") }
            guard first == UInt64(references.count) else { throw r.error("first index \(first), expected \(references.count)") }
            guard count <= FormatLimits.maximumReferenceRowsPerRecord, r.remaining == count * 4 else {
                throw r.error("\(count) rows do not fit the payload")
            }
            references.reserveCapacity(references.count + count)
            for _ in 0..<count {
                let value = try r.u32("chunk index")
                guard Int(value) < chunks.count else { throw r.error("reference to chunk \(value) of \(chunks.count)") }
                references.append(value)
            }
        case .manifestEntries:
            guard first == UInt64(entries.count) else { throw r.error("first index \(first), expected \(entries.count)") }
            // Each row is at least 60 bytes, so `count` is bounded by the payload.
            guard count <= r.remaining / 60 + 1 else { throw r.error("\(count) rows do not fit the payload") }
            for _ in 0..<count {
                let recordOffset = try r.u64("entry record offset")
                let firstReference = try r.u64("first reference")
                let referenceCount = try r.u64("reference count")
                let digest = try r.digest("content digest")
                let length = Int(try r.u32("entry length"))
                guard length <= r.remaining else { throw r.error("entry length \(length) runs past the record") }
                let before = r.position
                var entry = try ArchiveEntry.decodeVersion1(&r)
                guard r.position - before == length else { throw r.error("entry length \(length) does not match its fields") }
                let (end, overflow) = firstReference.addingReportingOverflow(referenceCount)
                guard !overflow, end <= UInt64(references.count) else {
                    throw r.error("entry references \(firstReference)+\(referenceCount) run past the reference table")
                }
                if entry.kind == .file {
                    entry.contentDigest = digest
                    entry.chunkCount = Int(referenceCount)
                } else if referenceCount != 0 || digest != .zero {
                    throw r.error("a \(entry.kind) entry has chunk references or a content digest")
                }
                entries.append(
                    EntryRow(
                        recordOffset: recordOffset, firstReference: firstReference, referenceCount: referenceCount,
                        contentDigest: digest, entry: entry))
            }
            guard r.isAtEnd else { throw r.error("\(r.remaining) bytes after the last row") }
        default:
            throw r.error("not a manifest record")
        }
    }
}

extension Manifest {
    /// The manifest is compressed with zstd whatever the chunks use: it is small, read whole,
    /// and mostly names and numbers, which zstd packs far tighter than LZ4.
    package static let compression = CompressionMethod.zstd(level: 9)
}
