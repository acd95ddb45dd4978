/// The synchronous heart of the archiver: it turns entries and processed chunks into the bytes
/// of `Spec/0001-container-format.md`, in order, and keeps everything needed for the manifest,
/// deduplication and commits.
///
/// It does no I/O: callers append, then take the produced bytes with ``takeOutput()`` and write
/// them wherever they go. The writer never seeks back, so the bytes can go to a pipe.
///
/// - Important: Every byte produced must be written, in order, for the archive to be valid.
package final class ArchiveWriter {
    /// Bytes produced but not yet taken.
    private var output: [UInt8] = []
    /// Bytes already taken (written by the caller).
    private var takenBytes: UInt64 = 0
    /// How much of `output` the chain hasher has seen.
    private var hashedCount = 0
    /// The running chain hash: primed with the previous chain digest, fed every byte since the
    /// previous commit record's start.
    private var chain = SHA256()
    private var commitSequence: UInt64 = 0
    /// The state after the last commit with no file open: where ``rewindToBoundary()`` goes.
    private(set) package var boundary: Boundary?

    private(set) package var manifest = Manifest()
    /// Chunk id → index in the manifest chunk table.
    private var chunkIndex: [Digest: UInt32] = [:]
    private(set) package var contentBytes: UInt64 = 0
    private(set) package var storedBytes: UInt64 = 0
    /// Sum of the raw lengths of the distinct chunks.
    private(set) package var uniqueBytes: UInt64 = 0

    // The file entry being written, if any.
    private var openEntry: Int?
    private var pendingReferences: [ChunkReference] = []
    private var openFileBytes: UInt64 = 0
    private var openFileDigest = SHA256()
    private var openFileFirstReference = 0
    private var bytesSinceCommit: UInt64 = 0
    private var finished = false

    /// A commit record is written inside a file at least this often, in content bytes.
    package static let commitInterval: UInt64 = 4 * 1024 * 1024

    /// Starts an archive: the prelude, the header record and commit 0.
    package init(header: ArchiveHeader) throws(CairnError) {
        try header.validate()
        output.reserveCapacity(1 << 20)
        output.append(contentsOf: Prelude.bytes)
        RecordCodec.append(.header, payload: header.encoded(), to: &output)
        chain.update(Digest.zero.bytes)
        try commit()
    }

    /// The writer's state at an item boundary (just after a commit record with no file open),
    /// taken at every such commit: counts instead of copies, so it costs no more than the commit.
    package struct Boundary: Sendable {
        package var entryCount: Int
        package var chunkCount: Int
        package var referenceCount: Int
        package var contentBytes: UInt64
        package var storedBytes: UInt64
        package var uniqueBytes: UInt64
        package var nextCommitSequence: UInt64
        /// The chain digest the commit record carries (the chain is primed with it).
        package var chainDigest: Digest
        /// The commit record's framed bytes (the chain continues over them).
        package var commitRecord: [UInt8]
        /// Archive offset just after the commit record.
        package var offset: UInt64

        package init(
            entryCount: Int, chunkCount: Int, referenceCount: Int, contentBytes: UInt64, storedBytes: UInt64,
            uniqueBytes: UInt64, nextCommitSequence: UInt64, chainDigest: Digest, commitRecord: [UInt8], offset: UInt64
        ) {
            self.entryCount = entryCount
            self.chunkCount = chunkCount
            self.referenceCount = referenceCount
            self.contentBytes = contentBytes
            self.storedBytes = storedBytes
            self.uniqueBytes = uniqueBytes
            self.nextCommitSequence = nextCommitSequence
            self.chainDigest = chainDigest
            self.commitRecord = commitRecord
            self.offset = offset
        }
    }

    /// Everything needed to continue an archive after one of its commit records
    /// (see ``ArchiveRecovery``).
    package struct RecoveredState: Sendable {
        package struct OpenFile: Sendable {
            package var index: Int
            package var bytes: UInt64
            package var firstReference: Int
        }
        package var manifest: Manifest
        package var contentBytes: UInt64
        package var storedBytes: UInt64
        package var nextCommitSequence: UInt64
        package var chainDigest: Digest
        /// The commit record's bytes (the chain hash continues over them).
        package var commitRecord: [UInt8]
        /// Offset just after the commit record; the writer continues there.
        package var offset: UInt64
        package var openFile: OpenFile?
        /// The last item boundary at or before this commit (this commit itself when no file is
        /// open), for ``rewindToBoundary()``.
        package var boundary: Boundary?
    }

    /// Continues an archive after a commit record: the next byte produced belongs at
    /// `state.offset`. If the commit was inside a file, that file is open and takes chunks.
    package init(recovering state: RecoveredState) throws(CairnError) {
        output.reserveCapacity(1 << 20)
        takenBytes = state.offset
        manifest = state.manifest
        for (index, row) in manifest.chunks.enumerated() {
            chunkIndex[row.id] = UInt32(truncatingIfNeeded: index)
            uniqueBytes += UInt64(row.rawLength)
        }
        contentBytes = state.contentBytes
        storedBytes = state.storedBytes
        commitSequence = state.nextCommitSequence
        chain.update(state.chainDigest.bytes)
        chain.update(state.commitRecord)
        boundary = state.boundary
        if let open = state.openFile {
            guard open.index < manifest.entries.count, open.firstReference <= manifest.references.count else {
                throw CairnError(.notResumable, "the open file of the last commit is not in the archive")
            }
            openEntry = open.index
            openFileBytes = open.bytes
            openFileFirstReference = open.firstReference
            for reference in manifest.references[open.firstReference...] {
                manifest.chunks[Int(reference)].id.withUnsafeBytes { openFileDigest.update($0) }
            }
        }
    }

    /// The index of the file entry currently open, if any.
    package var openEntryIndex: Int? { openEntry }

    /// The archive offset of the next byte to be produced.
    package var offset: UInt64 { takenBytes + UInt64(output.count) }
    /// Entries begun so far.
    package var entryCount: Int { manifest.entries.count }
    /// Distinct chunks stored so far.
    package var chunkCount: Int { manifest.chunks.count }
    /// Bytes waiting to be taken.
    package var pendingOutputCount: Int { output.count }

    /// Hands over the bytes produced so far.
    package func takeOutput() -> [UInt8] {
        hashPending()
        let bytes = output
        takenBytes += UInt64(bytes.count)
        output = []
        output.reserveCapacity(1 << 20)
        hashedCount = 0
        return bytes
    }

    private func hashPending() {
        guard hashedCount < output.count else { return }
        output.withUnsafeBytes { chain.update(UnsafeRawBufferPointer(rebasing: $0[hashedCount...])) }
        hashedCount = output.count
    }

    /// Writes an entry record. Files stay open for chunks until ``endFile()``; other kinds are
    /// complete at once and followed by a commit.
    ///
    /// - Returns: the entry's index.
    /// - Throws: `.invalidArgument` if a file is still open; `.limitExceeded` for over-long names.
    @discardableResult
    package func beginEntry(_ entry: ArchiveEntry) throws(CairnError) -> Int {
        guard openEntry == nil, !finished else {
            throw CairnError(.invalidArgument, "an entry is already open", path: entry.path)
        }
        try Self.checkLimits(entry)
        let index = manifest.entries.count
        var row = Manifest.EntryRow(
            recordOffset: offset, firstReference: UInt64(manifest.references.count), referenceCount: 0,
            contentDigest: .zero, entry: entry)
        RecordCodec.append(.entry, payload: entry.encoded(), to: &output)
        if entry.kind == .file {
            openEntry = index
            openFileBytes = 0
            openFileFirstReference = manifest.references.count
            pendingReferences.removeAll(keepingCapacity: true)
            manifest.entries.append(row)
        } else {
            row.entry.size = 0
            manifest.entries.append(row)
            try commit()
        }
        return index
    }

    /// Whether a chunk with this id is already stored (so it needs no compression).
    package func contains(_ id: Digest) -> Bool { chunkIndex[id] != nil }

    /// Appends one chunk of the open file. If `id` is new, a chunk record is written with
    /// `stored` (already compressed with `codec`); otherwise only a reference is added.
    ///
    /// - Parameters:
    ///   - rawLength: the chunk's uncompressed length in bytes.
    ///   - stored: the stored payload, or nil when the caller knows the chunk is a duplicate.
    package func appendChunk(id: Digest, rawLength: Int, codec: ChunkCodec, stored: UnsafeRawBufferPointer?)
        throws(CairnError)
    {
        guard openEntry != nil else { throw CairnError(.invalidArgument, "no file entry is open") }
        if let existing = chunkIndex[id] {
            try addReference(existing, id: id, rawLength: rawLength)
            return
        }
        guard let stored else {
            throw CairnError(.invalidArgument, "chunk \(id) is new but no payload was given")
        }
        let start = RecordCodec.beginRecord(.chunk, in: &output)
        ChunkRecordPrefix(id: id, codec: codec, rawLength: rawLength).encode(into: &output)
        output.append(contentsOf: stored)
        RecordCodec.endRecord(startingAt: start, in: &output)
        let index = addChunkRow(id: id, offset: start, rawLength: rawLength, storedLength: stored.count, codec: codec)
        try addReference(index, id: id, rawLength: rawLength)
    }

    /// Like ``appendChunk(id:rawLength:codec:stored:)`` for a chunk already framed as a whole
    /// chunk record (built and checksummed by a processing task); copied as is when `id` is new.
    package func appendChunkRecord(
        id: Digest, rawLength: Int, codec: ChunkCodec, record: UnsafeRawBufferPointer, storedLength: Int
    ) throws(CairnError) {
        guard openEntry != nil else { throw CairnError(.invalidArgument, "no file entry is open") }
        if let existing = chunkIndex[id] {
            try addReference(existing, id: id, rawLength: rawLength)
            return
        }
        let start = output.count
        output.append(contentsOf: record)
        let index = addChunkRow(id: id, offset: start, rawLength: rawLength, storedLength: storedLength, codec: codec)
        try addReference(index, id: id, rawLength: rawLength)
    }

    /// Records a new chunk whose record starts at `output[offset]`.
    private func addChunkRow(id: Digest, offset: Int, rawLength: Int, storedLength: Int, codec: ChunkCodec) -> UInt32 {
        let index = UInt32(truncatingIfNeeded: manifest.chunks.count)
        manifest.chunks.append(
            Manifest.ChunkRow(
                id: id, offset: takenBytes + UInt64(offset), rawLength: UInt32(truncatingIfNeeded: rawLength),
                storedLength: UInt32(truncatingIfNeeded: storedLength), codec: codec))
        chunkIndex[id] = index
        storedBytes += UInt64(storedLength)
        uniqueBytes += UInt64(rawLength)
        return index
    }

    /// Appends a reference to chunk `index` to the open file; commits every ``commitInterval``.
    private func addReference(_ index: UInt32, id: Digest, rawLength: Int) throws(CairnError) {
        manifest.references.append(index)
        pendingReferences.append(ChunkReference(id: id, length: rawLength))
        id.withUnsafeBytes { openFileDigest.update($0) }
        openFileBytes += UInt64(rawLength)
        contentBytes += UInt64(rawLength)
        bytesSinceCommit += UInt64(rawLength)
        if pendingReferences.count >= FormatLimits.maximumReferencesPerRecord {
            flushReferences()
        }
        if bytesSinceCommit >= Self.commitInterval {
            flushReferences()
            try commit()
        }
    }

    private func flushReferences() {
        guard let entry = openEntry, !pendingReferences.isEmpty else { return }
        RecordCodec.append(
            .chunkReferences,
            payload: ChunkReferencesRecord.encode(entryIndex: UInt64(entry), references: pendingReferences[...]),
            to: &output)
        pendingReferences.removeAll(keepingCapacity: true)
    }

    /// Ends the open file: its remaining references, its file-end record, then a commit.
    ///
    /// - Returns: the file's content digest.
    @discardableResult
    package func endFile() throws(CairnError) -> Digest {
        guard let entry = openEntry else { throw CairnError(.invalidArgument, "no file entry is open") }
        flushReferences()
        let digest = try openFileDigest.finalize()
        let referenceCount = manifest.references.count - openFileFirstReference
        let end = FileEndRecord(
            entryIndex: UInt64(entry), size: openFileBytes, chunkCount: UInt64(referenceCount), contentDigest: digest)
        RecordCodec.append(.fileEnd, payload: end.encoded(), to: &output)
        manifest.entries[entry].referenceCount = UInt64(referenceCount)
        manifest.entries[entry].contentDigest = digest
        manifest.entries[entry].entry.size = openFileBytes
        openEntry = nil
        try commit()
        return digest
    }

    /// Goes back to ``boundary``, the last commit with no file open: forgets the entries, chunks
    /// (from the dedup index too) and references added since, and restores the counts, the
    /// commit sequence and the chain, so the next bytes are those an archive without them would
    /// have. Used to leave out a file that could not be read whole, and when a resumed archive's
    /// open file cannot be continued.
    ///
    /// - Returns: nil when every byte after the boundary was still pending (it is dropped);
    ///   otherwise the offset the caller must cut its sink back to, because bytes after the
    ///   boundary were already taken.
    /// - Throws: `.invalidArgument` when there is no boundary or the manifest was begun.
    package func rewindToBoundary() throws(CairnError) -> UInt64? {
        guard let mark = boundary, manifestStart == nil, !finished,
            mark.entryCount <= manifest.entries.count, mark.chunkCount <= manifest.chunks.count,
            mark.referenceCount <= manifest.references.count
        else {
            throw CairnError(.invalidArgument, "internal error: no item boundary to go back to")
        }
        manifest.entries.removeSubrange(mark.entryCount...)
        for row in manifest.chunks[mark.chunkCount...] { chunkIndex[row.id] = nil }
        manifest.chunks.removeSubrange(mark.chunkCount...)
        manifest.references.removeSubrange(mark.referenceCount...)
        contentBytes = mark.contentBytes
        storedBytes = mark.storedBytes
        uniqueBytes = mark.uniqueBytes
        commitSequence = mark.nextCommitSequence
        openEntry = nil
        pendingReferences.removeAll(keepingCapacity: true)
        openFileBytes = 0
        openFileDigest = SHA256()
        openFileFirstReference = manifest.references.count
        bytesSinceCommit = 0
        chain = SHA256()
        chain.update(mark.chainDigest.bytes)
        chain.update(mark.commitRecord)
        if mark.offset >= takenBytes {
            output.removeSubrange(Int(mark.offset - takenBytes)...)
            hashedCount = output.count
            return nil
        }
        takenBytes = mark.offset
        output.removeAll(keepingCapacity: true)
        hashedCount = 0
        return mark.offset
    }

    /// Writes a commit record: extends the chain digest over the bytes since the previous
    /// commit record's start, and records the counts.
    private func commit() throws(CairnError) {
        hashPending()
        let digest = try chain.finalize()
        chain.update(digest.bytes)
        let record = CommitRecord(
            sequence: commitSequence, entryCount: UInt64(manifest.entries.count),
            chunkCount: UInt64(manifest.chunks.count), contentBytes: contentBytes, storedBytes: storedBytes,
            openEntry: openEntry.map { UInt64($0) } ?? CommitRecord.noOpenEntry,
            openEntryBytes: openEntry == nil ? 0 : openFileBytes, chainDigest: digest)
        let start = output.count
        RecordCodec.append(.commit, payload: record.encoded(), to: &output)
        commitSequence += 1
        bytesSinceCommit = 0
        if openEntry == nil {
            boundary = Boundary(
                entryCount: manifest.entries.count, chunkCount: manifest.chunks.count,
                referenceCount: manifest.references.count, contentBytes: contentBytes, storedBytes: storedBytes,
                uniqueBytes: uniqueBytes, nextCommitSequence: commitSequence, chainDigest: digest,
                commitRecord: Array(output[start...]), offset: offset)
        }
    }

    /// Appends the manifest and the footer. Nothing may be appended afterwards.
    package func finish() throws(CairnError) {
        while try finishStep() {}
    }

    /// Writes the manifest one record per call, then the footer; returns false once the footer
    /// is written. Taking the output between calls keeps the manifest of a large archive from
    /// sitting in memory whole.
    package func finishStep() throws(CairnError) -> Bool {
        if finished { return false }
        if manifestStart == nil {
            guard openEntry == nil else { throw CairnError(.invalidArgument, "a file entry is still open") }
            manifestStart = offset
        }
        let before = output.count
        if manifestEncoder.appendNextRecord(of: manifest, to: &output) {
            output.withUnsafeBytes { manifestHasher.update(UnsafeRawBufferPointer(rebasing: $0[before...])) }
            return true
        }
        finished = true
        let manifestOffset = manifestStart ?? offset
        let manifestDigest = try manifestHasher.finalize()
        hashPending()
        let chainDigest = try chain.finalize()
        let footer = Footer(
            manifestOffset: manifestOffset, manifestLength: offset - manifestOffset, manifestDigest: manifestDigest,
            entryCount: UInt64(manifest.entries.count), chunkCount: UInt64(manifest.chunks.count),
            referenceCount: UInt64(manifest.references.count), contentBytes: contentBytes, storedBytes: storedBytes,
            chainDigest: chainDigest)
        RecordCodec.append(.footer, payload: footer.encoded(), to: &output)
        return false
    }

    private var manifestStart: UInt64?
    private var manifestEncoder = Manifest.Encoder()
    private let manifestHasher = SHA256()

    /// Checks an entry against the format's hard limits before it is written.
    package static func checkLimits(_ entry: ArchiveEntry) throws(CairnError) {
        guard !entry.pathBytes.isEmpty, entry.pathBytes.count <= FormatLimits.maximumPathLength else {
            throw CairnError(.limitExceeded, "path is empty or longer than \(FormatLimits.maximumPathLength) bytes", path: entry.path)
        }
        guard entry.linkTarget.count <= FormatLimits.maximumLinkTargetLength else {
            throw CairnError(.limitExceeded, "link target is longer than \(FormatLimits.maximumLinkTargetLength) bytes", path: entry.path)
        }
        guard entry.extendedAttributes.count <= FormatLimits.maximumExtendedAttributes else {
            throw CairnError(.limitExceeded, "more than \(FormatLimits.maximumExtendedAttributes) extended attributes", path: entry.path)
        }
        for attribute in entry.extendedAttributes
        where attribute.name.count > FormatLimits.maximumExtendedAttributeNameLength
            || attribute.value.count > FormatLimits.maximumExtendedAttributeValueLength
        {
            throw CairnError(.limitExceeded, "an extended attribute is over the size limits", path: entry.path)
        }
    }
}

extension Digest {
    /// The 32 bytes as an array.
    package var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        append(to: &out)
        return out
    }
}
