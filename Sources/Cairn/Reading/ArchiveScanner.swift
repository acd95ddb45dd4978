/// Reads an archive front to back, seeing each byte once, and checks its structure
/// (`Spec/0001-container-format.md §13.2`): every record's CRC-32, the chain digest of every
/// commit, every reference, every file's size and content digest, the manifest against what the
/// stream held, and the footer. Chunk contents (decompression and SHA-256, the expensive part)
/// are checked by the caller on other cores, from the payloads the scanner hands out
/// (``ChunkVerifier``, ``StreamExtractor``).
///
/// It reports what it reads through ``Event``s, so the same pass serves `verify`, every full
/// extraction (from a pipe or a file), `verify --partial`, resuming a write, and the seekable
/// reader's structural walk: this is the one place that decides what an archive's records mean
/// (the Design article of the Cairn documentation, "One meaning"). State is kept per chunk id
/// (for references) and per entry (for the manifest check), never per content byte.
///
/// Beyond each record's own rules it enforces the order of `Spec/0001 §9`: commit 0 right after
/// the header, a commit right after every directory, symlink, hard-link and file-end record, and
/// a commit inside a file only right after a chunk-references record; and the entry rules of
/// ``EntryRules``.
package final class ArchiveScanner {
    /// What the scanner has just verified.
    package enum Event {
        /// An entry record (for a file, content events follow until ``fileEnd``).
        case entry(index: Int, entry: ArchiveEntry, offset: UInt64)
        /// A chunk record whose prefix checked; with `emittingChunkPayloads`, its payload (prefix
        /// and stored bytes) for the caller to decode and verify, else nil.
        case chunk(id: Digest, payload: [UInt8]?, offset: UInt64)
        /// With `emittingChunkPayloads`: an inline chunk of a pack (§7.5), its bytes already
        /// decompressed and checked (through the pack's content digest), so they need no task.
        case packedChunk(id: Digest, bytes: [UInt8], offset: UInt64)
        /// The next pieces of the open file, in order.
        case references(entryIndex: Int, [ChunkReference])
        /// The open file is complete and its size and digest are verified.
        case fileEnd(index: Int, size: UInt64)
        /// A valid commit: everything up to `end` (exclusive) is verified.
        case commit(end: UInt64, record: CommitRecord)
        /// The footer: the archive is complete and verified.
        case footer(Footer)
    }

    /// Totals of what was verified.
    package struct Totals: Sendable {
        package var entries = 0
        package var files = 0
        package var chunks = 0
        package var references = 0
        package var contentBytes: UInt64 = 0
        package var storedBytes: UInt64 = 0
        package var commits = 0
    }

    package private(set) var header: ArchiveHeader?
    package private(set) var totals = Totals()
    /// End offset of the last valid commit record (or of the footer), 0 before the first; when
    /// keys are trusted, of the last commit a verified signature covers
    /// (`Spec/0004-trusted-archives.md §4.2`).
    package private(set) var verifiedLength: UInt64 = 0
    /// Where a reader that stopped here continues: ``verifiedLength``, or when keys are trusted
    /// the end of the signature record that moved it, which the scanner consumed too
    /// (`Spec/0004 §4.2`).
    package private(set) var resumableLength: UInt64 = 0
    /// Chain digest at the commit that ends at ``verifiedLength``.
    package private(set) var verifiedChainDigest = Digest.zero
    /// End offset of the last valid commit record, signed or not: where the manifest may begin.
    private var committedLength: UInt64 = 0
    /// The signature rules (`Spec/0004 §3.3`, §4.2).
    private var signatures: SignatureChecks
    /// Whether the archive is signed (`Spec/0004 §3.3` rule 5); nil until the record after commit 0.
    package var isSigned: Bool? { signatures.isSigned }
    /// Whether signatures are verified (trusted keys were given).
    package var isTrusting: Bool { signatures.isTrusting }
    /// The key id of the archive's signatures, once one was read.
    package var signerKeyID: SigningKeyID? { signatures.signer?.keyID }
    package private(set) var footer: Footer?

    /// The archive's version, from its prelude.
    package private(set) var version = FormatVersion(major: 1, minor: 0)
    /// Format 1.x: the chain over every byte (§10.3 of 1.0).
    private let byteChain = SHA256()
    /// Format 2.0: the chain over record digests (§10.3).
    private var recordChain = RecordChain()
    /// Format 2.x: what the chain was fed since it was last primed (``RecordChain/init(link:)``).
    private var link: [Digest] = []
    /// Format 2.x: the last commit record's link, before it was finalized (not for commit 0), so
    /// that a resumed writer can write that commit again (§10.4).
    package private(set) var linkBeforeLastCommit: [Digest]?
    /// The record digest of the last manifest index read.
    private var indexDigest: Digest?
    /// Every chunk record seen: its index in the chunk table and its raw length.
    private var chunks: [Digest: (index: Int, length: Int)] = [:]
    /// The id of every chunk by index, packed ones included (zero for a packed chunk whose
    /// content was skipped).
    package private(set) var chunkIDs: [Digest] = []
    /// Format 2.0: the body of the manifest read so far.
    private var manifestBody: [UInt8] = []
    private let decompressor = ChunkDecompressor()
    /// The manifest rebuilt from the records. With a reference manifest, whose rows are each
    /// checked as their records arrive, only its references and packs are kept (rows would be
    /// a second copy of the manifest), and ``entryCount``, ``chunkCount`` and ``openRow`` count
    /// and hold the rest.
    private var expected = Manifest()
    private var decoded = Manifest()
    private var entryCount = 0
    private var chunkCount = 0
    /// The open file's row, completed at its file end.
    private var openRow: Manifest.EntryRow?
    /// Whether ``expected`` keeps every row (no reference manifest).
    private var keepsRows: Bool { reference == nil }
    private var manifestHasher: SHA256?
    private var manifestOffset: UInt64 = 0
    private var rules = EntryRules()
    private var openFile: (index: Int, bytes: UInt64, references: UInt64, digest: SHA256)?
    private var nextCommitSequence: UInt64 = 0
    private var sawFooter = false
    /// The record a commit must follow next (§9), if one must: its name and offset.
    private var awaitingCommit: (what: String, offset: UInt64)?
    /// The last record seen that is not a skipped unknown one.
    private var previousType: RecordType?
    /// A manifest read from the archive's end, checked row by row as the records rebuild it, so
    /// that a disagreement is reported at the record it concerns (the seekable reader's walk).
    private let reference: Manifest?
    /// Chunk records that failed their CRC and were read past (``RecordStream/toleratesDamagedChunks``),
    /// in archive order.
    package private(set) var damagedChunks: [CairnError] = []
    /// Whether a damaged chunk was read past since the last commit: that commit's chain digest
    /// cannot match, and the chain continues from the digest it records.
    private var damagedSinceCommit = false

    /// Whether the chain digests are recomputed and checked: by every reader that reads all the
    /// bytes (resuming a write too, so a prefix changed after it was committed is not trusted);
    /// off only for the seekable reader's structural walk, which skips chunk payloads.
    private let verifiesChainDigests: Bool

    /// Whether ``Event/chunk(id:payload:offset:)`` carries the payload (a copy per chunk).
    private let emitsChunkPayloads: Bool

    /// The archive's keys, which its chunk records' readers take from here
    /// (`Spec/0004-trusted-archives.md §6.6`); nil for a plain archive.
    package let keying: ChunkKeying?
    /// The archive's chunk id rule: packs' inline chunks are checked by it here, chunk records by
    /// the callers (``ChunkVerifier``, ``StreamExtractor``) with the same rule.
    package let idFunction: ChunkIDFunction

    /// - Parameters:
    ///   - verifyingChainDigests: recompute and check every commit's and the footer's chain digest
    ///     (§10.3); off only where the bytes are not all read (the structural walk).
    ///   - emittingChunkPayloads: hand each chunk's payload out in ``Event/chunk(id:payload:offset:)``.
    ///   - reference: the manifest a seekable reader decoded, to check each row against the record
    ///     it describes as soon as that record is read.
    ///   - trustedKeys: the keys a signature must verify under (`Spec/0004 §4`); empty: the
    ///     signature records' placement only is checked (§3.3).
    ///   - keying: the archive's keys (`Spec/0004 §6.6`); nil for a plain archive.
    package init(
        verifyingChainDigests: Bool = true, emittingChunkPayloads: Bool = false, checkingAgainst reference: Manifest? = nil,
        trustedKeys: [PublicKey] = [], keying: ChunkKeying?
    ) {
        self.keying = keying
        idFunction = ChunkIDFunction(keying: keying)
        signatures = SignatureChecks(trustedKeys: trustedKeys)
        verifiesChainDigests = verifyingChainDigests
        emitsChunkPayloads = emittingChunkPayloads
        self.reference = reference
        byteChain.update(Digest.zero.bytes)
    }

    /// Adds a record (or the prelude) to the chain: its bytes in 1.x, its digest in 2.0.
    private func hashChain(_ bytes: [UInt8]) throws(CairnError) {
        guard verifiesChainDigests else { return }
        if version.isVersion1 {
            byteChain.update(bytes)
        } else {
            let digest = try SHA256.hash(bytes)
            recordChain.add(digest)
            link.append(digest)
        }
    }

    /// Adds a record to the chain: in 2.0 the digest its reader computed, when it did.
    private func hashChain(_ record: RecordStream.Record) throws(CairnError) {
        guard verifiesChainDigests, !version.isVersion1, let digest = record.digest else { return try hashChain(record.framed) }
        recordChain.add(digest)
        link.append(digest)
    }

    /// The chain digest at a commit or the footer; the chain is empty until primed.
    private func finalizeChain() throws(CairnError) -> Digest {
        version.isVersion1 ? try byteChain.finalize() : try recordChain.finalize()
    }

    private func primeChain(_ digest: Digest) {
        guard verifiesChainDigests else { return }
        if version.isVersion1 {
            byteChain.update(digest.bytes)
        } else {
            recordChain.prime(digest)
            link = [digest]
        }
    }

    /// The manifest rebuilt from the records seen so far (entries, chunks and references,
    /// including any not yet committed).
    package var manifestSoFar: Manifest { expected }  // rows only without a reference manifest

    /// The open file's entry index and content bytes so far, if a file is open.
    package var openFileProgress: (index: Int, bytes: UInt64)? { openFile.map { ($0.index, $0.bytes) } }

    /// Reads and checks the prelude and the header record.
    package func start(_ stream: RecordStream) throws(CairnError) {
        let prelude = try stream.readBytes(Prelude.length)
        version = try Prelude.parse(prelude)
        try hashChain(prelude)
        guard let record = try stream.next() else {
            throw CairnError(.truncated, "the archive ends after its prelude", offset: stream.offset)
        }
        guard record.header.type == .header else {
            throw CairnError(.corrupted, "the first record is not a header record", offset: record.offset)
        }
        header = try ArchiveHeader.decode(record.payload, offset: record.offset + UInt64(RecordFraming.headerLength))
        try hashChain(record)
        awaitingCommit = ("header record", record.offset)
        previousType = .header
    }

    /// Reads the prelude and the header record (``start(_:)``) and, when keys are trusted, also
    /// commit 0 and the prefix signature that must follow it (`Spec/0004-trusted-archives.md
    /// §3.3` rule 5, §4.2). That signature covers `C_0`, the chain digest over the prelude and
    /// the header record, so only then may a caller act on the header (an import's request,
    /// `Spec/0004 §7`); without trusted keys the header is read alone, as ``start(_:)`` does.
    ///
    /// - Returns: the events the records after the header gave (commit 0's, once its signature
    ///   verified), for the caller to handle before the next record.
    /// - Throws: as ``start(_:)``; `.untrusted` for an archive that is not signed or is signed by
    ///   a key not trusted; `.checksumMismatch` when the signature does not verify; `.truncated`
    ///   when the input ends first.
    package func startWithSignedHeader(_ stream: RecordStream) throws(CairnError) -> [Event] {
        try start(stream)
        var all: [Event] = []
        var events: [Event] = []
        // Commit 0 and its prefix signature are the next two records, or the scanner refuses
        // the archive (§3.3 rules 2 and 5): the loop reads at most two.
        while isTrusting, verifiedLength == 0 {
            guard let record = try stream.next() else {
                throw CairnError(.truncated, "the archive ends before the signature of its header", offset: stream.offset)
            }
            try consume(record, collecting: &events)
            all += events
        }
        return all
    }

    /// After the footer: the input must end there (§13.2), whatever the extra bytes look like.
    ///
    /// - Throws: `.corrupted` "data after the footer" at the footer's end.
    package func requireEnd(of stream: RecordStream) throws(CairnError) {
        try requireEnd(inputEnded: try stream.isAtEnd(), at: stream.offset)
    }

    /// After the footer, which ends at `offset`: whether the input ended there.
    ///
    /// - Throws: `.corrupted` "data after the footer" at `offset` unless `inputEnded`.
    package func requireEnd(inputEnded: Bool, at offset: UInt64) throws(CairnError) {
        guard inputEnded else { throw CairnError(.corrupted, "data after the footer", offset: offset) }
    }

    /// Checks one record, for a caller that needs no events.
    ///
    /// - Throws: `CairnError` naming the record's offset.
    package func consume(_ record: RecordStream.Record) throws(CairnError) {
        do {
            try consume(record) { _ in }
        } catch let error as CairnError {
            throw error
        } catch {
            throw CairnError(.invalidArgument, "internal error: \(error)")
        }
    }

    /// Checks one record and reports what it holds: the rules every record meets (§3.3, §4, §9),
    /// then the rules of its type, in the method for that type.
    ///
    /// - Throws: `CairnError` naming the record's offset, or what `emit` throws.
    package func consume(_ record: RecordStream.Record, _ emit: (Event) throws -> Void) throws {
        guard !sawFooter else { throw CairnError(.corrupted, "data after the footer", offset: record.offset) }
        guard let type = record.header.type, type != .signature || !version.isVersion1 else {
            try signatures.otherRecord(nil, offset: record.offset)
            return try consumeUnknown(record)
        }
        if type == .signature { return try consumeSignature(record, emit) }
        try signatures.otherRecord(type, offset: record.offset)
        guard try admit(record, as: type) else { return }
        defer { previousType = type }
        switch type {
        case .header:
            throw CairnError(.corrupted, "a second header record", offset: record.offset)
        case .chunk:
            try emit(try consumeChunk(record))
        case .entry:
            try emit(try consumeEntry(record))
        case .chunkReferences:
            try emit(try consumeChunkReferences(record))
        case .fileEnd:
            try emit(try consumeFileEnd(record))
        case .commit:
            if let event = try consumeCommit(record) { try emit(event) }
        case .manifestChunks, .manifestReferences, .manifestEntries:
            try consumeManifestTable(record, type: type)
        case .manifest:
            try consumeManifestSegment(record)
        case .pack:
            try consumePack(record, emit)
        case .manifestIndex, .signature, .envelope:
            throw CairnError(.invalidArgument, "internal error: a skippable or outer record read as a body record", offset: record.offset)
        case .footer:
            try emit(try consumeFooter(record))
        }
    }

    /// A record of a type this version does not know: skipped (into the chain) when it is
    /// skippable and in the body (§3.3), which starts at commit 0; refused anywhere else.
    private func consumeUnknown(_ record: RecordStream.Record) throws(CairnError) {
        let offset = record.offset
        if manifestHasher != nil {
            throw CairnError(.corrupted, "unknown record type \(record.header.typeByte) inside the manifest", offset: offset)
        }
        if record.header.isSkippable, nextCommitSequence > 0 {
            try hashChain(record)
            return
        }
        throw CairnError(
            .corrupted,
            record.header.isSkippable
                ? "unknown record type \(record.header.typeByte) before the first commit"
                : "unknown record type \(record.header.typeByte) is not skippable", offset: offset)
    }

    /// The rules a known record meets before its type's own: known in this format version (§4),
    /// nothing but manifest records after the manifest begins, the order of §9 and the manifest
    /// index's description (§11.8). A manifest index is consumed here: the order rules look
    /// through it.
    ///
    /// - Returns: whether the record is still to be consumed by its type's method (false for a
    ///   manifest index).
    private func admit(_ record: RecordStream.Record, as type: RecordType) throws(CairnError) -> Bool {
        let offset = record.offset
        guard Self.isKnown(type, in: version) else {
            throw CairnError(.corrupted, "\(RecordType.withArticle(type.name)) record in a format \(version) archive", offset: offset)
        }
        if manifestHasher != nil, type != .footer, !Self.isManifest(type) {
            throw CairnError(.corrupted, "\(RecordType.withArticle(type.name)) record follows the manifest", offset: offset)
        }
        if type == .manifestIndex {
            // Skippable (§3.3, §11.8): the order rules look through it, as through a record a
            // 2.0 reader does not know.
            try consumeManifestIndex(record)
            return false
        }
        try checkOrder(type, offset: offset)
        try trackManifestIndex(type, record)
        if record.isPayloadSkipped, (type != .chunk && type != .pack) || verifiesChainDigests && (record.digest == nil || version.isVersion1) {
            throw CairnError(.invalidArgument, "internal error: a skipped payload where every byte must be read", offset: offset)
        }
        return true
    }

    /// A chunk record (§7): inside a file, stored once, as the reference manifest's row says.
    private func consumeChunk(_ record: RecordStream.Record) throws(CairnError) -> Event {
        let offset = record.offset
        guard openFile != nil else { throw CairnError(.corrupted, "chunk record outside a file", offset: offset) }
        // Only the 40-byte prefix is read in place; the payload is copied out only when its
        // contents are checked.
        let payloadCount = record.header.length
        let prefix: ChunkRecordPrefix
        do {
            let available = record.isPayloadSkipped ? min(payloadCount, ChunkRecordPrefix.length) : payloadCount
            var r = ByteReader(
                record.framed, range: RecordFraming.headerLength..<(RecordFraming.headerLength + available),
                baseOffset: offset, what: "chunk record")
            prefix = try ChunkRecordPrefix.decode(&r, storedLength: payloadCount - ChunkRecordPrefix.length)
        }
        guard chunks[prefix.id] == nil else {
            throw CairnError(.corrupted, "chunk \(prefix.id) is stored twice", offset: offset)
        }
        let row = Manifest.ChunkRow(
            id: prefix.id, offset: offset, rawLength: UInt32(prefix.rawLength),
            storedLength: UInt32(payloadCount - ChunkRecordPrefix.length), codec: prefix.codec)
        if let reference {
            let index = chunkCount
            guard index < reference.chunks.count, reference.chunks[index] == row else {
                throw CairnError(.corrupted, "the manifest's chunk row \(index) disagrees with this chunk record", offset: offset)
            }
        }
        chunks[prefix.id] = (chunkCount, prefix.rawLength)
        chunkIDs.append(prefix.id)
        if keepsRows { expected.chunks.append(row) }
        chunkCount += 1
        if let damage = record.crcFailure {
            damagedChunks.append(damage)
            damagedSinceCommit = true
        }
        totals.chunks += 1
        totals.storedBytes += UInt64(payloadCount - ChunkRecordPrefix.length)
        try hashChain(record)
        return .chunk(id: prefix.id, payload: emitsChunkPayloads ? record.payload : nil, offset: offset)
    }

    /// An entry record (§6): not inside a file, admitted by the entry rules; a file's entry
    /// opens the file, any other awaits a commit.
    private func consumeEntry(_ record: RecordStream.Record) throws(CairnError) -> Event {
        let offset = record.offset
        guard openFile == nil else {
            throw CairnError(.corrupted, "entry record while a file is still open", offset: offset)
        }
        let entry = try Self.decodeEntryRecord(record.payload, offset: offset, version: version)
        try rules.admit(entry, offset: offset)
        let index = entryCount
        let row = Self.row(ofEntryRecord: entry, at: offset, firstReference: UInt64(expected.references.count))
        if entry.kind == .file {
            openFile = (index, 0, 0, SHA256())
            openRow = row
            totals.files += 1
        } else {
            try checkAgainstReference(row, index: index, offset: offset)
            awaitingCommit = ("\(entry.kind.noun) entry", offset)
        }
        if keepsRows { expected.entries.append(row) }
        entryCount += 1
        totals.entries += 1
        try hashChain(record)
        return .entry(index: index, entry: entry, offset: offset)
    }

    /// A chunk-references record (§8): the open file's next pieces, each a chunk stored before
    /// it, with that chunk's length.
    private func consumeChunkReferences(_ record: RecordStream.Record) throws(CairnError) -> Event {
        let offset = record.offset
        guard var file = openFile else {
            throw CairnError(.corrupted, "chunk references outside a file", offset: offset)
        }
        var r = ByteReader(record.payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "chunk references record")
        let (entryIndex, references) = try ChunkReferencesRecord.decode(&r)
        guard entryIndex == UInt64(file.index) else {
            throw CairnError(.corrupted, "references name entry \(entryIndex), but entry \(file.index) is open", offset: offset)
        }
        for reference in references {
            guard let (chunkIndex, length) = chunks[reference.id] else {
                throw CairnError(.corrupted, "reference to chunk \(reference.id), which is not stored before it", offset: offset)
            }
            guard length == reference.length else {
                throw CairnError(.corrupted, "reference to chunk \(reference.id) says \(reference.length) bytes, the chunk has \(length)", offset: offset)
            }
            file.bytes += UInt64(length)
            file.references += 1
            reference.id.withUnsafeBytes { file.digest.update($0) }
            expected.references.append(UInt32(truncatingIfNeeded: chunkIndex))
        }
        openFile = file
        totals.references += references.count
        totals.contentBytes += references.reduce(0) { $0 + UInt64($1.length) }
        try hashChain(record)
        return .references(entryIndex: file.index, references)
    }

    /// A file-end record (§8.2): the open file's size, reference count and content digest, which
    /// complete its row; a commit must follow.
    private func consumeFileEnd(_ record: RecordStream.Record) throws(CairnError) -> Event {
        let offset = record.offset
        guard let file = openFile, var row = openRow else { throw CairnError(.corrupted, "file end outside a file", offset: offset) }
        var r = ByteReader(record.payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "file end record")
        let end = try FileEndRecord.decode(&r)
        let digest = try file.digest.finalize()
        guard end.entryIndex == UInt64(file.index), end.size == file.bytes, end.chunkCount == file.references,
            end.contentDigest == digest
        else {
            throw CairnError(
                .corrupted, "file end of \(PathBytes.display(row.entry.pathBytes)) does not match its content",
                offset: offset)
        }
        row.referenceCount = file.references
        row.contentDigest = digest
        row.entry.size = file.bytes
        row.entry.contentDigest = digest
        row.entry.chunkCount = Int(file.references)
        try checkAgainstReference(row, index: file.index, offset: offset)
        if keepsRows { expected.entries[file.index] = row }
        openRow = nil
        if let reference {
            let start = Int(row.firstReference)
            let end = start + Int(row.referenceCount)
            guard end <= reference.references.count,
                expected.references[start...].elementsEqual(reference.references[start..<end])
            else {
                throw CairnError(
                    .corrupted, "the manifest's references of \(row.entry.path) disagree with its chunk-references records",
                    offset: offset)
            }
        }
        awaitingCommit = ("file end", offset)
        openFile = nil
        try hashChain(record)
        return .fileEnd(index: file.index, size: file.bytes)
    }

    /// A signature record (`Spec/0004 §3`): placed as §3.3 says, verified when keys are trusted;
    /// skippable, so in the chain like any skippable record. A verified prefix signature releases
    /// the commits it covers that were held (their events are given now, in order: the last one
    /// at an entry boundary and the one it signs; ``verifiedLength`` moves to the latter's end).
    private func consumeSignature(_ record: RecordStream.Record, _ emit: (Event) throws -> Void) throws {
        let released = try signatures.signatureRead(record)
        try hashChain(record)
        for commit in released {
            resumableLength = record.offset + UInt64(record.framed.count)
            verifiedLength = commit.end
            verifiedChainDigest = commit.chainDigest
            try emit(.commit(end: commit.end, record: commit.record))
        }
    }

    /// A commit record (§10): in sequence, its chain digest that of the records before it, its
    /// counts theirs; everything up to its end is verified (when keys are trusted, once a
    /// signature of it verifies: the event is given then, `Spec/0004 §4.2`).
    private func consumeCommit(_ record: RecordStream.Record) throws(CairnError) -> Event? {
        let offset = record.offset
        var r = ByteReader(record.payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "commit record")
        let commit = try CommitRecord.decode(&r)
        // Not when the link holds a manifest index: that commit is final already.
        linkBeforeLastCommit =
            verifiesChainDigests && !version.isVersion1 && !damagedSinceCommit && commit.sequence > 0
                && !link.contains(where: { $0 == indexDigest }) ? link : nil
        var digest = verifiesChainDigests ? try finalizeChain() : commit.chainDigest
        // The damage already reported explains the mismatch; continue from the record.
        if damagedSinceCommit { digest = commit.chainDigest }
        damagedSinceCommit = false
        let open = openFile
        guard commit.sequence == nextCommitSequence else {
            throw CairnError(.corrupted, "commit \(commit.sequence) out of sequence (expected \(nextCommitSequence))", offset: offset)
        }
        guard commit.chainDigest == digest else {
            throw CairnError(.checksumMismatch, "commit \(commit.sequence) chain digest does not match the bytes before it", offset: offset)
        }
        guard commit.entryCount == UInt64(entryCount), commit.chunkCount == UInt64(chunkCount),
            commit.contentBytes == totals.contentBytes, commit.storedBytes == totals.storedBytes,
            commit.openEntry == (open.map { UInt64($0.index) } ?? CommitRecord.noOpenEntry),
            commit.openEntryBytes == (open?.bytes ?? 0)
        else {
            throw CairnError(.corrupted, "commit \(commit.sequence) counts do not match the records before it", offset: offset)
        }
        primeChain(digest)
        try hashChain(record)
        awaitingCommit = nil
        nextCommitSequence += 1
        totals.commits += 1
        committedLength = offset + UInt64(record.framed.count)
        let commitDigest: Digest
        if let known = record.digest { commitDigest = known } else { commitDigest = try SHA256.hash(record.framed) }
        let read = SignatureChecks.Commit(record: commit, end: committedLength, digest: commitDigest, chainDigest: digest)
        guard let released = try signatures.commitRead(read, offset: offset) else { return nil }
        verifiedLength = released.end
        resumableLength = released.end
        verifiedChainDigest = released.chainDigest
        return .commit(end: released.end, record: commit)
    }

    /// A 1.x manifest table record (§11 of 1.0).
    private func consumeManifestTable(_ record: RecordStream.Record, type: RecordType) throws(CairnError) {
        try beginManifestRecord(record)
        // A reference manifest was decoded from these very bytes (its digest is checked at
        // the footer): no need to decode it twice.
        if reference == nil { try decoded.add(type, payload: record.payload, offset: record.offset) }
        try hashChain(record)
    }

    /// A 2.0 manifest record (§11): one segment of the compressed manifest body, decoded at the
    /// footer.
    private func consumeManifestSegment(_ record: RecordStream.Record) throws(CairnError) {
        let offset = record.offset
        try beginManifestRecord(record)
        if reference == nil {
            try Manifest.appendSegment(
                record.payload, offset: offset, storedLength: offset + UInt64(record.framed.count) - manifestOffset,
                to: &manifestBody, decompressor: decompressor)
        }
        try hashChain(record)
    }

    /// The footer (§12): outside a file, right after a commit or the manifest, its chain digest,
    /// manifest description and counts those of the archive; the manifest must be the one the
    /// records rebuilt.
    private func consumeFooter(_ record: RecordStream.Record) throws(CairnError) -> Event {
        let offset = record.offset
        var r = ByteReader(record.payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "footer")
        let footer = try Footer.decode(&r)
        guard openFile == nil else { throw CairnError(.corrupted, "footer inside a file", offset: offset) }
        if manifestHasher == nil {
            guard committedLength == offset else {
                throw CairnError(.corrupted, "the footer does not follow a commit or manifest", offset: offset)
            }
            manifestOffset = offset
        }
        let manifestDigest: Digest
        if let manifestHasher { manifestDigest = try manifestHasher.finalize() } else { manifestDigest = try SHA256.hash([]) }
        var digest = verifiesChainDigests ? try finalizeChain() : footer.chainDigest
        if damagedSinceCommit { digest = footer.chainDigest }
        guard footer.chainDigest == digest else {
            throw CairnError(.checksumMismatch, "the footer's chain digest does not match the archive", offset: offset)
        }
        guard footer.manifestOffset == manifestOffset, footer.manifestLength == offset - manifestOffset,
            footer.manifestDigest == manifestDigest
        else {
            throw CairnError(.corrupted, "the footer does not describe the manifest before it", offset: offset)
        }
        guard footer.entryCount == UInt64(entryCount), footer.chunkCount == UInt64(chunkCount),
            footer.referenceCount == UInt64(expected.references.count), footer.contentBytes == totals.contentBytes,
            footer.storedBytes == totals.storedBytes
        else {
            throw CairnError(.corrupted, "the footer's counts do not match the archive", offset: offset)
        }
        if !version.isVersion1, reference == nil, manifestOffset < offset {
            decoded = try Manifest.decodeBody(manifestBody, offset: manifestOffset)
            manifestBody = []
        }
        try checkManifest(offset: manifestOffset)
        try signatures.footerRead(footer, offset: offset)
        sawFooter = true
        self.footer = footer
        verifiedLength = offset + UInt64(record.framed.count)
        resumableLength = verifiedLength
        verifiedChainDigest = digest
        return .footer(footer)
    }

    /// A pack record (§7.5): its items become the events an entry record, its chunk, chunk
    /// references and file end would have given, so consumers need nothing new. When the
    /// content was read, it is decompressed here and every inline chunk hashed: the ids'
    /// digest must be the pack's `contentDigest`.
    private func consumePack(_ record: RecordStream.Record, _ emit: (Event) throws -> Void) throws {
        let offset = record.offset
        guard openFile == nil else { throw CairnError(.corrupted, "pack record while a file is still open", offset: offset) }
        let payloadLength = record.header.length
        let pack = try PackContent.read(
            payload: record.payload, payloadLength: payloadLength, offset: offset, chunkCount: UInt64(chunkCount),
            contentIDs: record.isPayloadSkipped ? nil : idFunction, using: decompressor)
        let (prefix, items, content, inlineIDs) = (pack.prefix, pack.items, pack.content, pack.inlineIDs)
        var nextInline = 0
        let packIndex = expected.packs.count
        let firstEntry = entryCount
        var builder = PackRowBuilder(
            packIndex: packIndex, offset: offset, firstReference: expected.references.count, firstChunk: chunkCount)
        var events: [Event] = []
        for item in items {
            try rules.admit(item.entry, offset: offset)
            let index = entryCount
            events.append(.entry(index: index, entry: item.entry, offset: offset))
            let length = Int(item.entry.size)
            let (row, chunkIndex, inlineRow) = try builder.add(item) { (k) throws(CairnError) in try chunkLength(k, offset: offset) }
            if let inlineRow {
                var id = Digest.zero
                if let content {
                    id = inlineIDs[nextInline]
                    nextInline += 1
                    if emitsChunkPayloads {
                        let position = inlineRow.packOffset
                        events.append(.packedChunk(id: id, bytes: Array(content[position..<(position + length)]), offset: offset))
                    }
                }
                if keepsRows { expected.chunks.append(inlineRow) }
                chunkCount += 1
                chunkIDs.append(id)
                totals.chunks += 1
            }
            if item.entry.kind == .file {
                totals.files += 1
                if let chunkIndex {
                    expected.references.append(UInt32(truncatingIfNeeded: chunkIndex))
                    totals.references += 1
                    totals.contentBytes += UInt64(length)
                    events.append(.references(entryIndex: index, [ChunkReference(id: chunkIDs[chunkIndex], length: length)]))
                }
                events.append(.fileEnd(index: index, size: UInt64(length)))
            }
            try checkAgainstReference(row, index: index, offset: offset)
            if keepsRows { expected.entries.append(row) }
            entryCount += 1
            totals.entries += 1
        }
        let packRow = Manifest.PackRow(
            offset: offset, entryCount: items.count, contentLength: prefix.contentRawLength, contentDigest: prefix.contentDigest,
            firstEntry: firstEntry)
        if let reference {
            try Self.requirePackAgreement(reference, packRow: packRow, packIndex: packIndex, builder: builder)
        }
        expected.packs.append(packRow)
        totals.storedBytes += UInt64(prefix.contentStoredLength(payloadLength: payloadLength))
        awaitingCommit = ("pack", offset)
        try hashChain(record)
        for event in events { try emit(event) }
    }

    /// A manifest index (§11.8) and where it stands: it describes the manifest only when the next
    /// record after it (looking through skippable ones) is a commit and the next after that
    /// begins the manifest: the final commit. Anywhere else (an archive whose write was resumed
    /// after its manifest had begun) it describes nothing and is dropped.
    private var manifestIndex: (index: ManifestIndex, offset: UInt64, sawCommit: Bool, matched: Int)?

    private func consumeManifestIndex(_ record: RecordStream.Record) throws(CairnError) {
        let offset = record.offset
        guard record.header.isSkippable else {
            throw CairnError(.corrupted, "a manifest index record without the skippable flag", offset: offset)
        }
        guard nextCommitSequence > 0 else {
            throw CairnError(.corrupted, "a manifest index record before the first commit", offset: offset)
        }
        guard openFile == nil else { throw CairnError(.corrupted, "a manifest index record inside a file", offset: offset) }
        let index = try ManifestIndex.decode(record.payload, offset: offset + UInt64(RecordFraming.headerLength))
        manifestIndex = (index, offset, false, 0)
        try hashChain(record)
        indexDigest = link.last
    }

    /// Follows a manifest index through the final commit and the manifest records, each of which
    /// it must list by framed length and record digest, in order, all of them.
    private func trackManifestIndex(_ type: RecordType, _ record: RecordStream.Record) throws(CairnError) {
        guard var pending = manifestIndex else { return }
        switch type {
        case .commit where !pending.sawCommit:
            pending.sawCommit = true
            manifestIndex = pending
        case .manifest where pending.sawCommit:
            let entries = pending.index.entries
            let digest: Digest
            if let known = record.digest { digest = known } else { digest = try SHA256.hash(record.framed) }
            guard pending.matched < entries.count, entries[pending.matched].framedLength == UInt32(truncatingIfNeeded: record.framed.count),
                entries[pending.matched].digest == digest
            else {
                throw CairnError(
                    .corrupted,
                    pending.matched < entries.count
                        ? "the manifest index at offset \(pending.offset) does not describe manifest record \(pending.matched)"
                        : "the manifest index at offset \(pending.offset) lists \(entries.count) manifest records, the manifest has more",
                    offset: record.offset)
            }
            pending.matched += 1
            manifestIndex = pending
        case .footer where pending.sawCommit:
            guard pending.matched == pending.index.entries.count else {
                throw CairnError(
                    .corrupted,
                    "the manifest index at offset \(pending.offset) lists \(pending.index.entries.count) manifest records, the manifest has \(pending.matched)",
                    offset: record.offset)
            }
            manifestIndex = nil
        default:
            manifestIndex = nil
        }
    }

    /// The rules every manifest record shares, 1.x tables and 2.0 segments alike (§11): not inside a
    /// file; the first one right after the last commit; each hashed into the manifest digest.
    private func beginManifestRecord(_ record: RecordStream.Record) throws(CairnError) {
        let offset = record.offset
        guard openFile == nil else { throw CairnError(.corrupted, "manifest inside a file", offset: offset) }
        if manifestHasher == nil {
            guard committedLength == offset else {
                throw CairnError(.corrupted, "the manifest does not start right after a commit", offset: offset)
            }
            manifestHasher = SHA256()
            manifestOffset = offset
        }
        manifestHasher?.update(record.framed)
    }

    /// The raw length of chunk `index` (before the current record): from the rows kept, or from
    /// the reference manifest, whose rows up to ``chunkCount`` were each checked.
    private func chunkLength(_ index: Int, offset: UInt64) throws(CairnError) -> UInt32 {
        if keepsRows { return expected.chunks[index].rawLength }
        guard let reference, index < reference.chunks.count else {
            throw CairnError(.corrupted, "the manifest has no row for chunk \(index)", offset: offset)
        }
        return reference.chunks[index].rawLength
    }

    private static func isManifest(_ type: RecordType) -> Bool {
        type == .manifestChunks || type == .manifestReferences || type == .manifestEntries || type == .manifest
    }

    /// Record types of each format version (§4): 2.0 replaced the manifest tables with one
    /// compressed manifest record type and added packs.
    private static func isKnown(_ type: RecordType, in version: FormatVersion) -> Bool {
        switch type {
        case .manifestChunks, .manifestReferences, .manifestEntries: version.isVersion1
        case .pack, .manifest, .manifestIndex: !version.isVersion1
        // Only the outer file of an encrypted archive has one (`Spec/0004 §6.2`); the archive
        // sealed inside it is a 2.x archive like any other.
        case .envelope: false
        default: true
        }
    }

    /// The record order of §9, checked before a record is interpreted.
    private func checkOrder(_ type: RecordType, offset: UInt64) throws(CairnError) {
        if let awaiting = awaitingCommit, type != .commit {
            throw CairnError(
                .corrupted,
                "\(RecordType.withArticle(type.name)) record where a commit must follow the \(awaiting.what) at offset \(awaiting.offset)",
                offset: offset)
        }
        guard type == .commit else { return }
        if openFile != nil {
            guard previousType == .chunkReferences else {
                throw CairnError(.corrupted, "a commit inside a file that does not follow a chunk-references record", offset: offset)
            }
        } else if awaitingCommit == nil, !signatures.awaitsFinalCommit {
            throw CairnError(.corrupted, "a commit record that follows no header, entry or file end", offset: offset)
        }
    }

    /// Which fields of a manifest row differ from the row the records rebuilt, in words.
    static func differences(_ manifest: Manifest.EntryRow, _ records: Manifest.EntryRow) -> String {
        let (a, b) = (manifest.entry, records.entry)
        var fields: [String] = []
        if a.pathBytes != b.pathBytes { fields.append("path \(a.path) against \(b.path)") }
        if a.kind != b.kind { fields.append("kind \(a.kind.noun) against \(b.kind.noun)") }
        if a.permissions != b.permissions { fields.append("mode \(String(a.permissions, radix: 8)) against \(String(b.permissions, radix: 8))") }
        if a.modificationTime != b.modificationTime { fields.append("mtime") }
        if a.userID != b.userID || a.groupID != b.groupID { fields.append("owner") }
        if a.size != b.size { fields.append("size \(a.size) against \(b.size)") }
        if a.linkTarget != b.linkTarget { fields.append("link target") }
        if a.extendedAttributes != b.extendedAttributes { fields.append("extended attributes") }
        if manifest.recordOffset != records.recordOffset { fields.append("record offset \(manifest.recordOffset) against \(records.recordOffset)") }
        if manifest.firstReference != records.firstReference || manifest.referenceCount != records.referenceCount
            || manifest.contentDigest != records.contentDigest
        {
            fields.append("content")
        }
        return fields.isEmpty ? "content" : fields.joined(separator: ", ") + " (manifest against records)"
    }

    /// With a reference manifest: its row `index` must be the one the records just completed.
    private func checkAgainstReference(_ row: Manifest.EntryRow, index: Int, offset: UInt64) throws(CairnError) {
        guard let reference else { return }
        try Self.requireAgreement(reference, row: row, index: index, offset: offset)
    }

    /// The one comparison of a manifest's entry row with the row its records make (the walk's,
    /// and a remote reader's per entry, §13.7).
    ///
    /// - Throws: `.corrupted` "the manifest's row for entry N disagrees with its records: ..."
    ///   naming the fields, the entry and `offset`.
    static func requireAgreement(_ reference: Manifest, row: Manifest.EntryRow, index: Int, offset: UInt64) throws(CairnError) {
        guard index < reference.entries.count else {
            throw CairnError(.corrupted, "the manifest has no row for entry \(index)", path: row.entry.path, offset: offset)
        }
        guard reference.entries[index] == row else {
            throw CairnError(
                .corrupted,
                "the manifest's row for entry \(index) disagrees with its records: \(Self.differences(reference.entries[index], row))",
                path: row.entry.path, offset: offset)
        }
    }

    /// The one comparison of a manifest's rows for pack `packIndex` (its pack row, its packed
    /// chunk rows, its files' references) with what its record makes (`builder`, after every item).
    ///
    /// - Throws: `.corrupted` "the manifest's rows for pack N disagree with its record".
    static func requirePackAgreement(
        _ reference: Manifest, packRow: Manifest.PackRow, packIndex: Int, builder: PackRowBuilder
    ) throws(CairnError) {
        let firstReference = builder.firstReference
        let firstChunk = builder.firstChunk
        let chunkEnd = firstChunk + builder.packedRows.count
        guard packIndex < reference.packs.count, reference.packs[packIndex] == packRow,
            builder.references.elementsEqual(reference.references.dropFirst(firstReference).prefix(builder.references.count)),
            reference.chunks.count >= chunkEnd,
            reference.chunks[firstChunk..<chunkEnd].elementsEqual(builder.packedRows)
        else {
            throw CairnError(.corrupted, "the manifest's rows for pack \(packIndex) disagree with its record", offset: packRow.offset)
        }
    }

    /// An entry record's entry (§6), in either format's encoding.
    static func decodeEntryRecord(_ payload: [UInt8], offset: UInt64, version: FormatVersion) throws(CairnError) -> ArchiveEntry {
        var r = ByteReader(payload, baseOffset: offset + UInt64(RecordFraming.headerLength), what: "entry record")
        if version.isVersion1 {
            let entry = try ArchiveEntry.decodeVersion1(&r)
            guard r.isAtEnd else { throw r.error("\(r.remaining) byte\(r.remaining == 1 ? "" : "s") after the last field") }
            return entry
        }
        return try EntryCodec.decodeRecord(&r)
    }

    /// The row an entry record starts (§11.6); a file's content fields are completed at its file end.
    static func row(ofEntryRecord entry: ArchiveEntry, at offset: UInt64, firstReference: UInt64) -> Manifest.EntryRow {
        var row = Manifest.EntryRow(
            recordOffset: offset, firstReference: firstReference, referenceCount: 0, contentDigest: .zero, entry: entry)
        if entry.kind != .file { row.entry.size = 0 }
        return row
    }

    /// The manifest read must equal the one rebuilt from the stream. With a reference manifest,
    /// every row was compared as its record arrived: what is left is that it has no rows beyond.
    private func checkManifest(offset: UInt64) throws(CairnError) {
        if let reference {
            guard reference.entries.count == entryCount, reference.chunks.count == chunkCount, reference.packs == expected.packs,
                reference.references == expected.references
            else {
                throw CairnError(.corrupted, "the manifest holds more than the records", offset: offset)
            }
            return
        }
        let decoded = self.decoded
        guard decoded.packs == expected.packs else {
            throw CairnError(.corrupted, "the manifest's pack table does not match the pack records", offset: offset)
        }
        guard decoded.chunks == expected.chunks else {
            throw CairnError(.corrupted, "the manifest's chunk table does not match the chunk records", offset: offset)
        }
        guard decoded.references == expected.references else {
            throw CairnError(.corrupted, "the manifest's reference table does not match the files", offset: offset)
        }
        guard decoded.entries == expected.entries else {
            throw CairnError(.corrupted, "the manifest's entry table does not match the entry records", offset: offset)
        }
    }
}

