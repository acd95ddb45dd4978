/// Finds where an interrupted archive can be resumed (`Spec/0001-container-format.md §10.4`).
///
/// Reads the file front to back with an ``ArchiveScanner`` (CRC-32s, record rules and chain
/// digests; chunk payloads are not decompressed, pack contents are, to learn their chunks' ids
/// for deduplication), remembering every commit. Only archives of the version this library
/// writes are resumed. Reading stops at the
/// end of the file, at the first torn or invalid record, or at the footer. Everything up to the
/// last valid commit is vouched for by its chain digest; everything after it is discarded.
package struct ArchiveRecovery {
    /// The state at one commit record.
    package struct Checkpoint: Sendable {
        /// Offset just after the commit record: the length of the valid prefix.
        package var end: UInt64
        package var commit: CommitRecord
        /// The commit record's bytes as on disk (the chain hash continues over them).
        package var framed: [UInt8]
        /// Manifest reference-table length at this commit.
        package var referenceCount: Int
        /// This commit's link before it was finalized (format 2.x, not commit 0).
        package var linkBefore: [Digest]?
        /// Signed archives (`Spec/0004 §3.5`): the prefix signature record right after the
        /// commit, verified under the writer's key, kept when the resume continues here.
        package var signature: [UInt8]?
        /// Signed archives: the `signedLength` of the last verified prefix signature before
        /// this commit's own.
        package var lastSignedLength: UInt64?
        /// The end of what is kept when the resume continues here: the commit and its signature.
        package var keptEnd: UInt64 { end + UInt64(signature?.count ?? 0) }
    }

    package var header: ArchiveHeader
    /// The last valid commit.
    package var last: Checkpoint
    /// The last valid commit with no file open (the start of an entry).
    package var lastBoundary: Checkpoint
    /// The commit with no file open before ``lastBoundary`` (nil when that is commit 0): the
    /// start of the last entry complete at ``lastBoundary`` (or of the pack holding it).
    package var previousBoundary: Checkpoint?
    /// Everything the scan rebuilt, possibly past ``last``; cut it with ``writerState(at:)``.
    package var manifest: Manifest
    /// The id of every chunk the scan read, by index (packed chunks' too: they are hashed).
    package var chunkIDs: [Digest]
    /// Whether a valid footer was found (the archive was complete).
    package var wasComplete: Bool
    /// Why reading stopped before the footer, if it did (for messages).
    package var stopReason: CairnError?
    /// The archive's minor version, continued as it is (`Spec/0004 §3.1`).
    package var minorVersion: UInt16
    /// `C_0`, the chain digest of commit 0 (what signatures sign).
    package var headerChainDigest: Digest
    /// The resuming writer's chunk id rule (its `keying`), by which chunks read back are checked.
    package var idFunction: ChunkIDFunction

    /// Scans the archive readable from `input` (a file positioned at its start, or the inner
    /// archive of an encrypted partial file, `Spec/0004 §6.9`).
    ///
    /// A signed archive (format 2.2) is resumed only at a commit followed by a prefix signature
    /// that verifies under `signingKey` (`Spec/0004-trusted-archives.md §3.5`): the other
    /// commits are not checkpoints. A root signature cannot be checked before its footer is
    /// read, so the commit it follows is not one either (the resume goes back to the commit of
    /// the last prefix signature and writes the rest again: the same bytes).
    ///
    /// - Parameters:
    ///   - signingKey: the resuming writer's key: required for a signed archive (the same key),
    ///     refused for an unsigned one.
    ///   - keying: the resuming writer's chunk keys (`Spec/0004 §6.6`), by which packs' inline
    ///     chunks are hashed; nil for a plain archive.
    /// - Throws: `.notResumable` when not even the header and the first commit are valid, or
    ///   the key does not fit the archive (naming both key ids); `.unsupportedVersion` for an
    ///   archive of another version than this writer writes (2.1, or 2.2 signed).
    package static func scan(
        _ input: any ByteInput, path: String, signingKey: SigningKey? = nil, keying: ChunkKeying?
    ) throws -> ArchiveRecovery {
        let stream = RecordStream(input: input)
        let scanner = ArchiveScanner(keying: keying)
        do throws(CairnError) {
            try scanner.start(stream)
        } catch {
            throw CairnError(
                .notResumable, "the archive's header is not readable: \(error.message)", path: path, offset: error.offset,
                underlyingCause: error.underlyingCause)
        }
        var last: Checkpoint?
        var boundary: Checkpoint?
        var previousBoundary: Checkpoint?
        var stopReason: CairnError?
        var signatures = SignatureCheck(key: signingKey, isSigned: scanner.version.minor >= Prelude.signedMinorVersion)
        do throws(CairnError) {
            try scanner.run(over: stream, until: .unchecked) { record, events in
                for case .commit(let end, let commit) in events {
                    let checkpoint = Checkpoint(
                        end: end, commit: commit, framed: record.framed,
                        referenceCount: scanner.manifestSoFar.references.count, linkBefore: scanner.linkBeforeLastCommit)
                    signatures.commit(checkpoint)
                }
                guard let checkpoint = signatures.admit(record) else { return }
                last = checkpoint
                if checkpoint.commit.openEntry == CommitRecord.noOpenEntry {
                    previousBoundary = boundary
                    boundary = checkpoint
                }
            }
        } catch {
            stopReason = error
        }
        try signatures.checkKey(path: path)
        guard scanner.version == .current || scanner.version == FormatVersion(major: 2, minor: Prelude.signedMinorVersion)
        else {
            // Not `.notResumable` (which `create --resume` answers by starting over): the file
            // may hold hours of committed work that another cairn can still finish.
            throw CairnError(
                .unsupportedVersion,
                "the archive is format \(scanner.version); this version continues only format \(FormatVersion.current) and 2.\(Prelude.signedMinorVersion) archives: "
                    + "finish it with the cairn that began it",
                path: path)
        }
        guard let header = scanner.header, let last, let boundary else {
            throw CairnError(.notResumable, "the archive has no valid commit record to resume from", path: path)
        }
        return ArchiveRecovery(
            header: header, last: last, lastBoundary: boundary, previousBoundary: previousBoundary, manifest: scanner.manifestSoFar,
            chunkIDs: scanner.chunkIDs, wasComplete: scanner.footer != nil, stopReason: stopReason,
            minorVersion: scanner.version.minor, headerChainDigest: signatures.headerChainDigest, idFunction: scanner.idFunction)
    }

    /// Which commits of a scan a resume may continue from: every commit of an unsigned archive;
    /// in a signed one, a commit followed by a prefix signature that verifies under the key
    /// (`Spec/0004 §3.5`).
    private struct SignatureCheck {
        let key: SigningKey?
        let isSigned: Bool
        /// `C_0`, from commit 0.
        var headerChainDigest = Digest.zero
        /// The key id of commit 0's signature: the archive's signer.
        var signer: SigningKeyID?
        /// The commit just read, until the record after it says whether it is a checkpoint.
        var pending: Checkpoint?
        /// The commit just read, when it is a checkpoint already (unsigned archives).
        var ready: Checkpoint?
        var lastSignedLength: UInt64?

        mutating func commit(_ checkpoint: Checkpoint) {
            var checkpoint = checkpoint
            if checkpoint.commit.sequence == 0 { headerChainDigest = checkpoint.commit.chainDigest }
            checkpoint.lastSignedLength = lastSignedLength
            if isSigned { pending = checkpoint } else { ready = checkpoint }
        }

        /// The checkpoint `record` completes, if any: the commit itself (unsigned), or the
        /// commit before a prefix signature that verifies.
        mutating func admit(_ record: RecordStream.Record) -> Checkpoint? {
            if let checkpoint = ready {
                ready = nil
                return checkpoint
            }
            guard var checkpoint = pending else { return nil }
            guard record.header.type == .signature else {
                if record.header.type != .commit { pending = nil }
                return nil
            }
            pending = nil
            guard record.offset == checkpoint.end,
                let signature = try? SignatureRecord.decode(
                    record.payload, offset: record.offset + UInt64(RecordFraming.headerLength)),
                signature.kind == .prefix, signature.signedLength == checkpoint.end
            else { return nil }
            if checkpoint.commit.sequence == 0 { signer = signature.keyID }
            guard let key, let commitDigest = try? SHA256.hash(checkpoint.framed),
                signature.isValid(
                    for: key.publicKey, headerChainDigest: headerChainDigest, commitDigest: commitDigest, footer: nil)
            else { return nil }
            checkpoint.signature = record.framed
            lastSignedLength = checkpoint.end
            return checkpoint
        }

        /// The key rules of `Spec/0004 §3.5`.
        ///
        /// - Throws: `.notResumable` naming the key ids when the key does not fit the archive,
        ///   with itself in ``CairnError/additionalErrors`` (a difference to refuse, as for other
        ///   options, not "nothing committed" to start over from).
        func checkKey(path: String) throws(CairnError) {
            let problem: String
            switch (isSigned, key) {
            case (false, nil):
                return
            case (false, .some):
                problem = "the archive is not signed; resume it without a signing key"
            case (true, nil):
                problem = "the archive is signed by key \(signer.map(\.description) ?? "unknown"); resume it with that key"
            case (true, .some(let key)):
                guard let signer, signer != key.keyID else { return }
                problem = "the archive is signed by key \(signer), not by the key given (\(key.keyID))"
            }
            var error = CairnError(.notResumable, problem, path: path)
            error.additionalErrors = [error]
            throw error
        }
    }

    /// The commit a resume continues from (`Spec/0001 §10.4` step 2, `Spec/0003 §3.2` item 6):
    /// ``last``, unless it lies inside a database unit that is not complete.
    ///
    /// A database read under a read transaction and the `-wal` read right after it under the
    /// same transaction are one unit: its main file pairs only with that `-wal`. When the last
    /// entry complete at ``lastBoundary`` is a file whose archived content begins with the SQLite
    /// header (``SQLiteSnapshot/isDatabase(firstBytes:)``), and after it there is no entry, or
    /// only its own `-wal` (the same path and `-wal`), open at ``last``, the `-wal` that goes
    /// with it is not (all) in the archive: continuing would pair the kept main file with a
    /// `-wal` read later, under another transaction or none, after a checkpoint may have
    /// rewritten both. The resume then goes back to ``previousBoundary``, the commit before the
    /// database's entry (or before the pack holding it), so the unit is read again, whole, under
    /// one transaction. Going back to any commit with no file open gives the bytes an
    /// uninterrupted run gives when nothing changed, so a database at rest or without a `-wal`
    /// that ends the committed prefix costs only its reading again.
    ///
    /// Complete archives, and archives made without snapshots (`no-sqlite-snapshot` in
    /// `cairn.selection`: a database is then a plain file), resume at ``last``.
    ///
    /// - Parameter source: the interrupted archive, to read the first chunk of that entry; a
    ///   chunk that cannot be read leaves the resume at ``last`` (the scan verified everything
    ///   before it, so this does not happen short of the file changing meanwhile).
    /// - Returns: ``last`` or ``previousBoundary``.
    package func resumePoint(reading source: any ArchiveSource) -> Checkpoint {
        let selection = Archiver.SelectionOptions(recorded: header.metadata[Archiver.selectionMetadataKey])
        guard !wasComplete, selection.snapshotsSQLiteDatabases, let before = previousBoundary else { return last }
        let count = min(Int(clamping: lastBoundary.commit.entryCount), manifest.entries.count)
        guard count > 0 else { return last }
        let row = manifest.entries[count - 1]
        guard row.entry.kind == .file, row.entry.size >= UInt64(SQLiteSnapshot.header.count), row.referenceCount > 0 else {
            return last
        }
        if last.commit.openEntry != CommitRecord.noOpenEntry {
            // Inside a file: only the database's own `-wal` right after it leaves the unit open.
            guard last.commit.openEntry == UInt64(count), count < manifest.entries.count,
                manifest.entries[count].entry.pathBytes == SQLiteFileNames(main: row.entry.pathBytes).log
            else { return last }
        }
        let first = Int(clamping: row.firstReference)
        guard first < manifest.references.count, Int(manifest.references[first]) < manifest.chunks.count else { return last }
        let chunks = ChunkPrefetcher.Source(
            source: source, path: source.name, chunks: manifest.chunks, limit: last.end, ids: idFunction)
        var cache: ChunkPrefetcher.Source.PackCache?
        guard let bytes = try? chunks.decode(Int(manifest.references[first]), using: ChunkDecompressor(), cache: &cache) else {
            return last
        }
        return bytes.withUnsafeBytes { SQLiteSnapshot.isDatabase(firstBytes: $0) } ? before : last
    }

    /// What an ``ArchiveWriter`` needs to continue after `checkpoint`.
    package func writerState(at checkpoint: Checkpoint) -> ArchiveWriter.RecoveredState {
        let commit = checkpoint.commit
        var cut = Manifest()
        cut.entries = Manifest.EntryTable(manifest.entries.prefix(Int(clamping: commit.entryCount)))
        cut.chunks = Array(manifest.chunks.prefix(Int(clamping: commit.chunkCount)))
        cut.references = Array(manifest.references.prefix(checkpoint.referenceCount))
        cut.packs = Array(manifest.packs.prefix { $0.firstEntry < cut.entries.count })
        var open: ArchiveWriter.RecoveredState.OpenFile?
        if commit.openEntry != CommitRecord.noOpenEntry, commit.openEntry < UInt64(cut.entries.count) {
            let index = Int(clamping: commit.openEntry)
            open = .init(
                index: index, bytes: commit.openEntryBytes, firstReference: Int(cut.entries[index].firstReference))
        }
        return ArchiveWriter.RecoveredState(
            manifest: cut, chunkIDs: Array(chunkIDs.prefix(cut.chunks.count)), contentBytes: commit.contentBytes, storedBytes: commit.storedBytes,
            nextCommitSequence: commit.sequence + 1, chainDigest: commit.chainDigest, commitRecord: checkpoint.framed,
            offset: checkpoint.keptEnd, linkBeforeCommit: minorVersion >= Prelude.signedMinorVersion ? nil : checkpoint.linkBefore,
            openFile: open, boundary: boundary(at: open == nil ? checkpoint : lastBoundary), minorVersion: minorVersion,
            signature: checkpoint.signature, lastSignedLength: checkpoint.lastSignedLength, headerChainDigest: headerChainDigest)
    }

    /// The writer's item boundary at `checkpoint` (a commit with no file open).
    private func boundary(at checkpoint: Checkpoint) -> ArchiveWriter.Boundary {
        let commit = checkpoint.commit
        let chunkCount = min(Int(clamping: commit.chunkCount), manifest.chunks.count)
        // Distinct ids: a chunk stored packed and again as a record is one chunk of content.
        var seen = Set<Digest>()
        var uniqueBytes: UInt64 = 0
        for (row, id) in zip(manifest.chunks.prefix(chunkCount), chunkIDs) where seen.insert(id).inserted {
            uniqueBytes += UInt64(row.rawLength)
        }
        let entryCount = min(Int(clamping: commit.entryCount), manifest.entries.count)
        return ArchiveWriter.Boundary(
            entryCount: entryCount, chunkCount: chunkCount, packCount: manifest.packs.prefix { $0.firstEntry < entryCount }.count,
            referenceCount: checkpoint.referenceCount, contentBytes: commit.contentBytes, storedBytes: commit.storedBytes,
            uniqueBytes: uniqueBytes, nextCommitSequence: commit.sequence + 1, chainDigest: commit.chainDigest,
            commitRecord: checkpoint.framed, offset: checkpoint.keptEnd, signature: checkpoint.signature,
            lastSignedLength: checkpoint.signature == nil ? checkpoint.lastSignedLength : checkpoint.end)
    }
}
