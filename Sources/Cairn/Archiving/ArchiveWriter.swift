/// The synchronous heart of the archiver: it turns entries, processed chunks and packs into the
/// bytes of `Spec/0001-container-format.md` (format 2.1; 2.2 with the signature records of
/// `Spec/0004-trusted-archives.md §3` when given a signing key), in order, and keeps everything
/// needed for the manifest, deduplication, commits and signatures.
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
    /// The running chain (§10.3): primed with the previous chain digest and the previous commit
    /// record's digest, fed the digest of every record since.
    private var chain = RecordChain()
    /// Compresses pack item tables (small, so on this thread) with the archive's codec.
    private let tableCompressor: ChunkCompressor
    /// Whether the manifest is compressed: not in an archive whose header says it is not
    /// compressible.
    private let manifestCompressible: Bool
    private var commitSequence: UInt64 = 0
    /// The state after the last commit with no file open: where ``rewindToBoundary()`` goes.
    private(set) package var boundary: Boundary?

    private(set) package var manifest = Manifest()
    /// Chunk id → index of its first row in the manifest chunk table (a chunk record or a
    /// packed chunk).
    private var chunkIndex = ChunkIndex()
    /// Chunk id → index of its chunk record, for the few ids packed first and stored again as a
    /// chunk record: a file's chunk references name chunk records (§8.1), so a large file's
    /// chunk equal to a packed one is stored again. Every other id's chunk record, if any, is
    /// its first row, so one index serves both lookups (issue 9: one table less per chunk).
    private var recordsOfPacked: [Digest: UInt32] = [:]
    /// The id of every chunk, by index (packed rows of the manifest do not hold theirs).
    private var chunkIDs: [Digest] = []
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
    /// The commit records written since the last ``takeCommitPoints()``.
    private var pendingCommits: [CommitPoint] = []


    /// Hands over the commit points produced since the last call, in order (with the bytes of
    /// ``takeOutput()``: every point ends at or before the bytes taken).
    package func takeCommitPoints() -> [CommitPoint] {
        let ready = pendingCommits.prefix { $0.end <= takenBytes }
        defer { pendingCommits.removeFirst(ready.count) }
        return Array(ready)
    }

    /// A commit record is written inside a file at least this often, in content bytes.
    package static let commitInterval: UInt64 = 4 * 1024 * 1024

    /// Starts an archive: the prelude, the header record and commit 0 (and, signing, the prefix
    /// signature of commit 0, `Spec/0004 §3.4` rule 1).
    ///
    /// - Parameters:
    ///   - header: the header record's fields.
    ///   - minorVersion: 1 (format 2.1, the default): the manifest index goes before the final
    ///     commit (`Spec/0001 §11.8`). 0: format 2.0, without it (a seeded fetch rebuilding a 2.0
    ///     archive, §13.6.1). Ignored when `signingKey` is given: a signed archive is 2.2.
    ///   - signingKey: the maker's key: the archive is signed (`Spec/0004 §3.4`).
    package init(
        header: ArchiveHeader, minorVersion: UInt16 = Prelude.minorVersion, signingKey: SigningKey? = nil
    ) throws(CairnError) {
        try header.validate()
        tableCompressor = ChunkCompressor(method: header.isCompressible ? header.compression : .none)
        manifestCompressible = header.isCompressible
        output.reserveCapacity(1 << 20)
        self.minorVersion = signingKey == nil ? minorVersion : Prelude.minorVersion(signed: true)
        self.signingKey = signingKey
        let prelude = Prelude.bytes(minor: self.minorVersion)
        output.append(contentsOf: prelude)
        try chain.add(recordBytes: prelude)
        try appendRecord(.header, payload: header.encoded())
        try commit()
        try writeDuePrefixSignature()
    }

    // MARK: Signatures (`Spec/0004-trusted-archives.md §3.4`)

    /// The maker's key when the archive is signed (format 2.2).
    private let signingKey: SigningKey?
    /// `C_0`, the chain digest of commit 0, which every signed message holds.
    private var headerChainDigest = Digest.zero
    /// The last commit record written: its end and its record digest `d(c)` (signing only).
    private var latestCommit: (end: UInt64, digest: Digest)?
    /// The `signedLength` of the last prefix signature written (nil before commit 0's).
    private var lastSignedLength: UInt64?
    /// Whether ``latestCommit`` gets a prefix signature before the next body record.
    private var prefixSignatureDue = false

    /// A prefix signature follows commit 0 and every commit that ends at least this many bytes
    /// after the last prefix signature's `signedLength` (4 MiB, `Spec/0004 §3.4` rule 2).
    package static let signatureInterval: UInt64 = 4 * 1024 * 1024

    /// Whether a commit ending at `end` gets a prefix signature when the archive goes on, after
    /// the last one covering `signedLength` (nil: none yet, so this is commit 0). The one place
    /// the cadence of §3.4 rule 2 is decided.
    private static func isPrefixSignatureDue(end: UInt64, after signedLength: UInt64?) -> Bool {
        guard let signedLength else { return true }
        return end >= signedLength && end - signedLength >= signatureInterval
    }

    /// Writes the prefix signature of ``latestCommit`` if one is due: called before every body
    /// record (the archive goes on), so the last commit of the body never carries one.
    private func writeDuePrefixSignature() throws(CairnError) {
        guard prefixSignatureDue, let key = signingKey, let commit = latestCommit, commit.end == offset else { return }
        prefixSignatureDue = false
        let record = SignatureRecord(
            signing: .prefix, with: key, signedLength: commit.end, headerChainDigest: headerChainDigest,
            commitDigest: commit.digest, footer: nil
        ).framed()
        let start = output.count
        output.append(contentsOf: record)
        try hashRecord(from: start)
        lastSignedLength = commit.end
        // The item boundary at this commit keeps its signature: a rewind leaves it in place.
        if var mark = boundary, mark.offset == commit.end {
            mark.signature = record
            mark.offset = offset
            mark.lastSignedLength = commit.end
            boundary = mark
        }
    }

    /// Records the commit just written at `output[start...]` for the signatures.
    private func noteCommitForSigning(startingAt start: Int, chainDigest: Digest, sequence: UInt64) throws(CairnError) {
        guard signingKey != nil else { return }
        let digest = try output.withBytes { (raw) throws(CairnError) in
            try SHA256.hash(UnsafeRawBufferPointer(rebasing: raw[start...]))
        }
        if sequence == 0 { headerChainDigest = chainDigest }
        latestCommit = (offset, digest)
        prefixSignatureDue = Self.isPrefixSignatureDue(end: offset, after: lastSignedLength)
    }

    /// The signing state after a commit ending at `end` (record digest `digest`) that a rewind or
    /// a resume continues from, with the prefix signature kept after it, if any: the chain goes on
    /// over that signature, or the commit gets one if it is due when the archive goes on.
    private func continueSigning(
        afterCommitEnding end: UInt64, digest: Digest, signature: [UInt8]?, lastSignedLength: UInt64?
    ) throws(CairnError) {
        guard signingKey != nil else { return }
        latestCommit = (end, digest)
        self.lastSignedLength = signature == nil ? lastSignedLength : end
        if let signature { try chain.add(recordBytes: signature) }
        prefixSignatureDue = signature == nil && Self.isPrefixSignatureDue(end: end, after: lastSignedLength)
    }

    /// Signing: the end of the body (§3.4 rule 3). The last commit, held back as a 2.1 writer
    /// holds it, is written again after the root signature and the manifest index, so the final
    /// link is the last item's records, the root and the index, as in 2.1. The root signs the
    /// commit that link starts from, with the footer that will be written. When no commit is held
    /// back (an archive of no item; a resumed write with nothing after its resume point), the
    /// root signs the last commit and a new final commit follows (§3.3 rule 6).
    private func writeRootSignature(manifestRecords records: [UInt8], manifestDigest: Digest) throws(CairnError) {
        guard let key = signingKey, let last = latestCommit else { return }
        // An archive of nothing: commit 0's prefix signature is still written first (§3.3 rule 5).
        if lastSignedLength == nil { try writeDuePrefixSignature() }
        let held = lastCommitIsOpen ? lastCommit : nil
        let signed: (end: UInt64, digest: Digest)
        let bodyEnd: UInt64
        if let held, let linkStart = held.linkStart {
            signed = linkStart
            bodyEnd = held.start
        } else {
            guard last.end == offset || lastSignedLength == last.end else {
                throw CairnError(.invalidArgument, "internal error: the body does not end with a commit record")
            }
            signed = last
            bodyEnd = offset
        }
        var index: [UInt8] = []
        if !records.isEmpty {
            let built = try ManifestIndex(manifestRecords: records)
            if built.entries.count <= ManifestIndex.maximumCount { index = built.framed() }
        }
        let manifestOffset =
            bodyEnd + UInt64(SignatureRecord.framedLength) + UInt64(index.count) + UInt64(CommitRecord.framedLength)
        let footer = makeFooter(
            manifestOffset: manifestOffset, manifestLength: UInt64(records.count), manifestDigest: manifestDigest,
            chainDigest: .zero)
        let root = SignatureRecord(
            signing: .root, with: key, signedLength: signed.end, headerChainDigest: headerChainDigest,
            commitDigest: signed.digest, footer: footer)
        prefixSignatureDue = false
        if held != nil {
            guard try insertBeforeLastCommit(records: [root.framed(), index]) else {
                throw CairnError(.invalidArgument, "internal error: the last commit could not be written again")
            }
        } else {
            for record in [root.framed(), index] where !record.isEmpty {
                let start = output.count
                output.append(contentsOf: record)
                try hashRecord(from: start)
            }
            try commit()
        }
        prefixSignatureDue = false
        guard offset == manifestOffset else {
            throw CairnError(.invalidArgument, "internal error: the manifest begins at \(offset), not \(manifestOffset)")
        }
    }

    /// The footer of this archive (the counts are final once the manifest is begun).
    private func makeFooter(
        manifestOffset: UInt64, manifestLength: UInt64, manifestDigest: Digest, chainDigest: Digest
    ) -> Footer {
        Footer(
            manifestOffset: manifestOffset, manifestLength: manifestLength, manifestDigest: manifestDigest,
            entryCount: UInt64(manifest.entries.count), chunkCount: UInt64(manifest.chunks.count),
            referenceCount: UInt64(manifest.references.count), contentBytes: contentBytes, storedBytes: storedBytes,
            chainDigest: chainDigest)
    }

    /// The minor version written (the prelude's), which decides the manifest's form.
    private let minorVersion: UInt16
    /// Whether the manifest index is written before the final commit (format 2.1).
    private var writesManifestIndex: Bool { Prelude.hasManifestIndex(minor: minorVersion) }
    /// The last commit record (not commit 0), while the manifest index may still be put before it:
    /// its archive offset, and the chain as it was before the commit's link was finalized. It
    /// is held back by ``takeOutput(holdingLastCommit:)`` while it ends the output, since only at
    /// ``finish()`` is it known to be the final commit.
    ///
    /// Signing: `linkStart` is the commit record its link starts from (its end and `d(c)`),
    /// which the root signature signs.
    private var lastCommit: (start: UInt64, chainBefore: RecordChain, linkStart: (end: UInt64, digest: Digest)?)?

    /// Whether ``lastCommit`` still ends the output and has not been taken.
    private var lastCommitIsOpen: Bool {
        guard let held = lastCommit else { return false }
        return held.start >= takenBytes && held.start + UInt64(CommitRecord.framedLength) == offset
    }

    /// Puts `record` (a skippable record: the manifest index) before the last commit record, which
    /// is written again with the chain digest that now covers it (its counts do not change, §3.3).
    ///
    /// - Returns: false when the last commit was taken already or records follow it.
    /// - Throws: what hashing throws.
    package func insertBeforeLastCommit(_ record: [UInt8]) throws(CairnError) -> Bool {
        try insertBeforeLastCommit(records: [record])
    }

    /// ``insertBeforeLastCommit(_:)`` for several skippable records, in order (empty ones left out).
    private func insertBeforeLastCommit(records: [[UInt8]]) throws(CairnError) -> Bool {
        guard let held = lastCommit, lastCommitIsOpen, let point = pendingCommits.last,
            point.end == held.start + UInt64(CommitRecord.framedLength)
        else { return false }
        output.removeSubrange(Int(held.start - takenBytes)...)
        pendingCommits.removeLast()
        commitSequence -= 1
        chain = held.chainBefore
        for record in records where !record.isEmpty {
            let start = output.count
            output.append(contentsOf: record)
            try hashRecord(from: start)
        }
        try commit()
        return true
    }

    /// Appends a record built here and adds its digest to the chain.
    private func appendRecord(_ type: RecordType, payload: [UInt8]) throws(CairnError) {
        try writeDuePrefixSignature()
        let start = output.count
        RecordCodec.append(type, payload: payload, to: &output)
        try hashRecord(from: start)
    }

    /// Adds the digest of the record at `output[start...]` to the chain.
    private func hashRecord(from start: Int) throws(CairnError) {
        try output.withBytes { (raw) throws(CairnError) in
            try chain.add(recordBytes: UnsafeRawBufferPointer(rebasing: raw[start...]))
        }
    }

    /// The writer's state at an item boundary (just after a commit record with no file open),
    /// taken at every such commit: counts instead of copies, so it costs no more than the commit.
    package struct Boundary: Sendable {
        package var entryCount: Int
        package var chunkCount: Int
        package var packCount: Int
        package var referenceCount: Int
        package var contentBytes: UInt64
        package var storedBytes: UInt64
        package var uniqueBytes: UInt64
        package var nextCommitSequence: UInt64
        /// The chain digest the commit record carries (the chain is primed with it).
        package var chainDigest: Digest
        /// The commit record's framed bytes (the chain continues over them).
        package var commitRecord: [UInt8]
        /// Archive offset just after the commit record (and its prefix signature, if kept).
        package var offset: UInt64
        /// Signed archives: the prefix signature record kept after the commit record, if one
        /// was written (the chain continues over it too).
        package var signature: [UInt8]?
        /// Signed archives: the `signedLength` of the last prefix signature at or before
        /// ``offset`` (`Spec/0004 §3.4` rule 2).
        package var lastSignedLength: UInt64?

        package init(
            entryCount: Int, chunkCount: Int, packCount: Int, referenceCount: Int, contentBytes: UInt64,
            storedBytes: UInt64, uniqueBytes: UInt64, nextCommitSequence: UInt64, chainDigest: Digest, commitRecord: [UInt8],
            offset: UInt64, signature: [UInt8]? = nil, lastSignedLength: UInt64? = nil
        ) {
            self.signature = signature
            self.lastSignedLength = lastSignedLength
            self.entryCount = entryCount
            self.chunkCount = chunkCount
            self.packCount = packCount
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
        /// The id of every chunk of ``manifest``, by index (packed chunks' ids are not in it).
        package var chunkIDs: [Digest]
        package var contentBytes: UInt64
        package var storedBytes: UInt64
        package var nextCommitSequence: UInt64
        package var chainDigest: Digest
        /// The commit record's bytes (the chain hash continues over them).
        package var commitRecord: [UInt8]
        /// Offset just after the commit record.
        package var offset: UInt64
        /// Format 2.1: the commit's link before it was finalized (``RecordChain/init(link:)``),
        /// when the commit is not commit 0: with no file open the writer then starts at the
        /// commit record again (``writerStart``).
        package var linkBeforeCommit: [Digest]?
        /// Where the writer's first byte goes: the start of the commit record when it is
        /// written again (``chainBeforeCommit``), else ``offset``.
        package var writerStart: UInt64 {
            linkBeforeCommit == nil || openFile != nil ? offset : offset - UInt64(commitRecord.count)
        }
        package var openFile: OpenFile?
        /// The last item boundary at or before this commit (this commit itself when no file is
        /// open), for ``rewindToBoundary()``.
        package var boundary: Boundary?
        /// The archive's minor version, which the writer continues (`Spec/0004 §3.1`).
        package var minorVersion: UInt16 = Prelude.minorVersion
        /// Signed archives: the prefix signature kept after the commit record (``offset`` is after
        /// it), and the `signedLength` of the last prefix signature before it.
        package var signature: [UInt8]?
        package var lastSignedLength: UInt64?
        /// `C_0`, the chain digest of commit 0 (signed archives).
        package var headerChainDigest = Digest.zero
    }

    /// Continues an archive after a commit record: the next byte produced belongs at
    /// `state.writerStart`. If the commit was inside a file, that file is open and takes chunks.
    ///
    /// - Parameter signingKey: the key of a signed archive (format 2.2): the one its signatures
    ///   carry, checked by ``ArchiveRecovery``.
    package init(recovering state: RecoveredState, header: ArchiveHeader, signingKey: SigningKey? = nil) throws(CairnError) {
        tableCompressor = ChunkCompressor(method: header.isCompressible ? header.compression : .none)
        manifestCompressible = header.isCompressible
        minorVersion = state.minorVersion
        self.signingKey = signingKey
        guard (signingKey != nil) == (state.minorVersion >= Prelude.signedMinorVersion) else {
            throw CairnError(.notResumable, "internal error: a signing key for an unsigned archive, or none for a signed one")
        }
        output.reserveCapacity(1 << 20)
        takenBytes = state.offset
        // Format 2.1: the last commit is written again, so that the manifest index can go
        // before it if nothing follows it (the resumed archive is the uninterrupted one's bytes).
        if let link = state.linkBeforeCommit, state.writerStart < state.offset {
            takenBytes = state.writerStart
            output.append(contentsOf: state.commitRecord)
            lastCommit = (state.writerStart, RecordChain(link: link), nil)
            pendingCommits.append(CommitPoint(end: state.offset, chainDigest: state.chainDigest))
        }
        manifest = state.manifest
        guard state.chunkIDs.count == manifest.chunks.count else {
            throw CairnError(.notResumable, "internal error: \(state.chunkIDs.count) chunk ids for \(manifest.chunks.count) chunks")
        }
        chunkIDs = state.chunkIDs
        for (index, row) in manifest.chunks.enumerated() {
            let id = chunkIDs[index]
            if chunkIndex.lookup(id, in: chunkIDs) == nil {
                chunkIndex.set(id, UInt32(truncatingIfNeeded: index), in: chunkIDs)
                uniqueBytes += UInt64(row.rawLength)
            } else if row.pack == nil {
                recordsOfPacked[id] = UInt32(truncatingIfNeeded: index)
            }
        }
        contentBytes = state.contentBytes
        storedBytes = state.storedBytes
        commitSequence = state.nextCommitSequence
        let commitDigest = try SHA256.hash(state.commitRecord)
        chain = RecordChain(continuingFrom: state.chainDigest, commitRecordDigest: commitDigest)
        headerChainDigest = state.headerChainDigest
        try continueSigning(
            afterCommitEnding: state.offset - UInt64(state.signature?.count ?? 0), digest: commitDigest,
            signature: state.signature, lastSignedLength: state.lastSignedLength)
        boundary = state.boundary
        if let open = state.openFile {
            guard open.index < manifest.entries.count, open.firstReference <= manifest.references.count else {
                throw CairnError(.notResumable, "the open file of the last commit is not in the archive")
            }
            openEntry = open.index
            openFileBytes = open.bytes
            openFileFirstReference = open.firstReference
            for reference in manifest.references[open.firstReference...] {
                chunkIDs[Int(reference)].withUnsafeBytes { openFileDigest.update($0) }
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
    ///
    /// - Parameter holdingLastCommit: keep back a commit record that ends the output (format 2.1),
    ///   so that ``finish()`` can put the manifest index before it if it is the final one; it is
    ///   handed over with the next bytes. False: everything (an abandoned archive, a rebuild).
    package func takeOutput(holdingLastCommit: Bool = true) -> [UInt8] {
        let holding = holdingLastCommit && writesManifestIndex && lastCommitIsOpen && manifestStart == nil && !finished
        var bytes = output
        output = []
        if holding {
            output = Array(bytes.suffix(CommitRecord.framedLength))
            bytes.removeLast(CommitRecord.framedLength)
        }
        takenBytes += UInt64(bytes.count)
        // Room for as much as was just taken and a quarter more, so the next batch's records
        // (a batch is up to about 1.6 MiB) do not make the buffer double and copy itself.
        output.reserveCapacity(Swift.max(1 << 20, bytes.count + bytes.count / 4))
        return bytes
    }

    /// Writes an entry record. Files stay open for chunks until ``endFile()``; other kinds are
    /// complete at once and followed by a commit.
    ///
    /// - Returns: the entry's index.
    /// - Throws: `.invalidArgument` if a file is still open; `.limitExceeded` for over-long names.
    @discardableResult
    package func beginEntry(_ entry: ArchiveEntry) throws(CairnError) -> Int {
        guard openEntry == nil, !finished, manifestStart == nil else {
            throw CairnError(.invalidArgument, manifestStart == nil ? "an entry is already open" : "the manifest was begun", path: entry.path)
        }
        try Self.checkLimits(entry)
        // A prefix signature due after the last commit goes first, so the row's offset is the
        // entry record's own (appendRecord would otherwise put it between them).
        try writeDuePrefixSignature()
        let index = manifest.entries.count
        var row = Manifest.EntryRow(
            recordOffset: offset, firstReference: UInt64(manifest.references.count), referenceCount: 0,
            contentDigest: .zero, entry: entry)
        try appendRecord(.entry, payload: EntryCodec.encode(entry))
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

    /// Whether a chunk record with this id is already stored (so a file's chunk needs no
    /// compression).
    package func contains(_ id: Digest) -> Bool { recordIndex(of: id) != nil }

    /// The index of the chunk record with this id, if one is stored.
    private func recordIndex(of id: Digest) -> UInt32? {
        guard let index = chunkIndex.lookup(id, in: chunkIDs) else { return nil }
        if manifest.chunks[Int(index)].pack == nil { return index }
        return recordsOfPacked.isEmpty ? nil : recordsOfPacked[id]
    }

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
        if let existing = recordIndex(of: id) {
            try addReference(existing, id: id, rawLength: rawLength)
            return
        }
        guard let stored else {
            throw CairnError(.invalidArgument, "chunk \(id) is new but no payload was given")
        }
        try writeDuePrefixSignature()
        let start = RecordCodec.beginRecord(.chunk, in: &output)
        ChunkRecordPrefix(id: id, codec: codec, rawLength: rawLength).encode(into: &output)
        output.append(contentsOf: stored)
        RecordCodec.endRecord(startingAt: start, in: &output)
        try hashRecord(from: start)
        let index = addChunkRow(id: id, offset: start, rawLength: rawLength, storedLength: stored.count, codec: codec)
        try addReference(index, id: id, rawLength: rawLength)
    }

    /// Like ``appendChunk(id:rawLength:codec:stored:)`` for a chunk already framed as a whole
    /// chunk record (built, checksummed and hashed by a processing task: `recordDigest` is its
    /// `d(r)`, §10.3); copied as is when `id` is new.
    package func appendChunkRecord(
        id: Digest, rawLength: Int, codec: ChunkCodec, record: UnsafeRawBufferPointer, storedLength: Int,
        recordDigest: Digest
    ) throws(CairnError) {
        guard openEntry != nil else { throw CairnError(.invalidArgument, "no file entry is open") }
        if let existing = recordIndex(of: id) {
            try addReference(existing, id: id, rawLength: rawLength)
            return
        }
        try writeDuePrefixSignature()
        let start = output.count
        output.append(contentsOf: record)
        chain.add(recordDigest)
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
        chunkIDs.append(id)
        storedBytes += UInt64(storedLength)
        if chunkIndex.lookup(id, in: chunkIDs) == nil {
            chunkIndex.set(id, index, in: chunkIDs)
            uniqueBytes += UInt64(rawLength)
        } else {
            // Already packed: stored again as a record (§8.5), but not new content.
            recordsOfPacked[id] = index
        }
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
            try flushReferences()
        }
        if bytesSinceCommit >= Self.commitInterval {
            try flushReferences()
            try commit()
        }
    }

    private func flushReferences() throws(CairnError) {
        guard let entry = openEntry, !pendingReferences.isEmpty else { return }
        try appendRecord(
            .chunkReferences,
            payload: ChunkReferencesRecord.encode(entryIndex: UInt64(entry), references: pendingReferences[...]))
        pendingReferences.removeAll(keepingCapacity: true)
    }

    /// Ends the open file: its remaining references, its file-end record, then a commit.
    ///
    /// - Returns: the file's content digest.
    @discardableResult
    package func endFile() throws(CairnError) -> Digest {
        guard let entry = openEntry else { throw CairnError(.invalidArgument, "no file entry is open") }
        try flushReferences()
        let digest = try openFileDigest.finalize()
        let referenceCount = manifest.references.count - openFileFirstReference
        let end = FileEndRecord(
            entryIndex: UInt64(entry), size: openFileBytes, chunkCount: UInt64(referenceCount), contentDigest: digest)
        try appendRecord(.fileEnd, payload: end.encoded())
        // One read and one write of the packed row.
        var row = manifest.entries[entry]
        row.referenceCount = UInt64(referenceCount)
        row.contentDigest = digest
        row.entry.size = openFileBytes
        manifest.entries[entry] = row
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
            mark.packCount <= manifest.packs.count, mark.referenceCount <= manifest.references.count
        else {
            throw CairnError(.invalidArgument, "internal error: no item boundary to go back to")
        }
        manifest.entries.removeSubrange(mark.entryCount...)
        var reindex = false
        for id in chunkIDs[mark.chunkCount...] {
            chunkIndex.remove(id, in: chunkIDs)
            reindex = reindex || recordsOfPacked[id] != nil
        }
        chunkIDs.removeSubrange(mark.chunkCount...)
        manifest.chunks.removeSubrange(mark.chunkCount...)
        manifest.packs.removeSubrange(mark.packCount...)
        if reindex {
            // An id removed above also belongs to an earlier chunk (packed and then a chunk
            // record): index what is left again. Rare, so done the simple way.
            (chunkIndex, recordsOfPacked) = (ChunkIndex(), [:])
            for (index, id) in chunkIDs.enumerated() {
                if chunkIndex.lookup(id, in: chunkIDs) == nil {
                    chunkIndex.set(id, UInt32(truncatingIfNeeded: index), in: chunkIDs)
                } else if manifest.chunks[index].pack == nil {
                    recordsOfPacked[id] = UInt32(truncatingIfNeeded: index)
                }
            }
        }
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
        let commitDigest = try SHA256.hash(mark.commitRecord)
        chain = RecordChain(continuingFrom: mark.chainDigest, commitRecordDigest: commitDigest)
        try continueSigning(
            afterCommitEnding: mark.offset - UInt64(mark.signature?.count ?? 0), digest: commitDigest,
            signature: mark.signature, lastSignedLength: mark.lastSignedLength)
        pendingCommits.removeAll { $0.end > mark.offset }
        if let held = lastCommit, held.start + UInt64(CommitRecord.framedLength) != mark.offset { lastCommit = nil }
        if mark.offset >= takenBytes {
            output.removeSubrange(Int(mark.offset - takenBytes)...)
            return nil
        }
        takenBytes = mark.offset
        output.removeAll(keepingCapacity: true)
        return mark.offset
    }

    /// Writes a commit record: extends the chain digest over the records since the previous
    /// commit record, and records the counts.
    private func commit() throws(CairnError) {
        let before = writesManifestIndex && commitSequence > 0 ? chain.copy() : nil
        // Signing: the commit this one's link starts from, which a root signature put before it
        // signs (`Spec/0004 §3.4` rule 3).
        let linkStart = latestCommit
        let digest = try chain.finalize()
        chain.prime(digest)
        let record = CommitRecord(
            sequence: commitSequence, entryCount: UInt64(manifest.entries.count),
            chunkCount: UInt64(manifest.chunks.count), contentBytes: contentBytes, storedBytes: storedBytes,
            openEntry: openEntry.map { UInt64($0) } ?? CommitRecord.noOpenEntry,
            openEntryBytes: openEntry == nil ? 0 : openFileBytes, chainDigest: digest)
        let start = output.count
        RecordCodec.append(.commit, payload: record.encoded(), to: &output)
        try hashRecord(from: start)
        try noteCommitForSigning(startingAt: start, chainDigest: digest, sequence: commitSequence)
        lastCommit = before.map { (takenBytes + UInt64(start), $0, linkStart) }
        pendingCommits.append(CommitPoint(end: offset, chainDigest: digest))
        commitSequence += 1
        bytesSinceCommit = 0
        if openEntry == nil {
            boundary = Boundary(
                entryCount: manifest.entries.count, chunkCount: manifest.chunks.count, packCount: manifest.packs.count,
                referenceCount: manifest.references.count, contentBytes: contentBytes, storedBytes: storedBytes,
                uniqueBytes: uniqueBytes, nextCommitSequence: commitSequence, chainDigest: digest,
                commitRecord: Array(output[start...]), offset: offset, lastSignedLength: lastSignedLength)
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
            // No chunk is added from here on: the dedup index goes before the manifest is
            // encoded (for 100,000 small files it is about 14 MiB of the peak).
            chunkIndex = ChunkIndex()
            recordsOfPacked = [:]
            chunkIDs = []
            // The tables grew by doubling; they are final now.
            manifest.entries.shrinkToFit()
            manifest.chunks = manifest.chunks.withoutSpareCapacity()
            // What the pipeline freed goes back to the system before the manifest's buffers and
            // the compressor's tables are allocated.
            LargeBuffers.returnFreeMemory()
            var records: [UInt8] = []
            manifest.encode(into: &records, compressible: manifestCompressible, minorVersion: minorVersion)
            manifestRecords = records
            manifestDigest = try SHA256.hash(records)
            if signingKey != nil {
                try writeRootSignature(manifestRecords: records, manifestDigest: manifestDigest)
            } else if writesManifestIndex, !records.isEmpty {
                // Format 2.1: the manifest index just before the final commit (§11.8), when that
                // commit is still here to be written again (not after a resumed write's last commit).
                let index = try ManifestIndex(manifestRecords: records)
                if index.entries.count <= ManifestIndex.maximumCount { _ = try insertBeforeLastCommit(index.framed()) }
            }
            manifestStart = offset
        }
        // One manifest record per call, so the caller can take each before the next is copied.
        if manifestRecordStart < manifestRecords.count {
            let header = try manifestRecords.withBytes { (raw) throws(CairnError) in
                try RecordCodec.parseHeader(UnsafeRawBufferPointer(rebasing: raw[manifestRecordStart...]), offset: offset)
            }
            let end = manifestRecordStart + RecordFraming.overhead + header.length
            let start = output.count
            output.append(contentsOf: manifestRecords[manifestRecordStart..<end])
            try hashRecord(from: start)
            manifestRecordStart = end
            return true
        }
        manifestRecords = []
        finished = true
        let manifestOffset = manifestStart ?? offset
        let footer = makeFooter(
            manifestOffset: manifestOffset, manifestLength: offset - manifestOffset, manifestDigest: manifestDigest,
            chainDigest: try chain.finalize())
        RecordCodec.append(.footer, payload: footer.encoded(), to: &output)
        return false
    }


    private var manifestStart: UInt64?
    private var manifestRecords: [UInt8] = []
    private var manifestRecordStart = 0
    /// SHA-256 over the manifest's records, once they are encoded.
    private var manifestDigest = Digest.zero

    /// One small item handed to ``appendPack(_:content:)``: its entry (a file's `size` is the
    /// length of its one chunk) and, for a file with content, that chunk's id and length.
    package struct PackInput: Sendable {
        package var entry: ArchiveEntry
        package var chunk: (id: Digest, length: Int)?
        package init(entry: ArchiveEntry, chunk: (id: Digest, length: Int)?) {
            self.entry = entry
            self.chunk = chunk
        }
    }

    /// A pack's content section as a processing task built it: the inline chunks' bytes in
    /// order, stored with `codec` (§7.3), and the digest over their ids.
    package struct PackContent: Sendable {
        package var codec: ChunkCodec
        package var stored: [UInt8]
        package var rawLength: Int
        /// SHA-256 over ``inlineIDs``, in order (§7.5).
        package var digest: Digest
        package var inlineIDs: [Digest]
        package init(codec: ChunkCodec, stored: [UInt8], rawLength: Int, digest: Digest, inlineIDs: [Digest]) {
            self.codec = codec
            self.stored = stored
            self.rawLength = rawLength
            self.digest = digest
            self.inlineIDs = inlineIDs
        }
    }

    /// For each item, whether ``appendPack(_:content:)`` would store its chunk inline now: a
    /// file whose chunk is stored nowhere yet, neither earlier in the archive nor earlier in
    /// `items`.
    package func inlinePlan(_ items: [PackInput]) -> [Bool] {
        var seen = Set<Digest>()
        return items.map { item in
            guard let chunk = item.chunk else { return false }
            return chunkIndex.lookup(chunk.id, in: chunkIDs) == nil && seen.insert(chunk.id).inserted
        }
    }

    /// Writes a pack record holding `items` (§7.5), then a commit: the entries get consecutive
    /// indices, each new chunk is stored inline in `content`, each chunk already stored is named
    /// by its index.
    ///
    /// - Parameter content: the inline chunks of ``inlinePlan(_:)``, in order.
    /// - Returns: the entries' indices.
    /// - Throws: `.invalidArgument` when a file is open, `items` is empty or over
    ///   ``PackItemTable/maximumItems``, or `content` holds other chunks than the plan;
    ///   `.limitExceeded` for an entry over the format's limits.
    @discardableResult
    package func appendPack(_ items: [PackInput], content: PackContent) throws(CairnError) -> Range<Int> {
        guard openEntry == nil, !finished, manifestStart == nil else {
            throw CairnError(.invalidArgument, "a pack cannot begin while a file is open or after the manifest")
        }
        guard !items.isEmpty, items.count <= PackItemTable.maximumItems else {
            throw CairnError(.invalidArgument, "a pack holds 1 … \(PackItemTable.maximumItems) items, not \(items.count)")
        }
        guard content.rawLength <= PackRecordPrefix.maximumSectionLength else {
            throw CairnError(.invalidArgument, "pack content of \(content.rawLength) bytes is over the limit")
        }
        for item in items { try Self.checkLimits(item.entry) }
        let plan = inlinePlan(items)
        var inlineIDs: [Digest] = []
        for (item, inline) in zip(items, plan) where inline {
            if let chunk = item.chunk { inlineIDs.append(chunk.id) }
        }
        guard inlineIDs == content.inlineIDs else {
            throw CairnError(.invalidArgument, "internal error: the pack's content does not hold the chunks it must")
        }
        try writeDuePrefixSignature()
        let packIndex = manifest.packs.count
        let recordOffset = offset
        let firstEntry = manifest.entries.count
        var packItems: [PackItem] = []
        packItems.reserveCapacity(items.count)
        var contentOffset = 0
        for (item, inline) in zip(items, plan) {
            var entry = item.entry
            var row = Manifest.EntryRow(
                recordOffset: recordOffset, firstReference: UInt64(manifest.references.count), referenceCount: 0,
                contentDigest: .zero, entry: entry, pack: packIndex)
            guard entry.kind == .file, let chunk = item.chunk else {
                if entry.kind == .file { entry.size = 0 }
                row.entry = entry
                manifest.entries.append(row)
                packItems.append(PackItem(entry: entry, content: .none))
                continue
            }
            entry.size = UInt64(chunk.length)
            let index: UInt32
            if inline {
                index = UInt32(truncatingIfNeeded: manifest.chunks.count)
                manifest.chunks.append(
                    Manifest.ChunkRow(
                        id: .zero, offset: recordOffset, rawLength: UInt32(truncatingIfNeeded: chunk.length), storedLength: 0,
                        codec: .none, pack: packIndex, packOffset: contentOffset))
                chunkIDs.append(chunk.id)
                chunkIndex.set(chunk.id, index, in: chunkIDs)
                contentOffset += chunk.length
                uniqueBytes += UInt64(chunk.length)
                packItems.append(PackItem(entry: entry, content: .inline))
            } else {
                guard let existing = chunkIndex.lookup(chunk.id, in: chunkIDs) else {
                    throw CairnError(.invalidArgument, "internal error: chunk \(chunk.id) is neither stored nor inline")
                }
                index = existing
                packItems.append(PackItem(entry: entry, content: .chunk(UInt64(existing))))
            }
            manifest.references.append(index)
            contentBytes += UInt64(chunk.length)
            row.entry = entry
            row.referenceCount = 1
            row.entry.chunkCount = 1
            manifest.entries.append(row)
        }
        guard contentOffset == content.rawLength else {
            throw CairnError(.invalidArgument, "internal error: the pack's content is \(content.rawLength) bytes, its chunks \(contentOffset)")
        }
        let table = PackItemTable.encode(packItems)
        var storedTable: [UInt8] = []
        storedTable.reserveCapacity(table.count / 2 + 64)
        let tableCodec = table.withUnsafeBytes { tableCompressor.compress($0, appendingTo: &storedTable) }
        let start = RecordCodec.beginRecord(.pack, in: &output)
        PackRecordPrefix(
            tableCodec: tableCodec, contentCodec: content.rawLength == 0 ? .none : content.codec, tableRawLength: table.count,
            tableStoredLength: storedTable.count, contentRawLength: content.rawLength, contentDigest: content.digest
        ).encode(into: &output)
        output.append(contentsOf: storedTable)
        output.append(contentsOf: content.stored)
        guard output.count - start - RecordFraming.headerLength <= FormatLimits.maximumRecordPayload else {
            throw CairnError(.invalidArgument, "internal error: a pack over the record size limit")
        }
        RecordCodec.endRecord(startingAt: start, in: &output)
        try hashRecord(from: start)
        storedBytes += UInt64(content.stored.count)
        manifest.packs.append(
            Manifest.PackRow(
                offset: recordOffset, entryCount: items.count, contentLength: content.rawLength, contentDigest: content.digest,
                firstEntry: firstEntry))
        try commit()
        return firstEntry..<manifest.entries.count
    }

    /// Checks an entry against the format's hard limits before it is written.
    package static func checkLimits(_ entry: ArchiveEntry) throws(CairnError) {
        guard !entry.pathBytes.isEmpty, entry.pathBytes.count <= FormatLimits.maximumPathLength else {
            throw CairnError(.limitExceeded, "path is empty or longer than \(FormatLimits.maximumPathLength) bytes", path: entry.path)
        }
        guard entry.linkTarget.count <= FormatLimits.maximumLinkTargetLength else {
            throw CairnError(.limitExceeded, "link target is longer than \(FormatLimits.maximumLinkTargetLength) bytes", path: entry.path)
        }
        guard (entry.kind != .symlink && entry.kind != .hardLink) || !entry.linkTarget.isEmpty else {
            throw CairnError(.invalidArgument, "\(entry.kind.words) needs a target", path: entry.path)
        }
        guard !entry.extendedAttributes.contains(where: { $0.name.isEmpty }) else {
            throw CairnError(.invalidArgument, "an extended attribute has an empty name", path: entry.path)
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