/// The manifest rows a pack record's items make (§7.5, §11.6), item by item: each entry's row,
/// the packed chunk row of each inline file, and each file's reference. The scanner and a remote
/// reader's per-entry check (§13.7) build them the same way.
struct PackRowBuilder {
    let packIndex: Int
    let offset: UInt64
    /// The reference-table index of the pack's first reference.
    let firstReference: Int
    /// The chunk-table index of the pack's first inline chunk (the chunks before the pack).
    let firstChunk: Int
    /// The pack's references so far.
    private(set) var references: [UInt32] = []
    /// The pack's packed chunk rows so far.
    private(set) var packedRows: [Manifest.ChunkRow] = []
    private var position = 0

    init(packIndex: Int, offset: UInt64, firstReference: Int, firstChunk: Int) {
        self.packIndex = packIndex
        self.offset = offset
        self.firstReference = firstReference
        self.firstChunk = firstChunk
    }

    /// The next item's rows.
    ///
    /// - Parameter chunkLength: the raw length of chunk `k`, an earlier chunk an item names.
    /// - Returns: the entry's row, the chunk index of its content (if any), and its packed chunk
    ///   row when the content is inline.
    /// - Throws: `.corrupted` when an item's size is not that of the chunk it names.
    mutating func add(_ item: PackItem, chunkLength: (Int) throws(CairnError) -> UInt32) throws(CairnError)
        -> (row: Manifest.EntryRow, chunkIndex: Int?, inline: Manifest.ChunkRow?)
    {
        var row = Manifest.EntryRow(
            recordOffset: offset, firstReference: UInt64(firstReference + references.count), referenceCount: 0,
            contentDigest: .zero, entry: item.entry, pack: packIndex)
        let length = Int(item.entry.size)
        var chunkIndex: Int?
        var inline: Manifest.ChunkRow?
        switch item.content {
        case .none:
            break
        case .inline:
            chunkIndex = firstChunk + packedRows.count
            let chunkRow = Manifest.ChunkRow(
                id: .zero, offset: offset, rawLength: UInt32(truncatingIfNeeded: length), storedLength: 0, codec: .none,
                pack: packIndex, packOffset: position)
            packedRows.append(chunkRow)
            inline = chunkRow
            position += length
        case .chunk(let k):
            let target = Int(k)
            let targetLength = try chunkLength(target)
            guard UInt64(targetLength) == item.entry.size else {
                throw CairnError(
                    .corrupted, "\(item.entry.path) is \(length) bytes, but the chunk it names has \(targetLength)",
                    path: item.entry.path, offset: offset)
            }
            chunkIndex = target
        }
        if item.entry.kind == .file, let chunkIndex {
            references.append(UInt32(truncatingIfNeeded: chunkIndex))
            row.referenceCount = 1
            row.entry.chunkCount = 1
        }
        return (row, chunkIndex, inline)
    }
}
